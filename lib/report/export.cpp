#include "report/export.hpp"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <tuple>

namespace kb::report {

std::vector<model::BenchmarkResult> benchmark_results(const std::vector<TraceRecord>& records) {
  struct Acc {
    std::size_t total = 0, compile_errors = 0;
    std::string first_compile_error;
    double latency_sum = 0;
    std::size_t timed = 0;
    double log_speedup_sum = 0;
    std::size_t with_reference = 0;
    std::optional<double> max_diff;
  };
  std::map<std::tuple<std::string, std::string, std::string>, Acc> groups;
  for (const auto& r : records) {
    const Evaluation& ev = *r.trace.evaluation;
    Acc& a = groups[{r.trace.definition, *r.trace.solution, ev.environment.hardware}];
    ++a.total;
    if (ev.status == EvalStatus::compile_error) {
      if (a.compile_errors++ == 0)
        a.first_compile_error = ev.log.empty() ? fmt::format("COMPILE_ERROR with no log recorded ({})", r.origin) : ev.log;
      continue;
    }
    if (ev.correctness)
      a.max_diff = std::max(a.max_diff.value_or(0.0), ev.correctness->max_absolute_error);
    if (ev.status != EvalStatus::passed || !ev.performance || ev.performance->latency_ms <= 0) continue;
    a.latency_sum += ev.performance->latency_ms;
    ++a.timed;
    if (ev.performance->reference_latency_ms > 0) {
      a.log_speedup_sum += std::log(ev.performance->reference_latency_ms / ev.performance->latency_ms);
      ++a.with_reference;
    }
  }
  std::vector<model::BenchmarkResult> out;
  for (const auto& [key, a] : groups) {
    model::BenchmarkResult b;
    std::tie(b.kernel_id, b.source, b.device_name) = key;
    b.compiled = a.compile_errors < a.total;
    if (!b.compiled) {
      b.compile_error = a.first_compile_error;
    } else {
      if (a.timed) b.time = a.latency_sum / static_cast<double>(a.timed);
      if (a.with_reference) b.speedup = std::exp(a.log_speedup_sum / static_cast<double>(a.with_reference));
      b.max_diff = a.max_diff;
    }
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace kb::report
