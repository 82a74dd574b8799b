// Typed element access for the ATen family kernels that are templated on
// their floating dtype (pooling, embedding bags, scatters, nll_loss,
// factories): loads into the accumulation type, stores with one rounding
// (double -> f16/bf16 directly, as the oracles round), strided views as
// device descriptors, 64-bit index loads, and the host-side dispatch from a
// run-time Dtype to a template instantiation. Accumulation is fp32 for
// f16/bf16/f32 (PyTorch's opmath) and fp64 for f64 inputs or while the GPU
// reference is planned (cuda::reference_mode()).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "args.hpp"
#include "cuda_engine.hpp"

namespace kb::backendbench::aten::cuda::typed {

template <class A, class T>
__device__ __forceinline__ A ld(const T* p, long long i) {
  if constexpr (std::is_same_v<T, __half>) return static_cast<A>(__half2float(p[i]));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return static_cast<A>(__bfloat162float(p[i]));
  else return static_cast<A>(p[i]);
}

template <class T, class A>
__device__ __forceinline__ void st(T* p, long long i, A v) {
  if constexpr (std::is_same_v<T, __half>) {
    if constexpr (std::is_same_v<A, double>) p[i] = __double2half(v);
    else p[i] = __float2half_rn(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if constexpr (std::is_same_v<A, double>) p[i] = __double2bfloat16(v);
    else p[i] = __float2bfloat16_rn(v);
  } else {
    p[i] = static_cast<T>(v);
  }
}

// Element `at` of a buffer of any real dtype known only at run time, as a double / as an int64
// (exact for integer dtypes), and a store rounding once (integers from `iv` when `integral`).
__device__ __forceinline__ double load_any_f64(const void* p, Dtype dt, long long at) {
  switch (dt) {
    case Dtype::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[at]);
    case Dtype::f64: return static_cast<const double*>(p)[at];
    case Dtype::f32: return static_cast<const float*>(p)[at];
    case Dtype::f16: return __half2float(static_cast<const __half*>(p)[at]);
    case Dtype::i8: return static_cast<const signed char*>(p)[at];
    case Dtype::i16: return static_cast<const short*>(p)[at];
    case Dtype::i32: return static_cast<const int*>(p)[at];
    case Dtype::i64: return static_cast<double>(static_cast<const long long*>(p)[at]);
    case Dtype::u8: return static_cast<const unsigned char*>(p)[at];
    case Dtype::b8: return static_cast<const unsigned char*>(p)[at] != 0;
    default: return 0;
  }
}

__device__ __forceinline__ long long load_any_i64(const void* p, Dtype dt, long long at) {
  switch (dt) {
    case Dtype::i8: return static_cast<const signed char*>(p)[at];
    case Dtype::i16: return static_cast<const short*>(p)[at];
    case Dtype::i32: return static_cast<const int*>(p)[at];
    case Dtype::i64: return static_cast<const long long*>(p)[at];
    case Dtype::u8: return static_cast<const unsigned char*>(p)[at];
    case Dtype::b8: return static_cast<const unsigned char*>(p)[at] != 0;
    default: return static_cast<long long>(load_any_f64(p, dt, at));
  }
}

__device__ __forceinline__ void store_any(void* p, Dtype dt, long long i, double v, long long iv, bool integral) {
  const long long w = integral ? iv : static_cast<long long>(v);
  switch (dt) {
    case Dtype::bf16: static_cast<__nv_bfloat16*>(p)[i] = __double2bfloat16(v); break;
    case Dtype::f64: static_cast<double*>(p)[i] = v; break;
    case Dtype::f32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case Dtype::f16: static_cast<__half*>(p)[i] = __double2half(v); break;
    case Dtype::i8: static_cast<signed char*>(p)[i] = static_cast<signed char>(w); break;
    case Dtype::i16: static_cast<short*>(p)[i] = static_cast<short>(w); break;
    case Dtype::i32: static_cast<int*>(p)[i] = static_cast<int>(w); break;
    case Dtype::i64: static_cast<long long*>(p)[i] = w; break;
    case Dtype::u8: static_cast<unsigned char*>(p)[i] = static_cast<unsigned char>(w); break;
    case Dtype::b8: static_cast<unsigned char*>(p)[i] = integral ? iv != 0 : v != 0; break;
    default: break;
  }
}

// An int64 or int32 index element.
__device__ __forceinline__ long long ldi(const void* p, bool i64, long long i) {
  return i64 ? static_cast<const long long*>(p)[i] : static_cast<long long>(static_cast<const int*>(p)[i]);
}

constexpr int kMaxRank = 8;

// A strided view as a kernel argument: element offsets of logical (row-major) positions.
struct Strided {
  int rank = 0;
  long long shape[kMaxRank] = {};
  long long stride[kMaxRank] = {};
  long long offset = 0;
};

__device__ __forceinline__ long long offset_of(const Strided& s, long long i) {
  long long o = s.offset;
  for (int d = s.rank - 1; d >= 0; --d) {
    const long long q = i / s.shape[d];
    o += (i - q * s.shape[d]) * s.stride[d];
    i = q;
  }
  return o;
}

inline Strided strided(const DView& v) {
  if (v.shape.size() > static_cast<std::size_t>(kMaxRank)) fail("more than 8 dims are not supported on CUDA");
  Strided s;
  s.rank = static_cast<int>(v.shape.size());
  for (int d = 0; d < s.rank; ++d) {
    s.shape[d] = v.shape[static_cast<std::size_t>(d)];
    s.stride[d] = v.strides[static_cast<std::size_t>(d)];
  }
  s.offset = v.offset;
  return s;
}

// x's dims split into those kept and those reduced (`reduced[d]`), each as
// a strided descriptor (the kept one with x's offset) and its element count.
struct KeptReduced {
  Strided kept, red;
  long long count = 0, n = 0;  // kept positions, reduced elements per position
};

inline KeptReduced split_reduced(const DView& x, const std::vector<bool>& reduced) {
  DView kept, red;
  kept.offset = x.offset;
  for (std::size_t d = 0; d < x.shape.size(); ++d) {
    DView& v = reduced[d] ? red : kept;
    v.shape.push_back(x.shape[d]);
    v.strides.push_back(x.strides[d]);
  }
  return KeptReduced{strided(kept), strided(red), kept.numel(), red.numel()};
}

template <class T>
T* ptr(const DView& v) {
  return static_cast<T*>(v.base);
}

inline bool index_is_i64(const DView& v, const char* what) {
  if (v.dtype == Dtype::i64) return true;
  if (v.dtype == Dtype::i32) return false;
  fail(std::string(what) + " must be i64 or i32 on CUDA");
}

inline Status launched(const char* what) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return ok_status();
  return make_error(Code::cuda_error, std::string(what) + ": " + cudaGetErrorString(e));
}

inline cudaStream_t stream_of(void* s) { return static_cast<cudaStream_t>(s); }

inline unsigned blocks_for(long long n, int threads) {
  long long b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > 0x7fffffffLL) b = 0x7fffffffLL;
  return static_cast<unsigned>(b);
}

// The family kernels' launch shape: grid-stride loops (KB_GRID_LOOP) of
// kThreads threads a block over grid_for(n) blocks, at most 8 * 65535.
constexpr int kThreads = 256;

inline unsigned grid_for(long long n) { return std::min<unsigned>(blocks_for(n, kThreads), 65535u * 8u); }

#define KB_GRID_LOOP(i, n)                                                                       \
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<long long>(gridDim.x) * blockDim.x)

// The planes of a [C, H, W] or [N, C, H, W] view (pooling, padding): plane p
// starts at off + (p / inner) * s_outer + (p % inner) * s_inner; `count` planes.
struct Planes {
  long long off = 0, s_outer = 0, s_inner = 0, inner = 1, sh = 0, sw = 0, h = 1, w = 1, count = 1;
};

inline Planes planes_of(const DView& v, const char* what) {
  const std::size_t r = v.shape.size();
  if (r != 3 && r != 4) fail(std::string(what) + ": expected a [C, H, W] or [N, C, H, W] tensor");
  Planes p;
  p.off = v.offset;
  if (r == 3) {
    p.s_inner = v.strides[0];
    p.inner = std::max<long long>(v.shape[0], 1);
    p.count = v.shape[0];
  } else {
    p.s_outer = v.strides[0];
    p.s_inner = v.strides[1];
    p.inner = std::max<long long>(v.shape[1], 1);
    p.count = v.shape[0] * v.shape[1];
  }
  p.sh = v.strides[r - 2];
  p.sw = v.strides[r - 1];
  p.h = v.shape[r - 2];
  p.w = v.shape[r - 1];
  return p;
}

__device__ __forceinline__ long long at(const Planes& p, long long plane, long long h, long long w) {
  return p.off + (plane / p.inner) * p.s_outer + (plane % p.inner) * p.s_inner + h * p.sh + w * p.sw;
}

// Calls f(T{}, A{}) with the element type of `dt` and the accumulation type.
template <class F>
void float_dispatch(Dtype dt, const char* what, F&& f) {
  const bool ref = reference_mode();
  switch (dt) {
    case Dtype::f16:
      if (ref) f(__half{}, double{});
      else f(__half{}, float{});
      return;
    case Dtype::bf16:
      if (ref) f(__nv_bfloat16{}, double{});
      else f(__nv_bfloat16{}, float{});
      return;
    case Dtype::f32:
      if (ref) f(float{}, double{});
      else f(float{}, float{});
      return;
    case Dtype::f64: f(double{}, double{}); return;
    default: fail(std::string(what) + ": only f16, bf16, f32 and f64 are supported on CUDA, got " + dtype_abbrev(dt));
  }
}

// The launch of one grid-stride kernel over n elements for the element and
// accumulation types of `dt` (float_dispatch): make(T{}, A{}) returns
// run(stream, blocks), which enqueues the kernel on grid_for(n) blocks of
// kThreads; nothing runs when n is 0.
template <class Make>
Launch typed_launch(Dtype dt, const char* what, long long n, Make&& make) {
  Launch launch;
  float_dispatch(dt, what, [&](auto t, auto acc) {
    auto run = make(t, acc);
    launch = [=](void* s) -> Status {
      if (n > 0) run(stream_of(s), grid_for(n));
      return launched(what);
    };
  });
  return launch;
}

}  // namespace kb::backendbench::aten::cuda::typed
