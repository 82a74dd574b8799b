// kb estimate RECORD TRACES...: a calling record weighed with recorded traces (lib/estimate),
// printed as a table or written as JSON.
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <vector>

#include "commands.hpp"
#include "common/printable.hpp"
#include "estimate/estimate.hpp"
#include "model/records.hpp"

namespace {

constexpr const char* kEstimateUsage = R"(usage: kb estimate [options] RECORD TRACES...

Estimates one model step from a Kernel Calling Record (how often each kernel
runs per step, at which var-axis values) and recorded traces (.jsonl files or
folders of them, as kb bench writes). For each kernel: the recorded workload
nearest to the call (the dispatch rule: the sum over var axes of
|log2 call - log2 recorded|; marked ~ when not exact), the baseline's latency
there and the fastest PASSED solution's, times the count; each kernel's share of
the step and the step's estimated speedup. Kernels without a usable record are
listed with the reason; the totals say how many kernels they cover.

The baseline is the reference latency the records carry (reference_latency_ms,
the median where several records give one), or with --baseline a solution's.

options:
  --hardware NAME     use only records of this device (required when the traces
                      come from several)
  --baseline NAME     the solution whose latency is the baseline
  --json              write the estimate as JSON instead of the table
  -h, --help          this text

Exit 0 when at least one kernel was measured, 1 otherwise or on an error.
)";

std::string axes_text(const std::vector<std::pair<std::string, std::int64_t>>& axes) {
  if (axes.empty()) return "-";
  std::string out;
  for (const auto& [k, v] : axes) out += fmt::format("{}{}={}", out.empty() ? "" : " ", k, v);
  return out;
}

std::string ms(double v) { return fmt::format("{:.4f}", v); }

void print_table(const kb::estimate::Estimate& e, std::FILE* out) {
  fmt::print(out, "model {} ({}){}\n", e.model, e.framework, e.step.empty() ? "" : ", step " + e.step);
  fmt::print(out, "{} trace record{}{}; baseline: {}\n", e.records, e.records == 1 ? "" : "s",
             e.hardware.empty() ? "" : " on " + e.hardware,
             e.baseline == "reference" ? "the reference latency the records carry" : "solution " + e.baseline);
  constexpr const char* row = "{:<48} {:>6}  {:<28} {:>11} {:>11}  {:<28} {:>8} {:>7} {:>7}\n";
  fmt::print(out, "\n");
  fmt::print(out, row, "kernel", "count", "recorded workload", "baseline_ms", "best_ms", "best solution", "speedup",
             "share", "share'");
  for (const auto& k : e.kernels) {
    if (!k.measured) continue;
    fmt::print(out, row, k.id, k.count, (k.exact ? "" : "~") + axes_text(k.matched_axes), ms(k.baseline_ms),
               ms(k.best_ms), k.best_solution, fmt::format("{:.2f}x", k.speedup),
               fmt::format("{:.1f}%", 100 * k.baseline_share), fmt::format("{:.1f}%", 100 * k.best_share));
  }
  bool any_inexact = false;
  for (const auto& k : e.kernels) any_inexact = any_inexact || (k.measured && !k.exact);
  if (any_inexact) {
    fmt::print(out, "\n~ not the call's workload: the nearest recorded one\n");
    for (const auto& k : e.kernels)
      if (k.measured && !k.exact)
        fmt::print(out, "  {}: call {}, recorded {} (distance {:.2f})\n", k.id, axes_text(k.axes),
                   axes_text(k.matched_axes), k.distance);
  }
  if (e.measured != e.kernels.size()) {
    fmt::print(out, "\nnot measured ({} of {} kernels):\n", e.kernels.size() - e.measured, e.kernels.size());
    for (const auto& k : e.kernels)
      if (!k.measured) fmt::print(out, "  {} x{} ({}): {}\n", k.id, k.count, axes_text(k.axes), k.reason);
  }
  fmt::print(out, "\nshare: of the step's baseline time; share': of its time with the best solutions\n");
  if (e.measured == 0) {
    fmt::print(out, "step: no kernel measured, no estimate\n");
    return;
  }
  fmt::print(out, "step ({} of {} kernels): baseline {} ms, best {} ms, estimated speedup {:.2f}x\n", e.measured,
             e.kernels.size(), ms(e.baseline_ms), ms(e.best_ms), e.speedup);
}

}  // namespace

int cmd_estimate(const std::vector<std::string>& args) {
  kb::estimate::Options opt;
  bool as_json = false;
  std::vector<std::string> positional;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* flag) -> const std::string* {
      if (i + 1 >= args.size()) {
        fmt::print(stderr, "kb estimate: {} needs a value\n", flag);
        return nullptr;
      }
      return &args[++i];
    };
    if (is_help(a)) {
      std::fputs(kEstimateUsage, stdout);
      return 0;
    } else if (a == "--hardware") {
      auto v = value("--hardware");
      if (!v) return 2;
      opt.hardware = *v;
    } else if (a == "--baseline") {
      auto v = value("--baseline");
      if (!v) return 2;
      opt.baseline = *v;
    } else if (a == "--json") {
      as_json = true;
    } else if (a.size() > 1 && a[0] == '-') {
      fmt::print(stderr, "kb estimate: unknown option {} (see kb estimate --help)\n", a);
      return 2;
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() < 2) {
    fmt::print(stderr, "kb estimate: needs a calling record and at least one traces file or folder (see kb estimate "
                       "--help)\n");
    return 2;
  }
  kb::Diagnostics diags;
  auto record = kb::model::read_calling_record_file(positional[0], &diags);
  if (!record) {
    for (const auto& d : diags.items())
      if (d.severity == kb::Severity::error) fmt::print(stderr, "{}\n", d.to_string());
    return 1;
  }
  std::vector<std::string> traces(positional.begin() + 1, positional.end());
  auto e = kb::estimate::estimate(*record, traces, opt);
  if (!e) {
    fmt::print(stderr, "kb estimate: {}\n", kb::printable(e.error().message));
    return 1;
  }
  if (as_json) fmt::print("{}\n", kb::estimate::to_json(*e));
  else print_table(*e, stdout);
  return e->measured > 0 ? 0 : 1;
}
