// Hopper (sm_90a) PTX wrappers shared by kb's wgmma / TMA kernels: cp.async,
// mbarriers, tensor and bulk copies (TMA), named barriers, wgmma fences and
// waits, shared-memory matrix descriptors (128-byte swizzle), setmaxnreg, and
// the run-time lookup of cuTensorMapEncodeTiled. Users: the attention prefill
// (prefill_wgmma.cuh), the long-K gemm (kernels/gemm/cuda/wgmma_gemm.cu), the
// gemv's bulk kernel (kernels/gemm/cuda/gemv.cu) and the MoE fp8 GEMM
// (kernels/moe/cuda/moe.cu).
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (the encoder is fetched at run time: no -lcuda)
#include <cuda_runtime.h>

#include <cstdint>

namespace kb::kernels::hopper {

// ---- PTX wrappers (sm_90a) ----------------------------------------------------------

__device__ __forceinline__ std::uint32_t saddr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared (shared address); `valid` false: 16 zero bytes, nothing read.
__device__ __forceinline__ void cp_async16(std::uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}

// Closes this thread's cp.async issued since the last commit into one group.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed cp.async groups are pending.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Arrive on the mbarrier once every cp.async this thread issued so far has
// landed; .noinc: the arrival counts against the barrier's expected count.
__device__ __forceinline__ void cp_async_mbar_arrive_noinc(std::uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// The same for global memory: generic-proxy writes (seen through an acquire) before TMA reads of them.
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;\n" ::: "memory"); }

__device__ __forceinline__ unsigned ld_volatile(const unsigned* p) {
  unsigned v;
  asm volatile("ld.volatile.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Arrive on named barrier `id` without waiting (the other side waits with bar.sync).
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Non-.aligned barrier (threads of a warp may arrive from different places).
__device__ __forceinline__ void named_bar_sync_unaligned(int id, int threads) {
  asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Arrive (release, CTA scope) and add `bytes` to the transaction count of the current phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(bar), "r"(bytes)
               : "memory");
}

// Tensor copy (TMA) of one 3-D box global -> shared, completing `bytes` on the mbarrier.
__device__ __forceinline__ void tma_load_3d(std::uint32_t dst, const CUtensorMap* map, int c0, int c1, int c2,
                                            std::uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

// Tensor copy (TMA) of one 2-D box global -> shared (c0 innermost), completing `bytes` on the mbarrier.
__device__ __forceinline__ void tma_load_2d(std::uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                            std::uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// The same box multicast to the CTAs of the cluster in `mask` (bit r: rank r): it lands at `dst` in each
// of their shared memories and completes its bytes on the mbarrier at `bar` in each.
__device__ __forceinline__ void tma_load_2d_multicast(std::uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                                      std::uint32_t bar, std::uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
      "[%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
      : "memory");
}

// This CTA's rank in its cluster.
__device__ __forceinline__ std::uint32_t cluster_ctarank() {
  std::uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// Every thread of every CTA of the cluster arrives and waits (release / acquire, cluster scope).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// Arrive on the mbarrier at shared address `bar` in the CTA of rank `rank`.
// Release at CTA scope only: enough to hand a stage back whose reads were by
// wgmma (finished by its wait) to a producer whose TMA overwrites it. With
// .release.cluster ptxas puts MEMBAR.ALL.GPU before every arrive; that made
// the long-K gemm's multicast clusters 2x slower.
__device__ __forceinline__ void mbar_arrive_cluster(std::uint32_t bar, std::uint32_t rank) {
  asm volatile(
      "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar),
      "r"(rank)
      : "memory");
}

// Shared -> global tensor copy (a TMA store) into a bulk group of this thread.
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, std::uint32_t src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                   reinterpret_cast<std::uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
// Bulk copy (the TMA's 1-D form) of `bytes` (a multiple of 16; both addresses
// 16-byte aligned) global -> shared, completing as transactions on mbarrier
// `bar`, with an L2 cache policy (createpolicy).
__device__ __forceinline__ void bulk_load_1d(std::uint32_t dst, const void* src, std::uint32_t bytes, std::uint32_t bar,
                                             std::uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar), "l"(policy)
      : "memory");
}

__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// This thread's bulk groups have read their shared memory (it may be written again).
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
// This thread's bulk groups are complete (their global writes done).
__device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

__device__ __forceinline__ void tma_prefetch_desc(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<std::uint64_t>(map)) : "memory");
}

__device__ __forceinline__ void mbar_init(std::uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

// Arrive (release, CTA scope).
__device__ __forceinline__ void mbar_arrive(std::uint32_t bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar) : "memory");
}

// Wait (acquire, CTA scope) until the phase with parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(std::uint32_t bar, std::uint32_t parity) {
  std::uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Orders later (ordinary) uses of the registers after the preceding asm
// (wgmma.wait_group): the compiler sees them rewritten here.
template <int N>
__device__ __forceinline__ void reg_fence(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N, int M>
__device__ __forceinline__ void reg_fence(float (&r)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i) reg_fence(r[i]);
}
template <int N, int M>
__device__ __forceinline__ void reg_fence(std::uint32_t (&r)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int k = 0; k < M; ++k) asm volatile("" : "+r"(r[i][k])::"memory");
}

template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}

// Shared memory matrix descriptor, 128-byte swizzle.
__device__ __forceinline__ std::uint64_t make_desc(std::uint32_t smem, std::uint32_t lbo, std::uint32_t sbo) {
  return static_cast<std::uint64_t>((smem & 0x3FFFFu) >> 4) | (static_cast<std::uint64_t>((lbo & 0x3FFFFu) >> 4) << 16) |
         (static_cast<std::uint64_t>((sbo & 0x3FFFFu) >> 4) << 32) | (std::uint64_t{1} << 62);
}
// The same descriptor `bytes` further on (bytes % 16 == 0; the start field cannot overflow
// since shared addresses stay under 256 KB).
__device__ __forceinline__ std::uint64_t desc_add(std::uint64_t d, std::uint32_t bytes) { return d + (bytes >> 4); }

// The accumulator of a wgmma with N = 64 (32 fp32 registers a thread) or N = 128 (64): its
// register list in the instruction ("{%0, ..., %31}"; the operands after it are numbered from 32 or
// 64) and its read-write operands, d[0 ..] in order.
#define KB_WGMMA_D32_LIST \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define KB_WGMMA_D64_LIST \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define KB_WGMMA_D32_OPERANDS_AT(d, o) \
  "+f"((d)[(o) + 0]), "+f"((d)[(o) + 1]), "+f"((d)[(o) + 2]), "+f"((d)[(o) + 3]), \
  "+f"((d)[(o) + 4]), "+f"((d)[(o) + 5]), "+f"((d)[(o) + 6]), "+f"((d)[(o) + 7]), \
  "+f"((d)[(o) + 8]), "+f"((d)[(o) + 9]), "+f"((d)[(o) + 10]), "+f"((d)[(o) + 11]), \
  "+f"((d)[(o) + 12]), "+f"((d)[(o) + 13]), "+f"((d)[(o) + 14]), "+f"((d)[(o) + 15]), \
  "+f"((d)[(o) + 16]), "+f"((d)[(o) + 17]), "+f"((d)[(o) + 18]), "+f"((d)[(o) + 19]), \
  "+f"((d)[(o) + 20]), "+f"((d)[(o) + 21]), "+f"((d)[(o) + 22]), "+f"((d)[(o) + 23]), \
  "+f"((d)[(o) + 24]), "+f"((d)[(o) + 25]), "+f"((d)[(o) + 26]), "+f"((d)[(o) + 27]), \
  "+f"((d)[(o) + 28]), "+f"((d)[(o) + 29]), "+f"((d)[(o) + 30]), "+f"((d)[(o) + 31])
#define KB_WGMMA_D32_OPERANDS(d) KB_WGMMA_D32_OPERANDS_AT(d, 0)
#define KB_WGMMA_D64_OPERANDS(d) KB_WGMMA_D32_OPERANDS_AT(d, 0), KB_WGMMA_D32_OPERANDS_AT(d, 32)

// D[64 x 64] (+)= A[64 x 16] * B[16 x 64]: A and B from shared memory (K-major descriptors);
// `accumulate` 0: D = A * B.
__device__ __forceinline__ void wgmma_ss_n64(float (&d)[32], std::uint64_t desc_a, std::uint64_t desc_b,
                                             int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " KB_WGMMA_D32_LIST ", %32, %33, p, 1, 1, 0, 0;\n}\n"
               : KB_WGMMA_D32_OPERANDS(d)
               : "l"(desc_a), "l"(desc_b), "r"(accumulate)
               : "memory");
}

// D[64 x 128] (+)= A[64 x 16] * B[16 x 128]: A and B from shared memory (K-major descriptors);
// `accumulate` 0: D = A * B.
__device__ __forceinline__ void wgmma_ss_n128(float (&d)[64], std::uint64_t desc_a, std::uint64_t desc_b,
                                             int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " KB_WGMMA_D64_LIST ", %64, %65, p, 1, 1, 0, 0;\n}\n"
               : KB_WGMMA_D64_OPERANDS(d)
               : "l"(desc_a), "l"(desc_b), "r"(accumulate)
               : "memory");
}

// D[64 x 128] (+)= A[64 x 32] * B[32 x 128], e4m3 x e4m3: A and B from shared memory (K-major
// descriptors; fp8 operands have no transposed form); `accumulate` 0: D = A * B.
__device__ __forceinline__ void wgmma_ss_n128_e4m3(float (&d)[64], std::uint64_t desc_a, std::uint64_t desc_b,
                                                  int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " KB_WGMMA_D64_LIST ", %64, %65, p, 1, 1;\n}\n"
               : KB_WGMMA_D64_OPERANDS(d)
               : "l"(desc_a), "l"(desc_b), "r"(accumulate)
               : "memory");
}

// D[64 x 128] (+)= A[64 x 16] * B[16 x 128]: A from registers (four bf16x2 per thread), B from
// shared memory N-major (imm-trans-b 1); `accumulate` 0: D = A * B.
__device__ __forceinline__ void wgmma_rs_n128_tb(float (&d)[64], const std::uint32_t (&a)[4], std::uint64_t desc_b,
                                                int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " KB_WGMMA_D64_LIST
               ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
               : KB_WGMMA_D64_OPERANDS(d)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate)
               : "memory");
}

// D[64 x 64] (+)= A[64 x 16] * B[16 x 64]: A from registers (four bf16x2 per thread), B from
// shared memory N-major (imm-trans-b 1); `accumulate` 0: D = A * B.
__device__ __forceinline__ void wgmma_rs_n64_tb(float (&d)[32], const std::uint32_t (&a)[4], std::uint64_t desc_b,
                                               int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " KB_WGMMA_D32_LIST
               ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
               : KB_WGMMA_D32_OPERANDS(d)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate)
               : "memory");
}
#undef KB_WGMMA_D32_LIST
#undef KB_WGMMA_D64_LIST
#undef KB_WGMMA_D32_OPERANDS_AT
#undef KB_WGMMA_D32_OPERANDS
#undef KB_WGMMA_D64_OPERANDS

// cuTensorMapEncodeTiled through the runtime's driver entry point (no link
// against libcuda); null when the driver does not provide it.
using TensorMapEncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                          const cuuint64_t*, const cuuint32_t*, const cuuint32_t*,
                                          CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                          CUtensorMapFloatOOBfill);
inline TensorMapEncodeTiled tensor_map_encoder() {
  static const TensorMapEncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
#if CUDART_VERSION >= 12050
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q);
#else
    const cudaError_t e = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &f, cudaEnableDefault, &q);
#endif
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      f = nullptr;
    }
    return reinterpret_cast<TensorMapEncodeTiled>(f);
  }();
  return fn;
}

}  // namespace kb::kernels::hopper
