// Tensor values generated on the device (see device_materialize.hpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "backendbench/device_materialize.hpp"

namespace kb::backendbench {

namespace {

constexpr unsigned long long kGamma = 0x9E3779B97F4A7C15ull;

// Draw k (1-based) of the stream that starts at `state` (ops.hpp: Rng::next).
__device__ __forceinline__ unsigned long long draw(unsigned long long state, unsigned long long k) {
  unsigned long long z = state + k * kGamma;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// DT: the Dtype's order in trace.hpp (bf16 0, f64 1, f32 2, f16 3, b8 11).
template <int DT>
__global__ void fill_kernel(void* dst, long long n, unsigned long long state) {
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const unsigned long long z = draw(state, static_cast<unsigned long long>(i) + 1);
    const double u = static_cast<double>(z >> 11) * 0x1.0p-53;  // Rng::uniform
    if constexpr (DT == 0) {
      static_cast<__nv_bfloat16*>(dst)[i] = __float2bfloat16_rn(__double2float_rn(u));
    } else if constexpr (DT == 1) {
      static_cast<double*>(dst)[i] = u;
    } else if constexpr (DT == 2) {
      static_cast<float*>(dst)[i] = __double2float_rn(u);
    } else if constexpr (DT == 3) {
      static_cast<__half*>(dst)[i] = __float2half_rn(__double2float_rn(u));
    } else {
      static_cast<unsigned char*>(dst)[i] = static_cast<unsigned char>(z >> 63);
    }
  }
}

}  // namespace

Status device_fill(void* dst, Dtype dtype, std::int64_t elements, std::uint64_t state, void* stream_ptr) {
  if (elements <= 0) return ok_status();
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  int dev = 0, sms = 132;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const unsigned blocks = static_cast<unsigned>(std::min<long long>((elements + 255) / 256, static_cast<long long>(sms) * 16));
  switch (dtype) {
    case Dtype::bf16: fill_kernel<0><<<blocks, 256, 0, stream>>>(dst, elements, state); break;
    case Dtype::f64: fill_kernel<1><<<blocks, 256, 0, stream>>>(dst, elements, state); break;
    case Dtype::f32: fill_kernel<2><<<blocks, 256, 0, stream>>>(dst, elements, state); break;
    case Dtype::f16: fill_kernel<3><<<blocks, 256, 0, stream>>>(dst, elements, state); break;
    case Dtype::b8: fill_kernel<11><<<blocks, 256, 0, stream>>>(dst, elements, state); break;
    default:
      return make_error(Code::unsupported, std::string("device_fill: dtype ") + dtype_abbrev(dtype) +
                                               " is generated on the host");
  }
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return make_error(Code::cuda_error, std::string("device_fill: ") + cudaGetErrorString(e));
  return ok_status();
}

}  // namespace kb::backendbench
