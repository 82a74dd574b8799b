// BackendBench's output folder (see report.hpp).
#include "backendbench/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <tuple>

#include "json/json.hpp"

namespace kb::backendbench {
namespace {

Status write_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return make_error(Code::io_error, fmt::format("{}: cannot write", path));
  const bool failed = std::fwrite(text.data(), 1, text.size(), f) != text.size();
  if (std::fclose(f) != 0 || failed) return make_error(Code::io_error, fmt::format("{}: write failed", path));
  return ok_status();
}

// What kind of failure a line's problem is ("" for a passed line).
std::string error_type(const LineOutcome& l) {
  if (l.passed) return "";
  for (const char* v : {"incorrect_count", "incorrect_dtype", "incorrect_shape", "incorrect_numerical"})
    if (l.problem.rfind(v, 0) == 0) return v;
  if (l.problem.rfind("not judged", 0) == 0) return "not_judged";
  if (l.problem.rfind("not run", 0) == 0) return "not_run";
  return "error";
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

struct Entry {
  const LineOutcome* line;
  const std::string* args;
  bool performance;
  bool failed;
};

void write_entry(json::Writer& w, const Entry& e, std::optional<double> empty_ms) {
  const LineOutcome& l = *e.line;
  w.begin_object();
  w.key("op_name").string(l.op);
  w.key("args").string(*e.args);
  if (!e.performance) {
    w.key("is_correct").boolean(l.passed);
    w.key("error_msg").string(l.passed ? "" : l.problem);
    w.key("error_type").string(error_type(l));
    w.key("traceback").string("");
    w.key("max_abs_error");
    if (l.max_abs_error) w.number(*l.max_abs_error);
    else w.null();
    w.key("max_rel_error");
    if (l.max_rel_error) w.number(*l.max_rel_error);
    else w.null();
    w.key("test_type").string("correctness");
  } else {
    const bool ran = l.passed && l.kb_ms > 0;
    w.key("speedup");
    if (ran) w.number(*l.baseline_ms / l.kb_ms);
    else w.null();
    w.key("benchmark_time_ms").number(l.kb_ms);
    w.key("reference_time_ms").number(*l.baseline_ms);
    w.key("error_msg").string(l.passed ? "" : l.problem);
    w.key("successfully_ran").boolean(ran);
    w.key("test_type").string("performance");
    w.key("overhead_dominated");
    if (empty_ms) w.boolean(*l.baseline_ms < overhead_factor * *empty_ms);
    else w.null();
  }
  w.key("source_line").integer(static_cast<std::int64_t>(l.source_line));
  w.end_object();
}

// p as BackendBench prints a Python float: "1.0", "1.5".
std::string p_text(double p) { return p == std::floor(p) ? fmt::format("{:.1f}", p) : fmt::format("{}", p); }

}  // namespace

Status write_outputs(const RunReport& report, const TraceFile& trace, const OutputInfo& info, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(Code::io_error, fmt::format("{}: cannot create the output folder: {}", dir, ec.message()));
  const std::optional<double> empty_ms = info.empty_call_ms ? info.empty_call_ms : report.empty_call_ms;

  // Each line's args text, by (operator, index within the merged operator).
  std::map<std::pair<std::string, std::size_t>, std::string> args_text;
  for (const Operator& op : merge_operators(trace))
    for (std::size_t i = 0; i < op.lines.size(); ++i) args_text[{op.name, i}] = print_args(op.lines[i].args);
  static const std::string unknown_args = "?";
  auto args_of = [&](const LineOutcome& l) -> const std::string* {
    auto it = args_text.find({l.op, l.index});
    return it == args_text.end() ? &unknown_args : &it->second;
  };

  std::vector<Entry> entries;
  for (const LineOutcome& l : report.lines) {
    entries.push_back({&l, args_of(l), false, !l.passed});
    if (l.baseline_ms) entries.push_back({&l, args_of(l), true, !(l.passed && l.kb_ms > 0)});
  }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.line->op, *a.args) < std::tie(b.line->op, *b.args);
  });
  for (bool failed_only : {false, true}) {
    json::Writer w(true);
    w.begin_array();
    for (const Entry& e : entries)
      if (!failed_only || e.failed) write_entry(w, e, empty_ms);
    w.end_array();
    const std::string path = (std::filesystem::path(dir) / (failed_only ? "failed_tests.json" : "full_results.json")).string();
    if (auto st = write_file(path, w.str() + "\n"); !st) return st;
  }

  // Per operator: lines, passes, speedups of the timed lines, errors, overhead-dominated lines.
  struct OpRow {
    std::size_t lines = 0, passed = 0, overhead = 0;
    std::vector<double> speedups;
    double max_abs = 0, max_rel = 0;
  };
  std::map<std::string, OpRow> rows;
  std::vector<const LineOutcome*> overhead_lines;
  for (const LineOutcome& l : report.lines) {
    OpRow& r = rows[l.op];
    ++r.lines;
    r.passed += l.passed;
    if (l.max_abs_error) r.max_abs = std::max(r.max_abs, *l.max_abs_error);
    if (l.max_rel_error) r.max_rel = std::max(r.max_rel, *l.max_rel_error);
    if (l.baseline_ms && l.passed && l.kb_ms > 0) r.speedups.push_back(*l.baseline_ms / l.kb_ms);
    if (l.baseline_ms && empty_ms && *l.baseline_ms < overhead_factor * *empty_ms) {
      ++r.overhead;
      overhead_lines.push_back(&l);
    }
  }
  std::string csv =
      "operator,total_tests,passed_tests,failed_tests,correctness_rate,avg_speedup,geomean_speedup,max_absolute_error,"
      "max_relative_error\n";
  for (const OpScore& s : report.ops) {
    const OpRow& r = rows[s.op];
    double avg = 0, logs = 0;
    for (double x : r.speedups) {
      avg += x;
      logs += std::log(x);
    }
    const double n = static_cast<double>(r.speedups.size());
    csv += fmt::format("{},{},{},{},{},{},{},{},{}\n", csv_field(s.op), r.lines, r.passed, r.lines - r.passed,
                       r.lines ? static_cast<double>(r.passed) / static_cast<double>(r.lines) : 0.0,
                       n > 0 ? avg / n : 0.0, n > 0 ? std::exp(logs / n) : 0.0, r.max_abs, r.max_rel);
  }
  if (auto st = write_file((std::filesystem::path(dir) / "operator_summary.csv").string(), csv); !st) return st;

  // OVERALL_SUMMARY.md
  double mean_correct = 0;
  for (const OpScore& s : report.ops)
    mean_correct += s.lines ? static_cast<double>(s.passed) / static_cast<double>(s.lines) : 0.0;
  if (!report.ops.empty()) mean_correct /= static_cast<double>(report.ops.size());
  const bool timed = std::any_of(report.lines.begin(), report.lines.end(), [](const LineOutcome& l) { return l.baseline_ms.has_value(); });
  std::vector<std::pair<double, double>> ps = report.summary.perf_at;
  if (std::none_of(ps.begin(), ps.end(), [&](auto& pf) { return pf.first == info.p; }))
    ps.insert(ps.begin(), {info.p, summarize(report.ops, {info.p}).perf_at.at(0).second});
  std::string md = "# BackendBench Run Summary\n\n## Command\n```bash\n" + info.command + "\n```\n\n";
  md += fmt::format("Device: {}. Judge: atol = rtol = 1e-2, NaN equal to NaN, dtypes and shapes must match.\n\n",
                    info.device);
  md += "## Results\n\n| Metric | Value |\n|--------|-------|\n";
  md += fmt::format("| Correctness Score | {:.2f} |\n", mean_correct);
  md += timed ? fmt::format("| Performance Score (geomean speedup) | {:.2f} |\n", report.summary.geomean)
              : "| Performance Score (geomean speedup) | n/a (no baseline times) |\n";
  for (auto [p, f] : ps)
    if (p == info.p) md += timed ? fmt::format("| Perf@{} Score | {:.2f} |\n", p_text(p), f) : fmt::format("| Perf@{} Score | n/a |\n", p_text(p));
  for (auto [p, f] : ps)
    if (p != info.p && timed) md += fmt::format("| Perf@{} Score | {:.2f} |\n", p_text(p), f);
  md += "\n### Metric Descriptions\n\n"
        "- **Correctness Score**: Mean pass rate over all operators\n"
        "- **Performance Score**: Geometric mean speedup over all operators (a failing line counts 1.0)\n"
        "- **Perf@p Score**: Rate of operators that are fully correct with a speedup greater than p\n\n";
  md += "## Output Files\n\nThe following files are saved in this directory:\n\n"
        "- `full_results.json`: Complete test results for all operators\n"
        "- `operator_summary.csv`: Operator-level summary statistics\n"
        "- `failed_tests.json`: Log of failed tests (if any)\n"
        "- `OVERALL_SUMMARY.md`: This file\n\n";
  md += "### Operator Speedups vs Eager in Descending Order\n\n"
        "| Operator | Correctness Ratio | Speedup vs Eager | Overhead-dominated lines |\n"
        "|----------|-----------|----------------|----------|\n";
  std::vector<const OpScore*> order;
  for (const OpScore& s : report.ops) order.push_back(&s);
  std::stable_sort(order.begin(), order.end(), [&](const OpScore* a, const OpScore* b) {
    if (a->score != b->score) return a->score > b->score;
    return static_cast<double>(a->passed) / std::max<double>(1, static_cast<double>(a->lines)) >
           static_cast<double>(b->passed) / std::max<double>(1, static_cast<double>(b->lines));
  });
  for (const OpScore* s : order) {
    const OpRow& r = rows[s->op];
    md += fmt::format("| {} | {:.4f} | {} | {} |\n", s->op,
                      s->lines ? static_cast<double>(s->passed) / static_cast<double>(s->lines) : 0.0,
                      timed ? fmt::format("{:.4f}x", s->score) : std::string("N/A"),
                      empty_ms ? fmt::format("{}", r.overhead) : std::string("n/a"));
  }
  md += "\n## Overhead-dominated lines\n\n";
  if (!empty_ms) {
    md += "Not flagged: this run measured no empty-call time.\n";
  } else {
    md += fmt::format("Lines whose reference time is under {}x an empty call ({:.3g} ms): {}.\n", overhead_factor,
                      *empty_ms, overhead_lines.size());
    if (!overhead_lines.empty()) md += "\n| Operator | Line | Reference ms | kb ms |\n|---|---:|---:|---:|\n";
    for (const LineOutcome* l : overhead_lines)
      md += fmt::format("| {} | {} | {:.4f} | {:.4f} |\n", l->op, l->source_line, *l->baseline_ms, l->kb_ms);
  }
  md += "\n## Operators not run\n\n";
  if (report.unimplemented.empty()) {
    md += "None: every operator of the file ran.\n";
  } else {
    md += "| Operator | Lines | Why |\n|---|---:|---|\n";
    for (const CoverageRow& c : report.unimplemented)
      md += fmt::format("| {} | {} | {} |\n", c.op, c.lines,
                        c.cpu_oracle ? "not run on CUDA: kb has a CPU oracle and no CUDA kernel" : "kb does not implement it");
  }
  return write_file((std::filesystem::path(dir) / "OVERALL_SUMMARY.md").string(), md);
}

}  // namespace kb::backendbench
