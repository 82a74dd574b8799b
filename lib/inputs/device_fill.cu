// Random inputs generated on the device (see device_fill.hpp): the kernels
// call random::unit<T>, the function the host generator calls.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "inputs/device_fill.hpp"

namespace kb {

namespace {

template <DType T>
__global__ void fill_kernel(random::unit_t<T>* dst, long long units, unsigned long long key) {
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long j = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; j < units; j += step)
    dst[j] = random::unit<T>(key, static_cast<unsigned long long>(j));
}

template <DType T>
__global__ void fill_fresh_kernel(random::unit_t<T>* dst, long long units, unsigned long long key,
                                  unsigned long long salt, const unsigned long long* serial) {
  const unsigned long long k = fresh_key(key, salt, *serial);
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long j = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; j < units; j += step)
    dst[j] = random::unit<T>(k, static_cast<unsigned long long>(j));
}

// The bits of a storage unit (float32 compared as bits: -0 against +0 and NaN
// count as changes).
template <class U>
__device__ __forceinline__ bool same_bits(U a, U b) {
  if constexpr (sizeof(U) == 4 && !std::is_integral_v<U>) return __float_as_uint(a) == __float_as_uint(b);
  else return a == b;
}

template <DType T>
__global__ void count_kernel(const random::unit_t<T>* src, long long units, unsigned long long key,
                             unsigned long long* changed) {
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  unsigned long long mine = 0;
  for (long long j = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; j < units; j += step)
    mine += same_bits(src[j], random::unit<T>(key, static_cast<unsigned long long>(j))) ? 0 : 1;
  for (int off = 16; off > 0; off /= 2) mine += __shfl_down_sync(0xFFFFFFFFu, mine, off);
  if ((threadIdx.x & 31) == 0 && mine) atomicAdd(changed, mine);
}

Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return ok_status();
  return make_error(Code::cuda_error, std::string(what) + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")");
}

unsigned grid_for(long long units) {
  int dev = 0, sms = 132;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  return static_cast<unsigned>(std::max<long long>(1, std::min<long long>((units + 255) / 256, static_cast<long long>(sms) * 8)));
}

// Calls f.template operator()<T>() for the recipe's dtype.
template <class F>
void for_dtype(DType t, F&& f) {
  switch (t) {
    case DType::float32: f.template operator()<DType::float32>(); break;
    case DType::float16: f.template operator()<DType::float16>(); break;
    case DType::bfloat16: f.template operator()<DType::bfloat16>(); break;
    case DType::float8_e4m3fn: f.template operator()<DType::float8_e4m3fn>(); break;
    case DType::float8_e5m2: f.template operator()<DType::float8_e5m2>(); break;
    case DType::float4_e2m1: f.template operator()<DType::float4_e2m1>(); break;
    case DType::int64: f.template operator()<DType::int64>(); break;
    case DType::int32: f.template operator()<DType::int32>(); break;
    case DType::int16: f.template operator()<DType::int16>(); break;
    case DType::int8: f.template operator()<DType::int8>(); break;
    case DType::bool_: f.template operator()<DType::bool_>(); break;
  }
}

}  // namespace

Status device_fill(void* dst, const RandomRecipe& r, void* stream_ptr) {
  const long long units = random::units(r.dtype, r.numel);
  if (units <= 0) return ok_status();
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  const unsigned blocks = grid_for(units);
  for_dtype(r.dtype, [&]<DType T>() {
    fill_kernel<T><<<blocks, 256, 0, stream>>>(static_cast<random::unit_t<T>*>(dst), units, r.key);
  });
  return cuda_status(cudaGetLastError(), "device_fill");
}

Status device_fill_fresh(void* dst, const RandomRecipe& r, std::uint64_t salt, const unsigned long long* serial,
                         void* stream_ptr) {
  const long long units = random::units(r.dtype, r.numel);
  if (units <= 0) return ok_status();
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  const unsigned blocks = grid_for(units);
  for_dtype(r.dtype, [&]<DType T>() {
    fill_fresh_kernel<T><<<blocks, 256, 0, stream>>>(static_cast<random::unit_t<T>*>(dst), units, r.key, salt, serial);
  });
  return cuda_status(cudaGetLastError(), "device_fill_fresh");
}

Result<std::int64_t> device_count_changed(const void* src, const RandomRecipe& r, void* stream_ptr) {
  const long long units = random::units(r.dtype, r.numel);
  if (units <= 0) return std::int64_t{0};
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  unsigned long long* changed = nullptr;
  KB_TRY(cuda_status(cudaMallocAsync(reinterpret_cast<void**>(&changed), sizeof *changed, stream),
                     "device_count_changed: cudaMallocAsync"));
  unsigned long long host = 0;
  auto count = [&]() -> Status {
    KB_TRY(cuda_status(cudaMemsetAsync(changed, 0, sizeof *changed, stream), "device_count_changed: cudaMemsetAsync"));
    const unsigned blocks = grid_for(units);
    for_dtype(r.dtype, [&]<DType T>() {
      count_kernel<T><<<blocks, 256, 0, stream>>>(static_cast<const random::unit_t<T>*>(src), units, r.key, changed);
    });
    KB_TRY(cuda_status(cudaGetLastError(), "device_count_changed"));
    return cuda_status(cudaMemcpyAsync(&host, changed, sizeof host, cudaMemcpyDeviceToHost, stream),
                       "device_count_changed: cudaMemcpyAsync");
  };
  const Status counted = count();
  const Status freed = cuda_status(cudaFreeAsync(changed, stream), "device_count_changed: cudaFreeAsync");
  const Status synced = cuda_status(cudaStreamSynchronize(stream), "device_count_changed: synchronize");
  for (const Status* st : {&counted, &freed, &synced})
    if (!st->ok()) return st->error();
  return static_cast<std::int64_t>(host);
}

}  // namespace kb
