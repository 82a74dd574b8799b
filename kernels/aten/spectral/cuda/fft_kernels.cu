// kb's element kernels around cuFFT for _fft_c2c (see fft_kernels.hpp).
#include "../../common/cuda_typed.cuh"
#include "fft_kernels.hpp"

namespace kb::backendbench::aten::cuda {
namespace {

using namespace typed;

// Part k (0 real, 1 imaginary) of complex element `at` of a c32/c64/c128 buffer.
__device__ __forceinline__ double part(const void* p, Dtype dt, long long at, int k) {
  switch (dt) {
    case Dtype::c32: return __half2float(static_cast<const __half*>(p)[2 * at + k]);
    case Dtype::c64: return static_cast<const float*>(p)[2 * at + k];
    default: return static_cast<const double*>(p)[2 * at + k];
  }
}

__device__ __forceinline__ void set_part(void* p, Dtype dt, long long at, int k, double v) {
  switch (dt) {
    case Dtype::c32: static_cast<__half*>(p)[2 * at + k] = __double2half(v); break;
    case Dtype::c64: static_cast<float*>(p)[2 * at + k] = static_cast<float>(v); break;
    default: static_cast<double*>(p)[2 * at + k] = v; break;
  }
}

template <class W>
__global__ void load_kernel(W* work, const void* x, Dtype dt, Strided xs, long long n) {
  KB_GRID_LOOP(i, n) {
    const long long o = offset_of(xs, i);
    work[2 * i] = static_cast<W>(part(x, dt, o, 0));
    work[2 * i + 1] = static_cast<W>(part(x, dt, o, 1));
  }
}

template <class W>
__global__ void store_kernel(void* out, Dtype dt, const W* work, double scale, long long n) {
  KB_GRID_LOOP(i, n) {
    set_part(out, dt, i, 0, static_cast<double>(work[2 * i]) * scale);
    set_part(out, dt, i, 1, static_cast<double>(work[2 * i + 1]) * scale);
  }
}

}  // namespace

Status fft_load(void* work, bool wide, const DView& x, void* stream) {
  const long long n = x.numel();
  if (n == 0) return ok_status();
  const Strided xs = strided(x);
  if (wide) load_kernel<double><<<grid_for(n), kThreads, 0, stream_of(stream)>>>(static_cast<double*>(work), x.base, x.dtype, xs, n);
  else load_kernel<float><<<grid_for(n), kThreads, 0, stream_of(stream)>>>(static_cast<float*>(work), x.base, x.dtype, xs, n);
  return launched("_fft_c2c load");
}

Status fft_store(const DView& out, const void* work, bool wide, double scale, void* stream) {
  const long long n = out.numel();
  if (n == 0) return ok_status();
  if (wide)
    store_kernel<double><<<grid_for(n), kThreads, 0, stream_of(stream)>>>(out.base, out.dtype, static_cast<const double*>(work), scale, n);
  else
    store_kernel<float><<<grid_for(n), kThreads, 0, stream_of(stream)>>>(out.base, out.dtype, static_cast<const float*>(work), scale, n);
  return launched("_fft_c2c store");
}

}  // namespace kb::backendbench::aten::cuda
