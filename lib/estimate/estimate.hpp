// What faster kernels do to a whole model step: a Kernel Calling Record (how often each kernel
// runs in one step, at which var-axis values) weighed with recorded traces.
//
// For each kernel of the record: the recorded workloads of its definition are grouped by their
// var-axis values (a point); the call is matched to the nearest point by the dispatch rule (the
// sum over the call's axes of |log2 call - log2 recorded|, dispatch::log2_distance), and the
// estimate says when the match is not exact. At that point:
//   baseline  the records' reference_latency_ms (the reference kb bench and FlashInfer-Bench time
//             beside every PASSED solution; the median when several records carry one), or, with
//             EstimateOptions::baseline, that solution's PASSED latency;
//   best      the fastest solution that PASSED there (a solution with any other status at the
//             point is out for it, as in dispatch), its best latency.
// Per kernel: count x latency for both, its share of each step total, its speedup. The step:
// the sums over the measured kernels and their ratio. A kernel with no usable record is listed
// with the reason, never dropped, and the totals say how many kernels they cover.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "model/records.hpp"

namespace kb::estimate {

struct Options {
  // Non-empty: only records whose evaluation.environment.hardware equals it. Empty: all records,
  // which must then come from one device (mixing GPUs is refused, naming them).
  std::string hardware;
  // Non-empty: the solution whose latency is the baseline (e.g. a FlashInfer wrapper), instead of
  // the records' reference_latency_ms.
  std::string baseline;
};

struct KernelEstimate {
  std::string id;
  std::int64_t count = 0;
  std::vector<std::pair<std::string, std::int64_t>> axes;  // the call's, from the record
  bool measured = false;
  std::string reason;  // why not measured

  // Measured kernels only:
  std::vector<std::pair<std::string, std::int64_t>> matched_axes;  // the recorded point used
  bool exact = false;     // matched_axes equal the call's axes (and the call gave every var axis)
  double distance = 0;    // the dispatch rule's distance to the point (0 when exact)
  double baseline_ms = 0;          // one call
  std::string best_solution;
  double best_ms = 0;              // one call
  double baseline_step_ms = 0;     // count x baseline_ms
  double best_step_ms = 0;         // count x best_ms
  double baseline_share = 0;       // of the step's baseline total, 0..1
  double best_share = 0;           // of the step's best total
  double speedup = 0;              // baseline_ms / best_ms
};

struct Estimate {
  std::string model;
  std::string framework;
  std::string step;       // the record's step, or ""
  std::string hardware;   // the device of the records used ("" when none was used)
  std::string baseline;   // "reference" (the records' reference_latency_ms) or the baseline solution
  std::size_t records = 0;  // trace records read for the record's kernels (with an evaluation)
  std::vector<KernelEstimate> kernels;  // in the record's order
  std::size_t measured = 0;
  double baseline_ms = 0;  // step totals over the measured kernels
  double best_ms = 0;
  double speedup = 0;      // baseline_ms / best_ms (0 when nothing was measured)
};

// Reads every .jsonl under each of `trace_paths` (files, or folders searched recursively) and
// estimates `record`. Errors: a path that does not exist (io_error), a line that is not a valid
// Trace (parse_error / invalid_data, naming file:line), records from several devices without
// options.hardware (invalid_argument, naming them).
Result<Estimate> estimate(const model::CallingRecord& record, const std::vector<std::string>& trace_paths,
                          const Options& options);

// The estimate as JSON ({"model", ..., "kernels": [...]}), pretty or one line.
std::string to_json(const Estimate& e, bool pretty = true);

}  // namespace kb::estimate
