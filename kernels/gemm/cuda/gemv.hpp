// kb's handwritten skinny GEMM for the decode regime (M <= kGemvMaxM):
// C[M, N] = A[M, K] @ B[N, K]^T that streams the weight B once. The kernel and
// the choice of its grid live in gemv.cu; this header has no CUDA types.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "gemm_problem.hpp"

namespace kb::kernels::gemm_cuda {

// The gemv kernel is instantiated for M = 1 .. kGemvMaxM (templated M).
inline constexpr int kGemvMaxM = 16;
// K must be a multiple of this (rows of A and B are read as 16-byte vectors),
// and A and B 16-byte aligned.
inline constexpr int kGemvKMultiple = 8;
// Scratch the split-K path needs from StreamScratch::gemv_scratch at most
// (partials of at most kGemvMaxSlots blocks plus their counters); gemv_plan
// never picks a split that needs more than the scratch it is given.
inline constexpr std::size_t kGemvScratchBytes = std::size_t{4} << 20;

// How one launch is cut (see the comment at the top of gemv.cu).
struct GemvPlan {
  int rows_per_block = 32;  // rows of N per block: 16 (one MMA tile) or 32 (two); at most, when balanced
  int row_blocks = 0;       // blocks along N, rows_per_block rows each (unless balanced)
  // Rows spread evenly over row_blocks blocks (block b owns rows
  // [b N / row_blocks, (b + 1) N / row_blocks), at most rows_per_block), so
  // that every SM gets the same number of rows (gemv_balanced_blocks).
  bool balanced = false;
  int splits = 1;           // blocks along K (split-K); >1 uses the scratch
  int warps = 0;            // warps per block, interleaved over K
  int k_iterations = 0;     // 64-wide K steps in all (ceil(K / 64))
  int blocks_per_sm = 0;    // occupancy of this instantiation
  int sm_count = 0;
  // Why kb_cuda_gemm's static rule hands this shape to cuBLASLt instead
  // (nullptr: the gemv). kb_cuda_gemm follows it only where it has not timed
  // both on the shape (gemv_or_cublaslt.hpp: under stream capture, or with
  // gemm_race=0). Both reasons are for M > 8 only:
  //  - "the gemv's last wave is short": unsplit, more than one wave of
  //    blocks, and the last wave holds fewer blocks than half the SMs (too
  //    few loads in flight at the end; gemv.cu says what was measured);
  //  - "the weight is 8 MiB or more" (gemv_cublaslt_weight).
  const char* cublaslt_instead = nullptr;
  // The weight stream's L2 policy: evict_first up to a few times the L2
  // size, no hint above (kernels/common/l2_stream_policy.cuh).
  bool evict_first = true;
  // The weight arrives by bulk copies into a shared-memory ring (the bulk
  // kernel, gemv.cu; gemv_bulk_rows says when).
  bool bulk = false;
  // The device's peak DRAM rate (memory clock x bus width x 2), GB/s; 0 if
  // unknown. gemv_bulk_rows takes the bulk kernel only where it was measured.
  int dram_gbps = 0;
};

// Warps per gemv block at most (they split the block's K range).
inline constexpr int kGemvMaxWarps = 8;

// At M > 8 the gemv streams a weight slower than cuBLASLt does (two
// activation tiles per MMA step, 2 blocks an SM instead of 3), so
// kb_cuda_gemm's static rule (where no race ran, gemv_or_cublaslt.hpp) takes
// cuBLASLt there for every weight of 8 MiB or more.
// Measured on an H200, timed with kb's clean L2 flush (lib/cuda/timing.hpp
// L2Flush), both solutions in one run at M = 9, 12, 16 on every shipped
// weight, gemv / cuBLASLt: 0.96-1.18, median 1.06, over the 60 cases from
// 16.8 MB up where the gemv ran (4096 x 4096 at M = 16 the one below 0.99;
// weights over 204 MB were cuBLASLt's already); 0.87-0.92 on 256 x 7168 (3.7
// MB) and 0.87-1.13 on 128 x 2048 (0.5 MB), which keep the gemv. (Timed
// after a write-only flush, whose dirty lines the timed kernel writes back,
// the gemv's evict_first stream was ahead up to 178 MB: the flush decides
// this crossover.) The crossover on an H100 is not measured.
inline constexpr std::int64_t kGemvCublasltMinWeightBytes = std::int64_t{8} << 20;

// Whether kb_cuda_gemm hands an M-row product with a `weight_bytes` weight
// to cuBLASLt for its size (see above).
inline bool gemv_cublaslt_weight(std::int64_t M, std::int64_t weight_bytes) {
  return M > 8 && weight_bytes >= kGemvCublasltMinWeightBytes;
}

// Resident blocks on the whole GPU (at least 1): blocks_per_sm is the
// occupancy of full-size blocks; blocks with fewer warps fit proportionally more.
inline std::int64_t gemv_slots(int sm_count, int blocks_per_sm, int warps = kGemvMaxWarps) {
  return std::max<std::int64_t>(1, std::int64_t{sm_count} * blocks_per_sm * (kGemvMaxWarps / std::max(1, warps)));
}

// How well `blocks` fill their waves of `slots` resident blocks: blocks / (waves x slots).
inline double gemv_fill(std::int64_t blocks, std::int64_t slots) {
  return static_cast<double>(blocks) / static_cast<double>((blocks + slots - 1) / slots * slots);
}

// How well blocks of `rows` rows fill their waves of resident blocks
// (slots = sm_count x blocks_per_sm).
inline double gemv_wave_fill(std::int64_t N, int rows, int sm_count, int blocks_per_sm) {
  return gemv_fill((N + rows - 1) / rows, gemv_slots(sm_count, blocks_per_sm));
}

// Rows per gemv block: 16 or 32, whichever fills its waves better, 16 on a
// tie (a half-empty last wave streams with a fraction of the loads in
// flight; gemv.cu has the measurements). per_sm_16 / per_sm_32: resident
// blocks per SM of each kernel.
inline int gemv_rows_per_block(std::int64_t N, int sm_count, int per_sm_16, int per_sm_32) {
  return gemv_wave_fill(N, 16, sm_count, per_sm_16) >= gemv_wave_fill(N, 32, sm_count, per_sm_32) ? 16 : 32;
}

// How well a finished plan's blocks (row_blocks x splits) fill their waves of
// resident blocks.
inline double gemv_plan_fill(const GemvPlan& p) {
  return gemv_fill(std::int64_t{p.row_blocks} * p.splits, gemv_slots(p.sm_count, p.blocks_per_sm, p.warps));
}

// Rows per block at 2 <= M <= 8, from the two finished plans (p16: 16 rows,
// p32: 32 rows, each with the split and warps the plan gives it): 32, 16,
// or 0 for no preference (then gemv_rows_per_block's wave fill decides).
// Blocks of 32 rows keep twice the weight loads in flight per warp and load
// each activation fragment for two weight tiles; where both plans put the
// same work on each SM (5376 x 21504: 336 blocks of 16 rows, or 168 of 32
// split in two), 32 ran 10-13% faster on an H200 (28 shipped shapes at
// M = 2, 4, 8, side by side: the fill rule alone lost 2.9% on average to the faster of
// the two and up to 12.7%; this rule 0.4% and at most 5.8%, on 128 x 2048).
// 32 loses where its warps get few K steps (5120 x 2048 split in two: 2 per
// warp, 8% slower; 2048 x 4096: 1.3, 6%), hence no preference below 2.5,
// and where it takes more than one wave and fills its waves much worse
// (16384 x 3072: 512 blocks on 396 slots against 1024 on 528, 7% slower).
inline int gemv_small_m_rows(const GemvPlan& p16, const GemvPlan& p32) {
  const double steps_per_warp =
      static_cast<double>(p32.k_iterations) / (static_cast<double>(p32.splits) * std::max(1, p32.warps));
  if (steps_per_warp < 2.5) return 0;
  const bool several_waves =
      std::int64_t{p32.row_blocks} * p32.splits > gemv_slots(p32.sm_count, p32.blocks_per_sm, p32.warps);
  if (several_waves && gemv_plan_fill(p32) < gemv_plan_fill(p16) - 0.15) return 16;
  return 32;
}

// The bulk kernel is taken only on devices with at least this peak DRAM rate
// (GB/s): it was measured on an H200 (4.8 TB/s); on an H100 (3.35 TB/s) a
// simpler bulk-copy kernel was level or slower everywhere, and this one is
// not measured there.
inline constexpr int kGemvBulkMinDramGBps = 4000;
// Rows per block of the bulk kernel's plan that kb takes instead of `plain`
// (the plain kernel's finished plan for an M x N x K problem), or 0 to keep
// the plain kernel; the bulk plan never splits K. The bulk kernel (gemv.cu)
// has the same blocks, warps and arithmetic; its weight comes by bulk copies
// (the TMA) into a shared-memory ring, so its bytes in flight cost no registers, but each block pays for
// filling and draining the ring, its 8 warps wait for each other stage by
// stage, and the ring takes shared memory from the L1 that activations hit.
// Measured on an H200 side by side, every shipped gemm shape (16- and
// 32-row bulk plans at M = 1, 4, 8, 12, 16; 16-row bulk plans unsplit at
// M = 2-16 on N <= 4096; this rule's plans against the plain kernel's at
// every M from 1 to 16), bulk / plain:
//  - M = 1, 16-row blocks unsplit, at most two an SM (N <= 4224 on 132
//    SMs): 0.855-0.98 on all 8 such shapes (2048 x 4096 0.855, 4096 x 14336
//    0.948); with more blocks an SM 0.97-1.17.
//  - 2 <= M <= 8, K >= 3072, 16-row blocks unsplit in place of the plain
//    kernel's split plans: where they are 1-2 an SM (N 2112 - 4224)
//    0.91-1.01 on all 7 such shapes, median 0.955 (4096 x 14336 0.92-0.99);
//    2-3 an SM (N 4224 - 6336) 0.92-0.98 on all 7. With fewer blocks than
//    SMs (2048 x 4096) 0.97-1.07, K = 2048 1.05-1.07; elsewhere 0.97-1.22.
//  - M >= 10 where the plain plan has 32-row blocks: 0.92-0.98 on all 5 such
//    shapes at every M (8192 x 8192 0.94-0.96, 7168 x 5120 0.93-0.96); at
//    M = 9 (the plain kernel loads one row of the second activation tile)
//    0.98-1.04; over the plain kernel's 16-row plans
//    0.96-1.08, except one split plan (128 x 2048 at M = 12, 0.84).
// Over 448 plans (every shipped shape, M = 1-16) the rule changes 141:
// 0.86-1.01, median 0.95 (the 307 others time 0.98-1.02 of themselves).
inline int gemv_bulk_rows(std::int64_t M, std::int64_t N, std::int64_t K, const GemvPlan& plain) {
  const std::int64_t sms = plain.sm_count;
  if (plain.balanced || sms < 1 || plain.dram_gbps < kGemvBulkMinDramGBps) return 0;
  if (M >= 10) return plain.rows_per_block == 32 && plain.splits == 1 ? 32 : 0;
  if (M == 1) return plain.rows_per_block == 16 && plain.splits == 1 && plain.row_blocks <= 2 * sms ? 16 : 0;
  if (M > 8) return 0;
  const std::int64_t blocks16 = (N + 15) / 16;
  return K >= 3072 && blocks16 >= sms && blocks16 <= 3 * sms ? 16 : 0;
}

// How the gemv spreads rows over blocks. `off`: whole tiles of 16 or 32 rows
// (7168 x 5120 at M = 1: 448 blocks of 16 on 132 SMs, 52 SMs with four and
// 80 with three, the latter idle at the end). `sm`: the fewest blocks that
// are a multiple of the SM count, rows spread evenly (528 blocks of 13-14
// rows, four on every SM). `wave`: a multiple of the resident slots (SMs x
// blocks per SM), so every wave is full. kb uses `off`: the others measured
// level or up to 2% slower on H100 and H200 (the idle SMs at the end do not
// cost what their count suggests). gemv_plan takes the balance as a
// parameter (the tests check every balance).
enum class GemvBalance { off, sm, wave };

// Blocks along N for `tiles` blocks of whole tiles under `balance`, on
// sm_count SMs with `slots` resident blocks in all. Never fewer than `tiles`
// (a block holds at most one tile's rows); `tiles` itself when balancing is
// off or there are fewer tiles than SMs (then split-K fills the SMs).
inline std::int64_t gemv_balanced_blocks(std::int64_t tiles, int sm_count, int slots, GemvBalance balance) {
  if (balance == GemvBalance::off || sm_count < 1 || tiles < sm_count) return tiles;
  const std::int64_t unit = balance == GemvBalance::wave ? std::max(slots, sm_count) : sm_count;
  return (tiles + unit - 1) / unit * unit;
}

// The plan gemv_launch would use for p on the current device (p must satisfy
// the gemv preconditions: 1 <= M <= kGemvMaxM, K % 8 == 0). Returns a
// cudaError_t value: 0 on success.
int gemv_plan(const GemmProblem& p, std::size_t scratch_bytes, GemvPlan* out);
// The same with the row balance given (the tests check the balances), and rows per block forced to 16 or 32 (0: kb's
// rule, gemv_rows_per_block).
int gemv_plan(const GemmProblem& p, std::size_t scratch_bytes, GemvBalance balance, GemvPlan* out);
int gemv_plan(const GemmProblem& p, std::size_t scratch_bytes, GemvBalance balance, int rows, GemvPlan* out);
// Which kernel streams the weight: kb's rule (gemv_bulk_rows), the plain
// kernel (its own 16-byte loads), or the bulk kernel (bulk copies into shared
// memory) wherever it can run (no balance). The overloads above take kb's rule.
enum class GemvKernel { rule, plain, bulk };
int gemv_plan(const GemmProblem& p, std::size_t scratch_bytes, GemvBalance balance, int rows, GemvKernel kernel,
              GemvPlan* out);

// Whether two plans launch the same kernel on the same grid.
inline bool same_gemv_launch(const GemvPlan& a, const GemvPlan& b) {
  return a.rows_per_block == b.rows_per_block && a.row_blocks == b.row_blocks && a.balanced == b.balanced &&
         a.splits == b.splits && a.warps == b.warps && a.bulk == b.bulk && a.evict_first == b.evict_first;
}

// The gemv plans kb_cuda_gemm's race (gemv_or_cublaslt.hpp) times beside
// cuBLASLt: `rule` (gemv_plan's for p and scratch_bytes) first, then every
// other form gemv_plan makes for p, 16 or 32 rows on the plain or the bulk
// kernel, each also unsplit where it splits K, each launch once. The rules
// above (rows, bulk kernel, splits) were fitted on some shapes and missed
// others by 5-12%; the race measures them all on the caller's shape. Writes
// at most kGemvRaceMaxPlans plans to `out`; returns how many.
inline constexpr int kGemvRaceMaxPlans = 9;
int gemv_race_plans(const GemmProblem& p, std::size_t scratch_bytes, const GemvPlan& rule, GemvPlan* out);

// The split-K scratch a plan may use from `scratch` (0 without one).
inline std::size_t gemv_scratch_bytes(const StreamScratch* scratch) {
  return scratch && scratch->gemv_scratch ? scratch->gemv_bytes : 0;
}

// Launches the gemv kernel on p.stream with `plan`, which gemv_plan made for
// p and gemv_scratch_bytes(scratch). Preconditions (checked by the caller,
// gemm_cuda.cpp, which turns them into messages; re-checked here and answered
// with cudaErrorInvalidValue): dtype float16/bfloat16, 1 <= M <= kGemvMaxM,
// N >= 1, K >= 1, K % 8 == 0, A and B 16-byte aligned, N and K below 2^31.
// `scratch` may be null (then the plan has no split). Returns a cudaError_t
// value: 0 on success, else the launch error.
int gemv_launch(const GemmProblem& p, const StreamScratch* scratch, const GemvPlan& plan);

}  // namespace kb::kernels::gemm_cuda
