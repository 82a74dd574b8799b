// kb's CUDA solutions for op_type "gemm" (C = A @ B.T, float16/bfloat16):
//   kb_cuda_gemm      chooses by shape: M <= kCudaGemmGemvMaxM -> the gemv
//                     kernel (gemv.cu) or cuBLASLt, whichever ran faster on
//                     the shape's first call (gemv_or_cublaslt.hpp); K >
//                     kLongK -> cuBLASLt's K chunks or kb's wgmma kernel
//                     (wgmma_gemm.cu, Hopper), likewise raced
//                     (long_k_race.hpp); else cuBLASLt (cublaslt_gemm.cpp)
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

void add_gemm_cuda(Registry& r);

}  // namespace kb::kernels
