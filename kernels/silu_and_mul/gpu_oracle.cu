// GPU oracle for silu_and_mul: one thread per output element, fp32 math.
#include <string>

#include "../common/cuda_types.cuh"
#include "oracle/gpu_oracle.hpp"

namespace kb::kernels {
namespace {

template <class T>
__global__ void silu_mul(const T* __restrict__ x, T* __restrict__ out, long long rows, long long d) {
  long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * d) return;
  long long r = i / d, j = i % d;
  float g = to_f32(x[r * 2 * d + j]), u = to_f32(x[r * 2 * d + d + j]);
  out[i] = from_f32<T>(g / (1.f + expf(-g)) * u);
}

template <class T>
Status launch(const GpuOracleCall& c) {
  const auto& x = *c.inputs[0].tensor;
  const auto& out = c.outputs[0];
  long long rows = out.dim(0), d = out.dim(1), n = rows * d;
  if (n == 0) return ok_status();
  silu_mul<T><<<static_cast<unsigned>((n + 255) / 256), 256, 0, static_cast<cudaStream_t>(c.stream)>>>(
      x.as<T>(), out.as<T>(), rows, d);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return make_error(Code::cuda_error, std::string("silu_and_mul GPU oracle: ") + cudaGetErrorString(e) + "");
  return ok_status();
}

}  // namespace

Status silu_and_mul_gpu_oracle(const GpuOracleCall& c) {
  switch (c.outputs[0].dtype) {
    case DType::bfloat16: return launch<__nv_bfloat16>(c);
    case DType::float16: return launch<__half>(c);
    case DType::float32: return launch<float>(c);
    default: return make_error(Code::unsupported, "silu_and_mul GPU oracle: fp16, bf16 and fp32 only");
  }
}

}  // namespace kb::kernels
