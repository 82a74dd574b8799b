// fp16/bf16 <-> fp32 on raw 16-bit patterns, one element or eight (one
// 16-byte vector), shared by kb's handwritten CUDA kernels. Round to nearest
// even on the way down, as torch's .to() does.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace kb::kernels::half_bits {

template <bool BF16>
__device__ __forceinline__ float to_f32(std::uint32_t bits16) {
  if constexpr (BF16) return __uint_as_float(bits16 << 16);
  else return __half2float(__ushort_as_half(static_cast<unsigned short>(bits16)));
}

template <bool BF16>
__device__ __forceinline__ std::uint32_t from_f32(float v) {
  if constexpr (BF16) return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  else return __half_as_ushort(__float2half_rn(v));
}

// Eight elements packed in a 16-byte vector, element 2i in the low half of word i.
template <bool BF16>
__device__ __forceinline__ void unpack8(const uint4& v, float (&f)[8]) {
  const std::uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = to_f32<BF16>(w[i] & 0xffffu);
    f[2 * i + 1] = to_f32<BF16>(w[i] >> 16);
  }
}

template <bool BF16>
__device__ __forceinline__ uint4 pack8(const float (&f)[8]) {
  std::uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = from_f32<BF16>(f[2 * i]) | (from_f32<BF16>(f[2 * i + 1]) << 16);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

}  // namespace kb::kernels::half_bits
