// The measurement of one evaluation as one typed record, and the only code
// that turns it into JSON and back: `performance.extra` of a trace line is
// write_extra(m), and every printer (the terminal table, reports, `kb
// dispatch`) gets the record back with read_measurement. Producers
// (harness.cpp, gpu_eval.cpp, plugin.cpp, through timing_report.hpp and
// cupti_report.hpp) fill the fields they measured and leave the others
// absent: a CPU evaluation has no clock, ceiling or CUPTI fields, not zeros.
//
// Every field but median_ms is one key of `extra`, named in its comment, and
// written in the order of this struct. FlashInfer-Bench, tools/ and tests read
// these keys: a key is never renamed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "schema/model.hpp"

namespace kb {

// "timing": the clock the latency was read from.
enum class TimingMethod { cuda_events, wall_clock };
// "stream_check": the other-stream check's verdict (a call on a stream held
// shut by a gate kernel; cuda/anti_gaming.hpp). `true` is read as same_stream.
enum class StreamCheck { same_stream, inconclusive, not_checked };
// "l2_flush": how a cold sample's L2 flush left the L2 (cuda/timing.hpp's L2Flush).
enum class L2FlushMode { clean, write, none };
// "cost_basis": how the cost model (cost.hpp) reached `bytes` and `flops`;
// ordered from the firmest (mean_cost keeps the weakest of its trials).
enum class CostBasis {
  exact,         // "exact": the op type's model, on the call's index values
  upper_bound,   // "upper_bound": a choice made inside the call is bounded, not known (MoE routing)
  tensor_sizes,  // "tensor_sizes": an op type the model does not know: every tensor whole, flops 0
};

struct Measurement {
  // The latency: performance.latency_ms, the median of the samples. Not in
  // `extra`; read_measurement takes it from the Performance beside it.
  double median_ms = 0;

  // Where it ran.
  std::optional<std::int64_t> cuda_device;  // "cuda_device": the CUDA ordinal
  std::optional<std::string> pci_bus_id;    // "pci_bus_id": the same device, independent of CUDA_VISIBLE_DEVICES

  // How it was timed, and the anti-gaming around the timing.
  std::optional<TimingMethod> timing;              // "timing"
  std::optional<bool> worker;                      // "worker": timed in kb-worker (an outside solution)
  std::optional<bool> l2_flushed;                  // "l2_flushed": cold samples
  std::optional<std::uint64_t> input_sets;         // "input_sets": samples rotate through this many
  std::optional<std::uint64_t> rotations_checked;  // "rotations_checked": rotations judged again after timing
  std::optional<StreamCheck> stream_check;         // "stream_check"

  // The samples.
  std::optional<bool> graph;             // "graph": captured in CUDA graphs (else: stream + blocking kernel)
  std::optional<std::uint64_t> samples;  // "samples": how many were kept
  std::optional<double> min_ms;          // "min_ms"
  std::optional<double> max_ms;          // "max_ms"
  std::optional<double> mean_ms;         // "mean_ms"
  std::optional<double> rel_noise;       // "rel_noise": stdev / mean

  // SM clocks and throttling (CUDA events; cuda::TimingResult).
  // "sm_clock_mhz": [before, after] the samples (NVML).
  std::optional<std::pair<std::uint64_t, std::uint64_t>> sm_clock_mhz;
  std::optional<std::uint64_t> sm_clock_max_mhz;  // "sm_clock_max_mhz"
  // "sm_clock_lowest_kept_mhz": the lowest average over a kept batch; 0 where batches were not checked.
  std::optional<std::uint64_t> sm_clock_lowest_kept_mhz;
  std::optional<bool> throttled;  // "throttled": the set-aside samples had to be used
  std::optional<std::uint64_t> throttled_samples_set_aside;  // "throttled_samples_set_aside"
  std::optional<std::string> throttle_reasons;               // "throttle_reasons": NVML's names, "" for none

  // The call's ideal cost (cost.hpp, docs/cost_model.md) and the speed it implies.
  std::optional<double> bytes;            // "bytes": the input parts read and the outputs written, each once
  std::optional<double> achieved_gbs;     // "achieved_gbs": bytes / median, GB/s
  std::optional<double> copy_bandwidth_gbs;          // "copy_bandwidth_gbs": the device's measured copy bandwidth
  std::optional<double> fraction_of_copy_bandwidth;  // "fraction_of_copy_bandwidth"
  std::optional<double> flops;            // "flops": 0 where the cost model does not know the op type
  std::optional<double> achieved_tflops;  // "achieved_tflops"
  std::optional<double> mma_bf16_tflops;  // "mma_bf16_tflops": the device's measured bf16 mma.sync rate
  std::optional<double> fraction_of_mma_bf16;  // "fraction_of_mma_bf16": achieved_tflops / mma_bf16_tflops
  std::optional<CostBasis> cost_basis;         // "cost_basis"
  std::optional<double> empty_kernel_ms;     // "empty_kernel_ms": the launch floor, timed as solutions are
  std::optional<double> one_read_kernel_ms;  // "one_read_kernel_ms": the floor with one cold DRAM read
  std::optional<std::string> implausible;    // "implausible": why the speed beats the ceilings, "" for plausible

  std::optional<L2FlushMode> l2_flush;  // "l2_flush"
  // "baseline": what performance.reference_latency_ms timed, the speedup's
  // denominator: "reference" (the reference's own time) or a solution's name.
  std::optional<std::string> baseline;

  // Where the evaluation's wall time went, in seconds of kb's host clock:
  // the checked trials (inputs, the reference, judging; on CUDA the stream
  // check too), then the timing (warm-up, samples, the reference's timing on
  // the CPU, and on CUDA the judging of timed calls after them).
  std::optional<double> judge_s;   // "judge_s"
  std::optional<double> timing_s;  // "timing_s"

  // CUPTI's kernel time (kb bench --cupti; cuda::time_kernels_cupti): the
  // kernels alone, or why CUPTI could not record them.
  std::optional<double> cupti_kernel_ms;                // "cupti_kernel_ms": median over cold calls
  std::optional<double> cupti_min_ms;                   // "cupti_min_ms"
  std::optional<double> cupti_max_ms;                   // "cupti_max_ms"
  std::optional<std::uint64_t> cupti_samples;           // "cupti_samples"
  std::optional<std::uint64_t> cupti_kernels_per_call;  // "cupti_kernels_per_call": the most kernels one call ran
  std::optional<bool> cupti_graph;                      // "cupti_graph": every call replayed from a CUDA graph
  std::optional<std::string> cupti_error;               // "cupti": the reason CUPTI could not record

  // "samples_ms": every kept sample, in the order it ran; written only when
  // non-empty (it makes a trace line long).
  std::vector<double> samples_ms;

  // Keys kb does not know (another tool's `extra`), kept in order as minified
  // JSON values and written after kb's own.
  std::vector<std::pair<std::string, std::string>> other;

  bool operator==(const Measurement&) const = default;
};

// `extra`'s JSON object (minified) for `m`. Every optional field that holds a
// value is written, absent ones are not.
std::string write_extra(const Measurement& m);

// performance.latency_ms = median_ms and performance.extra = write_extra(m)
// (absent when `m` holds nothing but the median); reference_latency_ms and
// speedup_factor are left as they are.
void record(const Measurement& m, Performance& perf);

// The record back from `extra`'s JSON text. Errors (Code::parse_error for text
// that is not JSON, Code::invalid_data for a known key of the wrong kind):
// "origin: path.key: expected ..., got ...", `path` naming `extra` itself
// (e.g. "evaluation.performance.extra").
Result<Measurement> read_extra(std::string_view extra_json, std::string_view origin, std::string_view path);

// The record of a trace line's evaluation: median_ms from latency_ms, the
// rest from `extra` (absent: only median_ms). nullopt when the trace holds no
// performance (not evaluated, or not PASSED). `origin`: "file:line" for errors.
Result<std::optional<Measurement>> read_measurement(const Trace& t, std::string_view origin);

// correctness.extra: the judge's counts beside max_absolute_error and
// max_relative_error. Elementwise judging fills mismatched and total;
// sampling, judged by distribution, fills tvd, tvd_threshold, bins and draws,
// or out_of_support for a sample the reference can never draw.
struct JudgeCounts {
  std::optional<double> tvd;            // "tvd": the largest total variation distance over the rows
  std::optional<double> tvd_threshold;  // "tvd_threshold": the distance the judge allowed there
  std::optional<std::int64_t> bins;     // "bins"
  std::optional<std::int64_t> draws;    // "draws": calls per trial
  std::optional<bool> out_of_support;   // "out_of_support"
  std::optional<std::int64_t> mismatched;  // "mismatched": elements outside the tolerance
  std::optional<std::int64_t> total;       // "total": elements compared
  // "matched_ratio": the lowest fraction of elements within tolerance of any
  // output in any trial (FlashInfer-Bench's key); recorded where the judge
  // requires a matched ratio below 1.
  std::optional<double> matched_ratio;
  std::int64_t trials_run = 0;             // "trials_run"
  bool operator==(const JudgeCounts&) const = default;

  static JudgeCounts elementwise(std::int64_t mismatched, std::int64_t total, std::int64_t trials_run,
                                 std::optional<double> matched_ratio = std::nullopt) {
    JudgeCounts c;
    c.mismatched = mismatched;
    c.total = total;
    c.matched_ratio = matched_ratio;
    c.trials_run = trials_run;
    return c;
  }
};

// correctness.extra's JSON object (minified) for `c`.
std::string write_judge_counts(const JudgeCounts& c);

// Table cells every printer shares ("-" where the record holds no value).
// The median in ms, 4 decimals ("0.0123"); "*" appended when throttled (the
// samples set aside for a low clock had to be used after all).
std::string latency_cell(const Measurement& m);
// The spread of the samples: rel_noise as a percentage ("1.2%").
std::string noise_cell(const Measurement& m);
// The larger fraction of a measured ceiling the call reached: "83% copy"
// (fraction_of_copy_bandwidth) or "41% mma" (fraction_of_mma_bf16).
std::string achieved_cell(const Measurement& m);
// CUPTI's median kernel time in ms, 4 decimals, or "n/a" where CUPTI could not record.
std::string cupti_cell(const Measurement& m);

}  // namespace kb
