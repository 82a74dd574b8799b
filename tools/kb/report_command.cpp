// kb export, kb compare and kb report: trace sets turned into Benchmark Results, a side-by-side
// comparison, and an offline report (lib/report), printed or written here.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "model/records.hpp"
#include "report/compare.hpp"
#include "report/export.hpp"
#include "report/render.hpp"
#include "report/report.hpp"
#include "report/traces.hpp"

namespace {

constexpr const char* kExportUsage = R"(usage: kb export --benchmark-result [--out FILE] TRACES...

Writes one Benchmark Result (the FlashInfer schema set's per-kernel summary) per
definition, solution and device of the traces (.jsonl files or folders of them),
one JSON object per line, to FILE or stdout:
  kernel_id  the definition        source  the solution      device.name  the hardware
  compiled   false when every record of it is COMPILE_ERROR, with compile_error
             (the first such record's log)
  time       the mean latency_ms over the workloads where it PASSED, timed
  speedup    the geometric mean of reference_latency_ms / latency_ms there
  max_diff   the largest max_absolute_error over its judged records
Each line reads back with kb's Benchmark Result reader.

options:
  --benchmark-result  the format (the only one)
  --out FILE          write to FILE instead of stdout
  -h, --help          this text
)";

constexpr const char* kCompareUsage = R"(usage: kb compare [--json] OLD NEW

Puts two trace sets (.jsonl files or folders of them) side by side: per
definition, solution and workload, the old and the new latency and whether the
difference is more than noise, as nvbench's compare script decides: with
d = (new - old) / old and each measurement's relative spread (rel_noise, else
half its min..max range over the median), the noise is the smaller spread (the
one recorded when only one is); |d| <= noise is within noise, else faster or
slower. Status changes (now failing, now passing) and workloads in one set only
are listed too, then a summary.

options:
  --json      write the comparison as JSON instead of the table
  -h, --help  this text

Exit 0 when both sets were read (whatever changed), 1 on an error.
)";

constexpr const char* kReportUsage = R"(usage: kb report --out DIR [options] TRACES...

Writes a report of the traces (.jsonl files or folders of them) into DIR:
  index.html     devices and timing method, win rate and fast_p per author, and per
                 definition: speedup against the baseline, latency against each var
                 axis per solution (charts), fast_p, the status matrix of solutions
                 by workloads with the failure messages
  models.html    with --records: each calling record's kb estimate
  agents.html    with --agent-traces: each agent trace's conversation and tool
                 calls in order
  report.md, results.csv, solutions.csv, authors.csv, fast_p.csv (models.csv),
  report.json    the same tables
The pages are self-contained (styles and Chart.js inlined): they open offline.
Authors come from the traces/<author>/<op_type>/ folders kb bench writes.

options:
  --out DIR              the folder to write (created if missing)
  --records PATH         calling records (.json file or folder; repeatable)
  --agent-traces FILE    agent trace files (repeatable; the .json files that
                         follow it are agent traces too)
  --baseline NAME        the solution whose latency is the baseline (default:
                         the reference latency the traces carry)
  --hardware NAME        estimates: use only records of this device
  --title TEXT           the report's title
  -h, --help             this text
)";

bool read_set(const std::vector<std::string>& paths, const char* cmd, kb::report::TraceSet& out) {
  auto set = kb::report::read_traces(paths);
  if (!set) {
    fmt::print(stderr, "kb {}: {}\n", cmd, set.error().message);
    return false;
  }
  out = std::move(*set);
  return true;
}

std::string axes_text(const std::vector<std::pair<std::string, std::int64_t>>& axes) {
  if (axes.empty()) return "-";
  std::string out;
  for (const auto& [k, v] : axes) out += fmt::format("{}{}={}", out.empty() ? "" : " ", k, v);
  return out;
}

void print_comparison(const kb::report::Comparison& c, std::FILE* out) {
  using kb::report::Change;
  fmt::print(out, "old: {}\nnew: {}\n\n", c.old_devices.empty() ? "-" : fmt::format("{}", fmt::join(c.old_devices, ", ")),
             c.new_devices.empty() ? "-" : fmt::format("{}", fmt::join(c.new_devices, ", ")));
  constexpr const char* row = "{:<40} {:<24} {:<26} {:>11} {:>11} {:>8} {:>7}  {}\n";
  fmt::print(out, row, "definition", "solution", "workload", "old_ms", "new_ms", "diff", "noise", "change");
  auto side = [](const kb::report::CompareSide& s) {
    if (s.status.empty()) return std::string("-");
    if (s.latency_ms) return fmt::format("{:.4f}", *s.latency_ms);
    return s.status;
  };
  for (const auto& r : c.rows)
    fmt::print(out, row, r.definition, r.solution, axes_text(r.axes), side(r.old_side), side(r.new_side),
               r.difference ? fmt::format("{:+.1f}%", 100 * *r.difference) : "-",
               r.noise ? fmt::format("{:.1f}%", 100 * *r.noise) : "-", kb::report::change_name(r.change));
  fmt::print(out, "\n{} rows:", c.rows.size());
  bool first = true;
  for (std::size_t i = 0; i < kb::report::kChangeCount; ++i) {
    if (!c.counts[i]) continue;
    fmt::print(out, "{} {} {}", first ? "" : ",", c.counts[i], kb::report::change_name(static_cast<Change>(i)));
    first = false;
  }
  fmt::print(out, "\n");
  if (c.timed_pairs)
    fmt::print(out, "timed on both sides: {}; new / old, geometric mean: {:.3f}\n", c.timed_pairs, c.geomean_ratio);
  if (c.old_repeats || c.new_repeats)
    fmt::print(out, "repeated lines (the later one used): {} old, {} new\n", c.old_repeats, c.new_repeats);
}

}  // namespace

int cmd_export(const std::vector<std::string>& args) {
  bool benchmark_result = false;
  std::string out_path;
  std::vector<std::string> paths;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (is_help(a)) {
      std::fputs(kExportUsage, stdout);
      return 0;
    } else if (a == "--benchmark-result") {
      benchmark_result = true;
    } else if (a == "--out") {
      if (i + 1 >= args.size()) {
        fmt::print(stderr, "kb export: --out needs a value\n");
        return 2;
      }
      out_path = args[++i];
    } else if (a.size() > 1 && a[0] == '-') {
      fmt::print(stderr, "kb export: unknown option {} (see kb export --help)\n", a);
      return 2;
    } else {
      paths.push_back(a);
    }
  }
  if (!benchmark_result) {
    fmt::print(stderr, "kb export: name the format: --benchmark-result (see kb export --help)\n");
    return 2;
  }
  if (paths.empty()) {
    fmt::print(stderr, "kb export: needs at least one traces file or folder (see kb export --help)\n");
    return 2;
  }
  kb::report::TraceSet set;
  if (!read_set(paths, "export", set)) return 1;
  std::string text;
  for (const auto& r : kb::report::benchmark_results(set.records)) text += kb::model::to_json(r, false) + "\n";
  if (out_path.empty()) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    fmt::print(stderr, "kb export: {}: cannot be written\n", out_path);
    return 1;
  }
  return 0;
}

int cmd_compare(const std::vector<std::string>& args) {
  bool as_json = false;
  std::vector<std::string> paths;
  for (const auto& a : args) {
    if (is_help(a)) {
      std::fputs(kCompareUsage, stdout);
      return 0;
    } else if (a == "--json") {
      as_json = true;
    } else if (a.size() > 1 && a[0] == '-') {
      fmt::print(stderr, "kb compare: unknown option {} (see kb compare --help)\n", a);
      return 2;
    } else {
      paths.push_back(a);
    }
  }
  if (paths.size() != 2) {
    fmt::print(stderr, "kb compare: needs two trace sets, OLD and NEW (see kb compare --help)\n");
    return 2;
  }
  kb::report::TraceSet old_set, new_set;
  if (!read_set({paths[0]}, "compare", old_set) || !read_set({paths[1]}, "compare", new_set)) return 1;
  auto c = kb::report::compare(old_set, new_set);
  if (as_json) fmt::print("{}\n", kb::report::to_json(c));
  else print_comparison(c, stdout);
  return 0;
}

int cmd_report(const std::vector<std::string>& args) {
  kb::report::Options opt;
  std::string out_dir;
  std::vector<std::string> paths;
  // --agent-traces takes the .json files that follow it; a .jsonl file or a folder after them is traces.
  bool agent_mode = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* flag) -> const std::string* {
      if (i + 1 >= args.size()) {
        fmt::print(stderr, "kb report: {} needs a value\n", flag);
        return nullptr;
      }
      return &args[++i];
    };
    if (is_help(a)) {
      std::fputs(kReportUsage, stdout);
      return 0;
    }
    if (a.size() > 1 && a[0] == '-') agent_mode = false;
    if (a == "--out") {
      auto v = value("--out");
      if (!v) return 2;
      out_dir = *v;
    } else if (a == "--records") {
      auto v = value("--records");
      if (!v) return 2;
      opt.record_paths.push_back(*v);
    } else if (a == "--agent-traces") {
      auto v = value("--agent-traces");
      if (!v) return 2;
      opt.agent_trace_paths.push_back(*v);
      agent_mode = true;
    } else if (a == "--baseline") {
      auto v = value("--baseline");
      if (!v) return 2;
      opt.baseline = *v;
    } else if (a == "--hardware") {
      auto v = value("--hardware");
      if (!v) return 2;
      opt.hardware = *v;
    } else if (a == "--title") {
      auto v = value("--title");
      if (!v) return 2;
      opt.title = *v;
    } else if (a.size() > 1 && a[0] == '-') {
      fmt::print(stderr, "kb report: unknown option {} (see kb report --help)\n", a);
      return 2;
    } else if (agent_mode && a.size() > 5 && a.ends_with(".json")) {
      opt.agent_trace_paths.push_back(a);
    } else {
      paths.push_back(a);
    }
  }
  if (out_dir.empty()) {
    fmt::print(stderr, "kb report: needs --out DIR (see kb report --help)\n");
    return 2;
  }
  if (paths.empty()) {
    fmt::print(stderr, "kb report: needs at least one traces file or folder (see kb report --help)\n");
    return 2;
  }
  kb::report::TraceSet set;
  if (!read_set(paths, "report", set)) return 1;
  opt.trace_paths = paths;
  auto rep = kb::report::build(set, opt);
  if (!rep) {
    fmt::print(stderr, "kb report: {}\n", rep.error().message);
    return 1;
  }
  auto written = kb::report::write_report(*rep, out_dir);
  if (!written) {
    fmt::print(stderr, "kb report: {}\n", written.error().message);
    return 1;
  }
  fmt::print("{} records, {} definitions", rep->records, rep->definitions.size());
  if (!rep->models.empty()) fmt::print(", {} calling records", rep->models.size());
  if (!rep->agents.empty()) fmt::print(", {} agent traces", rep->agents.size());
  fmt::print("\n");
  for (const auto& f : *written) fmt::print("wrote {}\n", f);
  return 0;
}
