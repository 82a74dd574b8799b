// kb's long-K gemm on Hopper (wgmma_gemm.hpp has the interface):
// C[M, N] = A[M, K] B[N, K]^T, A and B K-major (kb's TN mapping), f16 / bf16.
//
// Why: on Hopper the tensor cores' fp32 sum of one output drifts from the
// exact product roughly in proportion to K (long_k.hpp has the figures), so
// at K = 28672 cuBLASLt (and torch.matmul) fail FlashInfer-Bench's check on a
// few elements per million. kb's cuBLASLt path therefore sums K in chunks
// through fp32 buffers, which costs 4-7% at M >= 512. This kernel keeps the
// tensor cores' sum short instead: every `promote_every` K blocks it moves
// the accumulators into a second sum, kept as a bfloat16 "high part" in
// registers, and restarts the accumulators from the remainder:
//     t = hi + acc (fp32),  hi = bf16(t),  acc = t - hi (exact in fp32).
// acc then starts each stretch at most 2^-9 of the total, so the tensor
// cores' drift is that of one stretch (14336 of K by default), and the total
// hi + acc keeps fp32's precision. hi costs 64 registers a thread, half of an
// fp32 copy, which is what lets a warpgroup hold a 64 x 256 tile.
//
// Shape of the kernel:
//  * CTA tile 128 x 256, K blocks of 64, a 4-deep ring of shared-memory
//    stages (A 16 KB + B 32 KB each, 128-byte swizzle, loaded by TMA).
//  * 3 warpgroups: warpgroup 0 is the producer (one thread issues the TMA
//    copies; setmaxnreg down to 40 registers), warpgroups 1 and 2 are
//    consumers, 64 rows each, m64n256k16 wgmma with A and B from shared
//    memory (setmaxnreg up to 232). full[s] (1 arrival + the copies' bytes)
//    and empty[s] (one arrival per consumer warp) mbarriers per stage.
//  * A persistent grid of one CTA per SM. The work is super-tiles x K
//    blocks, where a super-tile is `group` neighbouring 128-row tiles of one
//    256-column slice; the CTAs of a group each take one of those row tiles
//    and all run the same K range, so the B (weight) block they share is
//    read from memory about once. First whole waves of super-tiles, one per
//    group, all groups in step over K: the A rows and B columns a wave reads
//    are read from memory once for the wave (L2). Super-tiles go row groups
//    first within bands of 4 row groups (raster_band), so a wave spans a
//    few row groups and several columns rather than all of M. Then stream-K over the
//    last partial wave: each group takes an equal contiguous share of its
//    super-tile K blocks, so every SM does the same work (no short last
//    wave); a last wave that fills >= min_last_wave_percent of the groups
//    runs whole instead, its few idle groups cheaper than the hand-over.
//    Each stream-K piece runs its K blocks last to first, which puts all
//    groups at two K positions at a time, so they share loads in L2 as the
//    whole waves do (descending_stream_k in the header has the figures).
//    (Stream-K over all the work would put each group at its own K offset,
//    sharing nothing in L2: about 10x the ideal memory traffic at 8192 x
//    28672, M = 2048, bound by memory bandwidth.) A tile whose K range is
//    split between groups is finished by the group that ran its first K
//    block (its "owner"): the others, for which it is their first piece of
//    stream-K work, write their fp32 sums to the workspace (one 128 x 256 slot per
//    CTA) and raise the CTA's flag; the owner, for which it is its last
//    piece, waits for the flags, adds those sums in K order, rounds once and
//    stores C (16-byte stores after a transpose within each quad of
//    lanes). The owner resets each flag, so the workspace stays zeroed.
//    Owners only wait on work that others did first, so nothing can wait in
//    a circle even when not every CTA is resident.
//
// Accumulator layout (m64nN, fp32): warp w of the warpgroup owns rows
// 16w .. 16w + 15; lane l holds rows l/4 and l/4 + 8, columns 8j + 2(l%4) +
// {0, 1}, as d[4j + {0, 1}] and d[4j + {2, 3}] (PTX ISA, "wgmma fragments").
// Descriptors as in kernels/common/prefill_wgmma.cuh: K-major, 128-byte
// swizzle, start + 32 bytes per k16 step, SBO 1024 (8 rows of 128 bytes).
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../../common/hopper_ptx.cuh"
#include "wgmma_gemm.hpp"

// The kernel's body is compiled for sm_90a only (#if below); the other passes
// would warn that its helpers and constants go unused.
#pragma nv_diag_suppress 177

namespace kb::kernels::gemm_cuda {
namespace {

using namespace ::kb::kernels::hopper;

constexpr int kBM = 128, kBK = 64;
constexpr int kThreads = 384;  // producer warpgroup + 2 consumer warpgroups
constexpr int kConsumerThreads = 256;
constexpr std::uint32_t kABytes = kBM * kBK * 2;
constexpr int kMaxTileFloats = kBM * 256;  // one workspace slot: the widest tile's fp32 sums

// What depends on the tile's width BN (256 or 168 columns; wgmma_gemm.hpp
// says why 168): the shared-memory ring holds as many stages as fit in the
// 227 KB an SM offers (4 of 48 KB at 256 columns, 6 of 37 KB at 168), and
// each consumer thread holds BN / 2 fp32 accumulators and BN / 4 bf16 pairs.
template <int BN>
struct Tile {
  static constexpr std::uint32_t kBBytes = BN * kBK * 2, kStageBytes = kABytes + kBBytes;
  static constexpr int kStages = BN == 256 ? 4 : 6;
  static constexpr std::size_t kSmemBytes =
      1024 /* alignment slack */ + kStages * std::size_t{kStageBytes} + 2 * kStages * 8;
  static constexpr int kAcc = BN / 2;            // fp32 accumulators per consumer thread (m64nBN)
  static constexpr int kTileFloats = kBM * BN;   // one tile's fp32 sums
  static constexpr int kQuads = kAcc / 4;        // float4s per consumer thread in a partial tile
  static_assert(BN % 8 == 0 && BN <= 256 && (BN * 128) % 1024 == 0, "wgmma n, and 1024-byte aligned B stages");
  static_assert(kSmemBytes <= 227 * 1024, "the ring must fit in an SM's shared memory");
};
constexpr int kProducerRegs = 40, kConsumerRegs = 232;
constexpr int kConsumerBarrier = 1;  // named barrier of the 256 consumer threads (0 is __syncthreads)

// D[64 x N] += A[64 x 16] * B[16 x N] (TYPE in, fp32 accumulate), N = 256 or
// 168: A and B from shared memory by K-major descriptors (128-byte swizzle),
// no transposes, scale 1 (D accumulates). The N / 2 accumulators as asm
// operands, four at a time:
#define KB_F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define KB_WGMMA_D128 \
  KB_F4(0), KB_F4(4), KB_F4(8), KB_F4(12), KB_F4(16), KB_F4(20), KB_F4(24), KB_F4(28), \
  KB_F4(32), KB_F4(36), KB_F4(40), KB_F4(44), KB_F4(48), KB_F4(52), KB_F4(56), KB_F4(60), \
  KB_F4(64), KB_F4(68), KB_F4(72), KB_F4(76), KB_F4(80), KB_F4(84), KB_F4(88), KB_F4(92), \
  KB_F4(96), KB_F4(100), KB_F4(104), KB_F4(108), KB_F4(112), KB_F4(116), KB_F4(120), KB_F4(124)
#define KB_WGMMA_D84 \
  KB_F4(0), KB_F4(4), KB_F4(8), KB_F4(12), KB_F4(16), KB_F4(20), KB_F4(24), KB_F4(28), \
  KB_F4(32), KB_F4(36), KB_F4(40), KB_F4(44), KB_F4(48), KB_F4(52), KB_F4(56), KB_F4(60), \
  KB_F4(64), KB_F4(68), KB_F4(72), KB_F4(76), KB_F4(80)
#define KB_WGMMA_M64N256K16(TYPE) \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n" \
  "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " {" \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" \
  "}, %128, %129, p, 1, 1, 0, 0;\n}\n"

#define KB_WGMMA_M64N168K16(TYPE) \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %86, 0;\n" \
  "wgmma.mma_async.sync.aligned.m64n168k16.f32." TYPE "." TYPE " {" \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83" \
  "}, %84, %85, p, 1, 1, 0, 0;\n}\n"

template <int BN, bool BF16>
__device__ __forceinline__ void wgmma_m64k16(float (&d)[BN / 2], std::uint64_t desc_a, std::uint64_t desc_b) {
  static_assert(BN == 256 || BN == 168, "wgmma shapes kb instantiates");
  if constexpr (BN == 256 && BF16)
    asm volatile(KB_WGMMA_M64N256K16("bf16") : KB_WGMMA_D128 : "l"(desc_a), "l"(desc_b), "r"(1) : "memory");
  else if constexpr (BN == 256)
    asm volatile(KB_WGMMA_M64N256K16("f16") : KB_WGMMA_D128 : "l"(desc_a), "l"(desc_b), "r"(1) : "memory");
  else if constexpr (BF16)
    asm volatile(KB_WGMMA_M64N168K16("bf16") : KB_WGMMA_D84 : "l"(desc_a), "l"(desc_b), "r"(1) : "memory");
  else
    asm volatile(KB_WGMMA_M64N168K16("f16") : KB_WGMMA_D84 : "l"(desc_a), "l"(desc_b), "r"(1) : "memory");
}
#undef KB_WGMMA_M64N256K16
#undef KB_WGMMA_M64N168K16
#undef KB_WGMMA_D128
#undef KB_WGMMA_D84
#undef KB_F4

// The work split, computed alike by the producer and the consumers.
struct Schedule {
  int tiles_m = 0;     // 128-row tiles
  int mgroups = 0;     // ceil(tiles_m / group): super-tile rows
  int iters = 0;       // K blocks per tile
  int group = 1;       // CTAs per group (one row tile each)
  int groups = 0;      // gridDim.x / group
  int tiles_n = 0;     // BN-column tiles
  bool n_fastest = false;  // super-tile order: column tiles first (else row groups first)
  int band = 0;            // row groups first within bands of this many (WgmmaGemmArgs::raster_band); 0: one band
  bool descending_k = false;  // stream-K pieces run their K blocks last to first (WgmmaGemmArgs)
  int dp_waves = 0;    // whole waves of super-tiles (one a group, all of K) before the stream-K part
  int supertiles = 0;  // mgroups x tiles_n (the last wave may have fewer than `groups`)
  long long total = 0; // super-tiles x iters

  // The row group (x) and column tile (y) of super-tile st: column tiles first, or row groups first within
  // bands of `band` row groups (the last band may be narrower), the bands one after another.
  __device__ int2 place(int st) const {
    if (n_fastest) return make_int2(st / tiles_n, st % tiles_n);
    if (band <= 0 || band >= mgroups) return make_int2(st % mgroups, st / mgroups);
    const int b = st / (band * tiles_n), in_band = st % (band * tiles_n);
    const int width = mgroups - b * band < band ? mgroups - b * band : band;
    return make_int2(b * band + in_band % width, in_band / width);
  }

  // Start of group g's stream-K range (g = groups: the end), after the waves.
  __device__ long long begin(int g) const {
    const int whole = dp_waves * groups < supertiles ? dp_waves * groups : supertiles;
    const long long dp = static_cast<long long>(whole) * iters;
    return dp + (total - dp) * g / groups;
  }
};

// One piece of a group's range: super-tile st, K blocks [k0, k1), run from
// k1 - 1 down to k0 where `descending`.
struct Segment {
  int st, k0, k1;
  bool descending;
  // The K block loaded at step k (k0 <= k < k1) of the piece.
  __device__ int block(int k) const { return descending ? k1 - 1 - (k - k0) : k; }
};

// Whole waves before the stream-K part: every full wave, and the last partial
// one too (its idle groups left idle) where it fills at least
// `min_last_wave_percent` of the groups.
inline int whole_waves(int supertiles, int groups, int min_last_wave_percent) {
  const int full = supertiles / groups, rest = supertiles % groups;
  return full + (rest > 0 && rest * 100 >= min_last_wave_percent * groups ? 1 : 0);
}

// The CTA groups the grid holds, and with them the whole waves before stream-K.
// Set where the grid is chosen and again where launch caps a cluster grid to
// what fits.
inline void set_groups(Schedule& s, int groups, const WgmmaGemmArgs& a) {
  s.groups = groups;
  s.dp_waves = whole_waves(s.supertiles, groups, a.min_last_wave_percent);
}

// Calls f(cta) for each CTA whose partial sum of super-tile st the owner
// group g (ending inside st) adds, in K order: the later groups whose ranges
// start inside st (empty ranges wrote nothing).
template <class F>
__device__ __forceinline__ void for_each_contributor(const Schedule& s, int g, int st, int row_in_group, F&& f) {
  const long long tile_end = static_cast<long long>(st + 1) * s.iters;
  for (int g2 = g + 1; g2 < s.groups && s.begin(g2) < tile_end; ++g2)
    if (s.begin(g2) != s.begin(g2 + 1)) f(g2 * s.group + row_in_group);
}

// Calls f(segment) for each piece of group g's range in order.
template <class F>
__device__ __forceinline__ void for_each_segment(const Schedule& s, int g, F&& f) {
  for (int w = 0; w < s.dp_waves && w * s.groups + g < s.supertiles; ++w)
    f(Segment{w * s.groups + g, 0, s.iters, false});
  long long pos = s.begin(g);
  const long long end = s.begin(g + 1);
  while (pos < end) {
    const int st = static_cast<int>(pos / s.iters), k0 = static_cast<int>(pos % s.iters);
    const int k1 = static_cast<int>(k0 + (end - pos) < s.iters ? k0 + (end - pos) : s.iters);
    f(Segment{st, k0, k1, s.descending_k});
    pos += k1 - k0;
  }
}

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

// Starts copying `bytes` (a multiple of 16) at p into L2.
__device__ __forceinline__ void prefetch_l2(const void* p, std::uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
}

__device__ __forceinline__ float2 bf16x2_to_float2(std::uint32_t v) {
  return make_float2(__uint_as_float(v << 16), __uint_as_float(v & 0xffff0000u));
}

// hi (bf16 pairs) + d -> hi, with d left the exact remainder (see the header).
template <int ACC>
__device__ __forceinline__ void promote(float (&d)[ACC], std::uint32_t (&hi)[ACC / 2]) {
#pragma unroll
  for (int i = 0; i < ACC / 2; ++i) {
    const float2 h = bf16x2_to_float2(hi[i]);
    const float t0 = h.x + d[2 * i], t1 = h.y + d[2 * i + 1];
    const __nv_bfloat162 n = __floats2bfloat162_rn(t0, t1);
    const float2 nf = __bfloat1622float2(n);
    d[2 * i] = t0 - nf.x;
    d[2 * i + 1] = t1 - nf.y;
    hi[i] = *reinterpret_cast<const std::uint32_t*>(&n);
  }
}

// How the epilogue stores C (the kernel's store_mode).
constexpr int kStoreVector = 0;  // 16-byte stores after a transpose within each quad of lanes (C 16-byte aligned)
constexpr int kStoreScalar = 1;  // one 4-byte store per pair of columns, as the accumulators lie (C 4-byte aligned)

// Two fp32 values as one 4-byte pair of f16 / bf16 (round to nearest even).
template <bool BF16>
__device__ __forceinline__ std::uint32_t pack2(float a, float b) {
  if constexpr (BF16) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(a, b);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  }
}

// Within each quad of lanes (p = this lane's place in it): lane p holds v[0..3]; returns, in order, element p of
// lanes 0..3 of the quad. Round r sends lane p ^ r the element it needs (v[p ^ r]) and receives element p of lane
// p ^ r. Indices are picked by selects: dynamic register indexing would put v in local memory.
__device__ __forceinline__ std::uint32_t pick4(const std::uint32_t (&v)[4], int i) {
  return i == 0 ? v[0] : i == 1 ? v[1] : i == 2 ? v[2] : v[3];
}
__device__ __forceinline__ uint4 quad_transpose(const std::uint32_t (&v)[4], int p) {
  std::uint32_t t[4];  // t[r]: element p of lane p ^ r
  t[0] = pick4(v, p);
#pragma unroll
  for (int r = 1; r < 4; ++r) t[r] = __shfl_xor_sync(0xffffffffu, pick4(v, p ^ r), r);
  return make_uint4(pick4(t, p), pick4(t, p ^ 1), pick4(t, p ^ 2), pick4(t, p ^ 3));
}

// CL: CTAs per cluster (1 or 2). With 2, the two CTAs (neighbouring row tiles
// of one group, so the same column tile and K range) each load half of the B
// block and multicast it to both: half the weight traffic from L2 per CTA.
// BN: the tile's width (Tile<BN>).
template <bool BF16, int CL, int BN>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                      void* __restrict__ c_out, int M, int N, Schedule s, int promote_every, bool stagger,
                      int prefetch_ahead, int store_mode, float* __restrict__ partials, unsigned* __restrict__ flags) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = Tile<BN>;
  constexpr int kStages = T::kStages, kBN = BN, kAcc = T::kAcc, kQuads = T::kQuads;
  constexpr std::uint32_t kBBytes = T::kBBytes, kStageBytes = T::kStageBytes;
  extern __shared__ unsigned char smem_raw[];
  const std::uint32_t base = (saddr(smem_raw) + 1023u) & ~1023u;
  const std::uint32_t bars = base + kStages * kStageBytes;
  auto full = [&](int st) { return bars + 8u * st; };
  auto empty = [&](int st) { return bars + 8u * (kStages + st); };
  auto stage_a = [&](int st) { return base + st * kStageBytes; };
  auto stage_b = [&](int st) { return base + st * kStageBytes + kABytes; };
  // In a cluster, each CTA loads half of the B block and multicasts it to both.
  constexpr bool mc = CL > 1;

  if (threadIdx.x == 0) {
    for (int st = 0; st < kStages; ++st) {
      mbar_init(full(st), 1);
      mbar_init(empty(st), (mc ? CL : 1) * kConsumerThreads / 32);  // every consumer warp of the cluster
    }
    fence_proxy_async();  // the initialised barriers, seen by the copy engine
  }
  // The peer's copies and arrivals must find these barriers initialised.
  if constexpr (CL > 1) cluster_sync();
  else __syncthreads();
  const std::uint32_t rank = CL > 1 ? cluster_ctarank() : 0u;

  const int g = blockIdx.x / s.group, row_in_group = blockIdx.x % s.group;
  auto tile_m = [&](int st) { return s.place(st).x * s.group + row_in_group; };
  auto tile_n = [&](int st) { return s.place(st).y; };

  if (threadIdx.x < 128) {
    // ---- producer ----
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) {
      tma_prefetch_desc(&map_a);
      tma_prefetch_desc(&map_b);
      int stage = 0;
      std::uint32_t phase = 0;
      for_each_segment(s, g, [&](const Segment& seg) {
        const int tm = tile_m(seg.st), tn = tile_n(seg.st);
        // In a cluster a CTA past the last row tile still loads (zeros for A) and multicasts its half of B.
        if (tm >= s.tiles_m && CL == 1) return;
        // An owner that will add other CTAs' sums has them fetched into L2 a few
        // K blocks before its end (written long before, they may have left it).
        const int prefetch_at = seg.k0 == 0 && seg.k1 < s.iters && prefetch_ahead > 0
                                    ? (seg.k1 - prefetch_ahead > seg.k0 ? seg.k1 - prefetch_ahead : seg.k0)
                                    : -1;
        for (int k = seg.k0; k < seg.k1; ++k) {
          if (k == prefetch_at)
            for_each_contributor(s, g, seg.st, row_in_group, [&](int cta) {
              if (ld_acquire(flags + cta) == 0u) return;  // not written yet: the consumers will wait
              const float* theirs = partials + static_cast<std::size_t>(cta) * kMaxTileFloats;
              for (int part = 0; part < 4; ++part)
                prefetch_l2(theirs + part * (T::kTileFloats / 4), T::kTileFloats);  // a quarter's bytes
            });
          mbar_wait(empty(stage), phase ^ 1u);
          mbar_arrive_expect_tx(full(stage), kStageBytes);
          const int kblock = seg.block(k);
          tma_load_2d(stage_a(stage), &map_a, kblock * kBK, tm * kBM, full(stage));
          if constexpr (CL == 1) {
            tma_load_2d(stage_b(stage), &map_b, kblock * kBK, tn * kBN, full(stage));
          } else {
            constexpr int kHalf = kBN / CL;
            tma_load_2d_multicast(stage_b(stage) + rank * (kBBytes / CL), &map_b, kblock * kBK,
                                  tn * kBN + static_cast<int>(rank) * kHalf, full(stage), (1u << CL) - 1u);
          }
          if (++stage == kStages) stage = 0, phase ^= 1u;
        }
      });
    }
  } else {
    // ---- consumers ----
    setmaxnreg_inc<kConsumerRegs>();
    const int ct = threadIdx.x - 128;  // 0..255
    const int cw = ct / 128;           // consumer warpgroup: rows 64 cw .. 64 cw + 63 of the tile
    const int warp = (ct % 128) / 32, lane = ct % 32;
    int stage = 0;
    std::uint32_t phase = 0;
    // Releases a stage: one arrival per warp, on this CTA's barrier and (in a cluster) on the peer's, whose
    // producer multicasts into this CTA's copy of the stage too.
    auto release = [&](int st) {
      if (lane != 0) return;
      if constexpr (!mc) {
        mbar_arrive(empty(st));
      } else {
        for (std::uint32_t r = 0; r < CL; ++r) mbar_arrive_cluster(empty(st), r);
      }
    };
    for_each_segment(s, g, [&](const Segment& seg) {
      const int tm = tile_m(seg.st), tn = tile_n(seg.st);
      if (tm >= s.tiles_m && CL == 1) return;
      float d[kAcc];
      std::uint32_t hi[kAcc / 2];
#pragma unroll
      for (int i = 0; i < kAcc; ++i) d[i] = 0.f;
#pragma unroll
      for (int i = 0; i < kAcc / 2; ++i) hi[i] = 0u;
      int pending = -1, since = cw == 1 && stagger ? promote_every / 2 : 0;
      for (int k = seg.k0; k < seg.k1; ++k) {
        mbar_wait(full(stage), phase);
        wgmma_fence();
        const std::uint64_t da = make_desc(stage_a(stage) + cw * 64 * 128, 16, 1024);
        const std::uint64_t db = make_desc(stage_b(stage), 16, 1024);
#pragma unroll
        for (int ks = 0; ks < kBK / 16; ++ks) {
          wgmma_m64k16<BN, BF16>(d, desc_add(da, ks * 32), desc_add(db, ks * 32));
        }
        wgmma_commit();
        // One block's MMAs stay in flight; the stage before it is free once they are done.
        wgmma_wait<1>();
        if (pending >= 0) release(pending);
        pending = stage;
        if (++stage == kStages) stage = 0, phase ^= 1u;
        if (promote_every > 0 && ++since == promote_every) {
          since = 0;
          wgmma_wait<0>();
          reg_fence(d);
          if (pending >= 0) release(pending);
          pending = -1;
          promote(d, hi);
        }
      }
      wgmma_wait<0>();
      reg_fence(d);
      if (pending >= 0) release(pending);
      if (tm >= s.tiles_m) return;  // (clusters only) rows past M: computed on zeros, nothing to keep
      // The segment's sum in fp32.
#pragma unroll
      for (int i = 0; i < kAcc / 2; ++i) {
        const float2 h = bf16x2_to_float2(hi[i]);
        d[2 * i] += h.x;
        d[2 * i + 1] += h.y;
      }
      float4* slot = reinterpret_cast<float4*>(partials);
      if (seg.k0 > 0) {
        // Not the owner: this is the CTA's first stream-K segment; hand the sum to the owner.
        float4* mine = slot + static_cast<std::size_t>(blockIdx.x) * (kMaxTileFloats / 4);
#pragma unroll
        for (int q = 0; q < kQuads; ++q)
          __stcg(mine + q * kConsumerThreads + ct, make_float4(d[4 * q], d[4 * q + 1], d[4 * q + 2], d[4 * q + 3]));
        __threadfence();
        named_bar_sync(kConsumerBarrier, kConsumerThreads);
        if (ct == 0) st_release(flags + blockIdx.x, 1u);
        return;
      }
      // The owner: add the later groups' sums of this tile, in K order.
      if (seg.k1 < s.iters) {
        for_each_contributor(s, g, seg.st, row_in_group, [&](int cta) {
          if (ct == 0) {
            while (ld_acquire(flags + cta) == 0u) {
            }
            flags[cta] = 0u;  // consumed; zero again for the next launch
          }
          named_bar_sync(kConsumerBarrier, kConsumerThreads);
          const float4* theirs = slot + static_cast<std::size_t>(cta) * (kMaxTileFloats / 4);
#pragma unroll
          for (int q = 0; q < kQuads; ++q) {
            const float4 v = __ldcg(theirs + q * kConsumerThreads + ct);
            d[4 * q] += v.x, d[4 * q + 1] += v.y, d[4 * q + 2] += v.z, d[4 * q + 3] += v.w;
          }
        });
      }
      // Store: rows r0 and r0 + 8; lane l holds columns 8j + 2 (l % 4) + {0, 1} of both (the wgmma layout).
      const int r0 = tm * kBM + cw * 64 + warp * 16 + lane / 4;
      constexpr int kVecJ = kAcc / 16 * 4;  // leading 8-column blocks stored 16 bytes at a time (whole groups of 4)
      if (store_mode == kStoreVector) {
        // Each quad of lanes holds 4 consecutive 8-column blocks of a row as 4-byte pairs; a transpose within
        // the quad leaves lane q with all 8 columns of block 4 i + q: one 16-byte store instead of four
        // 4-byte ones, and a warp's store covers 64 contiguous bytes of each of its 8 rows.
        const int q = lane % 4;
#pragma unroll
        for (int i = 0; i < kVecJ / 4; ++i) {
          const int col = tn * kBN + 8 * (4 * i + q);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            std::uint32_t v[4];
#pragma unroll
            for (int b = 0; b < 4; ++b) v[b] = pack2<BF16>(d[4 * (4 * i + b) + 2 * h], d[4 * (4 * i + b) + 2 * h + 1]);
            const uint4 out = quad_transpose(v, q);
            const int row = r0 + 8 * h;
            if (row < M && col < N)
              *reinterpret_cast<uint4*>(static_cast<std::uint16_t*>(c_out) + static_cast<std::size_t>(row) * N + col) =
                  out;
          }
        }
      }
      const int n0 = tn * kBN + 2 * (lane % 4);
#pragma unroll
      for (int j = 0; j < kAcc / 4; ++j) {
        if (store_mode == kStoreVector && j < kVecJ) continue;  // stored above
        const int col = n0 + 8 * j;
        if (col >= N) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = r0 + 8 * h;
          if (row >= M) continue;
          const std::size_t at = static_cast<std::size_t>(row) * N + col;
          *reinterpret_cast<std::uint32_t*>(static_cast<std::uint16_t*>(c_out) + at) =
              pack2<BF16>(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
        }
      }
    });
  }
  // No CTA leaves while its peer may still copy into its shared memory or arrive on its barriers.
  if constexpr (CL > 1) cluster_sync();
#else
  __trap();  // built without sm_90a: wgmma_gemm refuses devices other than compute capability 9.0
#endif
}

// The workspace: one flag per CTA (rounded up to 256 bytes), then one fp32 tile per CTA.
std::size_t flag_bytes(int ctas) { return (static_cast<std::size_t>(ctas) * sizeof(unsigned) + 255) / 256 * 256; }

// [rows, K] row-major f16 / bf16 as a 2-D tensor map, boxes of 64 columns x
// box_rows rows, 128-byte swizzle; false where it cannot be encoded.
bool encode_k_major(CUtensorMap* map, const void* base, std::uint64_t rows, std::uint64_t K, std::uint32_t box_rows,
                    bool bf16) {
  const TensorMapEncodeTiled enc = tensor_map_encoder();
  if (!enc) return false;
  const cuuint64_t dims[2] = {K, rows};
  const cuuint64_t strides[1] = {K * 2};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kBK), box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  return enc(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
             const_cast<void*>(base), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// Raises the kernel's shared-memory limit, once per process.
template <bool BF16, int CL, int BN>
cudaError_t prepare_kernel() {
  static const cudaError_t attr = cudaFuncSetAttribute(wgmma_gemm_kernel<BF16, CL, BN>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       static_cast<int>(Tile<BN>::kSmemBytes));
  return attr;
}

// The launch of `ctas` CTAs in clusters of CL on `stream`; *cluster_attr is pointed at.
template <int CL>
cudaLaunchConfig_t launch_config(int ctas, std::size_t smem_bytes, void* stream, cudaLaunchAttribute* cluster_attr) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(ctas));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = smem_bytes;
  config.stream = static_cast<cudaStream_t>(stream);
  *cluster_attr = cudaLaunchAttribute{};
  cluster_attr->id = cudaLaunchAttributeClusterDimension;
  cluster_attr->val.clusterDim.x = CL, cluster_attr->val.clusterDim.y = 1, cluster_attr->val.clusterDim.z = 1;
  config.attrs = cluster_attr;
  config.numAttrs = CL > 1 ? 1 : 0;
  return config;
}

// CTAs of the kernel in clusters of CL that fit on the current device at once; -1 where it cannot say.
template <bool BF16, int CL, int BN>
int resident_ctas() {
  if (prepare_kernel<BF16, CL, BN>() != cudaSuccess) return -1;
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t config = launch_config<CL>(CL * 64, Tile<BN>::kSmemBytes, nullptr, &attr);
  config.numAttrs = 1;  // the query wants the cluster size even for 1
  int clusters = 0;
  const cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, wgmma_gemm_kernel<BF16, CL, BN>, &config);
  (void)cudaGetLastError();
  return e == cudaSuccess ? clusters * CL : -1;
}

template <bool BF16, int CL, int BN>
cudaError_t launch(const WgmmaGemmArgs& a, const CUtensorMap& map_a, const CUtensorMap& map_b, Schedule s) {
  if (cudaError_t e = prepare_kernel<BF16, CL, BN>(); e != cudaSuccess) return e;
  int ctas = a.ctas;
  if constexpr (CL > 1) {
    // Clusters need their SMs in one GPC: run no more CTAs than fit at once (stream-K assumes one wave).
    if (const int fit = resident_ctas<BF16, CL, BN>(); fit > 0 && fit < ctas) {
      ctas = fit - fit % s.group;
      if (ctas <= 0) return cudaErrorNotSupported;
      set_groups(s, ctas / s.group, a);
    }
  }
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t config = launch_config<CL>(ctas, Tile<BN>::kSmemBytes, a.stream, &attr);
  const int store_mode = reinterpret_cast<std::uintptr_t>(a.C) % 16 == 0 ? kStoreVector : kStoreScalar;
  // Flags first, sized for the caller's grid (a.ctas), so they stay where they were whatever grid runs.
  auto* flags = static_cast<unsigned*>(a.workspace);
  auto* partials = reinterpret_cast<float*>(static_cast<unsigned char*>(a.workspace) + flag_bytes(a.ctas));
  return cudaLaunchKernelEx(&config, wgmma_gemm_kernel<BF16, CL, BN>, map_a, map_b, a.C, static_cast<int>(a.M),
                            static_cast<int>(a.N), s, a.promote_every, a.stagger, a.prefetch_ahead, store_mode,
                            partials, flags);
}

}  // namespace

int wgmma_gemm_resident_ctas(int cluster, bool bf16) {
  if (cluster == 2) return bf16 ? resident_ctas<true, 2, 256>() : resident_ctas<false, 2, 256>();
  if (cluster == 1) return bf16 ? resident_ctas<true, 1, 256>() : resident_ctas<false, 1, 256>();
  return -1;
}

std::size_t wgmma_gemm_workspace_bytes(int ctas) {
  return flag_bytes(ctas) + static_cast<std::size_t>(ctas) * kMaxTileFloats * sizeof(float);
}

int wgmma_gemm(const WgmmaGemmArgs& a) {
  int device = 0, major = 0, minor = 0, sms = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device); e != cudaSuccess)
    return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device); e != cudaSuccess)
    return e;
  if (major != 9 || minor != 0) return cudaErrorNotSupported;
  if (a.M <= 0 || a.N <= 0 || a.K <= 0 || a.K % 8 != 0 || a.N % 8 != 0 || a.M > INT32_MAX / 2 || a.N > INT32_MAX / 2 ||
      (a.K + kBK - 1) / kBK > INT32_MAX / 2)
    return cudaErrorNotSupported;
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  if (!aligned(a.A) || !aligned(a.B) || reinterpret_cast<std::uintptr_t>(a.C) % 4 != 0) return cudaErrorNotSupported;
  WgmmaGemmArgs args = a;
  if (args.ctas <= 0) {
    if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess)
      return e;
    args.ctas = sms;
  }
  if (args.group <= 0 || args.promote_every < 0) return cudaErrorNotSupported;
  if (args.cluster != 1 && args.cluster != 2) return cudaErrorNotSupported;
  // 168 columns: single CTAs only (half a 168-row B block is not a whole number of 1 KB swizzle atoms).
  if (args.tile_n != 256 && (args.tile_n != 168 || args.cluster != 1)) return cudaErrorNotSupported;
  const int kBN = args.tile_n;
  if (!args.workspace || args.workspace_bytes < wgmma_gemm_workspace_bytes(args.ctas)) return cudaErrorNotSupported;
  CUtensorMap map_a, map_b;
  if (!encode_k_major(&map_a, a.A, static_cast<std::uint64_t>(a.M), static_cast<std::uint64_t>(a.K), kBM, a.bf16) ||
      !encode_k_major(&map_b, a.B, static_cast<std::uint64_t>(a.N), static_cast<std::uint64_t>(a.K),
                      static_cast<std::uint32_t>(kBN / args.cluster),
                      a.bf16))
    return cudaErrorNotSupported;
  Schedule s;
  s.tiles_m = static_cast<int>((a.M + kBM - 1) / kBM);
  // No more CTAs a group than there are row tiles (the rest would idle), no fewer than a cluster (its CTAs
  // share one group); the largest such divisor of the grid that the cluster size divides.
  s.group = static_cast<int>(args.group < s.tiles_m ? args.group : s.tiles_m);
  if (s.group < args.cluster) s.group = args.cluster;
  while (s.group > args.cluster && (args.ctas % s.group != 0 || s.group % args.cluster != 0)) --s.group;
  if (args.ctas % s.group != 0 || s.group % args.cluster != 0) return cudaErrorNotSupported;
  s.mgroups = (s.tiles_m + s.group - 1) / s.group;
  s.iters = static_cast<int>((a.K + kBK - 1) / kBK);
  s.tiles_n = static_cast<int>((a.N + kBN - 1) / kBN);
  s.n_fastest = args.n_fastest;
  s.band = args.raster_band;
  s.descending_k = args.descending_stream_k;
  s.total = static_cast<long long>(s.mgroups) * s.tiles_n * s.iters;
  if (static_cast<long long>(s.mgroups) * s.tiles_n > INT32_MAX) return cudaErrorNotSupported;
  s.supertiles = s.mgroups * s.tiles_n;
  set_groups(s, args.ctas / s.group, args);
  if (args.cluster == 2)
    return a.bf16 ? launch<true, 2, 256>(args, map_a, map_b, s) : launch<false, 2, 256>(args, map_a, map_b, s);
  if (kBN == 168)
    return a.bf16 ? launch<true, 1, 168>(args, map_a, map_b, s) : launch<false, 1, 168>(args, map_a, map_b, s);
  return a.bf16 ? launch<true, 1, 256>(args, map_a, map_b, s) : launch<false, 1, 256>(args, map_a, map_b, s);
}

}  // namespace kb::kernels::gemm_cuda
