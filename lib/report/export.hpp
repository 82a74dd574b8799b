// Benchmark Results (the FlashInfer schema set's per-kernel summary) from trace records.
#pragma once

#include <vector>

#include "model/records.hpp"
#include "report/traces.hpp"

namespace kb::report {

// One Benchmark Result per (definition, solution, device) of `records`, sorted by kernel id,
// source, then device:
//   kernel_id  the definition; source: the solution; device.name: environment.hardware;
//   compiled   false exactly when every record of it is COMPILE_ERROR; compile_error is then the
//              first such record's log (or, when that log is empty, a line naming the record);
//   time       the mean latency_ms over its PASSED, timed workloads (absent when none);
//   speedup    the geometric mean over those workloads of reference_latency_ms / latency_ms,
//              where the record carries a reference (absent when none does);
//   max_diff   the largest correctness.max_absolute_error over its judged records (PASSED and
//              INCORRECT_NUMERICAL; absent when none was judged).
std::vector<model::BenchmarkResult> benchmark_results(const std::vector<TraceRecord>& records);

}  // namespace kb::report
