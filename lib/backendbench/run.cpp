// Running BackendBench traces through kb's ATen operators (see run.hpp).
#include "backendbench/run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <numeric>
#include <set>

#include "backendbench/materialize.hpp"
#include "backendbench/ops.hpp"
#include "json/json.hpp"

namespace kb::backendbench {

namespace {

std::int64_t input_elements(const Value& v) {
  if (v.kind == Kind::tensor) return v.numel();
  std::int64_t n = 0;
  for (const Value& c : v.children) n += input_elements(c);
  return n;
}

std::int64_t line_elements(const ArgLine& l) {
  std::int64_t n = 0;
  for (const Value& v : l.args.positional) n += input_elements(v);
  for (const Kwarg& k : l.args.kwargs) n += input_elements(k.value);
  return n;
}

// Every tensor of a call, in argument order.
std::vector<const HostTensor*> call_tensors(const Call& c) {
  std::vector<const HostTensor*> out;
  auto add = [&](const CallArg& a) {
    if (a.tensor) out.push_back(&*a.tensor);
    for (const HostTensor& t : a.tensors) out.push_back(&t);
  };
  for (const CallArg& a : c.positional) add(a);
  for (const auto& kv : c.kwargs) add(kv.second);
  return out;
}

struct Attempt {
  std::vector<HostTensor> outputs;
  double ms = 0;
  std::string problem;
};

Attempt attempt(const OpInfo& info, const ArgLine& line, std::uint64_t seed, std::size_t index, bool check_inputs) {
  Attempt a;
  auto call = materialize_prepared(info, line.args, seed, index);
  if (!call) {
    a.problem = call.error().message;
    return a;
  }
  std::vector<HostTensor> before;
  if (check_inputs)
    for (const HostTensor* t : call_tensors(*call)) before.push_back(deep_copy(*t));
  auto t0 = std::chrono::steady_clock::now();
  auto outs = run_cpu(info, *call);
  a.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!outs) {
    a.problem = outs.error().message;
    return a;
  }
  if (check_inputs) {
    auto after = call_tensors(*call);
    for (std::size_t i = 0; i < after.size(); ++i)
      if (*after[i]->storage != *before[i].storage) {
        a.problem = fmt::format("a functional operator changed its input tensor {}", i);
        return a;
      }
  }
  a.outputs = std::move(*outs);
  return a;
}

std::string specs_text(const std::vector<HostTensor>& ts) {
  std::vector<std::string> parts;
  for (const HostTensor& t : ts) parts.push_back(fmt::format("{}{}", dtype_abbrev(t.dtype), shape_text(t.shape)));
  return fmt::format("({})", fmt::join(parts, ", "));
}

LineOutcome run_line(const OpInfo& info, const ArgLine& line, std::size_t index, std::uint64_t seed,
                     std::vector<HostTensor>* keep = nullptr) {
  LineOutcome o;
  o.op = info.name;
  o.index = index;
  o.source_line = line.line;
  auto meta_call = materialize_call(info.name, line.args, seed, index, true);
  if (!meta_call) {
    o.problem = "materialize: " + meta_call.error().message;
    return o;
  }
  // An output whose shape depends on the input's values (nonzero) has no
  // meta answer: such a line is judged by its two runs alone; when the run
  // fails too, the meta problem is the one reported.
  auto meta = run_cpu(info, *meta_call);
  Attempt first = attempt(info, line, seed, index, !info.inplace());
  o.kb_ms = first.ms;
  if (!meta && !first.problem.empty()) {
    o.problem = "meta: " + meta.error().message;
    return o;
  }
  if (!first.problem.empty()) {
    o.problem = first.problem;
    return o;
  }
  bool specs_match = !meta || meta->size() == first.outputs.size();
  for (std::size_t k = 0; meta && specs_match && k < meta->size(); ++k)
    specs_match = (*meta)[k].dtype == first.outputs[k].dtype && (*meta)[k].shape == first.outputs[k].shape;
  if (!specs_match) {
    o.problem = fmt::format("outputs {} differ from the meta call's {}", specs_text(first.outputs), specs_text(*meta));
    return o;
  }
  Attempt second = attempt(info, line, seed, index, false);
  if (!second.problem.empty()) {
    o.problem = "second run: " + second.problem;
    return o;
  }
  if (!identical(first.outputs, second.outputs)) {
    o.problem = "two runs on the same inputs gave different outputs";
    return o;
  }
  o.passed = true;
  if (keep) *keep = std::move(first.outputs);
  return o;
}

// BackendBench's operators without a correctness test: values unspecified (uninitialized memory) or random.
bool values_unspecified(std::string_view op) {
  for (std::string_view p : {"aten.new_empty.", "aten.new_empty_strided.", "aten.empty_like.", "aten.bernoulli"})
    if (op.rfind(p, 0) == 0) return true;
  return false;
}

// Outputs PyTorch's CPU kernel shapes or fills differently from the CUDA
// kernel the traces come from (kb's oracles follow CUDA): not compared
// against PyTorch on the CPU. _embedding_bag's offset2bag, bag_size and
// max_indices: the CPU kernel leaves some empty or sizes them by offsets in
// sum and mean mode.
std::vector<std::size_t> device_specific_outputs(std::string_view op) {
  if (op == "aten._embedding_bag.default") return {1, 2, 3};
  return {};
}

// Outputs compared for equality, as BackendBench's assert_close does: a
// sparse COO tensor's indices (kernels/aten/sparse/sparse_coo.cpp writes the
// tensor as its indices and values).
std::vector<std::size_t> exact_outputs(std::string_view op) {
  if (op == "aten._sparse_coo_tensor_with_dims_and_tensors.default") return {0};
  return {};
}

// Judges kb's outputs (the candidate) against PyTorch's on a line that passed the oracle's own checks.
void judge_against_torch(LineOutcome& o, std::vector<HostTensor> kb, TorchLineResult t) {
  if (!t.error.empty()) {
    o.passed = false;
    o.problem = "no reference: " + t.error;
    return;
  }
  for (std::size_t k : device_specific_outputs(o.op))
    for (auto* side : {&kb, &t.outputs})
      if (k < side->size()) {
        (*side)[k] = HostTensor{};
        (*side)[k].undefined = true;
      }
  Judgment j = values_unspecified(o.op) ? judge_signature(t.outputs, kb) : judge(t.outputs, kb);
  if (j.verdict == Verdict::passed && o.op.rfind("aten.bernoulli", 0) == 0)
    for (std::size_t k = 0; k < kb.size() && j.verdict == Verdict::passed; ++k)
      for (double v : to_doubles(kb[k]))
        if (v != 0 && v != 1) {
          j.verdict = Verdict::incorrect_numerical;
          j.detail = fmt::format("output {}: a draw of {}, not 0 or 1", k, v);
          break;
        }
  for (std::size_t k : exact_outputs(o.op))
    if (j.verdict == Verdict::passed && k < kb.size() && k < t.outputs.size()) {
      Judgment e = judge({t.outputs[k]}, {kb[k]}, 0.0, 0.0);
      if (e.verdict != Verdict::passed) {
        j.verdict = e.verdict;
        j.detail = fmt::format("output {} must be equal: {}", k, e.detail);
      }
    }
  if (!values_unspecified(o.op)) {
    o.max_abs_error = j.max_abs_error;
    o.max_rel_error = j.max_rel_error;
  }
  if (j.verdict != Verdict::passed) {
    o.passed = false;
    o.problem = fmt::format("against PyTorch{}: {}: {}", t.fp64 ? " (fp64)" : "", verdict_name(j.verdict), j.detail);
  }
}

// Lines of one operator run by kb's oracle and judged against PyTorch, in batches of about `budget` input bytes.
Result<std::vector<LineOutcome>> run_lines_torch(const OpInfo& info, const Operator& op, const std::vector<std::size_t>& idx,
                                                 std::uint64_t seed, const RunOptions& options) {
  std::vector<LineOutcome> out;
  std::size_t at = 0;
  while (at < idx.size()) {
    std::vector<std::size_t> batch;
    std::int64_t bytes = 0;
    while (at < idx.size() && (batch.empty() || bytes < options.torch_batch_bytes)) {
      bytes += line_elements(op.lines[idx[at]]) * 8;
      batch.push_back(idx[at++]);
    }
    std::vector<LineOutcome> outcomes;
    std::vector<std::vector<HostTensor>> kb_outs(batch.size());
    std::vector<Call> calls;
    std::vector<std::string> texts;
    std::vector<std::size_t> sent;  // positions in batch handed to PyTorch
    for (std::size_t b = 0; b < batch.size(); ++b) {
      const ArgLine& line = op.lines[batch[b]];
      outcomes.push_back(run_line(info, line, batch[b], seed, &kb_outs[b]));
      if (!outcomes.back().passed) continue;
      auto call = materialize_prepared(info, line.args, seed, batch[b]);
      if (!call) {
        outcomes.back().passed = false;
        outcomes.back().problem = "materialize for PyTorch failed";
        continue;
      }
      calls.push_back(std::move(*call));
      texts.push_back(print_args(line.args));
      sent.push_back(b);
    }
    std::vector<TorchLine> tl;
    for (std::size_t k = 0; k < calls.size(); ++k) {
      TorchLine l{info.name, texts[k], call_tensors(calls[k])};
      tl.push_back(std::move(l));
    }
    if (!tl.empty()) {
      auto res = run_torch_lines(tl, options.torch);
      if (!res) return std::move(res).error();
      for (std::size_t k = 0; k < sent.size(); ++k)
        judge_against_torch(outcomes[sent[k]], std::move(kb_outs[sent[k]]), std::move((*res)[k]));
    }
    for (auto& o : outcomes) out.push_back(std::move(o));
  }
  return out;
}

// The median over many calls of the CPU runner's timer around a call that does nothing.
double empty_call_ms() {
  volatile int sink = 0;
  auto nothing = [&sink] { sink = sink + 1; };
  std::vector<double> ms(1001);
  for (double& m : ms) {
    auto t0 = std::chrono::steady_clock::now();
    nothing();
    m = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  std::nth_element(ms.begin(), ms.begin() + 500, ms.end());
  return ms[500];
}

}  // namespace

std::vector<Operator> merge_operators(const TraceFile& trace) {
  std::vector<Operator> out;
  std::map<std::string, std::size_t> at;
  for (const Operator& op : trace.operators) {
    auto [it, fresh] = at.emplace(op.name, out.size());
    if (fresh) out.push_back(op);
    else out[it->second].lines.insert(out[it->second].lines.end(), op.lines.begin(), op.lines.end());
  }
  return out;
}

std::vector<std::size_t> sample_lines(const Operator& op, std::size_t limit) {
  std::vector<std::size_t> idx(op.lines.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  if (limit == 0 || limit >= idx.size()) return idx;
  std::vector<std::int64_t> size(op.lines.size());
  for (std::size_t i = 0; i < op.lines.size(); ++i) size[i] = line_elements(op.lines[i]);
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return size[a] < size[b]; });
  idx.resize(limit);
  std::sort(idx.begin(), idx.end());
  return idx;
}

Result<RunReport> run_cpu_trace(const TraceFile& trace, const RunOptions& options) {
  RunReport r;
  const std::uint64_t seed = options.seed ? options.seed : default_seed;
  std::set<std::string> wanted(options.ops.begin(), options.ops.end());
  std::set<std::string> seen;
  std::map<std::string, CoverageRow> impl, unimpl;
  for (const Operator& op : merge_operators(trace)) {
    std::uint64_t count = 0;
    for (const ArgLine& l : op.lines) count += l.count;
    r.total_lines += op.lines.size();
    r.total_count += count;
    const OpInfo* info = find_aten_op(op.name);
    auto& row = (info ? impl : unimpl)[op.name];
    row.op = op.name;
    row.lines += op.lines.size();
    row.count += count;
    if (!info || (!wanted.empty() && !wanted.count(op.name))) continue;
    seen.insert(op.name);
    std::vector<LineScore> scores;
    const std::vector<std::size_t> picked = sample_lines(op, options.limit_per_op);
    std::vector<LineOutcome> judged;
    if (options.torch_reference) {
      auto j = run_lines_torch(*info, op, picked, seed, options);
      if (!j) return std::move(j).error();
      judged = std::move(*j);
    }
    for (std::size_t n = 0; n < picked.size(); ++n) {
      const std::size_t i = picked[n];
      LineOutcome o = options.torch_reference ? std::move(judged[n]) : run_line(*info, op.lines[i], i, seed);
      LineScore s;
      s.passed = o.passed;
      if (auto b = options.baseline.find(op.name); b != options.baseline.end())
        if (auto t = b->second.find(i); t != b->second.end()) {
          o.baseline_ms = t->second;
          if (o.kb_ms > 0) s.speedup = t->second / o.kb_ms;
        }
      scores.push_back(s);
      r.lines.push_back(std::move(o));
    }
    r.ops.push_back(score_op(op.name, scores));
  }
  for (const std::string& w : wanted)
    if (!seen.count(w)) r.unknown_ops.push_back(w);
  for (auto& [k, v] : impl) r.implemented.push_back(v);
  for (auto& [k, v] : unimpl) r.unimplemented.push_back(v);
  std::stable_sort(r.unimplemented.begin(), r.unimplemented.end(),
                   [](const CoverageRow& a, const CoverageRow& b) { return a.lines > b.lines; });
  r.summary = summarize(r.ops);
  r.empty_call_ms = empty_call_ms();
  return r;
}

Result<std::map<std::string, std::map<std::size_t, double>>> read_baseline(const std::string& path) {
  auto text = json::read_text_file(path);
  if (!text) return std::move(text).error();
  auto doc = json::parse(*text, path);
  if (!doc) return std::move(doc).error();
  std::map<std::string, std::map<std::size_t, double>> out;
  json::Object root;
  if (doc->root().get_object().get(root))
    return make_error(Code::invalid_data, fmt::format("{}: the baseline must be a JSON object", path));
  std::string_view format;
  if (root["format"].get_string().get(format) || format != "kb-backendbench-baseline-1")
    return make_error(Code::invalid_data, fmt::format("{}: format: expected \"kb-backendbench-baseline-1\"", path));
  json::Object times;
  if (root["times_ms"].get_object().get(times))
    return make_error(Code::invalid_data, fmt::format("{}: times_ms: expected an object", path));
  for (auto [op, per_line] : times) {
    json::Object lines;
    if (per_line.get_object().get(lines))
      return make_error(Code::invalid_data, fmt::format("{}: times_ms.{}: expected an object", path, std::string(op)));
    for (auto [idx, ms] : lines) {
      std::size_t i = 0;
      auto [p, ec] = std::from_chars(idx.data(), idx.data() + idx.size(), i);
      if (ec != std::errc() || p != idx.data() + idx.size())
        return make_error(Code::invalid_data,
                          fmt::format("{}: times_ms.{}: key \"{}\" is not a line index", path, std::string(op), std::string(idx)));
      if (ms.is_null()) continue;
      double v = 0;
      if (ms.get_double().get(v) || !(v > 0))
        return make_error(Code::invalid_data, fmt::format("{}: times_ms.{}.{}: expected a positive number of ms", path,
                                                          std::string(op), std::string(idx)));
      out[std::string(op)][i] = v;
    }
  }
  return out;
}

Status write_saved_lines(const RunReport& report, const std::string& device, const std::string& path) {
  json::Writer w(true);
  w.begin_object().key("format").string("kb-backendbench-lines-1").key("device").string(device);
  w.key("lines").begin_array();
  for (const LineOutcome& l : report.lines) {
    if (l.problem.rfind("not run", 0) == 0) continue;
    w.begin_object();
    w.key("op").string(l.op);
    w.key("index").integer(static_cast<std::int64_t>(l.index));
    w.key("source_line").integer(static_cast<std::int64_t>(l.source_line));
    w.key("passed").boolean(l.passed);
    w.key("kb_ms").number(l.kb_ms);
    w.key("baseline_ms");
    if (l.baseline_ms)
      w.number(*l.baseline_ms);
    else
      w.null();
    w.key("by_reference").boolean(l.by_reference);
    w.key("problem").string(l.problem);
    w.end_object();
  }
  w.end_array().end_object();
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return make_error(Code::io_error, fmt::format("{}: cannot write", path));
  const std::string& text = w.str();
  const bool failed = std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::fputc('\n', f) == EOF;
  if (std::fclose(f) != 0 || failed) return make_error(Code::io_error, fmt::format("{}: write failed", path));
  return ok_status();
}

Result<std::map<std::pair<std::string, std::size_t>, LineOutcome>> read_saved_lines(const std::string& path) {
  auto text = json::read_text_file(path);
  if (!text) return std::move(text).error();
  auto doc = json::parse(*text, path);
  if (!doc) return std::move(doc).error();
  json::Object root;
  std::string_view format;
  if (doc->root().get_object().get(root) || root["format"].get_string().get(format) ||
      format != "kb-backendbench-lines-1")
    return make_error(Code::invalid_data, fmt::format("{}: expected an object with format \"kb-backendbench-lines-1\"", path));
  json::Array lines;
  if (root["lines"].get_array().get(lines))
    return make_error(Code::invalid_data, fmt::format("{}: lines: expected an array", path));
  std::map<std::pair<std::string, std::size_t>, LineOutcome> out;
  std::size_t k = 0;
  for (auto v : lines) {
    json::Object o;
    LineOutcome l;
    std::string_view op, problem;
    std::uint64_t index = 0, source_line = 0;
    bool passed = false, by_ref = false;
    double kb_ms = 0;
    if (v.get_object().get(o) || o["op"].get_string().get(op) || o["index"].get_uint64().get(index) ||
        o["source_line"].get_uint64().get(source_line) || o["passed"].get_bool().get(passed) ||
        o["kb_ms"].get_double().get(kb_ms) || o["by_reference"].get_bool().get(by_ref) ||
        o["problem"].get_string().get(problem))
      return make_error(Code::invalid_data, fmt::format("{}: lines[{}]: expected op, index, source_line, passed, kb_ms, "
                                                        "baseline_ms, by_reference and problem", path, k));
    auto b = o["baseline_ms"];
    double bms = 0;
    if (!b.is_null()) {
      if (b.get_double().get(bms) || !(bms > 0))
        return make_error(Code::invalid_data, fmt::format("{}: lines[{}].baseline_ms: expected a positive number or null", path, k));
      l.baseline_ms = bms;
    }
    l.op = op;
    l.index = index;
    l.source_line = source_line;
    l.passed = passed;
    l.kb_ms = kb_ms;
    l.by_reference = by_ref;
    l.problem = problem;
    out[{l.op, l.index}] = std::move(l);
    ++k;
  }
  return out;
}

}  // namespace kb::backendbench
