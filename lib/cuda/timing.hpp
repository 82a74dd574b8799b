// Timing GPU work the way nvbench does (notes/measurement.md):
//  - device time from CUDA events around each sample;
//  - cold samples: L2 flushed by writing a buffer twice the L2 size and
//    reading it back, queued before the start event (L2Flush below: the L2
//    the sample starts from holds no dirty lines);
//  - no host launch gaps inside a sample: samples are captured in a CUDA graph
//    (flush, start event, work, stop event; many samples per graph) and
//    replayed, so the GPU never waits for the host between the events;
//  - warm-up outside timing (a count and a duration, for the clock to boost);
//  - an adaptive stop (minimum samples, target relative standard error of the
//    mean, time cap); median, spread and count reported;
//  - the SM clock averaged over every batch of samples (the GPU's cycle
//    counters against its timer, clock_sampler.hpp): a batch that ran
//    under throttle_threshold of the maximum clock is set aside and the
//    GPU rests before the next (nvbench's throttle handling), so a long run of
//    heavy samples is not measured under the power cap; the result says how
//    many samples were set aside and flags throttling that remained.
// Work that cannot be captured in a graph is timed on the stream instead,
// behind a blocking kernel that holds the GPU until all samples are queued.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "common/tuning.hpp"

namespace kb::cuda {

// TimingOptions::throttle_threshold's default: the tuning setting
// throttle_threshold (common/tuning.hpp; 0.75, nvbench's, unless changed).
// 0.9 keeps only samples near the maximum clock; 0 keeps everything.
inline double default_throttle_threshold() { return tuning::current().throttle_threshold; }

// How a cold sample's L2 flush leaves the L2.
//  - clean (the default): a memset of a buffer twice the L2 size, then one
//    read of the whole buffer, both before the start event. The dirty lines
//    are written back during the flush, and the sample starts from an L2
//    that holds only clean, unrelated lines: the state Nsight Compute's
//    --cache-control all gives the kernels it times.
//  - write: the memset alone (nvbench's and FlashInfer-Bench's way). The L2
//    is left holding up to its size of dirty lines, and the timed kernel's
//    misses write them back to DRAM: a kernel that reads tens of MB pays for
//    the harness's own writes.
// Measured on an H200: after either flush a
// pointer chase through lines read just before it takes 668 cycles a load
// (290 without a flush), so both leave the L2 as cold; kb's median against
// Nsight Compute's kernel duration is 1.001-1.016 with clean and 1.015-1.037
// with write on three kernels of 0.17-0.37 ms, and 1.007-1.078 against
// 1.08-1.18 on decode gemms of 21-116 us (whose events also hold the launch).
// The tuning setting l2_flush (common/tuning.hpp) is the default; its
// environment variable KB_L2_FLUSH also reaches kb's worker processes and
// bench/torch_timing.py.
// Inline, like default_throttle_threshold: builds without CUDA (no timing.cpp)
// still write the traces' timing fields.
using L2Flush = tuning::L2Flush;
// "clean" or "write"; nullopt for anything else (and for null).
inline std::optional<L2Flush> parse_l2_flush(const char* s) {
  if (s && std::strcmp(s, "clean") == 0) return L2Flush::clean;
  if (s && std::strcmp(s, "write") == 0) return L2Flush::write;
  return std::nullopt;
}
inline L2Flush default_l2_flush() { return tuning::current().l2_flush; }
inline const char* l2_flush_name(L2Flush f) { return f == L2Flush::clean ? "clean" : "write"; }

struct TimingOptions {
  int warmup = 3;                   // calls before timing, at least
  double warmup_ms = 10.0;          // and at least this much wall time of calls (0: count only)
  int min_samples = 10;
  int max_samples = 2000;
  // Stop once the standard error of the mean, relative (stdev / mean / sqrt(n)),
  // is below this. Not stdev / mean itself: a kernel whose samples spread by 4%
  // then ran to max_samples, 2000 back-to-back GEMMs, and the H100's clock
  // fell from 1980 to 1515 MHz under the sustained power: the
  // median measured the throttle, not the kernel.
  double target_rel_error = 0.005;
  double max_time_s = 1.5;          // wall-clock cap per measurement
  bool flush_l2 = true;             // cold samples
  L2Flush l2_flush = default_l2_flush();  // how (above)
  int samples_per_graph = 16;       // samples per batch (one graph), at most
  // Batches are cut to about this much device time (from the warm-up's pace),
  // so the clock is checked every few samples of a long kernel: 16 samples of
  // a 6 ms GEMM were 100 ms of sustained power between two readings.
  double batch_target_ms = 20.0;
  // A batch whose average SM clock was under this fraction of its maximum
  // is set aside, and the GPU rests throttle_recovery_ms before the next; the
  // batch after a rest only warms the clock up again and is set aside too.
  // 0 keeps every sample. nvbench's defaults: 0.75 and 50 ms (the threshold's
  // default can be set by KB_THROTTLE_THRESHOLD, above). If fewer than
  // min_samples were kept when the run stops, the set-aside samples are used
  // after all and the result is flagged throttled.
  double throttle_threshold = default_throttle_threshold();
  double throttle_recovery_ms = 50.0;
  // Work enqueued around every call the timer makes (warm-up calls too),
  // never inside a sample's events: `before` ahead of the sample's L2 flush,
  // so what it writes (fresh inputs, poisoned outputs) is flushed from the L2
  // like everything else and the sample starts as cold as without it;
  // `after` behind the sample's stop event (keeping the call's outputs). In
  // graph mode both are captured into the batch's graph between the timed
  // calls. Empty: nothing.
  std::function<Status(int sample, void* stream)> before, after;
};

struct TimingResult {
  double median_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  double mean_ms = 0;
  double rel_noise = 0;  // stdev / mean
  std::size_t samples = 0;
  bool graph = false;    // captured in CUDA graphs (else: stream + blocking kernel)
  int samples_per_batch = 0;  // samples between two clock readings (one graph replay)
  unsigned sm_clock_mhz_before = 0, sm_clock_mhz_after = 0, sm_clock_mhz_max = 0;
  // The lowest average SM clock over a kept batch (the GPU's own counters;
  // clock_sampler.hpp); 0 where batches were not checked.
  unsigned sm_clock_mhz_lowest_kept = 0;
  // The set-aside samples had to be used (fewer than min_samples ran above
  // the threshold); with batches unchecked (threshold 0), NVML's clock under
  // 90% of its maximum before or after the samples.
  bool throttled = false;
  std::size_t throttled_samples_set_aside = 0;  // clock under the threshold, or warming up after a rest
  unsigned throttle_reasons = 0;        // NVML's clock event reasons seen at set-aside batches (nvml.hpp), ORed
  // Cold samples, and how (plain values: the struct crosses kb's worker pipe).
  bool l2_flushed = false;
  L2Flush l2_flush = L2Flush::write;
  const char* l2_flush_name() const { return l2_flushed ? cuda::l2_flush_name(l2_flush) : "none"; }
  std::string method() const;  // one line for logs
};

// Times `launch(sample_index, stream)`. The callback must enqueue the work on
// the given stream only, without synchronizing; sample_index lets it rotate
// input sets so a result cannot be reused across samples. samples_out, when
// given, receives every sample's ms in the order they ran.
Result<TimingResult> time_gpu(const std::function<Status(int sample, void* stream)>& launch, void* stream,
                              const TimingOptions& opt = {}, std::vector<double>* samples_out = nullptr);

// Kernel time from CUPTI's activity records (cupti.hpp): the GPU's own
// start and end of each kernel, without the launch and event overhead that
// time_gpu's events include. `samples` cold calls (L2 flushed), each alone:
// flush, synchronize, record, launch, synchronize; a sample is the span from
// the call's first kernel start to its last kernel end. One warm-up call.
// Each call is captured in a CUDA graph and replayed: launched directly, a
// call of several kernels (cuBLASLt's split-K and its reduction) left the GPU
// idle while the host launched the next one, and the span held that gap
// (H100: 60 us against the events' 10 us). Work that cannot be
// captured is launched directly (graph = false: host gaps may be inside).
// Code::unsupported where CUPTI cannot record (cupti_available says why).
struct KernelTimingResult {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  std::size_t samples = 0;
  std::size_t kernels_per_call = 0;  // the most kernels one call ran
  bool graph = false;                // every call replayed from a CUDA graph
};
// `before`, when set, is enqueued ahead of each call's L2 flush, outside
// the records (TimingOptions::before).
Result<KernelTimingResult> time_kernels_cupti(const std::function<Status(int sample, void* stream)>& launch,
                                              void* stream, int samples = 20, bool flush_l2 = true,
                                              L2Flush l2_flush = default_l2_flush(),
                                              const std::function<Status(int sample, void* stream)>& before = {});

// Device ceilings kb measures once per run with the same timer.
struct Ceilings {
  double copy_bandwidth_gbs = 0;  // device-to-device copy, bytes read + written per second
  double empty_kernel_ms = 0;     // an empty kernel's median, timed as solutions are: the launch floor
  double one_read_kernel_ms = 0;  // one thread copying 16 bytes, timed the same way: the floor with one cold DRAM read
};
Result<Ceilings> measure_ceilings(void* stream);

}  // namespace kb::cuda
