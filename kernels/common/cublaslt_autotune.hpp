// Choosing among cuBLASLt's candidate algorithms by measuring them, shared by
// the gemm solutions (kernels/gemm/cuda/cublaslt_gemm.cpp) and the ATen
// matmuls (kernels/aten/matmul/cuda/matmul_cuda.cpp). The heuristic
// (cublasLtMatmulAlgoGetHeuristic) predicts; its first choice is not always
// the fastest on the device at hand. Each caller asks it for up to
// kLtTuneCandidates algorithms once per problem key and times them here, with
// kb's own GPU timer (lib/cuda/timing.hpp: CUDA graph replay, or a blocking
// kernel when the stream cannot be captured, so host launch gaps are not
// timed), on the caller's real operands, in two steps:
//   1. clock ramp: an idle H100 sits at a few hundred MHz and takes
//      milliseconds to reach its boost clock. Timed first, the heuristic's #0
//      looked slowest and lost to worse algorithms (kb ran 1.10-1.14x
//      torch.matmul at M = 512 / 2048 while a standalone timing of the same
//      candidates had #0 fastest, on an H100). So candidate 0 runs
//      untimed for at least kLtRampMs first.
//   2. kLtTuneRounds rounds, each timing every candidate in turn
//      (kLtTuneSamples cold samples after one untimed run): interleaved, any
//      remaining clock or thermal drift falls on all candidates alike. A
//      candidate's score is the median of all its samples.
// Every candidate computes the same product, and the caller's real run
// rewrites the output afterwards.
//
// The tuning setting cublaslt_autotune=0 (common/tuning.hpp) turns this off
// (the heuristic's first algorithm is used); read when a new problem key is
// planned. Each tuned plan's note (its choice and the candidates' times) is an
// info diagnostic (kb::log).
//
// CUDA builds only; no cuBLASLt types here.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "common/result.hpp"
#include "cuda/nvml.hpp"
#include "cuda/runtime.hpp"
#include "common/tuning.hpp"
#include "cuda/timing.hpp"

namespace kb::kernels {

// 16: on an H100 the best of the top 8 still ran 1.096x torch.matmul at M = 2048, N = K = 4096.
inline constexpr int kLtTuneCandidates = 16;  // asked of the heuristic, at most
inline constexpr int kLtTuneRounds = 3;
inline constexpr int kLtTuneSamples = 3;     // per candidate and round
inline constexpr double kLtRampMs = 20.0;    // untimed work before the first timing


inline bool cublaslt_autotune_enabled() { return tuning::current().cublaslt_autotune; }

// Median ms of each candidate 0 .. count-1 (`run` enqueues candidate c on
// the stream it is given, without synchronizing), or a negative value for a
// candidate that failed to run. cold_l2: flush L2 before each sample, as kb
// times solutions; false for callers timed with a warm L2. rounds x samples:
// each candidate's samples (kb_cuda_gemm's gemv-or-cuBLASLt race takes more,
// gemv_or_cublaslt.hpp). set_aside_throttled: a batch whose SM clock
// averaged under kb's throttle threshold (lib/cuda/timing.hpp) is set aside
// and, after the timer's rest, run again (within 0.5 s a batch), as kb times
// solutions; for candidates long and heavy enough to meet the power cap
// (kb_cuda_gemm's long-K race, long_k_race.hpp: at M = 8192 without it the
// race timed cuBLASLt's chunks 22% slower than kb bench did, and picked the
// other form). Synchronizes
// `stream`, which must not be capturing. An error only when the CUDA context
// broke (a sticky error): then no later work can run either.
inline Result<std::vector<double>> median_ms_of_candidates(int count,
                                                           const std::function<Status(int c, void* stream)>& run,
                                                           void* stream, bool cold_l2,
                                                           int rounds = kLtTuneRounds,
                                                           int samples_per_round = kLtTuneSamples,
                                                           bool set_aside_throttled = false) {
  const auto n = static_cast<std::size_t>(count > 0 ? count : 0);
  std::vector<double> ms(n, -1.0);
  std::vector<std::vector<double>> samples(n);
  std::vector<bool> failed(n, false);
  auto failure = [&](std::size_t c) -> Status {
    if (cuda::context_is_broken()) return make_error(Code::cuda_error, "CUDA context broken while autotuning");
    (void)cudaGetLastError();  // this candidate's launch error is not the caller's
    failed[c] = true;
    return ok_status();
  };

  // 1. Clock ramp: the first candidate that runs, repeated untimed for about
  // kLtRampMs, unless NVML reads the SM clock at 90% of its maximum already
  // (the ATen matmuls plan hundreds of shapes back to back).
  int device = 0;
  const bool hot = cudaGetDevice(&device) == cudaSuccess && cuda::max_sm_clock_mhz(device) > 0 &&
                   cuda::sm_clock_mhz(device) >= 0.9 * cuda::max_sm_clock_mhz(device);
  for (std::size_t c = 0; c < n && !hot; ++c) {
    cuda::TimingOptions one;
    one.warmup = 1;
    one.warmup_ms = 0;  // the ramp below is this step's warm-up
    one.min_samples = one.max_samples = one.samples_per_graph = 1;
    one.flush_l2 = false;
    one.throttle_threshold = 0;
    auto t = cuda::time_gpu([&](int, void* s) { return run(static_cast<int>(c), s); }, stream, one);
    if (!t) {
      KB_TRY(failure(c));
      continue;
    }
    const double each = t->median_ms > 1e-3 ? t->median_ms : 1e-3;
    const int repeats = static_cast<int>(kLtRampMs / each) + 1;
    for (int r = 0; r < repeats && r < 100000; ++r) KB_TRY(run(static_cast<int>(c), stream));
    if (cudaStreamSynchronize(static_cast<cudaStream_t>(stream)) != cudaSuccess) KB_TRY(failure(c));
    break;
  }

  // 2. Interleaved rounds.
  cuda::TimingOptions o;
  o.warmup = 1;
  o.warmup_ms = 0;  // step 1 ramped the clock
  o.min_samples = o.max_samples = o.samples_per_graph = samples_per_round;  // one batch of samples, then stop
  o.flush_l2 = cold_l2;
  // Exactly one batch each: the interleaved rounds, not set-aside batches, share the clock's drift fairly.
  o.batch_target_ms = 0;
  o.throttle_threshold = 0;
  if (set_aside_throttled) {
    // One kept batch each: batches under the threshold (and the warm-up batch after each rest) are run again.
    o.throttle_threshold = cuda::default_throttle_threshold();
    o.max_samples = 4 * samples_per_round;
    o.target_rel_error = 1.0;  // stop at min_samples kept
    o.max_time_s = 0.5;
  }
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t c = 0; c < n; ++c) {
      if (failed[c]) continue;
      cuda::TimingOptions oc = o;
      oc.warmup = round == 0 ? 1 : 0;
      std::vector<double> got;
      auto t = cuda::time_gpu([&](int, void* s) { return run(static_cast<int>(c), s); }, stream, oc, &got);
      if (!t) {
        KB_TRY(failure(c));
        continue;
      }
      samples[c].insert(samples[c].end(), got.begin(), got.end());
    }
  }
  for (std::size_t c = 0; c < n; ++c) {
    if (failed[c] || samples[c].empty()) continue;
    auto& v = samples[c];
    std::sort(v.begin(), v.end());
    ms[c] = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  }
  return ms;
}

}  // namespace kb::kernels
