#include "plugin/plugin.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <sstream>

#include "common/tuning.hpp"
#include "cuda/plausible.hpp"
#include "harness/cost.hpp"
#include "harness/cpu_floor.hpp"
#include "harness/dsa_judge.hpp"
#include "harness/cupti_report.hpp"
#include "harness/measurement.hpp"
#include "harness/sampling_judge.hpp"
#include "harness/timing_report.hpp"
#include "inputs/inputs.hpp"
#include "plugin/build.hpp"

namespace kb::plugin {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<worker::InArg> in_args(std::span<const Arg> args) {
  std::vector<worker::InArg> ins(args.size());
  for (std::size_t i = 0; i < args.size(); ++i) {
    const Arg& a = args[i];
    if (a.tensor) {
      ins[i].is_tensor = true;
      ins[i].dtype = a.tensor->dtype();
      ins[i].shape = a.tensor->shape();
      ins[i].data = a.tensor->empty_storage() ? nullptr : a.tensor->bytes();
      ins[i].nbytes = a.tensor->empty_storage() ? 0 : a.tensor->nbytes();
    } else {
      ins[i].is_tensor = false;
      ins[i].scalar = a.scalar;
    }
  }
  return ins;
}

std::vector<worker::OutArg> out_args(std::span<Tensor> ts) {
  std::vector<worker::OutArg> outs(ts.size());
  for (std::size_t i = 0; i < ts.size(); ++i) {
    Tensor& t = ts[i];
    outs[i].dtype = t.dtype();
    outs[i].shape = t.shape();
    outs[i].data = t.empty_storage() ? nullptr : t.bytes();
    outs[i].nbytes = t.empty_storage() ? 0 : t.nbytes();
  }
  return outs;
}

}  // namespace

std::string unsupported_language(const std::string& language) {
  if (language == "cpp" || language == "cuda") return {};
  if (language == "python" || language == "triton" || language == "tilelang")
    return fmt::format("language {} is not supported: kb builds and runs cpp and cuda solutions only", language);
  return fmt::format("unknown language \"{}\" (kb builds cpp and cuda solutions)", language);
}

std::string default_cache_dir() {
  if (const std::string& dir = tuning::current().cache_dir; !dir.empty()) return dir;
  if (const char* e = std::getenv("XDG_CACHE_HOME"); e && *e) return std::string(e) + "/kb";
  if (const char* e = std::getenv("HOME"); e && *e) return std::string(e) + "/.cache/kb";
  return fmt::format("/tmp/kb-cache-{}", static_cast<unsigned>(::getuid()));
}

Result<std::shared_ptr<Plugin>> load(const std::string& path, const Options& options) {
  worker::Options wo;
  wo.timeout_s = options.timeout_s;
  wo.load_timeout_s = options.load_timeout_s;
  wo.worker_path = options.worker_path;
  wo.cuda_device = options.cuda_device;
  auto w = worker::Worker::start(path, wo);
  if (!w) return std::move(w).error();
  auto p = std::make_shared<Plugin>();
  p->path = path;
  p->solutions = (*w)->solutions();
  p->worker = std::move(*w);
  return p;
}

Result<std::shared_ptr<Plugin>> load_solution(const Solution& s, const Definition& d, const Options& options) {
  if (auto why = unsupported_language(s.spec.language); !why.empty())
    return make_error(Code::unsupported, fmt::format("solution {}: {}", s.name, why));
  if (s.definition != d.name)
    return make_error(Code::invalid_data,
                      fmt::format("solution {} implements {}, not {}", s.name, s.definition, d.name));
  BuildOptions bo;
  bo.cache_dir = options.cache_dir.empty() ? default_cache_dir() : options.cache_dir;
  bo.limits = options.build_limits;
  auto built = build_solution(s, d, bo);
  if (!built) return std::move(built).error();
  if (!built->ok()) {
    auto p = std::make_shared<Plugin>();
    worker::SolutionInfo info;
    info.definition = s.definition;
    info.name = s.name;
    info.author = s.author;
    info.description = s.description;
    info.cuda = s.spec.language == "cuda";
    p->solutions.push_back(std::move(info));
    p->build_error = built->log;
    p->build_note = built->note;
    return p;
  }
  auto p = load(built->library, options);
  if (!p) return std::move(p).error();
  (*p)->build_note = built->note;
  // The generated entry point names the solution as the JSON does; a table
  // that says otherwise is not the build kb made.
  const auto& sols = (*p)->solutions;
  if (sols.size() != 1 || sols[0].name != s.name || sols[0].definition != s.definition)
    return make_error(Code::invalid_data,
                      fmt::format("{}: the built library's table does not describe solution {}", built->library, s.name));
  return p;
}

Status Session::run(const ImplementationCall& c) {
  if (plugin->build_error) return make_error(Code::invalid_data, "the solution did not build");
  std::lock_guard<std::mutex> lock(plugin->mutex);
  if (!plugin->worker) return make_error(Code::internal, "the plugin has no worker");
  const Definition& d = c.definition;
  std::vector<worker::InArg> ins = in_args(c.inputs);
  std::vector<worker::OutArg> outs = out_args(c.outputs);
  std::vector<std::string> in_names, out_names;
  for (const auto& t : d.inputs) in_names.push_back(t.name);
  for (const auto& t : d.outputs) out_names.push_back(t.name);
  auto r = plugin->worker->call(index, ins, outs, in_names, out_names);
  switch (r.outcome) {
    case worker::Outcome::ok: call_ms.push_back(r.call_ms); return ok_status();
    case worker::Outcome::unsupported: return make_error(Code::unsupported, r.message);
    case worker::Outcome::timed_out: timed_out = true; break;
    case worker::Outcome::wrong_shape: verdict = EvalStatus::incorrect_shape; break;
    case worker::Outcome::wrong_dtype: verdict = EvalStatus::incorrect_dtype; break;
    case worker::Outcome::failed:
    case worker::Outcome::crashed: break;
  }
  return make_error(Code::invalid_data, r.message);
}

std::vector<Implementation> implementations(const std::shared_ptr<Plugin>& p) {
  std::vector<Implementation> out;
  for (std::size_t i = 0; i < p->solutions.size(); ++i) {
    const auto& s = p->solutions[i];
    auto session = std::make_shared<Session>();
    session->plugin = p;
    session->index = i;
    Implementation impl;
    impl.name = s.name;
    impl.author = s.author;
    impl.device = s.cuda ? Device::cuda : Device::cpu;
    std::string where = p->path.empty() ? "a Solution JSON that did not build" : p->path;
    impl.description = s.description ? fmt::format("{} (from {})", *s.description, where) : fmt::format("from {}", where);
    std::string def = s.definition;
    impl.supports = [def](const Definition& d) {
      return d.name == def ? std::string() : fmt::format("implements {}, not {}", def, d.name);
    };
    impl.run = [session](const ImplementationCall& c) { return session->run(c); };
    impl.outside = session;
    out.push_back(std::move(impl));
  }
  return out;
}

Result<EvaluationResult> evaluate_in_worker(const Definition& d, const Workload& w, const Implementation& impl,
                                            const BenchOptions& opt) {
  const std::shared_ptr<Session>& session = impl.outside;
  if (!session) return make_error(Code::internal, fmt::format("{} is not an outside solution", impl.name));
  Plugin& p = *session->plugin;
  if (p.build_error || !p.worker) return make_error(Code::internal, "the solution did not build");
  if (judged_by_distribution(d))
    return make_error(Code::unsupported, fmt::format("{}: sampling is judged call by call (kb::evaluate)", d.name));
  Implementation oracle = reference_implementation();
  const bool use_torch = opt.reference == ReferenceSource::torch;
  if (!use_torch)
    if (auto why = oracle.supports(d); !why.empty()) return make_error(Code::unsupported, why);
  Tolerance tol = opt.tolerances.for_definition(d);
  std::string log;
  Evaluation ev = begin_evaluation(impl.device, opt, tol, log);
  auto finish = [&](EvalStatus st, std::string what) {
    ev.status = st;
    ev.log = log + what;
    EvaluationResult r;
    r.evaluation = std::move(ev);
    r.summary = std::move(what);
    return r;
  };
  const bool cpu = impl.device == Device::cpu;
  // A CPU solution is timed once on each timed set (worker_main.cpp): at least
  // kCpuTimedSets (and opt.min_samples) of them, so the median has samples
  // enough; the checked trials match their number (the wire format pairs them).
  constexpr int kCpuTimedSets = 5;
  const int wanted = opt.time && cpu ? std::max({opt.trials, opt.min_samples, kCpuTimedSets}) : opt.trials;
  const std::size_t trials = static_cast<std::size_t>(std::clamp(wanted, 1, 64 /* worker::kMaxSets */));
  if (static_cast<int>(trials) != opt.trials) log += fmt::format("trials: {} (one per timed input set)\n", trials);
  // The timed pass runs on other draws than the checked one: seeds
  // seed + kTimedSeedOffset + k, so a result cached from a checked call
  // cannot answer a timed one.
  constexpr std::uint64_t kTimedSeedOffset = std::uint64_t{1} << 32;
  const std::size_t passes_drawn = opt.time ? 2 : 1;
  // CUDA solutions are timed on fresh inputs (worker.hpp's FreshInput): the
  // worker draws the random floating-point inputs again before every timed
  // call, so a cache keyed by any fingerprint of them never hits, and a few
  // calls picked at random on the device are judged here on those very
  // draws. Their base keys are the first timed set's recipes; the salt is
  // this evaluation's.
  const bool fresh = opt.time && !cpu;
  constexpr std::size_t kKeptCalls = 4;
  std::vector<std::optional<RandomRecipe>> fresh_recipes;
  std::uint64_t fresh_salt = 0;
  if (fresh) {
    std::random_device rd;
    fresh_salt = (std::uint64_t{rd()} << 32) ^ rd();
  }
  std::vector<Materialized> ms, timed_ms;
  std::vector<std::vector<Tensor>> expected, expected_timed, got, timed;
  ms.reserve(trials);
  timed_ms.reserve(trials);
  double torch_ms = 0;
  for (std::size_t pass = 0; pass < passes_drawn; ++pass)
    for (std::size_t trial = 0; trial < trials; ++trial) {
      MaterializeOptions mo{opt.seed + trial + (pass ? kTimedSeedOffset : 0), opt.dataset_root};
      mo.defer_random_floats = pass == 1 && fresh;  // to learn which inputs are drawn fresh, and their recipes
      auto m = materialize(d, w, mo);
      if (!m) return m.error();
      if (mo.defer_random_floats) {
        if (trial == 0) fresh_recipes = m->deferred;
        KB_TRY(fill_deferred(*m));
      }
      auto& into = pass ? timed_ms : ms;
      into.push_back(std::move(*m));
      Materialized& cur = into.back();
      KB_TRY(ready_trial(d, cur, trial == 0 && pass == 0 ? &log : nullptr));
      auto e = allocate_outputs(d, cur.axes);
      if (!e) return e.error();
      if (pass == 1 && fresh) {
        // Judged through the kept calls instead (their inputs are other draws).
      } else if (use_torch) {
        auto tr = run_torch_reference(d, cur.args, *e, opt.torch);
        if (!tr) return tr.error();
        if (trial == 0 && pass == 0)
          log += fmt::format("reference: the definition's PyTorch reference (torch {}, CPU)\n", tr->torch_version);
        if (trial == 0 && pass == 0) torch_ms = tr->reference_ms;
      } else {
        KB_TRY(oracle.run(ImplementationCall{d, cur.axes, cur.args, *e, mo.seed}));
        if (trial == 0 && pass == 0) log += "reference: kb CPU oracle\n";
      }
      (pass ? expected_timed : expected).push_back(std::move(*e));
      auto g = allocate_outputs(d, cur.axes);
      if (!g) return g.error();
      (pass ? timed : got).push_back(std::move(*g));
    }
  if (opt.time && !fresh)
    log += fmt::format("timed inputs: other draws than the checked ones (seeds {} + 2^32 + k), each judged again after "
                       "timing\n", opt.seed);
  std::vector<worker::SetArgs> sets(trials);
  for (std::size_t k = 0; k < trials; ++k) {
    sets[k].inputs = in_args(ms[k].args);
    sets[k].outputs = out_args(got[k]);
    if (opt.time) {
      sets[k].timed_inputs = in_args(timed_ms[k].args);
      sets[k].timed_outputs = out_args(timed[k]);
    }
  }
  std::vector<std::string> in_names, out_names;
  for (const auto& t : d.inputs) in_names.push_back(t.name);
  for (const auto& t : d.outputs) out_names.push_back(t.name);
  worker::EvaluateOptions eo;
  eo.time = opt.time;
  eo.stream_check = impl.device == Device::cuda;
  eo.cupti = opt.cupti && !cpu;  // CUPTI times CUDA kernels; a CPU solution has none
  eo.timing_warmup = opt.gpu_warmup;
  eo.timing_min_samples = opt.gpu_min_samples;
  std::size_t fresh_count = 0;
  if (fresh) {
    eo.fresh_salt = fresh_salt;
    eo.kept_calls = kKeptCalls;
    eo.fresh_inputs.resize(d.inputs.size());
    for (std::size_t i = 0; i < fresh_recipes.size() && i < eo.fresh_inputs.size(); ++i)
      if (const auto& rr = fresh_recipes[i]) {
        eo.fresh_inputs[i] = worker::FreshInput{rr->key, rr->dtype, rr->numel};
        ++fresh_count;
      }
  }
  worker::EvaluateResult r;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    r = p.worker->evaluate(session->index, sets, in_names, out_names, eo);
  }
  if (!r.detail.empty()) log += r.detail + "\n";
  switch (r.call.outcome) {
    case worker::Outcome::ok: break;
    case worker::Outcome::unsupported: return make_error(Code::unsupported, r.call.message);
    case worker::Outcome::timed_out: return finish(EvalStatus::timeout, r.call.message);
    case worker::Outcome::wrong_shape: return finish(EvalStatus::incorrect_shape, r.call.message);
    case worker::Outcome::wrong_dtype: return finish(EvalStatus::incorrect_dtype, r.call.message);
    case worker::Outcome::failed:
    case worker::Outcome::crashed: return finish(EvalStatus::runtime_error, r.call.message);
  }
  if (r.stream == worker::StreamCheck::other)
    return finish(EvalStatus::runtime_error,
                  "launched work on a stream other than the one kb gave it (its outputs changed while kb's stream was "
                  "still held by a gate kernel)");
  double max_abs = 0, max_rel = 0;
  std::int64_t mismatched = 0, total = 0;
  double lowest_matched = 1.0;
  const std::size_t passes = r.timing && !fresh ? 2 : 1;
  for (std::size_t pass = 0; pass < passes; ++pass)
    for (std::size_t k = 0; k < trials; ++k)
      for (std::size_t i = 0; i < d.outputs.size(); ++i) {
        const Tensor& out = pass == 0 ? got[k][i] : timed[k][i];
        Comparison c = judge_output(d, pass == 0 ? ms[k].args : timed_ms[k].args, i, out,
                                    pass == 0 ? expected[k][i] : expected_timed[k][i], tol);
        std::string where = pass == 0 ? fmt::format("trial {}: output \"{}\": ", k, d.outputs[i].name)
                                      : fmt::format("after timing, timed set {}: output \"{}\": ", k, d.outputs[i].name);
        if (c.verdict == Comparison::Verdict::wrong_shape) return finish(EvalStatus::incorrect_shape, where + c.detail);
        if (c.verdict == Comparison::Verdict::wrong_dtype) return finish(EvalStatus::incorrect_dtype, where + c.detail);
        max_abs = std::max(max_abs, c.max_abs);
        max_rel = std::max(max_rel, c.max_rel);
        lowest_matched = std::min(lowest_matched, c.matched_ratio());
        if (pass == 0) {
          mismatched += c.mismatched;
          total += c.total;
        }
        if (c.verdict == Comparison::Verdict::wrong_values) {
          ev.correctness = Correctness{
              max_rel, max_abs,
              write_judge_counts(JudgeCounts::elementwise(mismatched + (pass ? c.mismatched : 0),
                                                          total + (pass ? c.total : 0), static_cast<std::int64_t>(k) + 1,
                                                          recorded_matched_ratio(tol, lowest_matched)))};
          return finish(EvalStatus::incorrect_numerical,
                        where + c.detail + (pass ? " (work skipped or results reused in timed calls)" : ""));
        }
      }
  // Fresh inputs: each kept timed call judged on the inputs it ran on, drawn
  // again here from its serial (the host generator gives the worker's bytes).
  if (fresh && r.timing) {
    if (r.kept.empty()) return make_error(Code::internal, "the worker kept no timed call");
    for (const worker::KeptCall& k : r.kept) {
      Materialized& m = timed_ms[static_cast<std::size_t>(k.set)];
      for (std::size_t i = 0; i < fresh_recipes.size() && i < m.tensors.size(); ++i)
        if (fresh_recipes[i]) fill_random(m.tensors[i], fresh_recipe(*fresh_recipes[i], fresh_salt, k.serial).key);
      auto want = allocate_outputs(d, m.axes);
      if (!want) return want.error();
      if (use_torch) {
        auto tr = run_torch_reference(d, m.args, *want, opt.torch);
        if (!tr) return tr.error();
      } else {
        KB_TRY(oracle.run(ImplementationCall{d, m.axes, m.args, *want, opt.seed + kTimedSeedOffset + static_cast<std::uint64_t>(k.set)}));
      }
      auto have = allocate_outputs(d, m.axes);
      if (!have) return have.error();
      for (std::size_t i = 0; i < d.outputs.size(); ++i) {
        Tensor& got_i = (*have)[i];
        if (k.outputs[i].size() != got_i.nbytes()) return make_error(Code::internal, "a kept output's size differs");
        std::memcpy(got_i.bytes(), k.outputs[i].data(), got_i.nbytes());
        Comparison c = judge_output(d, m.args, i, got_i, (*want)[i], tol);
        max_abs = std::max(max_abs, c.max_abs);
        max_rel = std::max(max_rel, c.max_rel);
        if (c.verdict != Comparison::Verdict::match) {
          ev.correctness = Correctness{max_rel, max_abs,
              write_judge_counts(JudgeCounts::elementwise(mismatched + c.mismatched, total + c.total,
                                                          static_cast<std::int64_t>(trials),
                                                          recorded_matched_ratio(tol, lowest_matched)))};
          return finish(EvalStatus::incorrect_numerical,
                        fmt::format("a timed call's output was wrong: call {} of the timing (timed set {}, its "
                                    "floating-point inputs drawn fresh for that call), output \"{}\": {} (results "
                                    "reused across calls, or work skipped in timed calls)",
                                    k.serial, k.set, d.outputs[i].name, c.detail));
        }
      }
    }
  }
  ev.status = EvalStatus::passed;
  ev.correctness = Correctness{max_rel, max_abs,
      write_judge_counts(JudgeCounts::elementwise(mismatched, total, static_cast<std::int64_t>(trials),
                                                  recorded_matched_ratio(tol, lowest_matched)))};
  std::string summary = "ok";
  ev.performance = Performance{};  // untimed: zeros, as FlashInfer-Bench requires one when PASSED
  if (r.timing) {
    const worker::WorkerTiming& t = *r.timing;
    std::vector<CallCost> costs;  // the timed calls ran on the timed sets' inputs
    for (const Materialized& m : timed_ms) {
      auto c = ideal_cost(d, m.axes, m.args);
      if (!c) return c.error();
      costs.push_back(*c);
    }
    const CallCost cost = mean_cost(costs);
    std::string implausible = cpu ? implausible_cpu_latency(cost.bytes, t.timer.median_ms)
                                  : cuda::implausible_speed(cost.bytes, cost.flops, t.timer.median_ms,
                                                            t.ceilings.copy_bandwidth_gbs, t.mma_tflops);
    Measurement m;
    if (r.cuda_device >= 0) {
      m.cuda_device = r.cuda_device;
      m.pci_bus_id = r.pci_bus_id;
    }
    m.worker = true;
    m.input_sets = trials;
    m.rotations_checked = fresh ? r.kept.size() : trials;
    m.stream_check = r.stream == worker::StreamCheck::same           ? StreamCheck::same_stream
                     : r.stream == worker::StreamCheck::inconclusive ? StreamCheck::inconclusive
                                                                     : StreamCheck::not_checked;
    if (!cpu) {
      record_gpu_timer(m, t.timer);
      record_cost(m, cost);
      record_ceilings(m, t.ceilings, t.mma_tflops, implausible);
    } else {
      // The worker's wall-clock timer reports its median, extremes and count.
      m.timing = TimingMethod::wall_clock;
      m.median_ms = t.timer.median_ms;
      m.l2_flushed = false;
      m.samples = t.timer.samples;
      m.min_ms = t.timer.min_ms;
      m.max_ms = t.timer.max_ms;
      m.implausible = implausible;
      record_cost(m, cost);
    }
    if (t.cupti) log += record_cupti(m, *t.cupti);  // --cupti: the kernels alone, timed in the worker
    Performance perf;
    record(m, perf);
    if (cpu) {
      // The reference's CPU time on the first checked set: kb's oracle timed
      // here, or the PyTorch reference's own call.
      if (use_torch) {
        perf.reference_latency_ms = torch_ms;
      } else {
        auto ref_outputs = allocate_outputs(d, ms[0].axes);
        if (!ref_outputs) return ref_outputs.error();
        auto rt = time_wall_clock(oracle, d, ms[0], *ref_outputs, opt);
        if (!rt) return rt.error();
        Measurement ref;
        record_wall_clock(ref, *rt);
        perf.reference_latency_ms = ref.median_ms;
      }
      perf.speedup_factor = m.median_ms > 0 ? perf.reference_latency_ms / m.median_ms : 0;
    }
    ev.performance = perf;
    if (fresh)
      log += fmt::format("anti-gaming: {} timed calls on fresh inputs ({} random floating-point input{} drawn again "
                         "before each call), {} of them drawn at random judged after timing\n",
                         r.fresh_calls, fresh_count, fresh_count == 1 ? "" : "s", r.kept.size());
    else
      log += fmt::format("anti-gaming: {} timed sets judged after timing\n", trials);
    if (!implausible.empty()) {
      // An outside solution faster than physics allows did not do the work it
      // was timed for: its timing is not a result.
      ev.correctness = Correctness{max_rel, max_abs,
          write_judge_counts(JudgeCounts::elementwise(mismatched, total, static_cast<std::int64_t>(trials)))};
      return finish(EvalStatus::runtime_error, "IMPLAUSIBLE timing: " + implausible);
    }
  }
  ev.log = log;
  EvaluationResult out;
  out.evaluation = std::move(ev);
  out.summary = summary;
  return out;
}

Result<EvaluationResult> evaluate(const Definition& d, const Workload& w, const Implementation& impl,
                                  const BenchOptions& opt) {
  const std::shared_ptr<Session>& s = impl.outside;
  if (!s) return kb::evaluate(d, w, impl, opt);
  s->timed_out = false;
  s->verdict.reset();
  s->call_ms.clear();
  Plugin& p = *s->plugin;
  if (p.worker) {
    std::lock_guard<std::mutex> lock(p.mutex);
    p.worker->take_output();  // what an earlier evaluation left behind is not this one's
  }
  if (auto why = impl.supports(d); !why.empty())
    return make_error(Code::unsupported, fmt::format("{} does not handle {}: {}", impl.name, d.name, why));
  if (p.build_error) {
    EvaluationResult r;
    r.evaluation.status = EvalStatus::compile_error;
    r.evaluation.environment = current_environment(impl.device);
    r.evaluation.timestamp = iso_timestamp_now();
    r.evaluation.log = fmt::format("{}\n{}", p.build_note, *p.build_error);
    // The first diagnostic the compiler printed, for one-line tables.
    std::string first;
    std::istringstream lines(*p.build_error);
    for (std::string line; std::getline(lines, line);)
      if (line.find("error") != std::string::npos) {
        first = line;
        break;
      }
    r.summary = "compile error: " + (first.empty() ? p.build_note : first);
    return r;
  }
  // CUDA solutions are judged the way kb judges its own (gpu_eval.cpp), in
  // the worker: all trials in one request, device buffers with guards,
  // poisoned outputs, a stream check, cold-L2 event timing rotating through
  // the trials, every rotation judged again. Sampling stays call by call.
  if (!judged_by_distribution(d)) {
    auto r = evaluate_in_worker(d, w, impl, opt);
    std::string output;
    if (p.worker) {
      std::lock_guard<std::mutex> lock(p.mutex);
      output = p.worker->take_output();
    }
    if (!r) return r;
    Evaluation& ev = r->evaluation;
    if (!p.build_note.empty()) ev.log += p.build_note + "\n";
    if (!output.empty()) {
      if (!ev.log.empty() && ev.log.back() != '\n') ev.log += "\n";
      ev.log += "solution stdout/stderr:\n" + output;
    }
    if (ev.status == EvalStatus::timeout) r->summary = "timeout: " + r->summary;
    return r;
  }
  // The harness runs in this process on host tensors; the worker moves them
  // to the device for a CUDA solution (sampling).
  Implementation local = impl;
  local.device = Device::cpu;
  auto r = kb::evaluate(d, w, local, opt);
  std::string output;
  if (p.worker) {
    std::lock_guard<std::mutex> lock(p.mutex);
    output = p.worker->take_output();
  }
  if (!r) {
    if (!output.empty()) r = Error{r.error().code, r.error().message + "; solution output: " + output};
    return r;
  }
  Evaluation& ev = r->evaluation;
  if (impl.device == Device::cuda) ev.environment = current_environment(Device::cuda);
  if (s->timed_out || s->verdict) {
    ev.status = s->timed_out ? EvalStatus::timeout : *s->verdict;
    ev.correctness.reset();
    ev.performance.reset();
  }
  if (ev.performance && opt.time) {
    // The harness timed the round trip to the worker; the worker timed the
    // run function itself. Record the latter (after the checked trials and
    // the warm-up calls).
    std::size_t skip = static_cast<std::size_t>(std::max(1, opt.trials) + std::max(0, opt.warmup));
    if (s->call_ms.size() > skip) {
      std::vector<double> samples(s->call_ms.begin() + static_cast<std::ptrdiff_t>(skip), s->call_ms.end());
      double harness_ms = ev.performance->latency_ms;
      ev.performance->latency_ms = median(samples);
      ev.performance->speedup_factor =
          ev.performance->latency_ms > 0 ? ev.performance->reference_latency_ms / ev.performance->latency_ms : 0;
      ev.log += fmt::format("timing: the solution ran in a worker process: latency is the median of {} calls timed "
                            "there ({}), {:.4f} ms with the round trip\n",
                            samples.size(), impl.device == Device::cuda ? "wall time, device synchronized" : "wall time",
                            harness_ms);
    }
  }
  if (!p.build_note.empty()) ev.log += p.build_note + "\n";
  if (!output.empty()) {
    if (!ev.log.empty() && ev.log.back() != '\n') ev.log += "\n";
    ev.log += "solution stdout/stderr:\n" + output;
  }
  if (ev.status == EvalStatus::timeout) r->summary = "timeout: " + r->summary;
  return r;
}

}  // namespace kb::plugin
