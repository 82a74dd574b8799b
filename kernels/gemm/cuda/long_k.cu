// fp32 -> float16 / bfloat16 rounding (of a sum of K chunks) for the long-K gemm path (long_k.hpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "long_k.hpp"

namespace kb::kernels::gemm_cuda {
namespace {

// dst = the sum of `parts` fp32 arrays of n elements, `stride` apart, added in
// part order, rounded once. Four elements per thread when n allows it
// (16-byte loads, 8-byte stores).
template <class T>
__global__ void cast_kernel(const float* __restrict__ src, int parts, std::int64_t part_stride, T* __restrict__ dst,
                            std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t n4 = n / 4;
  for (std::int64_t v = i; v < n4; v += stride) {
    float4 x = reinterpret_cast<const float4*>(src)[v];
    for (int part = 1; part < parts; ++part) {
      const float4 y = reinterpret_cast<const float4*>(src + part * part_stride)[v];
      x.x += y.x, x.y += y.y, x.z += y.z, x.w += y.w;
    }
    T* d = dst + 4 * v;
    if constexpr (std::is_same_v<T, __half>) {
      reinterpret_cast<__half2*>(d)[0] = __floats2half2_rn(x.x, x.y);
      reinterpret_cast<__half2*>(d)[1] = __floats2half2_rn(x.z, x.w);
    } else {
      reinterpret_cast<__nv_bfloat162*>(d)[0] = __floats2bfloat162_rn(x.x, x.y);
      reinterpret_cast<__nv_bfloat162*>(d)[1] = __floats2bfloat162_rn(x.z, x.w);
    }
  }
  for (std::int64_t k = 4 * n4 + i; k < n; k += stride) {
    float x = src[k];
    for (int part = 1; part < parts; ++part) x += src[part * part_stride + k];
    if constexpr (std::is_same_v<T, __half>) dst[k] = __float2half_rn(x);
    else dst[k] = __float2bfloat16_rn(x);
  }
}

}  // namespace

int cast_f32(const float* src, int parts, std::int64_t part_stride, void* dst, std::int64_t n, bool bf16,
             void* stream) {
  if (n <= 0) return static_cast<int>(cudaSuccess);
  if (parts < 1 || (parts > 1 && (part_stride < n || part_stride % 4 != 0)))
    return static_cast<int>(cudaErrorInvalidValue);  // parts read as float4
  const std::int64_t want = (n / 4 + 255) / 256;
  const unsigned blocks = static_cast<unsigned>(want < 1 ? 1 : (want > 4096 ? 4096 : want));
  auto s = static_cast<cudaStream_t>(stream);
  if (bf16) cast_kernel<__nv_bfloat16><<<blocks, 256, 0, s>>>(src, parts, part_stride, static_cast<__nv_bfloat16*>(dst), n);
  else cast_kernel<__half><<<blocks, 256, 0, s>>>(src, parts, part_stride, static_cast<__half*>(dst), n);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kb::kernels::gemm_cuda
