// kb_cuda_gemm's choice at M <= kCudaGemmGemvMaxM (the decode regime)
// among kb's gemv plans and cuBLASLt, measured per problem.
//
// Why measure: with a clean L2 flush (H200) gemv / cuBLASLt ran 0.86-1.10
// at M <= 8 on weights under 64 MB and 0.93-1.08 above, shape by shape, with
// no rule in the shape that a static choice could follow; a static rule left
// kb_cuda_gemm up to 1.08x torch.matmul where cuBLASLt was the faster. The
// gemv's own rules (rows per block, the bulk kernel, split-K; gemv.hpp) were
// fitted on some shapes too: racing every form (H200), another gemv plan won
// 23 of 130 races, 1.1-6.3% faster than the rule's, and 7168 x 5120 at M = 2
// and 4 reached 75% of copy bandwidth only then. So, like cuBLASLt's own
// algorithms (cublaslt_gemm.hpp), the first call of a problem on a stream
// that is not being captured times the candidates on the caller's operands
// (kb's timer, cold samples: the clean L2 flush of lib/cuda/timing.hpp,
// interleaved rounds; kernels/common/cublaslt_autotune.hpp) and caches the
// fastest for the process. The candidates: the gemv's rule plan, its other
// forms (gemv_race_plans, gemv.hpp) and cuBLASLt. A call under stream
// capture and a problem not yet raced while the tuning setting gemm_race is
// 0 (read for problems not yet raced only) take the static rule (the rule
// plan, or cuBLASLt where GemvPlan::cublaslt_instead says so) instead,
// uncached. The race file (tuning gemm_race_file) keeps the winners across
// processes, as for long K (race_file.hpp): a problem the file holds for
// this machine and scratch size is not raced, and each race appends its
// winner ("cuBLASLt" or the plan's label).
//
// The key (race.hpp's RaceKey): device, dtype, M, N, K, which of A, B, C
// are 16-byte aligned (the gemv needs A and B aligned) and the stream's
// split-K scratch size; the gemv plans depend on nothing else.
// The race costs about 20 ms of clock ramp (skipped when the clock is up)
// plus (candidates x kRaceRounds x kRaceSamples) cold runs, after cuBLASLt's
// own planning; it synchronizes the stream. Races run one at a time on a
// device (race.hpp); a call of a problem already raced never waits for one.
#pragma once

#include <string>

#include "common/result.hpp"
#include "gemm_problem.hpp"
#include "gemv.hpp"
#include "race.hpp"  // race_pick, kRaceRounds, gemm_race_count, gemm_race_notes

namespace kb::kernels::gemm_cuda {

// What kb_cuda_gemm runs p on: cuBLASLt, or the gemv with `plan`.
struct SmallMChoice {
  bool cublaslt = false;
  GemvPlan plan;
};

// A gemv plan's name in race notes and the race file: "gemv 32r bulk",
// "gemv 16r x4 (3w)": rows per block, kernel, blocks along K and warps where
// they are not the plain defaults, "balanced" where the rows are spread.
std::string gemv_plan_label(const GemvPlan& g);

// kb_cuda_gemm's choice for p, which the gemv can run with `rule`
// (gemv_plan's plan for `scratch`): the cached choice, else the race now,
// else the static rule (see above). An error only when the CUDA context
// broke.
Result<SmallMChoice> gemm_small_m_choice(const GemmProblem& p, const StreamScratch& scratch, const GemvPlan& rule);

}  // namespace kb::kernels::gemm_cuda
