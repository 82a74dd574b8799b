// kb's CUDA solutions for op_type "gemm" (C = A @ B.T, float16/bfloat16):
//   kb_cuda_gemm      chooses by shape: M <= kCudaGemmGemvMaxM -> the gemv
//                     kernel (gemv.cu) or cuBLASLt, whichever ran faster on
//                     the shape's first call (gemv_or_cublaslt.hpp); else
//                     cuBLASLt (cublaslt_gemm.cpp),
//                     or for K > kLongK with KB_GEMM_LONG_K=wgmma (or
//                     wgmma-c2: clusters of 2) kb's wgmma kernel
//                     (wgmma_gemm.cu, Hopper)
//   kb_cublaslt_gemm  always cuBLASLt
//   kb_cuda_gemv      always the gemv kernel; refuses M > 16 at run time
#pragma once

#include <cstdint>

#include "harness/implementation.hpp"

namespace kb::kernels {

// Largest M that kb_cuda_gemm sends to the gemv kernel (at most
// gemm_cuda::kGemvMaxM = 16). Tune from measurements of kb_cuda_gemv against
// kb_cublaslt_gemm.
inline constexpr std::int64_t kCudaGemmGemvMaxM = 16;

// kb_cuda_gemm runs long-K products (K > 20480) on kb's wgmma kernel
// (wgmma_gemm.hpp) only when KB_GEMM_LONG_K=wgmma (read on every long-K
// call); by default it keeps cuBLASLt's K chunks (long_k.hpp). H200, session
// 18 (benchmarks/h200-2026-11-28-s18/): in tools/gpu/long_k_variants.cu
// (N(0, 1) data, variants interleaved) the kernel was 1-5% faster than the
// chunks from M = 2048, but in kb bench, side by side in one run, it was
// 2-3% slower on 5376 x 21504 at M = 1024-2048 and 10-17% slower at M = 8192
// and on 8192 x 28672: there cuBLASLt ran at up to 750 TFLOP/s and the
// kernel at 590-675. Session 19 (benchmarks/h200-2026-11-28-s19/) found the
// cause with Nsight Compute: stream-K over all the work left every group at
// its own K offset, so the L2 shared nothing (DRAM 81% busy at M = 2048); the
// kernel now runs whole waves in step first (DRAM 29%, compute-bound) and is
// 0.4-1.6% slower than one cuBLASLt product (promotion included) from M =
// 2048 in long_k_variants. In kb bench, two runs in one call with the final
// kernel, it was still mixed against the chunks: ahead on 8192 x 28672 at
// M = 512 (2.7-4.6%) and 5376 x 21504 at M = 2048 (1.2-1.7%), behind
// elsewhere (1-5%, once 16%; 20-30% at M = 128) and less steady. Default
// unchanged.

void add_gemm_cuda(Registry& r);

}  // namespace kb::kernels
