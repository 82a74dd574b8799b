// GPU oracle for gemm: C = A @ B.T with fp64 multiply-add in plain CUDA cores
// (16x16 shared-memory tiles), rounded once to C's dtype. Slow by design;
// only its correctness matters. fp64, not fp32: over K = 21504 a sequential
// fp32 sum drifts by ~1e-3, the same order as the tensor-core errors it judges.
#include <string>

#include "../common/cuda_types.cuh"
#include "oracle/gpu_oracle.hpp"

namespace kb::kernels {
namespace {

constexpr int kTile = 16;

template <class T>
__global__ void gemm_tn_fp64(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, long long m,
                             long long n, long long k) {
  __shared__ double as[kTile][kTile + 1];
  __shared__ double bs[kTile][kTile + 1];
  long long row = static_cast<long long>(blockIdx.y) * kTile + threadIdx.y;  // of A / C
  long long col = static_cast<long long>(blockIdx.x) * kTile + threadIdx.x;  // of B / C
  double acc = 0.0;
  for (long long k0 = 0; k0 < k; k0 += kTile) {
    long long ka = k0 + threadIdx.x, kb_ = k0 + threadIdx.y;
    as[threadIdx.y][threadIdx.x] = (row < m && ka < k) ? static_cast<double>(to_f32(a[row * k + ka])) : 0.0;
    long long brow = static_cast<long long>(blockIdx.x) * kTile + threadIdx.y;
    bs[threadIdx.y][threadIdx.x] = (brow < n && k0 + threadIdx.x < k) ? static_cast<double>(to_f32(b[brow * k + k0 + threadIdx.x])) : 0.0;
    __syncthreads();
    for (int kk = 0; kk < kTile; ++kk) acc = fma(as[threadIdx.y][kk], bs[threadIdx.x][kk], acc);
    __syncthreads();
    (void)kb_;
  }
  if (row < m && col < n) c[row * n + col] = from_f32<T>(static_cast<float>(acc));
}

template <class T>
Status launch(const GpuOracleCall& call) {
  const auto& A = *call.inputs[0].tensor;
  const auto& B = *call.inputs[1].tensor;
  const auto& C = call.outputs[0];
  long long m = A.dim(0), k = A.dim(1), n = B.dim(0);
  dim3 block(kTile, kTile);
  dim3 grid(static_cast<unsigned>((n + kTile - 1) / kTile), static_cast<unsigned>((m + kTile - 1) / kTile));
  if (grid.y > 65535) return make_error(Code::unsupported, "gemm GPU oracle: M = " + std::to_string(m) + " is too large");
  gemm_tn_fp64<T><<<grid, block, 0, static_cast<cudaStream_t>(call.stream)>>>(A.as<T>(), B.as<T>(), C.as<T>(), m, n, k);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return make_error(Code::cuda_error, std::string("gemm GPU oracle: ") + cudaGetErrorString(e) + "");
  return ok_status();
}

}  // namespace

Status gemm_gpu_oracle(const GpuOracleCall& call) {
  if (call.inputs.size() != 2 || call.outputs.size() != 1 || !call.inputs[0].tensor || !call.inputs[1].tensor)
    return make_error(Code::invalid_argument, "gemm GPU oracle: expects A, B and C");
  switch (call.outputs[0].dtype) {
    case DType::float16: return launch<__half>(call);
    case DType::bfloat16: return launch<__nv_bfloat16>(call);
    case DType::float32: return launch<float>(call);
    default: return make_error(Code::unsupported, "gemm GPU oracle: fp16, bf16 and fp32 only");
  }
}

}  // namespace kb::kernels
