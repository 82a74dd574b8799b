// How close can ANY kernel get to the copy bandwidth when it reads a decode
// GEMM's weight once, timed as kb times it (cold: an L2 flush by memset of
// twice the L2 size and a read of it, queued before the start event)? Issue 4 asks the M <= 16
// gemm for 75% of the measured copy bandwidth on every weight of 64 MB or
// more; kb's gemv (kernels/gemm/cuda/gemv.cu) sits at 73-77% on the smaller
// of those weights (73-117 MB) and 84-89% on the large ones. This measures,
// side by side in one process, kernels that do nothing but read the weight
// (XOR into a checksum; no MMA, no activations, no output but one word),
// all with the gemv's load (ld.global.nc.L1::no_allocate.L2::256B,
// evict_first) unless said:
//   rows (gemv)  the gemv's geometry: a block of 8 warps per 32 weight rows,
//                warps interleaved over 64-element K steps, 8 x 16-byte loads
//                per lane per step (4 rows x 128 bytes per instruction)
//   rows16       the same with 16-row blocks (4 loads per lane per step)
//   rows deep    each warp takes 2 consecutive K steps per iteration
//   rows16 deep  both
//   rows split 2 K halves in separate blocks (grid.y = 2)
//   contig       a warp per 4 rows over all of K, 512 contiguous bytes per
//                load instruction
//   flat         the weight as one flat array: each block reads 256 x 8
//                consecutive 16-byte vectors (all loads before the XORs)
//   flat-ldg     the same with plain __ldg
//   bulkR CKxS   the gemv's blocks of R rows and 8 reading warps, but the
//                weight arrives by bulk copies (cp.async.bulk, the TMA's 1-D
//                form, evict_first) that a ninth warp issues: each row's next
//                CK elements a stage, S stages in a shared-memory ring with
//                mbarriers; the 8 warps read the gemv's register pattern from
//                shared memory (measured: benchmarks/h100-2026-11-25-s11/)
// These use 32-40 registers, so more blocks fit an SM than the gemv's
// 60-93 allow: where a pattern has more blocks than the gemv's resident
// slots, its figure is an upper bound for the gemv. Measured on an H100:
// benchmarks/h100-2026-11-25-s8/gemv_read_ceiling.txt.
// Also, for scale, an empty kernel and cudaMemcpyAsync of half the weight (as
// many bytes read + written as the weight). Every figure is bytes read per
// second over the copy bandwidth (cudaMemcpyAsync of 1 GiB device to device,
// (read + write) bytes / s, median of 20, warm).
// build: nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -o gemv_read_ceiling tools/gpu/gemv_read_ceiling.cu
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "standalone_cuda.cuh"  // CK(), median_event_ms()

namespace {

__device__ __forceinline__ std::uint64_t evict_first() {
  std::uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

__device__ __forceinline__ uint4 load_nc(const uint4* p, std::uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(policy));
  return v;
}

// The gemv's read pattern, generalized (K % 64 == 0 here, N % R == 0): a
// block of 8 warps owns R rows; a 64-element K step of the block's rows is
// R / 4 load instructions of 4 rows x 128 bytes per lane; a warp takes
// kSteps consecutive K steps per iteration (all loads before the XORs) and
// the warps interleave; grid.y = kSplit splits K into contiguous ranges.
// R = 32, kSteps = 1, kSplit = 1 is the gemv's geometry.
template <int R, int kSteps, int kSplit>
__global__ void __launch_bounds__(256) rows(const std::uint16_t* __restrict__ w, int N, int K, unsigned* out) {
  constexpr int kInstr = R / 4;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n0 = blockIdx.x * R;
  const std::uint64_t policy = evict_first();
  const uint4* row[kInstr];
#pragma unroll
  for (int j = 0; j < kInstr; ++j)
    row[j] = reinterpret_cast<const uint4*>(w + static_cast<std::size_t>(n0 + 4 * j + (lane >> 3)) * K) + (lane & 7);
  const int steps = K / 64, per = steps / kSplit;
  const int s0 = blockIdx.y * per, s1 = blockIdx.y == kSplit - 1 ? steps : s0 + per;
  unsigned acc = 0;
  for (int it = s0 + warp * kSteps; it < s1; it += 8 * kSteps) {
    uint4 v[kSteps][kInstr];
#pragma unroll
    for (int u = 0; u < kSteps; ++u)
#pragma unroll
      for (int j = 0; j < kInstr; ++j)
        v[u][j] = it + u < s1 ? load_nc(row[j] + (it + u) * 8, policy) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < kSteps; ++u)
#pragma unroll
      for (int j = 0; j < kInstr; ++j) acc ^= v[u][j].x ^ v[u][j].y ^ v[u][j].z ^ v[u][j].w;
  }
  if (acc == 0x9e3779b9u) out[0] = acc;  // keeps the loads; practically never true
}

// Each warp instruction reads 512 contiguous bytes of one row: warp w of a
// 32-row block takes rows 4w .. 4w + 3 over all of K, two 512-byte spans of
// each per iteration (8 loads a lane).
__global__ void __launch_bounds__(256) contig(const std::uint16_t* __restrict__ w, int N, int K, unsigned* out) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::uint64_t policy = evict_first();
  const uint4* row[4];
#pragma unroll
  for (int j = 0; j < 4; ++j)
    row[j] = reinterpret_cast<const uint4*>(w + static_cast<std::size_t>(blockIdx.x * 32 + 4 * warp + j) * K) + lane;
  const int vecs = K / 8;  // 16-byte vectors a row
  unsigned acc = 0;
  for (int c = 0; c < vecs; c += 64) {
    uint4 v[4][2];
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int u = 0; u < 2; ++u)
        v[j][u] = c + 32 * u + lane < vecs ? load_nc(row[j] + c + 32 * u, policy) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int u = 0; u < 2; ++u) acc ^= v[j][u].x ^ v[j][u].y ^ v[j][u].z ^ v[j][u].w;
  }
  if (acc == 0x9e3779b9u) out[0] = acc;
}

template <bool kNc>
__global__ void __launch_bounds__(256) flat(const uint4* __restrict__ w, std::size_t n, unsigned* out) {
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * 256 * 8 + threadIdx.x;
  const std::uint64_t policy = evict_first();
  uint4 v[8];
#pragma unroll
  for (int u = 0; u < 8; ++u) {
    const std::size_t i = base + static_cast<std::size_t>(u) * 256;
    v[u] = i < n ? (kNc ? load_nc(w + i, policy) : __ldg(w + i)) : make_uint4(0, 0, 0, 0);
  }
  unsigned acc = 0;
#pragma unroll
  for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  if (acc == 0x9e3779b9u) out[0] = acc;
}

// ---- bulk copies (the TMA's 1-D form) into a shared-memory ring ----------------
__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void bar_init(std::uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void bar_arrive(std::uint32_t bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void bar_expect(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bar_wait(std::uint32_t bar, std::uint32_t parity) {
  std::uint32_t done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
}
__device__ __forceinline__ void bulk_load(std::uint32_t dst, const void* src, std::uint32_t bytes, std::uint32_t bar,
                                          std::uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          dst),
      "l"(src), "r"(bytes), "r"(bar), "l"(policy)
      : "memory");
}

// The gemv's blocks (R rows, 8 warps interleaved over 64-element K steps),
// but the weight arrives by bulk copies: a ninth warp streams each row's next
// CK elements into a ring of S stages (R x CK x 2 bytes each, one mbarrier
// per stage), and the 8 warps read their K steps from shared memory with the
// gemv's register pattern (4 rows x 128 bytes per instruction). K % CK == 0.
template <int R, int CK, int S>
__global__ void __launch_bounds__(288) rows_bulk(const std::uint16_t* __restrict__ w, int N, int K, unsigned* out) {
  extern __shared__ __align__(128) unsigned char ring[];  // [S][R][CK] bf16
  __shared__ __align__(8) std::uint64_t full[S], empty_[S];
  constexpr int kStage = R * CK * 2;
  constexpr int kSteps = CK / 64;  // 64-wide K steps a stage
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n0 = blockIdx.x * R;
  const int iters = K / CK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) bar_init(smem_u32(&full[s]), 1), bar_init(smem_u32(&empty_[s]), 8);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == 8) {
    if (lane == 0) {
      const std::uint64_t policy = evict_first();
      for (int i = 0; i < iters; ++i) {
        const int s = i % S;
        if (i >= S) bar_wait(smem_u32(&empty_[s]), ((i / S) - 1) & 1);
        bar_expect(smem_u32(&full[s]), kStage);
        for (int r = 0; r < R; ++r)
          bulk_load(smem_u32(ring + s * kStage + r * CK * 2), w + static_cast<std::size_t>(n0 + r) * K + i * CK,
                    CK * 2, smem_u32(&full[s]), policy);
      }
    }
    return;
  }
  unsigned acc = 0;
  for (int i = 0; i < iters; ++i) {
    const int s = i % S;
    bar_wait(smem_u32(&full[s]), (i / S) & 1);
    for (int st = warp; st < kSteps; st += 8) {
#pragma unroll
      for (int j = 0; j < R / 4; ++j) {
        const uint4 v = *reinterpret_cast<const uint4*>(ring + s * kStage + (4 * j + (lane >> 3)) * CK * 2 +
                                                        st * 128 + (lane & 7) * 16);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
      }
    }
    __syncwarp();
    if (lane == 0) bar_arrive(smem_u32(&empty_[s]));
  }
  if (acc == 0x9e3779b9u) out[0] = acc;
}

template <int R, int CK, int S>
cudaError_t launch_rows_bulk(const std::uint16_t* w, int N, int K, unsigned* out) {
  constexpr int kSmem = S * R * CK * 2;
  static bool attr = false;
  if (!attr) {
    cudaFuncSetAttribute(rows_bulk<R, CK, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    attr = true;
  }
  rows_bulk<R, CK, S><<<N / R, 288, kSmem>>>(w, N, K, out);
  return cudaGetLastError();
}

__global__ void empty() {}

}  // namespace

int main() {
  struct Shape {
    int n, k;
  };
  // The gemm definitions with weights >= 64 MB (and 4096 x 4096 for scale).
  const std::vector<Shape> shapes = {{7168, 5120},   {16384, 3072}, {4096, 14336}, {8192, 8192},  {5120, 17408},
                                     {10240, 8192},  {28672, 4096}, {5376, 21504}, {34816, 5120}, {8192, 28672},
                                     {4096, 4096}};
  std::size_t max_bytes = 0;
  for (const Shape& s : shapes) max_bytes = std::max(max_bytes, std::size_t{2} * s.n * s.k);
  int l2 = 0;
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const std::size_t flush_bytes = std::size_t{2} * l2;
  const std::size_t copy_bytes = std::size_t{1} << 30;
  void *w = nullptr, *flush = nullptr, *c0 = nullptr, *c1 = nullptr;
  unsigned* out = nullptr;
  CK(cudaMalloc(&w, max_bytes));
  CK(cudaMalloc(&flush, flush_bytes));
  CK(cudaMalloc(&c0, copy_bytes));
  CK(cudaMalloc(&c1, copy_bytes));
  CK(cudaMalloc(&out, 64));
  CK(cudaMemset(w, 0x3c, max_bytes));
  CK(cudaMemset(c0, 1, copy_bytes));

  auto warm = [](const std::function<void()>& f) {
    for (int i = 0; i < 3; ++i) f();
    cudaDeviceSynchronize();
  };
  auto copy_1g = [&] { cudaMemcpyAsync(c1, c0, copy_bytes, cudaMemcpyDeviceToDevice); };
  warm(copy_1g);
  const double copy_ms = median_event_ms(20, [] {}, copy_1g);
  const double copy_gbs = 2.0 * copy_bytes / copy_ms / 1e6;
  // As kb's flush (lib/cuda/timing.hpp L2Flush): the memset, then a read of
  // the whole buffer (no dirty lines left in L2), or with KB_L2_FLUSH=write
  // the memset alone.
  const bool clean = !(std::getenv("KB_L2_FLUSH") && std::string(std::getenv("KB_L2_FLUSH")) == "write");
  const std::size_t flush_vecs = flush_bytes / 16;
  auto flush_l2 = [&] {
    cudaMemsetAsync(flush, 0, flush_bytes);
    if (clean)
      flat<false><<<static_cast<unsigned>((flush_vecs + 2047) / 2048), 256>>>(static_cast<const uint4*>(flush),
                                                                              flush_vecs, out + 8);
  };
  auto cold = [&](const std::function<void()>& f) {
    warm(f);
    return median_event_ms(30, flush_l2, f) * 1e3;  // us
  };
  const double empty_us = cold([] { empty<<<1, 32>>>(); });
  CK(cudaGetLastError());
  std::printf("device: %s, %d SMs, L2 %d MiB; copy bandwidth (cudaMemcpyAsync 1 GiB D2D, read + write) %.0f GB/s; "
              "empty kernel (cold, as below) %.1f us\n",
              prop.name, prop.multiProcessorCount, l2 >> 20, copy_gbs, empty_us);
  std::printf("times in us, cold (memset of 2 x L2%s before each sample), median of 30; %% = bytes read / s over the "
              "copy bandwidth\n\n", clean ? ", then a read of it all" : " (KB_L2_FLUSH=write)");
  std::printf("%% of copy bandwidth (us)\n\n| N x K | weight MB | rows (gemv) | rows16 | rows deep | rows16 deep | rows split 2 "
              "| contig | flat | flat-ldg | bulk16 512x3 | bulk16 1024x2 | bulk32 512x2 | bulk16 256x6 | copy of half |\n"
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const Shape& s : shapes) {
    const std::size_t bytes = std::size_t{2} * s.n * s.k;
    const std::size_t vecs = bytes / 16;
    auto pct = [&](double us) { return 100.0 * bytes / (us * 1e3) / copy_gbs; };
    const auto* wp = static_cast<const std::uint16_t*>(w);
    const double t_rows = cold([&] { rows<32, 1, 1><<<s.n / 32, 256>>>(wp, s.n, s.k, out); });
    const double t_rows16 = cold([&] { rows<16, 1, 1><<<s.n / 16, 256>>>(wp, s.n, s.k, out); });
    const double t_deep = cold([&] { rows<32, 2, 1><<<s.n / 32, 256>>>(wp, s.n, s.k, out); });
    const double t_deep16 = cold([&] { rows<16, 2, 1><<<s.n / 16, 256>>>(wp, s.n, s.k, out); });
    const double t_split = cold([&] { rows<32, 1, 2><<<dim3(s.n / 32, 2), 256>>>(wp, s.n, s.k, out); });
    const double t_contig = cold([&] { contig<<<s.n / 32, 256>>>(wp, s.n, s.k, out); });
    const unsigned blocks = static_cast<unsigned>((vecs + 2047) / 2048);
    const double t_flat = cold([&] { flat<true><<<blocks, 256>>>(static_cast<const uint4*>(w), vecs, out); });
    const double t_ldg = cold([&] { flat<false><<<blocks, 256>>>(static_cast<const uint4*>(w), vecs, out); });
    const double t_b1 = cold([&] { launch_rows_bulk<16, 512, 3>(wp, s.n, s.k, out); });
    const double t_b2 = cold([&] { launch_rows_bulk<16, 1024, 2>(wp, s.n, s.k, out); });
    const double t_b3 = cold([&] { launch_rows_bulk<32, 512, 2>(wp, s.n, s.k, out); });
    const double t_b4 = cold([&] { launch_rows_bulk<16, 256, 6>(wp, s.n, s.k, out); });
    const double t_copy = cold([&] { cudaMemcpyAsync(c1, w, bytes / 2, cudaMemcpyDeviceToDevice); });
    CK(cudaGetLastError());
    std::printf("| %d x %d | %.1f |", s.n, s.k, bytes / 1e6);
    for (double t : {t_rows, t_rows16, t_deep, t_deep16, t_split, t_contig, t_flat, t_ldg, t_b1, t_b2, t_b3, t_b4, t_copy})
      std::printf(" %.1f (%.1f) |", pct(t), t);
    std::printf("\n");
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
