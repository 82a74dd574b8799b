// One GEMM call of the gemm definitions, as kb's CUDA gemm solutions see it:
// row-major C[M, N] = A[M, K] @ B[N, K]^T with A, B and C of one dtype
// (float16 or bfloat16), fp32 accumulation, on the current device and
// `stream`. Plain data (no CUDA types): included by .cpp and .cu files alike.
#pragma once

#include <cstddef>
#include <cstdint>

#include "schema/dtype.hpp"

namespace kb::kernels::gemm_cuda {

struct GemmProblem {
  DType dtype = DType::float16;  // of A, B and C
  std::int64_t M = 0, N = 0, K = 0;
  const void* A = nullptr;  // [M, K]
  const void* B = nullptr;  // [N, K]
  void* C = nullptr;        // [M, N]
  void* stream = nullptr;   // cudaStream_t
};

// Scratch memory owned by one (device, stream) pair, allocated the first time
// a gemm runs on that stream (cublaslt_gemm.cpp, stream_scratch()) and kept
// for the life of the process.
struct StreamScratch {
  int device = 0;
  void* lt_workspace = nullptr;  // cuBLASLt workspace, 256-byte aligned
  std::size_t lt_bytes = 0;
  // gemv split-K partial sums and per-row-block arrival counters; the
  // counters start at zero and every gemv launch leaves them at zero.
  void* gemv_scratch = nullptr;
  std::size_t gemv_bytes = 0;
};

}  // namespace kb::kernels::gemm_cuda
