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
// waits for the warpgroup's MMAs in flight (on an H200, promoting every 16
// blocks cost 6-10%, every 128 0-1%; every 224 is 0-1.3% faster than every
// 128 with no failing elements against fp64 on the long-K shapes).
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
  // An owner CTA has the partial sums it will add fetched into L2 this many
  // K blocks before the end of its segment; 0: not (no gain measured at 16
  // or 32 on an H200).
  int prefetch_ahead = 0;
  // Stream-K pieces (the last partial wave) run their K blocks last to first.
  // Each group's range is the end of one tile then the start of the next, of
  // nearly equal length L for all groups, so backwards every group reads K
  // block (iters - 1 - t) at step t of its first piece and (L - 1 - t) of
  // its second: two K positions at a time across the GPU, so groups on the
  // same rows or columns share their loads in L2, as in the whole waves.
  // Forwards each group sits at its own K offset: on 8192 x 28672 at M =
  // 2048 (H200) the kernel read 2.00 GB from memory forwards and 1.18 GB
  // backwards, and ran up to 2.4% faster backwards.
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
  // of B: about 4x the traffic of 4 row groups x 8 column tiles (on an H200,
  // 168-column tiles at M = 16384 ran about 14% faster in bands of 4; other
  // tiles and bands of 2-8 within 1.1%).
  int raster_band = 4;
  // The last partial wave of super-tiles runs as whole tiles too (some CTA
  // groups idle, no stream-K hand-over, all groups in step over K) where it
  // fills at least this percentage of the groups; above 100: never. The
  // idle groups of a nearly full wave cost less than the hand-over (H200,
  // 8192 x 28672 at M = 512, 32 super-tiles on 33 groups: 4% faster whole).
  int min_last_wave_percent = 95;
  // CTAs that run the same K range of one column of 256 output columns on
  // neighbouring 128-row tiles at once (so each weight block is read from
  // memory about once per group); taken down to the largest divisor of
  // `ctas` that is at most the row tiles, ceil(M / 128), and a multiple of
  // `cluster` (4 on 132 SMs, the H100 / H200 SXM).
  int group = 4;
  // CTAs per cluster, 1 or 2: with 2, neighbouring CTAs of a group each load
  // half of the weight block and multicast it to both (TMA multicast); the
  // grid and the group must then be even. Neither is fastest everywhere, so
  // kb_cuda_gemm races both (long_k_race.hpp).
  int cluster = 1;
  // Output columns per CTA tile: 256, or 168 (single CTAs only). Why 168:
  // a grid of 132 SMs takes 128 x 256 tiles of 5376 x 21504 at M = 1024 as
  // one whole wave and a stream-K part over 36 of its 168 tiles, each split
  // between about 4 CTAs whose partial sums the owner then adds; in 128 x
  // 168 tiles (5376 = 32 x 168) the same work is 256 tiles, 64 super-tiles
  // on 33 groups of 4: a whole wave, then 31 super-tiles split between about
  // 2 groups each. cuBLASLt's heuristic picks the same tile there. It is
  // faster on some shapes and slower on others (8192 x 28672 is not a whole
  // number of 168-column tiles), so kb_cuda_gemm races it (long_k_race.hpp).
  // 168 columns in clusters of 2 (two tensor maps of 88 and 80 rows) ran
  // slower than single CTAs at every M, so the kernel refuses that pair.
  // The epilogue stores C 16 bytes at a time (the accumulators first
  // transposed within each quad of lanes) where C is 16-byte aligned, else
  // 4 bytes per pair of columns.
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
