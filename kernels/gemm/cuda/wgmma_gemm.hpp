// kb's handwritten Hopper gemm for long K: C[M, N] = A[M, K] B[N, K]^T in
// float16 or bfloat16 (fp32 accumulate, one rounding to the output dtype), on
// wgmma + TMA (sm_90a), with the accumulators promoted to a second fp32 sum
// every few K blocks so that the error of the tensor cores' sum does not grow
// with K (long_k.hpp says why cuBLASLt's does). wgmma_gemm.cu describes the
// kernel.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kb::kernels::gemm_cuda {

// K blocks of 64 between two promotions (14336 of K): the tensor cores' sum
// of one stretch then errs as much as cuBLASLt's over K = 14336, the longest
// K kb leaves to one tensor-core sum elsewhere (the shipped K = 14336 shapes,
// and the chunks of kb's cuBLASLt long-K path, long_k.hpp), which passes
// FlashInfer-Bench's check at every M. Fewer promotions are faster: each one
// waits for the warpgroup's MMAs in flight. H200, 8192 x 28672 and 5376 x
// 21504 at M = 512 and 2048 (benchmarks/h200-2026-11-28-s18/
// long_k_variants_*.txt): every 128 blocks 0-1% slower than no promotion,
// every 64 1-3%, every 32 2.5-4.5%, every 16 6-10%, all with 0 failing
// elements against fp64 where no promotion failed 7-18. Session 33
// (benchmarks/h200-2026-12-03-s33/lkv_call1.txt, M = 512-4096): every 224
// against every 128 0-1.3% faster on both shapes and tile widths, 0
// failing elements, the largest error among elements below 4 in magnitude
// 0.0111-0.0127 against 0.0096-0.0103 (cuBLASLt's chunks of 14336:
// 0.0108-0.0137; its single product over 28672 fails on 20 elements).
inline constexpr int kWgmmaPromoteEvery = 224;

struct WgmmaGemmArgs {
  const void* A = nullptr;  // [M, K] row-major
  const void* B = nullptr;  // [N, K] row-major
  void* C = nullptr;        // [M, N] row-major
  std::int64_t M = 0, N = 0, K = 0;
  bool bf16 = true;  // false: float16
  // K blocks of 64 between promotions of the tensor-core sum into the second
  // sum; 0: never (the tensor cores sum all of K, as cuBLASLt does).
  int promote_every = kWgmmaPromoteEvery;
  // The second consumer warpgroup promotes half a period later than the
  // first, so that one warpgroup's MMAs keep the tensor cores busy while the
  // other waits for its own to finish and promotes. false: both at once.
  bool stagger = true;
  // Timing experiments only: each consumer warpgroup waits for its own K
  // block's MMAs to finish and frees the stage at once (the other
  // warpgroup's MMAs keep the tensor cores busy meanwhile), instead of
  // keeping one block's MMAs in flight and freeing a stage only after the
  // next block's data has arrived and been issued. H200, session 30: half
  // the waits for data, no faster (0.99-1.01x; benchmarks/h200-2026-12-02-
  // s30/long_k_variants_early_call6.txt).
  bool release_early = false;
  // An owner CTA has the partial sums it will add fetched into L2 this many
  // K blocks before the end of its segment; 0: not.
  // (Measured: no gain at 16 or 32 on the H200, so off by default.)
  int prefetch_ahead = 0;
  // Stream-K pieces (the last partial wave) run their K blocks last to first.
  // Each group's range is the end of one tile then the start of the next, of
  // nearly equal length L for all groups, so backwards every group reads K
  // block (iters - 1 - t) at step t of its first piece and (L - 1 - t) of
  // its second: two K positions at a time across the GPU, so groups on the
  // same rows or columns share their loads in L2, as in the whole waves.
  // Forwards each group sat at its own K offset. H200, session 30
  // (benchmarks/h200-2026-12-02-s30/): on 8192 x 28672 at M = 2048 the
  // kernel read 2.00 GB from memory forwards and 1.18 GB backwards (Nsight
  // Compute; cuBLASLt's single product 1.27 GB), and in one run of
  // long_k_variants (times over one cuBLASLt product) 1.026 -> 1.016 there,
  // 1.049 -> 1.025 at M = 512, 0.998 -> 0.986 at M = 8192; 5376 x 21504
  // 0.988 -> 0.967 at M = 512, 1.004 -> 1.003 at 2048, 1.001 -> 0.998 at 8192.
  bool descending_stream_k = true;
  // Order of the super-tiles in the work list: column tiles first (true) or
  // the row groups of one column first (false).
  bool n_fastest = false;
  // (Row groups first, n_fastest false.) The row groups taken in bands of
  // this many, all the columns of one band before the next; 0: one band
  // over all of M. Why: whole waves run in step over K, so what a wave
  // reads from memory is its rows of A and its columns of B over all of K.
  // One band over M, a wave of 33 super-tiles at M = 16384 (32 row groups of
  // 512 rows) spans all of A (16384 x K) and one or two 256-column blocks
  // of B: about 4x the traffic of 4 row groups x 8 column tiles. H200,
  // session 33 (benchmarks/h200-2026-12-03-s33/lkv_call3.txt, one run,
  // times over one cuBLASLt product): 168-column tiles at M = 16384 1.159
  // -> 1.002 on 8192 x 28672 and 1.134 -> 0.990 on 5376 x 21504 (bands of
  // 4 against one); 256-column tiles and clusters of 2 within 1.1% either way
  // at M = 1024-16384 (bands of 2, 4, 8), about the run's noise there.
  int raster_band = 4;
  // Timing experiments only (tools/gpu/long_k_variants.cu): skip the partial
  // sums' hand-over between CTAs, leaving split tiles WRONG, to time it.
  bool experiment_skip_fixup = false;
  // Timing experiments only: clusters launched, but each CTA loads its whole B block itself.
  bool experiment_cluster_without_multicast = false;
  // The last partial wave of super-tiles runs as whole tiles too (some CTA
  // groups idle, no stream-K hand-over, all groups in step over K) where it
  // fills at least this percentage of the groups; above 100: never. H200,
  // session 19 (long_k_variants_5_last_wave.txt): 8192 x 28672 at M = 512
  // (32 super-tiles on 33 groups) 0.998 of one cuBLASLt product as one whole
  // wave against 1.037 as stream-K; at M = 2048 (a last wave of 29 of 33)
  // 1.025 against 1.006: the idle 12% cost more than the hand-over.
  int min_last_wave_percent = 95;
  // Timing experiments only: stream-K over all the work (no whole waves first; slower, the L2 shares nothing).
  bool experiment_stream_k_only = false;
  // Whole waves of super-tiles the stream-K part takes in besides the last
  // partial wave, where there is one (0: only that partial wave). With the
  // partial wave alone, a small one (a quarter of the groups, say) splits
  // each of its tiles between about 4 groups that all finish together, and
  // the owner then waits for and adds 3 partial sums; with one whole wave
  // more each tile is split between about 2 groups, and the other group's
  // piece is its first (its sum long written when the owner needs it).
  // Timing experiments only: H200, session 31 (benchmarks/h200-2026-12-02-
  // s31/long_k_variants_sk_extra_call6.txt, times over kb's default) 1 is
  // 1.1% faster on 5376 x 21504 at M = 1024, 0.7% at 4096, 0.3% at 2048,
  // and 0.3-0.6% slower on 8192 x 28672 at M = 1024 and 2048: not enough
  // to close the 6-8% kb bench shows against torch.matmul at M = 1024.
  int stream_k_extra_waves = 0;
  // Timing experiments only: clusters launched, each CTA loads both halves of its B block with the multicast
  // instruction addressed to itself alone (no cross-CTA traffic or coupling; the multicast form's own cost).
  bool experiment_multicast_to_self = false;
  // CTAs that run the same K range of one column of 256 output columns on
  // neighbouring 128-row tiles at once (so each weight block is read from
  // memory about once per group); taken down to the largest divisor of
  // `ctas` that is at most the row tiles, ceil(M / 128), and a multiple of
  // `cluster` (4 on 132 SMs, the H100 / H200 SXM).
  int group = 4;
  // CTAs per cluster, 1 or 2: with 2, neighbouring CTAs of a group each load
  // half of the weight block and multicast it to both (TMA multicast); the
  // grid and the group must then be even. Correct (tests/gpu/test_gemm.cpp).
  // H200 (benchmarks/h200-2026-11-28-s19/): 2x slower than 1 until session
  // 19 (a cluster-scope release on every stage's arrive put MEMBAR.ALL.GPU in
  // the consumers' loop); since, 1.00-1.02x of single CTAs on the long-K
  // shapes at M >= 2048, slower below (1.02-1.12x). Kept for experiments and
  // KB_GEMM_LONG_K=wgmma-c2.
  int cluster = 1;
  // Output columns per CTA tile: 256, or 168 (single CTAs only). Why 168:
  // a grid of 132 SMs takes 128 x 256 tiles of 5376 x 21504 at M = 1024 as
  // one whole wave and a stream-K part over 36 of its 168 tiles, each split
  // between about 4 CTAs whose partial sums the owner then adds (4-5% of the
  // time, session 31); in 128 x 168 tiles (5376 = 32 x 168) the same work is
  // 256 tiles, 64 super-tiles on 33 groups of 4: a whole wave, then 31
  // super-tiles that run as stream-K (each split between about 2 groups) or,
  // from min_last_wave_percent <= 93, as a second whole wave; the two were
  // within 0.5% of each other. cuBLASLt's heuristic picks the same tile
  // there (its 168 x 128, in its column-major terms). H200, session 32
  // (benchmarks/h200-2026-12-02-s32/): 1-5% faster than 256 columns on
  // 5376 x 21504 up to M = 4096 in long_k_variants, but in kb bench (higher
  // clocks, the power cap nearer) only at M = 512 and 1024, and 3-27% slower
  // from M = 2048; slower on 8192 x 28672 (not a whole number of tiles)
  // except at M = 8192 in long_k_variants. So kb_cuda_gemm races it
  // (long_k_race.hpp). Tried and not kept: 168 columns in clusters of 2
  // (rank 0 multicasting the B block's first 88 rows, rank 1 the other 80,
  // two tensor maps): slower than single CTAs on 168 columns at every M in
  // both tools (benchmarks/h200-2026-12-02-s32/*c2_n168_call5*; in kb's
  // race 163.9 against 161.5 us at M = 512, 324.8 against 319.6 at 1024),
  // and slower than clusters of 2 on 256 columns from M = 2048. Yet
  // cuBLASLt's kernel there is that very shape (Nsight Compute, call 7:
  // nvjet 168x128, 5 stages, clusters of 1 x 2) and runs at 94.1% of the
  // SM's throughput where kb's reaches 91.8% without promotion and 91.2%
  // with it: kb's cluster path, not the idea, is what lost.
  // How the epilogue stores C: 0 (default) 16-byte stores, the accumulators
  // first transposed within each quad of lanes, where C is 16-byte aligned
  // (else 1); 1: a 4-byte store per pair of columns, as the accumulators lie
  // (the kernel's form before session 33); 2: no stores at all, leaving C
  // WRONG (timing experiments only: what the epilogue's stores cost). H200,
  // session 33 (benchmarks/h200-2026-12-03-s33/lkv_call1.txt, one run, M =
  // 512-4096 on both long-K shapes): 16-byte stores 0-1.8% faster than
  // 4-byte ones (5376 x 21504 at M = 1024: 350.5 against 353.0 us on 168
  // columns, 355.0 against 361.6 on 256), never slower; leaving the stores
  // out saved another 0.5-2.7% (343.8 us there): the epilogue still costs.
  int experiment_store = 0;
  // Tried and not kept (session 33, benchmarks/h200-2026-12-03-s33/
  // lkv_call3.txt): the second consumer warpgroup 1, 2 or 4 K blocks behind
  // the first (a named barrier at the start), so that their epilogues fall
  // at different times and one's MMAs cover the other's: -1.0% to +2.8%
  // against starting together at M = 1024-16384 (slower at M = 16384).
  int tile_n = 256;
  int ctas = 0;                  // persistent grid: one CTA per SM (the device's SM count); 0: asked of the device
  void* workspace = nullptr;     // wgmma_gemm_workspace_bytes(ctas), zeroed once before first use (cudaMemset)
  std::size_t workspace_bytes = 0;
  void* stream = nullptr;        // cudaStream_t
};

// Bytes of workspace a launch with `ctas` CTAs needs: one flag per CTA
// (first; the kernel leaves them zero, so the workspace is zeroed once, when
// allocated) and one fp32 128 x 256 partial tile per CTA.
std::size_t wgmma_gemm_workspace_bytes(int ctas);

// CTAs of `cluster` CTAs per cluster (1 or 2) that fit on the current device at
// once (cudaOccupancyMaxActiveClusters x cluster); -1 where it cannot say.
int wgmma_gemm_resident_ctas(int cluster, bool bf16);

// Launches the gemm on args.stream; returns a cudaError_t as an int:
// cudaErrorNotSupported where the kernel does not apply (not compute
// capability 9.0, K or N not a multiple of 8, unaligned pointers, a grid the
// cluster size does not divide, too small a workspace).
int wgmma_gemm(const WgmmaGemmArgs& args);

}  // namespace kb::kernels::gemm_cuda
