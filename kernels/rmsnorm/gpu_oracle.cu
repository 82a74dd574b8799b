// GPU oracle for rmsnorm and fused add + rmsnorm: one block per row, the
// mean of squares accumulated in double, fp32 elementwise math as the
// reference does, rounded once.
#include <string>

#include "../common/cuda_types.cuh"
#include "oracle/gpu_oracle.hpp"

namespace kb::kernels {
namespace {

template <class T>
__global__ void rmsnorm_rows(const T* __restrict__ x, const T* __restrict__ residual, const T* __restrict__ w,
                             T* __restrict__ out, long long hidden, float eps) {
  __shared__ double partial[256];
  long long row = blockIdx.x;
  const T* xr = x + row * hidden;
  const T* rr = residual ? residual + row * hidden : nullptr;
  double sum = 0;
  for (long long j = threadIdx.x; j < hidden; j += blockDim.x) {
    float v = to_f32(xr[j]) + (rr ? to_f32(rr[j]) : 0.f);
    sum += static_cast<double>(v) * v;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  float mean = static_cast<float>(partial[0] / static_cast<double>(hidden));
  float inv_rms = rsqrtf(mean + eps);
  for (long long j = threadIdx.x; j < hidden; j += blockDim.x) {
    float v = to_f32(xr[j]) + (rr ? to_f32(rr[j]) : 0.f);
    out[row * hidden + j] = from_f32<T>((v * inv_rms) * to_f32(w[j]));
  }
}

template <class T>
Status launch(const GpuOracleCall& c, const cuda::DeviceTensor& x, const cuda::DeviceTensor* residual,
              const cuda::DeviceTensor& w, float eps) {
  long long rows = x.dim(0), hidden = x.dim(1);
  if (rows == 0) return ok_status();
  rmsnorm_rows<T><<<static_cast<unsigned>(rows), 256, 0, static_cast<cudaStream_t>(c.stream)>>>(
      x.as<T>(), residual ? residual->as<T>() : nullptr, w.as<T>(), c.outputs[0].as<T>(), hidden, eps);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return make_error(Code::cuda_error, std::string("rmsnorm GPU oracle: ") + cudaGetErrorString(e) + "");
  return ok_status();
}

}  // namespace

Status rmsnorm_gpu_oracle(const GpuOracleCall& c) {
  auto eps = reference_constant(c.definition, "EPS");
  if (!eps) return make_error(Code::unsupported, "rmsnorm GPU oracle: the reference sets no EPS");
  auto xi = input_index(c.definition, "hidden_states"), wi = input_index(c.definition, "weight");
  auto ri = input_index(c.definition, "residual");
  if (!xi || !wi) return make_error(Code::invalid_argument, "rmsnorm GPU oracle: needs hidden_states and weight");
  const auto& x = *c.inputs[*xi].tensor;
  const auto* r = ri ? c.inputs[*ri].tensor : nullptr;
  const auto& w = *c.inputs[*wi].tensor;
  switch (x.dtype) {
    case DType::bfloat16: return launch<__nv_bfloat16>(c, x, r, w, static_cast<float>(*eps));
    case DType::float16: return launch<__half>(c, x, r, w, static_cast<float>(*eps));
    case DType::float32: return launch<float>(c, x, r, w, static_cast<float>(*eps));
    default: return make_error(Code::unsupported, "rmsnorm GPU oracle: fp16, bf16 and fp32 only");
  }
}

}  // namespace kb::kernels
