// Loads and stores of kb's 16-bit float dtypes in CUDA kernels, converting
// through fp32 with round-to-nearest-even (the hardware conversions), by
// template type or by a dtype known only at run time.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "schema/dtype.hpp"

namespace kb::kernels {

template <class T>
__device__ __forceinline__ float to_f32(T v);
template <>
__device__ __forceinline__ float to_f32<__half>(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
__device__ __forceinline__ float to_f32<float>(float v) { return v; }

template <class T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ float from_f32<float>(float v) { return v; }

// Element i of a buffer whose dtype `dt` (a DType's value) is float16, bfloat16, float8_e4m3fn or
// (any other value) float32, as fp32.
__device__ __forceinline__ float load_f32(const void* p, int dt, long long i) {
  switch (static_cast<DType>(dt)) {
    case DType::float16: return __half2float(static_cast<const __half*>(p)[i]);
    case DType::bfloat16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case DType::float8_e4m3fn: {
      __nv_fp8_e4m3 v;
      v.__x = static_cast<const __nv_fp8_storage_t*>(p)[i];
      return static_cast<float>(v);
    }
    default: return static_cast<const float*>(p)[i];
  }
}

// Stores v rounded to `dt` (float16, bfloat16, or any other value: float32) at element i.
__device__ __forceinline__ void store_f32(void* p, int dt, long long i, float v) {
  switch (static_cast<DType>(dt)) {
    case DType::float16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    case DType::bfloat16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<float*>(p)[i] = v;
  }
}

// Element i of an int64 (dt == DType::int64) or int32 index buffer.
__device__ __forceinline__ long long load_index(const void* p, int dt, long long i) {
  return static_cast<DType>(dt) == DType::int64 ? static_cast<const long long*>(p)[i]
                                                 : static_cast<long long>(static_cast<const int*>(p)[i]);
}

}  // namespace kb::kernels
