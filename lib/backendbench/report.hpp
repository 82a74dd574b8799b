// BackendBench's output folder, written from a run's report: the files
// BackendBench's own runner writes, with its field names, so tools that read
// its results read kb's.
//   OVERALL_SUMMARY.md    the command, correctness score (mean pass rate over
//                         operators), performance score (geometric mean of the
//                         per-operator speedups, a failing line counting 1.0),
//                         perf@p, and per operator its correctness ratio and
//                         speedup, highest speedup first
//   operator_summary.csv  operator,total_tests,passed_tests,failed_tests,
//                         correctness_rate,avg_speedup,geomean_speedup,
//                         max_absolute_error,max_relative_error
//                         (total_tests counts the operator's lines run;
//                         BackendBench's writer also counts its performance
//                         entries there)
//   full_results.json     one correctness entry per line run (op_name, args,
//                         is_correct, error_msg, error_type, traceback,
//                         max_abs_error, max_rel_error, test_type
//                         "correctness") and one performance entry per line
//                         with a baseline time (op_name, args, speedup,
//                         benchmark_time_ms, reference_time_ms, error_msg,
//                         successfully_ran, test_type "performance"), sorted
//                         by (op_name, args); kb adds source_line and, on
//                         performance entries, overhead_dominated
//   failed_tests.json     the entries of full_results.json that failed
//                         (BackendBench's runner names this file failed_ops.json)
// A line is overhead-dominated, as BackendBench flags it, when its reference
// time is under 1.3x the time of an empty call through the same timing
// (RunReport::empty_call_ms, or OutputInfo::empty_call_ms when given): its
// speedup measures launch overhead, not the kernel. Such lines are listed in
// OVERALL_SUMMARY.md and counted per operator; they stay in the score.
// Operators of the file that the run could not run (no implementation on its
// device) are listed in OVERALL_SUMMARY.md by lines, "not run on CUDA" where
// kb has only the CPU oracle.
#pragma once

#include <optional>
#include <string>

#include "backendbench/run.hpp"
#include "backendbench/trace.hpp"
#include "common/result.hpp"

namespace kb::backendbench {

inline constexpr double overhead_factor = 1.3;

struct OutputInfo {
  std::string command;                   // as run, for the summary
  std::string device;                    // "cpu", the GPU's name
  double p = 1.0;                        // the perf@p threshold of the summary's headline
  std::optional<double> empty_call_ms;   // overrides the report's own measurement
};

// Writes the four files into `dir` (created when missing). The trace is the
// one the report was run on (each line's args text comes from it).
Status write_outputs(const RunReport& report, const TraceFile& trace, const OutputInfo& info, const std::string& dir);

}  // namespace kb::backendbench
