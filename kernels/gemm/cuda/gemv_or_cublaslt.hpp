// kb_cuda_gemm's choice at M <= kCudaGemmGemvMaxM (the decode regime)
// between kb's gemv kernel and cuBLASLt, measured per problem.
//
// Why measure: with a clean L2 flush (H200, session 25,
// benchmarks/h200-2026-12-02-s25/gemv_vs_cublaslt.md) gemv / cuBLASLt ran
// 0.86-1.10 at M <= 8 on weights under 64 MB and 0.93-1.08 above, shape by
// shape, with no rule in the shape that a static choice could follow; a
// static rule left kb_cuda_gemm up to 1.08x torch.matmul where cuBLASLt was
// the faster. So, like cuBLASLt's own algorithms (cublaslt_gemm.hpp), the
// first call of a problem on a stream that is not being captured times both
// on the caller's operands (kb's timer, cold samples: the clean L2 flush of
// lib/cuda/timing.hpp, interleaved rounds; kernels/common/cublaslt_autotune.hpp)
// and caches the faster for the process. A call under stream capture and a
// problem not yet raced while KB_GEMM_RACE=0 (read for problems not yet
// raced only) take the static rule (GemvPlan::cublaslt_instead, gemv.hpp)
// instead, uncached.
//
// The key: (device, dtype, M, N, K, whether C is 16-byte aligned); the gemv
// plan depends on nothing else (A and B must be 16-byte aligned for it).
// The race costs about 20 ms of clock ramp (skipped when the clock is up)
// plus 2 x kRaceRounds x kRaceSamples cold runs, after cuBLASLt's own
// planning; it synchronizes the stream.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "gemm_problem.hpp"

namespace kb::kernels::gemm_cuda {

struct GemvPlan;

// Samples of each side: kRaceRounds interleaved rounds of kRaceSamples cold
// samples (more than cuBLASLt's 3 x 3: two candidates, and the margins at
// stake are a few percent).
inline constexpr int kRaceRounds = 5;
inline constexpr int kRaceSamples = 5;

// Within this fraction of each other the two count as tied and the static
// rule's side keeps the problem: a near tie does not flip from run to run
// with the noise.
inline constexpr double kRaceTieMargin = 0.01;

// Whether cuBLASLt takes the problem, from the two medians (ms; negative: that
// side failed to run) and the static rule's choice.
inline bool race_picks_cublaslt(double gemv_ms, double cublaslt_ms, bool static_rule_cublaslt) {
  if (gemv_ms < 0 && cublaslt_ms < 0) return static_rule_cublaslt;
  if (gemv_ms < 0) return true;
  if (cublaslt_ms < 0) return false;
  if (static_rule_cublaslt) return cublaslt_ms <= gemv_ms * (1 + kRaceTieMargin);
  return cublaslt_ms * (1 + kRaceTieMargin) < gemv_ms;
}

// Whether kb_cuda_gemm runs p (which the gemv can run, with `plan`, its plan
// for `scratch`) on cuBLASLt: the cached choice, else the race now, else the
// static rule (see above). An error only when the CUDA context broke.
Result<bool> gemm_prefers_cublaslt(const GemmProblem& p, const StreamScratch& scratch, const GemvPlan& plan);

// Number of problems raced so far (all devices), for tests.
std::size_t gemm_race_count();

// One line per raced problem: the problem, the side taken, both medians.
std::vector<std::string> gemm_race_notes();

}  // namespace kb::kernels::gemm_cuda
