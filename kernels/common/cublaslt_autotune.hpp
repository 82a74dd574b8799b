// Choosing among cuBLASLt's candidate algorithms by measuring them, shared by
// the gemm solutions (kernels/gemm/cuda/cublaslt_gemm.cpp) and the ATen
// matmuls (kernels/aten/matmul/cuda/matmul_cuda.cpp). The heuristic
// (cublasLtMatmulAlgoGetHeuristic) predicts; its first choice is not always
// the fastest on the device at hand. Each caller asks it for up to
// kLtTuneCandidates algorithms once per problem key and times them here, with
// kb's own GPU timer (lib/cuda/timing.hpp: CUDA graph replay, or a blocking
// kernel when the stream cannot be captured, so host launch gaps are not
// timed), on the caller's real operands: kLtTuneWarmup untimed runs, then
// kLtTuneSamples samples, median. Every candidate computes the same product,
// and the caller's real run rewrites the output afterwards.
//
// KB_CUBLASLT_AUTOTUNE=0 in the environment turns this off (the heuristic's
// first algorithm is used); read when a new problem key is planned.
//
// CUDA builds only; no cuBLASLt types here.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "common/result.hpp"
#include "cuda/runtime.hpp"
#include "cuda/timing.hpp"

namespace kb::kernels {

// 16: H100, 2026-11-24, the best of the top 8 still ran 1.096x torch.matmul at M = 2048, N = K = 4096.
inline constexpr int kLtTuneCandidates = 16;  // asked of the heuristic, at most
inline constexpr int kLtTuneWarmup = 2;
inline constexpr int kLtTuneSamples = 5;

inline bool cublaslt_autotune_enabled() {
  const char* v = std::getenv("KB_CUBLASLT_AUTOTUNE");
  return !(v && std::strcmp(v, "0") == 0);
}

// Median ms of each candidate 0 .. count-1 (`run` enqueues candidate c on
// the stream it is given, without synchronizing), or a negative value for a
// candidate that failed to run. cold_l2: flush L2 before each sample, as kb
// times solutions; false for callers timed with a warm L2. Synchronizes
// `stream`, which must not be capturing. An error only when the CUDA context
// broke (a sticky error): then no later work can run either.
inline Result<std::vector<double>> median_ms_of_candidates(int count,
                                                           const std::function<Status(int c, void* stream)>& run,
                                                           void* stream, bool cold_l2) {
  cuda::TimingOptions o;
  o.warmup = kLtTuneWarmup;
  o.min_samples = kLtTuneSamples;
  o.max_samples = kLtTuneSamples;  // one batch of samples, then stop
  o.samples_per_graph = kLtTuneSamples;
  o.flush_l2 = cold_l2;
  std::vector<double> ms(static_cast<std::size_t>(count > 0 ? count : 0), -1.0);
  for (int c = 0; c < count; ++c) {
    auto t = cuda::time_gpu([&](int, void* s) { return run(c, s); }, stream, o);
    if (t) {
      ms[static_cast<std::size_t>(c)] = t->median_ms;
      continue;
    }
    if (cuda::context_is_broken()) return t.error();
    (void)cudaGetLastError();  // this candidate's launch error is not the caller's
  }
  return ms;
}

}  // namespace kb::kernels
