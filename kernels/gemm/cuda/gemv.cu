// Skinny GEMM for decode: C[M, N] = A[M, K] @ B[N, K]^T with M <= 16,
// float16 or bfloat16 in and out, fp32 accumulation.
//
// The problem is one pass over the weight B (N x K x 2 bytes; 32 MiB for
// 4096 x 4096) with at most 16 multiply-adds per weight element; A (at most
// 16 x K) and C are small. The kernel's job is to keep enough 16-byte weight
// loads in flight to run at copy bandwidth, and to do the arithmetic without
// becoming the bottleneck.
//
// Arithmetic: tensor cores, not FFMA. At M = 16 on an H200 (4.3 TB/s, i.e.
// 2.1e12 weight elements/s) a CUDA-core dot product needs 16 FFMA per element,
// 3.4e13 FFMA/s, which is the whole chip's fp32 rate (132 SMs x 128 lanes x
// ~2 GHz) before any conversion or shared-memory traffic: it would be
// compute-bound well below bandwidth. mma.sync.m16n8k16 (fp16/bf16 in, fp32
// accumulate) does the same work at a small fraction of the tensor-core rate.
// The weight rows are the MMA's "A" operand (16 rows of N per tile), the
// activations its "B" operand (8 rows of M per tile, two tiles when M > 8),
// and the result the transposed tile C^T[16 n x 8 m]. The reduction over K
// inside a warp is done by the MMA itself: no shuffle reduction is needed.
//
// K order: a dot product may visit K in any order as long as the weight and
// the activation agree. Within each 64-wide K step, lane (g = lane/4,
// t = lane%4) feeds the MMAs with elements kb + 32u + 8t .. +8 (u = 0, 1) of
// its weight rows and of activation row g; elements 0..3 of each 16-byte
// vector go to the first k16 MMA step (fragment columns 2t, 2t+1, 2t+8,
// 2t+9), elements 4..7 to the second. Physical k depends on (t, u, element)
// only, never on the row, so all rows agree and each 64-wide step is a
// bijection onto 4 k16 MMA steps.
//
// Loads: whole 128-byte lines. The fragment layout alone would have each load
// instruction read 8 rows x 64 bytes (4 lanes per row); measured on an H200
// (28672 x 4096 bf16, pure weight streaming), that pattern tops out at
// 2.0-2.7 TB/s, while 4 rows x 128 bytes per instruction (8 lanes per row)
// reaches 3.3-3.6 TB/s, as fast as 512 contiguous bytes per instruction. So
// instruction j (0..7) of an iteration reads rows 4j + lane/8, 16 bytes at
// element kb + 8 (lane % 8), and one register exchange with lane ^ 4 (4
// shuffles per pair of vectors) moves the halves into fragment order; the
// fragment row g of slot (rt, h) is block row 16 rt + 8 h + perm(g) with
// perm(g) = 4 (g % 2) + g / 2, undone when the results are stored.
//
// Tiling and split:
//  - A block owns 32 rows of N (two 16-row MMA tiles, RT = 2) or 16 (RT = 1).
//    Every warp of the block works on all its rows, so with 32 each
//    activation fragment it loads is used for two weight tiles (activation
//    bytes per weight byte: 1/4 for M <= 8, 1/2 for M > 8; they come from
//    L1/L2, A is tiny). gemv_plan takes the one whose blocks fill their waves
//    of resident blocks better, 16 on a tie; at 2 <= M <= 8 it compares the
//    two finished plans, split included, and mostly takes 32 (gemv.hpp,
//    gemv_small_m_rows: up to 12% faster on an H200). Why 16 at all: a read-only
//    kernel with this load pattern (H100)
//    reads 4096 x 14336 at 81% of copy bandwidth with 16-row blocks and 75%
//    with 32-row ones (more blocks, more SMs streaming); in the gemv, side by
//    side: 16384 x 3072 M = 1 41.8 against 43.8 us, 4096 x 14336 M = 16 51.4
//    against 52.6, 28672 x 4096 M = 1 89.6 against 92.7; but 10240 x 8192
//    M = 1 72.4 against 69.1 (640 blocks of 16 make a second, short wave
//    where 320 of 32 fit one) and 8192 x 8192 M = 16 60.5 against 56.8,
//    which the fill rule gets right.
//  - The block's warps (8; fewer for tiny problems) split K: warp w takes
//    64-wide K steps w, w + warps, ..., so at any moment the block reads one
//    contiguous 8 x 128 bytes of each row. Per iteration a lane has 8 weight
//    loads of 16 bytes in flight (4 KiB per warp). The warps' fp32 partials
//    are summed in shared memory in a fixed order (deterministic).
//  - Enough in flight: memory-bound code needs about bandwidth x latency
//    bytes in flight (4.3 TB/s x ~1 us ~ 4 MiB, ~32 KiB per SM). At M = 1,
//    128 blocks of 8 warps (4 KiB per warp per round: 4 MiB) already stream
//    at full speed, and a K split costs its partial tiles' write, fence,
//    atomic and re-read at the end of the kernel; at M > 1 (more activation
//    loads and MMAs per warp) one block per SM is not enough. So K is
//    split across blocks (grid.y = splits) when M > 1 or there are fewer row
//    blocks than half the SMs (N < 2112 on 132 SMs; N = 128 and 256 among
//    the definitions): up to one resident wave (SMs x blocks per SM, from
//    the occupancy API), at least one 64-wide step per warp, and at most
//    kMaxFinalLoads partials per thread in the final sum (so large M splits
//    less). With 3 blocks per SM at M <= 8 and 2 above: 256 x 7168 at M = 1
//    runs 8 x 28 blocks of 4 warps, 4096 x 4096 128 x 1 blocks of 8 warps at
//    M = 1 and 128 x 2 at M = 16, 28672 x 4096 896 x 1 over several waves.
//    Measured on an H100 (kb's cold timing, side by side unless said):
//    * M = 2 .. 8 split like M = 16: 4096 x 14336 55.3 -> 51.5 us at M = 2,
//      4, 8 (71% -> 76% of copy), every other shape level; M = 1 stays
//      unsplit (49.6 against 50.8).
//    * M <= 8 without a split up to a whole wave: 4096 x 4096 M = 1 19.3
//      against 20.6 us, 4096 x 14336 M = 1 50.5 against 52.7; M = 16 unsplit
//      ran 4096 x 14336 in 56.6 against 52.8 (hence M > 8 keeps the split).
//    * Stream-K (every block an equal share of the row blocks' 64-wide
//      steps, partial row blocks summed by the last block to arrive) was
//      slower wherever it was tried: 4096 x 4096 M = 1 23.2 against 19.4 us
//      unsplit, 16384 x 3072 M = 1 47.1 against 43.6, 7168 x 5120 M = 1
//      37.2 against 33.2, 128 x 2048 M = 1 12.5 against 8.8 unsplit (7.2
//      split by grid.y); so was stream-K over the last wave's row blocks
//      only (16384 x 3072 M = 1 47.7 against 43.6, 28672 x 4096 M = 1 94.5
//      against 92.1), except 10240 x 8192 at M = 16 (320 row blocks on 264
//      slots: 76.5 against 79.5 us; cuBLASLt 72). Issuing the next
//      iteration's weight loads before the current MMAs (8 KiB in flight
//      per warp, 128 / 155 registers) was no faster on any of 30 shapes
//      (4096 x 14336 M = 1 51.2 against 50.6 us): bytes in flight are not
//      the limit.
//    * The weight by bulk copies into a shared-memory ring: a first form
//      (a ninth warp issuing the copies) was level or slower on an H100 on
//      every shape, 1-9% at M = 16 (7168 x 5120 M = 16 35.2 against 33.6
//      us). On an H200 the bulk kernel below, with the producer's 32 lanes
//      each copying a row and the activation loads issued before the stage
//      wait, is 2-15% faster where the plain kernel's blocks are few or its
//      activations many (gemv.hpp, gemv_bulk_rows), and kb takes it there.
//    * 2-4 splits where the rule takes none, so that many short blocks even
//      out the last wave (Nsight: 7168 x 5120's SMs are active 87% of the
//      kernel at M = 1, 52 SMs with four blocks and 80 with three): slower
//      on every shape, 7168 x 5120 M = 1 33.0 -> 35.8-37.6 us.
//    * The rows spread evenly over a multiple of the SMs or of the slots
//      (GemvBalance in gemv.hpp; the tests check each), so every SM gets as many rows (7168 x 5120: 528 blocks of 13-14
//      rows, four on each SM): level or up to 2% slower on H100 and H200
//      (7168 x 5120 M = 1 32.5 against 33.0 us on the H100), except 10240 x
//      8192 at M <= 8 (1-2% faster on the H100 only); the idle SMs at the end
//      do not cost what Nsight's 87% suggested.
//    * M > 8 on the weights of 64-134 MB (H200): M = 16 runs the same MMAs
//      as M = 9 (which loads one row of the second activation tile) and is
//      2-10% slower (7168 x 5120 27.9 against 25.5 us): activation loads and
//      7 more output rows. Nsight on that shape: L1 hit rate 9% / 14% of all
//      requests at M = 9 / 16; the weights never allocate, so by estimate
//      about 60% of the activation reads go on to L2. Not taken: 16 or 32
//      rows and the balances at M = 9, 12, 16 (the rule's pick is the best
//      or within 3%); 64-row blocks (RT = 4: 128 registers and 56 bytes of
//      spills at M > 8, 231 without a bound) 6-24% slower at M > 8, -3% to
//      +10% at M <= 8; the L1/shared carve-out at its L1 end (fewer resident
//      blocks) 25-60% slower; 64-row blocks of two row groups of 4 warps
//      (each group 32 rows, both on the same K steps, so one group's
//      activation reads can hit L1 for the other): 6% faster on 16384 x 3072
//      at M = 12, 16 (33.4 against 35.4 us) and level or slower on the other
//      9 weights (up to 48% at M = 1: fewer blocks).
//      Why M > 8 costs (H200, Nsight on 8192 x 8192 with clocks unlocked):
//      L2 runs at 80-86% of its peak at every M, DRAM at 80% at M = 1 and
//      70-71% at M = 16; the activation sectors that miss L1 (one of the two
//      blocks on an SM hits what the other fetched) add about a fifth to the
//      L2 reads of M = 1 at M = 16. Staging A in shared memory cannot help
//      this kernel by itself: a block's warps take different K steps, so
//      each activation is read once per block already. Not taken: blocks of
//      8 warps that each own a 32-row tile, the block's K slice of A staged
//      once in shared memory, K split to fill the SMs, partials summed by the
//      last warp of a tile: 1.29-2.06x the time on every weight and M (8192
//      x 8192 M = 16 70 against 44 us); L2 fell to 61% and DRAM to 53% of
//      peak (Nsight, M = 16). That block reads 128 bytes of each of 256 rows
//      per step; kb's 8 warps read a kilobyte of each of 32 rows.
//      gemv_read_ceiling shows the same sensitivity to the pattern ("rows
//      deep", each warp on two consecutive K steps: 57-72% where the gemv's
//      pattern reads 65-90%). The saving on activations does not pay for the
//      pattern. Forcing 2, 3 or 4 splits at M = 9, 12, 16 (best of 16 and 32
//      rows) was level or slower on all five weights, by 0.3-26%; so were
//      2-6 splits at M = 1 on eight weights of 34-235 MB, except 4096 x
//      14336 (37.6 against 37.9 us, within the noise).
//    * Three blocks per SM at M > 8 by __launch_bounds__(256, 3) (80
//      registers, 40-64 bytes of spills) made M = 16 8-25% slower (H100).
//  - Split-K blocks write fp32 partials to per-stream scratch; the last block
//    of a row block to arrive (atomic counter) sums the partials in split
//    order (deterministic), writes C and resets the counter to zero.
//
// The weight is read with ld.global.nc.L1::no_allocate (read once: keep L1
// for the activations, which every warp re-reads), a 256-byte L2 prefetch
// hint (a few percent faster than plain ld.global.nc in the same test) and
// an L2 policy by the weight's size (kernels/common/l2_stream_policy.cuh:
// evict_first up to 6 x the L2 size, no hint above); activations with
// plain __ldg.
//
// What bounds a cold sample. The L2 flush before it (kb's timer, and torch's
// in bench/compare_torch.py) is a memset, which leaves L2 full of dirty
// lines: a read that allocates a line in place of one makes L2 write it back
// first. H200 (copy 4.24 TB/s read + write, 60 MiB L2, empty kernel 3.1 us),
// reading the 33.6 MB of 4096 x 4096: 3.1 + 33.6 / 4.24 = 11.0 us without
// write-backs, 3.1 + 67.1 / 4.24 = 18.9 us if each weight line evicts a
// dirty one; measured torch.matmul 18.4-19.1, cuBLASLt 17.6-18.7, this kernel
// (before evict_first) 15.5-17.6. Larger weights agree with the write-back
// model (capped at the L2 size), not the other: 28672 x 4096, 58.5 vs 73.3 us
// modelled, 67.6-71.7 measured; 128256 x 4096, 251 vs 266, 257-275. So
// the split, the occupancy and the one-launch split-K tail (the last block
// of a row block sums 2-3 partial tiles of M x 32 floats) are not what is
// left; evict_first is, if L2 then replaces the kernel's own clean lines
// instead of the flush's dirty ones. Measured (H100): evict_first 7-16% faster up to ~180 MB of weight
// (7168 x 5120 32.9 against 38.0 us, 4096 x 14336 49.6 against 55.2), level
// around 270 MB, and 2-5% slower on 356-470 MB (8192 x 28672 178 against
// 169), hence the size rule.
//
// Measured before evict_first (H200, bf16, CUDA events around one call after
// a 256 MiB L2 flush, median of 30; kb_cuda_gemv vs kb_cublaslt_gemm, us):
//   N x K            M=1          M=8          M=16
//   4096 x 4096      16.4 / 17.6  15.5 / 17.7  17.1 / 17.9
//   28672 x 4096     70.4 / 68.7  67.6 / 70.9  70.9 / 71.0
//   4096 x 14336     38.7 / 41.0  37.1 / 41.2  39.2 / 41.3
//   128256 x 4096    266 / 257    265 / 260    275 / 262
//   256 x 7168       8.6 / 9.1    8.5 / 9.3    9.7 / 9.4
//   128 x 2048       6.8 / 8.1    7.0 / 8.3    7.3 / 8.3

#include "gemv.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "../../common/hopper_ptx.cuh"
#include "../../common/l2_stream_policy.cuh"

namespace kb::kernels::gemm_cuda {
namespace {

constexpr int kRowTile = 16;               // rows of N per MMA tile; a block has RT = 1 or 2
constexpr int kChunk = 32;                 // k covered by the 4 lanes of a group, 16 bytes each
constexpr int kUnroll = 2;                 // chunks per iteration
constexpr int kKStep = kChunk * kUnroll;   // 64: k per warp iteration
constexpr int kMaxWarps = kGemvMaxWarps;   // warps per block (they split K)
constexpr int kThreads = kMaxWarps * 32;
constexpr int kMaxSplits = 32;             // blocks along K at most
constexpr int kMaxFinalLoads = 16;         // split-K: partials summed per thread of the last block, at most
constexpr int kRedStride = 36;             // floats per m-row of a warp's partial tile: 32 + 4
                                           // pad, so fragment stores hit 32 distinct banks
constexpr int kMaxDevices = 64;

struct Params {
  const std::uint16_t* A;  // [M, K]
  const std::uint16_t* B;  // [N, K]
  std::uint16_t* C;        // [M, N]
  int N;
  int K;
  int k_iterations;        // ceil(K / kKStep)
  int splits;              // gridDim.y
  int balanced;            // rows spread evenly over gridDim.x blocks (GemvPlan::balanced)
  unsigned* counters;      // [kMaxCounters], zero at rest (splits > 1)
  float* partials;         // [row_blocks][splits][M][rows per block] (splits > 1)
  float evict_first;       // the weight stream's L2 policy: evict_first fraction (l2_stream_policy.cuh)
};

__device__ __forceinline__ uint4 load_weight(const std::uint16_t* p, std::uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(policy));
  return v;
}

__device__ __forceinline__ uint4 load_activation(const std::uint16_t* p) {
  return __ldg(reinterpret_cast<const uint4*>(p));
}

// d += a (16x16, row) * b (16x8, col), fp32 accumulators.
template <bool kBf16>
__device__ __forceinline__ void mma16816(float (&d)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                         std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
  if constexpr (kBf16) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}

template <bool kBf16>
__device__ __forceinline__ std::uint16_t to_bits(float v) {
  if constexpr (kBf16)
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  else
    return __half_as_ushort(__float2half_rn(v));
}

// Lane (g, t)'s activation row in each 8-row MMA tile: row 8 mt + g, from
// element 8t (aok false past M: those vectors load as zeros).
template <int M, int MT>
__device__ __forceinline__ void activation_rows(const std::uint16_t* (&arow)[MT], bool (&aok)[MT], const Params& p,
                                                int g, int t) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    aok[mt] = (M >= 8 * (mt + 1)) || (8 * mt + g < M);
    arow[mt] = p.A + static_cast<std::size_t>(aok[mt] ? 8 * mt + g : 0) * p.K + 8 * t;
  }
}

template <int RT, int MT>
__device__ __forceinline__ void zero(float (&acc)[RT][MT][4]) {
#pragma unroll
  for (int rt = 0; rt < RT; ++rt)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[rt][mt][i] = 0.f;
}

// One 64-wide K step's activation vectors: x[u][mt] holds, for lane (g, t),
// elements kb + 32u + 8t .. +8 of activation row 8 mt + g (zeros past K or M).
template <int MT>
__device__ __forceinline__ void load_activations(uint4 (&x)[kUnroll][MT], const std::uint16_t* const (&arow)[MT],
                                                 const bool (&aok)[MT], int kb, int t, int K) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int k = kb + kChunk * u;
    const bool kok = k + 8 * t < K;  // K % 8 == 0: a vector is all in or all out
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
      x[u][mt] = (kok && aok[mt]) ? load_activation(arow[mt] + k) : make_uint4(0, 0, 0, 0);
  }
}

// One 64-wide K step's arithmetic, from the weight vectors as loaded
// (v[j]: instruction j's 16 bytes, rows 4j + lane/8) and the activations.
template <bool kBf16, int RT, int MT>
__device__ __forceinline__ void exchange_and_mma(const uint4 (&v)[4 * RT], const uint4 (&x)[kUnroll][MT], bool odd,
                                                 float (&acc)[RT][MT][4]) {
  // Lane (g, t) holds, from instructions 2i and 2i+1, segment 4 (g & 1) + t
  // of rows n0 + 8i + g/2 and n0 + 8i + 4 + g/2. One exchange with lane ^ 4
  // (group g ^ 1) gives even groups both segments (t and 4 + t: u = 0, 1)
  // of row 8i + g/2 and odd groups both segments of row 8i + 4 + g/2: slot
  // i = 2 rt + h of the fragments, fragment row g <-> block row
  // 16 rt + 8 h + perm(g), perm(g) = 4 (g & 1) + g / 2.
  uint4 w[kUnroll][RT][2];
#pragma unroll
  for (int i = 0; i < 2 * RT; ++i) {
    const uint4 a = v[2 * i];
    const uint4 b = v[2 * i + 1];
    const uint4 send = odd ? a : b;
    uint4 recv;
    recv.x = __shfl_xor_sync(0xffffffffu, send.x, 4);
    recv.y = __shfl_xor_sync(0xffffffffu, send.y, 4);
    recv.z = __shfl_xor_sync(0xffffffffu, send.z, 4);
    recv.w = __shfl_xor_sync(0xffffffffu, send.w, 4);
    w[0][i >> 1][i & 1] = odd ? recv : a;
    w[1][i >> 1][i & 1] = odd ? b : recv;
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u)
#pragma unroll
    for (int rt = 0; rt < RT; ++rt)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        // Fragment A: {row g, cols 2t..}, {row g+8, cols 2t..}, {row g, cols 2t+8..}, {row g+8, cols 2t+8..};
        // fragment B: {k 2t.., col g}, {k 2t+8.., col g}. Step 1 takes elements 0..3, step 2 elements 4..7.
        mma16816<kBf16>(acc[rt][mt], w[u][rt][0].x, w[u][rt][1].x, w[u][rt][0].y, w[u][rt][1].y, x[u][mt].x,
                        x[u][mt].y);
        mma16816<kBf16>(acc[rt][mt], w[u][rt][0].z, w[u][rt][1].z, w[u][rt][0].w, w[u][rt][1].w, x[u][mt].z,
                        x[u][mt].w);
      }
}

// The end of a block: the `warps` K-interleaved warps' accumulators summed in
// shared memory `red` (fixed order), then C, or with split-K this block's
// partial tile and, in the last block of the row block to arrive, the sum of
// all splits in split order. Threads 0 .. 32 warps - 1 take part; `sync` is a
// barrier over exactly those threads.
template <int M, bool kBf16, int RT, class Sync>
__device__ __forceinline__ void finish_block(const Params& p, const float (&acc)[RT][(M + 7) / 8][4], float* red,
                                             int warps, int n0, int n_end, Sync sync) {
  constexpr int MT = (M + 7) / 8;
  constexpr int MP = MT * 8;
  constexpr int kRows = kRowTile * RT;
  __shared__ bool last_block;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int t = lane & 3;
  const int threads = warps * 32;
  const int split = blockIdx.y;

  // Accumulator fragment: c0, c1 = (row g, cols 2t, 2t+1), c2, c3 = (row g+8,
  // same cols); rows are n (fragment row g of slot h is block row
  // 16 rt + 8 h + perm(g)), cols are m.
  const int pg = 4 * (g & 1) + (g >> 1);
  float* mine = red + warp * (MP * kRedStride);
#pragma unroll
  for (int rt = 0; rt < RT; ++rt)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int r = 16 * rt + pg;
      const int m = 8 * mt + 2 * t;
      mine[m * kRedStride + r] = acc[rt][mt][0];
      mine[(m + 1) * kRedStride + r] = acc[rt][mt][1];
      mine[m * kRedStride + r + 8] = acc[rt][mt][2];
      mine[(m + 1) * kRedStride + r + 8] = acc[rt][mt][3];
    }
  sync();

  // Output (m, r) for i = m * kRows + r: consecutive threads write consecutive n.
  constexpr int kOut = M * kRows;
  if (p.splits == 1) {
    for (int i = threadIdx.x; i < kOut; i += threads) {
      const int m = i / kRows;
      const int r = i % kRows;
      const int n = n0 + r;
      if (n >= n_end) continue;
      float s = 0.f;
      for (int w = 0; w < warps; ++w) s += red[(w * MP + m) * kRedStride + r];
      p.C[static_cast<std::size_t>(m) * p.N + n] = to_bits<kBf16>(s);
    }
    return;
  }

  // Split-K: publish this block's partial tile, then the last block of the
  // row block to arrive sums all splits in split order.
  float* tile = p.partials + (static_cast<std::size_t>(blockIdx.x) * p.splits + split) * kOut;
  for (int i = threadIdx.x; i < kOut; i += threads) {
    const int m = i / kRows;
    const int r = i % kRows;
    float s = 0.f;
    for (int w = 0; w < warps; ++w) s += red[(w * MP + m) * kRedStride + r];
    tile[i] = s;
  }
  __threadfence();
  sync();
  if (threadIdx.x == 0) last_block = atomicAdd(&p.counters[blockIdx.x], 1u) == static_cast<unsigned>(p.splits - 1);
  sync();
  if (!last_block) return;
  __threadfence();
  const float* tiles = p.partials + static_cast<std::size_t>(blockIdx.x) * p.splits * kOut;
  for (int i = threadIdx.x; i < kOut; i += threads) {
    const int m = i / kRows;
    const int r = i % kRows;
    const int n = n0 + r;
    if (n >= n_end) continue;
    float s = 0.f;
    for (int sp = 0; sp < p.splits; ++sp) s += __ldcg(tiles + static_cast<std::size_t>(sp) * kOut + i);
    p.C[static_cast<std::size_t>(m) * p.N + n] = to_bits<kBf16>(s);
  }
  if (threadIdx.x == 0) p.counters[blockIdx.x] = 0;  // ready for the next launch on this stream
}

// Registers: M <= 8 asks for 3 blocks per SM, which lets ptxas use 80
// registers (70 without the bound, also 3 blocks per SM): mostly 1-4%
// faster, 4096 x 4096 and 4096 x 14336 unsplit 10% (H100). M > 8 has no minimum (0: 91-102 registers, 2 blocks per
// SM); a minimum of 2 blocks let ptxas take 123 and ran 2-5% slower.
// 16-row blocks (RT = 1) take 60-64 registers at M <= 8 (4 blocks per SM)
// and 72 at M > 8 (3); a minimum of 4 at M = 16 (64 registers, 8 bytes of
// spills) ran 2-15% slower.
template <int M, bool kBf16, int RT>
__global__ void __launch_bounds__(kThreads, M <= 8 ? 3 : 0) gemv_kernel(const Params p) {
  constexpr int MT = (M + 7) / 8;  // 8-wide MMA tiles covering the M rows of A
  constexpr int kRows = kRowTile * RT;  // rows of N per block
  constexpr int kLoads = 4 * RT;        // weight loads per lane per 64-wide K step (4 rows each)
  extern __shared__ float red[];   // [warps][MP][kRedStride]

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  const int g = lane >> 2;
  const int t = lane & 3;
  // This block's rows [n0, n_end): whole tiles, or an even share (at most kRows).
  const int n0 = p.balanced ? static_cast<int>(static_cast<long long>(blockIdx.x) * p.N / gridDim.x)
                            : static_cast<int>(blockIdx.x) * kRows;
  const int n_end = p.balanced ? static_cast<int>(static_cast<long long>(blockIdx.x + 1) * p.N / gridDim.x)
                               : min(n0 + kRows, p.N);
  const int split = blockIdx.y;

  // Weight loads: instruction j (0..kLoads-1) of an iteration reads rows
  // n0 + 4j + lane/8, 16 bytes at element kb + 8 (lane % 8): four whole
  // 128-byte lines. Rows past the block's end load zeros (and point at row 0,
  // never dereferenced).
  const int q = lane >> 3;
  const int s8 = lane & 7;
  const bool odd = g & 1;
  const std::uint16_t* brow[kLoads];
  bool bok[kLoads];
#pragma unroll
  for (int j = 0; j < kLoads; ++j) {
    const int n = n0 + 4 * j + q;
    bok[j] = n < n_end;
    brow[j] = p.B + static_cast<std::size_t>(bok[j] ? n : 0) * p.K + 8 * s8;
  }
  const std::uint16_t* arow[MT];
  bool aok[MT];
  activation_rows<M>(arow, aok, p, g, t);

  const std::uint64_t policy = l2_stream_policy(p.evict_first);
  float acc[RT][MT][4];
  zero(acc);

  const int it_begin = static_cast<int>(static_cast<long long>(split) * p.k_iterations / p.splits);
  const int it_end = static_cast<int>(static_cast<long long>(split + 1) * p.k_iterations / p.splits);
  for (int it = it_begin + warp; it < it_end; it += warps) {
    const int kb = it * kKStep;
    // All loads of the iteration first (kLoads weight + 2*MT activation
    // vectors per lane in flight), then the exchange and the MMAs.
    uint4 v[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j)
      v[j] = (bok[j] && kb + 8 * s8 < p.K) ? load_weight(brow[j] + kb, policy) : make_uint4(0, 0, 0, 0);
    uint4 x[kUnroll][MT];
    load_activations<MT>(x, arow, aok, kb, t, p.K);
    exchange_and_mma<kBf16, RT, MT>(v, x, odd, acc);
  }

  finish_block<M, kBf16, RT>(p, acc, red, warps, n0, n_end, [] { __syncthreads(); });
}

// ---- the bulk kernel: the weight by bulk copies ------------------------------------
// The same blocks, warps and arithmetic, but the weight reaches shared memory
// by bulk copies (cp.async.bulk, the TMA's one-dimensional form) that one
// extra warp issues, a row per lane: a stage holds the block's rows x
// kStageK elements (one 64-wide K step per consumer warp), kStages stages in
// a ring guarded by mbarriers (full: the stage's bytes arrived; empty: all 8
// consumer warps have copied theirs to registers). Consumers read the gemv's
// register pattern from shared memory. Why: on an H200 the read-only bulk
// readers of a read-only ceiling kernel reach 82-83% of copy bandwidth on
// 4096 x 14336 and 16384 x 3072 where the gemv's own load pattern reaches
// 78-80%: bytes in flight that cost no registers. What makes it pay where a
// simpler form (level or slower on an H100) did not:
// every lane of the producer issues a row, a consumer issues its activation
// loads before it waits for the stage, 16-row blocks at M <= 8 fit 4 an SM
// (56 registers; at 3 an SM there was a short second wave on 7168 x
// 5120, 32.5 against the plain kernel's 24.6 us), and M > 8 keeps 2 stages
// (3 stages of 32 rows, 96 KB a block, leave L1 too little for the
// activations: 16384 x 3072 at M = 16 took 37.0 us with 3 and 34.4 with 2,
// in two runs where the plain kernel took 35.3 and 35.1).
// gemv_plan takes it by the rule gemv_bulk_rows (gemv.hpp); a GemvKernel
// argument takes it never or wherever it can run (tests, the race).
constexpr int kStageK = kKStep * kMaxWarps;  // elements of each row per stage
// Ring stages and bytes for blocks of RT 16-row tiles at M rows of A (used
// by the kernel and by the host's launch size alike).
constexpr int bulk_stages(int RT, int M) { return RT == 1 && M <= 8 ? 3 : 2; }
constexpr int bulk_ring_bytes(int RT, int M) { return bulk_stages(RT, M) * kRowTile * RT * kStageK * 2; }
// Resident blocks asked of ptxas: 16-row blocks at M <= 8 fit 4 per SM
// (48 KB ring) if registers allow.
constexpr int bulk_min_blocks(int RT, int M) { return M > 8 ? 0 : RT == 1 ? 4 : 3; }

template <int M, bool kBf16, int RT>
__global__ void __launch_bounds__(kThreads + 32, bulk_min_blocks(RT, M)) gemv_bulk_kernel(const Params p) {
  using namespace kb::kernels::hopper;
  constexpr int MT = (M + 7) / 8;
  constexpr int kRows = kRowTile * RT;
  constexpr int kLoads = 4 * RT;
  constexpr int kStages = bulk_stages(RT, M);
  constexpr int kRowBytes = kStageK * 2;
  constexpr int kStageBytes = kRows * kRowBytes;
  constexpr int warps = kMaxWarps;  // consumers; warp kMaxWarps is the producer
  // The ring; after the main loop the consumers' partials go over it.
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ __align__(8) std::uint64_t full[kStages], empty[kStages];

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int n0 = static_cast<int>(blockIdx.x) * kRows;
  const int n_end = min(n0 + kRows, p.N);
  const int split = blockIdx.y;
  const int it_begin = static_cast<int>(static_cast<long long>(split) * p.k_iterations / p.splits);
  const int it_end = static_cast<int>(static_cast<long long>(split + 1) * p.k_iterations / p.splits);
  const int stages = (it_end - it_begin + warps - 1) / warps;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(saddr(&full[s]), 1);
      mbar_init(saddr(&empty[s]), warps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (warp == warps) {
    // Producer: lane r copies row n0 + r's next kStageK elements (fewer at
    // the end of the block's K range or of K); rows past N are not copied
    // (the consumers zero them).
    const std::uint64_t policy = l2_stream_policy(p.evict_first);
    const int rows = n_end - n0;
    const int k_end = min(it_end * kKStep, p.K);
    for (int i = 0; i < stages; ++i) {
      const int s = i % kStages;
      if (i >= kStages) mbar_wait(saddr(&empty[s]), ((i / kStages) - 1) & 1);
      const int k0 = (it_begin + i * warps) * kKStep;
      const int bytes = (min(k0 + kStageK, k_end) - k0) * 2;
      if (lane == 0) mbar_arrive_expect_tx(saddr(&full[s]), static_cast<std::uint32_t>(bytes * rows));
      __syncwarp();
      if (lane < rows)
        bulk_load_1d(saddr(ring + s * kStageBytes + lane * kRowBytes), p.B + static_cast<std::size_t>(n0 + lane) * p.K + k0,
                     static_cast<std::uint32_t>(bytes), saddr(&full[s]), policy);
    }
    return;
  }

  const int g = lane >> 2;
  const int t = lane & 3;
  const int q = lane >> 3;
  const int s8 = lane & 7;
  const bool odd = g & 1;
  bool bok[kLoads];
#pragma unroll
  for (int j = 0; j < kLoads; ++j) bok[j] = n0 + 4 * j + q < n_end;
  const std::uint16_t* arow[MT];
  bool aok[MT];
  activation_rows<M>(arow, aok, p, g, t);
  float acc[RT][MT][4];
  zero(acc);

  // This lane's 16 bytes of instruction j within a stage: row 4j + q, K step
  // `warp` of the stage, segment s8.
  const unsigned char* mine = ring + q * kRowBytes + warp * (kKStep * 2) + s8 * 16;
  for (int i = 0; i < stages; ++i) {
    const int s = i % kStages;
    const int it = it_begin + i * warps + warp;
    const int kb = it * kKStep;
    const bool live = it < it_end;
    uint4 x[kUnroll][MT];
    if (live) load_activations<MT>(x, arow, aok, kb, t, p.K);  // in flight while the stage lands
    mbar_wait(saddr(&full[s]), (i / kStages) & 1);
    uint4 v[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j)
      v[j] = (live && bok[j] && kb + 8 * s8 < p.K)
                 ? *reinterpret_cast<const uint4*>(mine + s * kStageBytes + 4 * j * kRowBytes)
                 : make_uint4(0, 0, 0, 0);
    __syncwarp();
    if (lane == 0) mbar_arrive(saddr(&empty[s]));  // this warp's bytes are in registers
    if (live) exchange_and_mma<kBf16, RT, MT>(v, x, odd, acc);
  }
  // The partials go over the ring: every consumer warp must be past its last read.
  const auto sync = [] { named_bar_sync(1, kThreads); };
  sync();
  finish_block<M, kBf16, RT>(p, acc, reinterpret_cast<float*>(ring), warps, n0, n_end, sync);
}

// ---- host side ----------------------------------------------------------------

using KernelFn = void (*)(Params);

// The one place templated M is dispatched: kernel(M, bf16, rows, bulk) for M
// in 1..16, blocks of 16 or 32 rows, global loads or bulk copies.
template <bool kBf16, int RT, bool kBulk, int... Ms>
constexpr std::array<KernelFn, sizeof...(Ms)> kernel_table(std::integer_sequence<int, Ms...>) {
  if constexpr (kBulk)
    return {&gemv_bulk_kernel<Ms + 1, kBf16, RT>...};
  else
    return {&gemv_kernel<Ms + 1, kBf16, RT>...};
}

template <bool kBulk>
KernelFn kernel_of(int M, bool bf16, int rows) {
  using Ms = std::make_integer_sequence<int, kGemvMaxM>;
  static constexpr auto f16 = kernel_table<false, 1, kBulk>(Ms{});
  static constexpr auto b16 = kernel_table<true, 1, kBulk>(Ms{});
  static constexpr auto f16x2 = kernel_table<false, 2, kBulk>(Ms{});
  static constexpr auto b16x2 = kernel_table<true, 2, kBulk>(Ms{});
  if (rows == kRowTile) return bf16 ? b16[M - 1] : f16[M - 1];
  return bf16 ? b16x2[M - 1] : f16x2[M - 1];
}

KernelFn kernel_for(int M, bool bf16, int rows, bool bulk) {
  return bulk ? kernel_of<true>(M, bf16, rows) : kernel_of<false>(M, bf16, rows);
}

// Threads of a block: the K-interleaved warps, plus the bulk kernel's producer.
int block_threads(int warps, bool bulk) { return (warps + (bulk ? 1 : 0)) * 32; }

// Dynamic shared memory: the warps' partials; with bulk copies the ring,
// which the partials reuse.
std::size_t smem_bytes(int M, int warps, int rows, bool bulk) {
  const int mp = (M + 7) / 8 * 8;
  const std::size_t partials = static_cast<std::size_t>(warps) * mp * kRedStride * sizeof(float);
  if (!bulk) return partials;
  const std::size_t ring = bulk_ring_bytes(rows / kRowTile, M);
  return std::max(partials, ring);
}

// Per-device facts, computed once (racing first calls compute the same value).
std::atomic<int> g_sm_count[kMaxDevices];
std::atomic<int> g_occupancy[kMaxDevices][kGemvMaxM][2][2][2];  // [device][M - 1][bf16][rows / 16 - 1][bulk]

cudaError_t sm_count(int device, int* out) {
  if (device >= 0 && device < kMaxDevices) {
    if (int v = g_sm_count[device].load(std::memory_order_relaxed)) return *out = v, cudaSuccess;
  }
  int v = 0;
  if (cudaError_t e = cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess) return e;
  if (device >= 0 && device < kMaxDevices) g_sm_count[device].store(v, std::memory_order_relaxed);
  *out = v;
  return cudaSuccess;
}

// Resident blocks per SM of the full-size block (kMaxWarps warps), the only
// block size that is ever split along K.
// The bulk kernels' shared memory above 48 KB is allowed here, once per
// device and kernel.
cudaError_t occupancy(int device, int M, bool bf16, int rows, bool bulk, int* out) {
  std::atomic<int>* slot = (device >= 0 && device < kMaxDevices)
                               ? &g_occupancy[device][M - 1][bf16][rows / kRowTile - 1][bulk]
                               : nullptr;
  if (slot) {
    if (int v = slot->load(std::memory_order_relaxed)) return *out = v, cudaSuccess;
  }
  KernelFn fn = kernel_for(M, bf16, rows, bulk);
  const std::size_t smem = smem_bytes(M, kMaxWarps, rows, bulk);
  if (bulk) {
    if (cudaError_t e = cudaFuncSetAttribute(reinterpret_cast<const void*>(fn),
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
        e != cudaSuccess)
      return e;
  }
  int v = 0;
  cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, fn, block_threads(kMaxWarps, bulk), smem);
  if (e != cudaSuccess) return e;
  if (v < 1) v = 1;
  if (slot) slot->store(v, std::memory_order_relaxed);
  *out = v;
  return cudaSuccess;
}


// Scratch layout: kMaxCounters arrival counters at offset 0 (a fixed region:
// row block b always uses counter b, whatever the launch, so partials of one
// launch never land on counters another launch relies on), then the partial
// tiles of the current launch.
constexpr int kMaxCounters = 4096;
constexpr std::size_t kCountersBytes = kMaxCounters * sizeof(unsigned);
std::size_t split_scratch_bytes(int M, int rows, int row_blocks, int splits) {
  return kCountersBytes + static_cast<std::size_t>(row_blocks) * splits * M * rows * sizeof(float);
}

bool preconditions(const GemmProblem& p) {
  if (p.dtype != DType::float16 && p.dtype != DType::bfloat16) return false;
  if (p.M < 1 || p.M > kGemvMaxM || p.N < 1 || p.K < 1) return false;
  if (p.N > 0x7fffffff - 2 * kRowTile || p.K > 0x7fffffff - kKStep) return false;
  if (p.K % kGemvKMultiple != 0) return false;
  if ((reinterpret_cast<std::uintptr_t>(p.A) | reinterpret_cast<std::uintptr_t>(p.B)) % 16 != 0) return false;
  return p.C != nullptr;
}

// The rest of a plan once its rows per block are chosen: blocks along N (and
// their balance), K split, warps per block. `plan` holds sm_count and
// evict_first; blocks_per_sm is the occupancy of the kernel with these rows.
GemvPlan plan_with_rows(const GemmProblem& p, std::size_t scratch_bytes, GemvBalance balance, GemvPlan plan,
                        int rows, int blocks_per_sm) {
  const int M = static_cast<int>(p.M);
  plan.rows_per_block = rows;
  plan.blocks_per_sm = blocks_per_sm;
  plan.k_iterations = static_cast<int>((p.K + kKStep - 1) / kKStep);
  plan.row_blocks = static_cast<int>((p.N + plan.rows_per_block - 1) / plan.rows_per_block);
  // Rows spread evenly over a multiple of the SMs (or of the slots), so no SM
  // is left idle while others finish a fourth block (gemv.hpp, GemvBalance).
  {
    const std::int64_t blocks = gemv_balanced_blocks(plan.row_blocks, plan.sm_count,
                                                     plan.sm_count * plan.blocks_per_sm, balance);
    if (blocks != plan.row_blocks && blocks <= 0x7fffffff) {
      plan.row_blocks = static_cast<int>(blocks);
      plan.balanced = true;
    }
  }
  // Blocks along K for a given block size: one resident wave (the occupancy
  // is that of full-size blocks; smaller ones fit proportionally more), at
  // least one 64-wide step per warp, and a final split-K sum of at most
  // kMaxFinalLoads partial loads per thread of the last block.
  // M = 1 and half the SMs' worth of row blocks or more: no split (see
  // the top).
  const bool split_pays = M > 1 || 2 * static_cast<long long>(plan.row_blocks) < plan.sm_count;
  auto splits_for = [&](int warps) {
    const long long slots = gemv_slots(plan.sm_count, plan.blocks_per_sm, warps);
    if (!split_pays || plan.row_blocks >= slots || plan.row_blocks > kMaxCounters) return 1;
    long long s = slots / plan.row_blocks;
    s = std::min<long long>(s, plan.k_iterations / warps);
    s = std::min<long long>(s, std::max(1, kMaxFinalLoads * warps / M));
    s = std::min<long long>(s, kMaxSplits);
    while (s > 1 && split_scratch_bytes(M, plan.rows_per_block, plan.row_blocks, static_cast<int>(s)) > scratch_bytes)
      --s;
    return s > 1 ? static_cast<int>(s) : 1;
  };
  plan.warps = plan.bulk ? kMaxWarps : std::min(kMaxWarps, plan.k_iterations);
  plan.splits = splits_for(plan.warps);
  // Small problems (N = 128, 256): when the blocks do not reach every SM,
  // fewer warps per block and more splits, if that makes more blocks.
  for (int w = plan.warps / 2;
       !plan.bulk && w >= 2 && static_cast<long long>(plan.row_blocks) * plan.splits < plan.sm_count; w /= 2) {
    const int s = splits_for(w);
    if (s > plan.splits) {
      plan.warps = w;
      plan.splits = s;
    }
  }
  // H100, M = 16, side by side: 10240 x
  // 8192 (320 row blocks on 264 slots: 56 in the last wave) ran 77.5 us
  // here and 72.0 in cuBLASLt; 34816 x 5120 (1088: 32 in the last wave)
  // 140.6 and 134.7; stream-K over the last wave's row blocks only reached
  // 76.5 on the first. M <= 8 (3 blocks per SM) showed no such loss
  // (10240 x 8192 M = 1: 69.3 against 72.0).
  if (M > 8 && plan.splits == 1) {
    const long long slots = static_cast<long long>(plan.sm_count) * plan.blocks_per_sm;
    if (plan.row_blocks > slots && 2 * (plan.row_blocks % slots) < plan.sm_count)
      plan.cublaslt_instead = "the gemv's last wave is short";
  }
  return plan;
}


}  // namespace

int gemv_plan(const GemmProblem& p, std::size_t scratch_bytes, GemvPlan* out) {
  return gemv_plan(p, scratch_bytes, GemvBalance::off, out);
}

int gemv_plan(const GemmProblem& p, std::size_t scratch_bytes, GemvBalance balance, GemvPlan* out) {
  return gemv_plan(p, scratch_bytes, balance, 0, out);
}

int gemv_plan(const GemmProblem& p, std::size_t scratch_bytes, GemvBalance balance, int rows, GemvPlan* out) {
  return gemv_plan(p, scratch_bytes, balance, rows, GemvKernel::rule, out);
}

int gemv_plan(const GemmProblem& p, std::size_t scratch_bytes, GemvBalance balance, int rows, GemvKernel kernel,
              GemvPlan* out) {
  if (!preconditions(p)) return cudaErrorInvalidValue;
  if (rows != 0 && rows != kRowTile && rows != 2 * kRowTile) return cudaErrorInvalidValue;
  const int M = static_cast<int>(p.M);
  const bool bf16 = p.dtype == DType::bfloat16;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  GemvPlan plan;
  if (cudaError_t e = sm_count(device, &plan.sm_count); e != cudaSuccess) return e;
  plan.dram_gbps = static_cast<int>(device_dram_bytes_per_s(device) / 1e9);
  const std::int64_t weight_bytes = static_cast<std::int64_t>(p.N) * p.K * 2;
  const std::int64_t l2_bytes = device_l2_bytes(device);
  plan.evict_first = stream_evict_first(weight_bytes, l2_bytes);
  // Rows per block: the caller's, else gemv_wave_fill's (gemv.hpp).
  const int forced_rows = rows;
  // The bulk kernel keeps whole tiles (no balance).
  const bool bulk_allowed = balance == GemvBalance::off && kernel != GemvKernel::plain;
  const bool bulk_only = bulk_allowed && kernel == GemvKernel::bulk;
  int per_sm[2][2] = {};  // [bulk][rows / 16 - 1]: resident blocks of 16 and 32 rows
  // The bulk kernel's occupancy only where it may run: forced, or chosen by
  // the rule below (then a failed query keeps the plain kernel).
  const auto occupancies = [&](bool bulk) -> cudaError_t {
    for (int i = 0; i < 2; ++i)
      if (cudaError_t e = occupancy(device, M, bf16, kRowTile * (i + 1), bulk, &per_sm[bulk][i]); e != cudaSuccess)
        return e;
    return cudaSuccess;
  };
  if (cudaError_t e = occupancies(bulk_only); e != cudaSuccess) return e;
  auto make = [&](int r, bool bulk) {
    GemvPlan base = plan;
    base.bulk = bulk;
    return plan_with_rows(p, scratch_bytes, balance, base, r, per_sm[bulk][r / kRowTile - 1]);
  };
  // kb_cuda_gemm's other reason to take cuBLASLt (gemv.hpp), whatever the rows.
  const auto finish = [&](GemvPlan chosen) {
    static_assert(kGemvCublasltMinWeightBytes == 8 << 20, "say the new figure below");
    if (gemv_cublaslt_weight(M, weight_bytes)) chosen.cublaslt_instead = "the weight is 8 MiB or more";
    *out = chosen;
    return cudaSuccess;
  };
  if (forced_rows) return finish(make(forced_rows, bulk_only));
  // By wave fill (gemv_rows_per_block), then at 2 <= M <= 8 by
  // gemv_small_m_rows, which compares the two finished plans (gemv.hpp says
  // what was measured).
  const int (&occ)[2] = per_sm[bulk_only];
  const int fill_rows = gemv_rows_per_block(p.N, plan.sm_count, occ[0], occ[1]);
  GemvPlan chosen = make(fill_rows, bulk_only);
  if (M >= 2 && M <= 8) {
    const GemvPlan other = make(fill_rows == kRowTile ? 2 * kRowTile : kRowTile, bulk_only);
    const GemvPlan& p16 = fill_rows == kRowTile ? chosen : other;
    const GemvPlan& p32 = fill_rows == kRowTile ? other : chosen;
    const int rows_by_plans = gemv_small_m_rows(p16, p32);
    if (rows_by_plans != 0) chosen = rows_by_plans == kRowTile ? p16 : p32;
  }
  // Then the kernel (gemv_bulk_rows in gemv.hpp says what was measured).
  if (kernel == GemvKernel::rule && bulk_allowed) {
    if (const int r = gemv_bulk_rows(p.M, p.N, p.K, chosen); r != 0) {
      if (occupancies(true) == cudaSuccess) {
        chosen = make(r, true);
        chosen.splits = 1;  // measured unsplit (a plan of one block along K needs no scratch)
      } else {
        (void)cudaGetLastError();  // the plain plan stands; the failed query's error is not the caller's
      }
    }
  }
  return finish(chosen);
}

int gemv_race_plans(const GemmProblem& p, std::size_t scratch_bytes, const GemvPlan& rule, GemvPlan* out) {
  int n = 0;
  out[n++] = rule;
  const auto add = [&](const GemvPlan& q) {
    for (int i = 0; i < n; ++i)
      if (same_gemv_launch(out[i], q)) return;
    if (n < kGemvRaceMaxPlans) out[n++] = q;
  };
  for (GemvKernel kernel : {GemvKernel::plain, GemvKernel::bulk})
    for (int rows : {kRowTile, 2 * kRowTile}) {
      GemvPlan q;
      if (gemv_plan(p, scratch_bytes, GemvBalance::off, rows, kernel, &q) != cudaSuccess) {
        (void)cudaGetLastError();  // e.g. no occupancy for the bulk kernel: that form is not a candidate
        continue;
      }
      add(q);
      if (q.splits > 1) {  // the same blocks along N, all warps, one block along K
        q.splits = 1;
        q.warps = q.bulk ? kMaxWarps : std::min(kMaxWarps, q.k_iterations);
        add(q);
      }
    }
  return n;
}

int gemv_launch(const GemmProblem& p, const StreamScratch* scratch, const GemvPlan& plan) {
  if (!preconditions(p)) return cudaErrorInvalidValue;
  const int M = static_cast<int>(p.M);
  // A split plan needs the scratch it was made for.
  if (plan.splits > 1 &&
      split_scratch_bytes(M, plan.rows_per_block, plan.row_blocks, plan.splits) > gemv_scratch_bytes(scratch))
    return cudaErrorInvalidValue;
  Params params{};
  params.A = static_cast<const std::uint16_t*>(p.A);
  params.B = static_cast<const std::uint16_t*>(p.B);
  params.C = static_cast<std::uint16_t*>(p.C);
  params.N = static_cast<int>(p.N);
  params.K = static_cast<int>(p.K);
  params.k_iterations = plan.k_iterations;
  params.splits = plan.splits;
  params.balanced = plan.balanced ? 1 : 0;
  params.evict_first = evict_first_fraction(plan.evict_first);
  if (plan.splits > 1) {
    auto* base = static_cast<unsigned char*>(scratch->gemv_scratch);
    params.counters = reinterpret_cast<unsigned*>(base);
    params.partials = reinterpret_cast<float*>(base + kCountersBytes);
  }
  const dim3 grid(static_cast<unsigned>(plan.row_blocks), static_cast<unsigned>(plan.splits));
  if (plan.rows_per_block != kRowTile && plan.rows_per_block != 2 * kRowTile) return cudaErrorInvalidValue;
  if (plan.bulk && (plan.warps != kMaxWarps || plan.balanced)) return cudaErrorInvalidValue;
  const dim3 block(static_cast<unsigned>(block_threads(plan.warps, plan.bulk)));
  KernelFn fn = kernel_for(M, p.dtype == DType::bfloat16, plan.rows_per_block, plan.bulk);
  void* args[] = {&params};
  cudaError_t e = cudaLaunchKernel(reinterpret_cast<const void*>(fn), grid, block, args,
                                   smem_bytes(M, plan.warps, plan.rows_per_block, plan.bulk),
                                   static_cast<cudaStream_t>(p.stream));
  return static_cast<int>(e);
}

}  // namespace kb::kernels::gemm_cuda
