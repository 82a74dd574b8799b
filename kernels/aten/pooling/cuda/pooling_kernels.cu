// kb's CUDA kernels for 2-D pooling (see pooling_kernels.hpp and the CPU
// oracle, pooling.cpp): one thread per output element for the forwards, one
// per input element for the gathered average backwards (no atomics, the
// oracle's order of additions), fp32/fp64 scratch with atomics for max
// pooling's backward (its indices may point anywhere in the plane).
#include "../../common/cuda_typed.cuh"
#include "pooling_kernels.hpp"

namespace kb::backendbench::aten::cuda {
namespace {

using namespace typed;

__device__ __forceinline__ long long floor_div(long long a, long long b) {
  const long long q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ long long ceil_div(long long a, long long b) { return -floor_div(-a, b); }

__device__ __forceinline__ long long lmin(long long a, long long b) { return a < b ? a : b; }
__device__ __forceinline__ long long lmax(long long a, long long b) { return a > b ? a : b; }

template <class T, class A>
__global__ void max_pool_kernel(T* out, long long* indices, const T* x, Planes px, PoolWindow w, long long n) {
  KB_GRID_LOOP(i, n) {
    const long long ow = i % w.ow, oh = i / w.ow % w.oh, p = i / (w.ow * w.oh);
    long long hs = oh * w.sh - w.ph, ws = ow * w.sw - w.pw;
    const long long he = lmin(hs + (w.kh - 1) * w.dh + 1, px.h), we = lmin(ws + (w.kw - 1) * w.dw + 1, px.w);
    while (hs < 0) hs += w.dh;
    while (ws < 0) ws += w.dw;
    A best = A(-INFINITY);
    long long arg = hs * px.w + ws;
    for (long long h = hs; h < he; h += w.dh)
      for (long long c = ws; c < we; c += w.dw) {
        const A v = ld<A>(x, at(px, p, h, c));
        if (v > best || v != v) {
          best = v;
          arg = h * px.w + c;
        }
      }
    st(out, i, best);
    indices[i] = arg;
  }
}

template <class T, class A>
__global__ void max_pool_backward_kernel(A* acc, const T* g, Planes pg, const long long* ind, Planes pi,
                                         long long plane_size, long long n) {
  KB_GRID_LOOP(i, n) {
    const long long ow = i % pg.w, oh = i / pg.w % pg.h, p = i / (pg.w * pg.h);
    const long long a = ind[at(pi, p, oh, ow)];
    atomicAdd(acc + p * plane_size + a, ld<A>(g, at(pg, p, oh, ow)));
  }
}

template <class T, class A>
__global__ void to_output_kernel(T* out, const A* acc, long long n) {
  KB_GRID_LOOP(i, n) st(out, i, acc[i]);
}

// The oracle's avg_cell: clipped bounds and divisor of output (oh, ow).
template <class A>
__device__ __forceinline__ A avg_cell(const PoolWindow& w, long long H, long long W, long long oh, long long ow,
                                      long long& hs, long long& he, long long& ws, long long& we) {
  hs = oh * w.sh - w.ph;
  ws = ow * w.sw - w.pw;
  he = lmin(hs + w.kh, H + w.ph);
  we = lmin(ws + w.kw, W + w.pw);
  const long long padded = (he - hs) * (we - ws);
  hs = lmax(hs, 0LL);
  ws = lmax(ws, 0LL);
  he = lmin(he, H);
  we = lmin(we, W);
  if (w.divisor) return static_cast<A>(w.divisor);
  return static_cast<A>(w.include_pad ? padded : (he - hs) * (we - ws));
}

template <class T, class A>
__global__ void avg_pool_kernel(T* out, const T* x, Planes px, PoolWindow w, long long n) {
  KB_GRID_LOOP(i, n) {
    const long long ow = i % w.ow, oh = i / w.ow % w.oh, p = i / (w.ow * w.oh);
    long long hs, he, ws, we;
    const A div = avg_cell<A>(w, px.h, px.w, oh, ow, hs, he, ws, we);
    A s = 0;
    for (long long h = hs; h < he; ++h)
      for (long long c = ws; c < we; ++c) s += ld<A>(x, at(px, p, h, c));
    st(out, i, s / div);
  }
}

template <class T, class A>
__global__ void avg_pool_backward_kernel(T* gx, const T* g, Planes pg, PoolWindow w, long long H, long long W,
                                         long long n) {
  KB_GRID_LOOP(i, n) {
    const long long c = i % W, h = i / W % H, p = i / (W * H);
    const long long oh0 = lmax(0LL, ceil_div(h + w.ph - w.kh + 1, w.sh)), oh1 = lmin(w.oh - 1, floor_div(h + w.ph, w.sh));
    const long long ow0 = lmax(0LL, ceil_div(c + w.pw - w.kw + 1, w.sw)), ow1 = lmin(w.ow - 1, floor_div(c + w.pw, w.sw));
    A s = 0;
    for (long long oh = oh0; oh <= oh1; ++oh)
      for (long long ow = ow0; ow <= ow1; ++ow) {
        long long hs, he, ws, we;
        const A div = avg_cell<A>(w, H, W, oh, ow, hs, he, ws, we);
        if (h < hs || h >= he || c < ws || c >= we) continue;
        s += ld<A>(g, at(pg, p, oh, ow)) / div;
      }
    st(gx, i, s);
  }
}

__device__ __forceinline__ long long a_start(long long o, long long in, long long out) { return o * in / out; }
__device__ __forceinline__ long long a_end(long long o, long long in, long long out) {
  return ((o + 1) * in + out - 1) / out;
}

template <class T, class A>
__global__ void adaptive_kernel(T* out, const T* x, Planes px, long long OH, long long OW, long long n) {
  KB_GRID_LOOP(i, n) {
    const long long ow = i % OW, oh = i / OW % OH, p = i / (OW * OH);
    const long long hs = a_start(oh, px.h, OH), he = a_end(oh, px.h, OH);
    const long long ws = a_start(ow, px.w, OW), we = a_end(ow, px.w, OW);
    A s = 0;
    for (long long h = hs; h < he; ++h)
      for (long long c = ws; c < we; ++c) s += ld<A>(x, at(px, p, h, c));
    st(out, i, s / static_cast<A>((he - hs) * (we - ws)));
  }
}

template <class T, class A>
__global__ void adaptive_backward_kernel(T* gx, const T* g, Planes pg, long long H, long long W, long long n) {
  KB_GRID_LOOP(i, n) {
    const long long c = i % W, h = i / W % H, p = i / (W * H);
    const long long OH = pg.h, OW = pg.w;
    const long long oh0 = h * OH / H, oh1 = lmin(OH - 1, ((h + 1) * OH + H - 1) / H - 1);
    const long long ow0 = c * OW / W, ow1 = lmin(OW - 1, ((c + 1) * OW + W - 1) / W - 1);
    A s = 0;
    for (long long oh = oh0; oh <= oh1; ++oh) {
      const long long hs = a_start(oh, H, OH), he = a_end(oh, H, OH);
      if (h < hs || h >= he) continue;
      for (long long ow = ow0; ow <= ow1; ++ow) {
        const long long ws = a_start(ow, W, OW), we = a_end(ow, W, OW);
        if (c < ws || c >= we) continue;
        s += ld<A>(g, at(pg, p, oh, ow)) / static_cast<A>((he - hs) * (we - ws));
      }
    }
    st(gx, i, s);
  }
}

}  // namespace

Launch max_pool2d(const DView& out, const DView& indices, const DView& x, const PoolWindow& w) {
  const Planes px = planes_of(x, "pooling");
  const long long n = out.numel();
  if (indices.dtype != Dtype::i64) fail("max_pool2d_with_indices: indices must be i64");
  return typed_launch(x.dtype, "max_pool2d_with_indices", n, [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    T* o = ptr<T>(out);
    long long* ind = ptr<long long>(indices);
    const T* xp = ptr<const T>(x);
    return [=](cudaStream_t s, unsigned blocks) {
      max_pool_kernel<T, A><<<blocks, kThreads, 0, s>>>(o, ind, xp, px, w, n);
    };
  });
}

Launch max_pool2d_backward(const DView& grad_input, const DView& grad_output, const DView& indices) {
  const Planes pg = planes_of(grad_output, "pooling"), pi = planes_of(indices, "pooling");
  const Planes px = planes_of(grad_input, "pooling");
  const long long n = grad_output.numel(), total = grad_input.numel(), plane_size = px.h * px.w;
  if (indices.dtype != Dtype::i64) fail("max_pool2d_with_indices_backward: indices must be i64");
  Launch launch;
  float_dispatch(grad_output.dtype, "max_pool2d_with_indices_backward", [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    auto scratch = device_alloc(static_cast<std::size_t>(std::max<long long>(total, 1)) * sizeof(A));
    T* gx = ptr<T>(grad_input);
    const T* g = ptr<const T>(grad_output);
    const long long* ind = ptr<const long long>(indices);
    launch = [=](void* s) -> Status {
      if (total == 0) return ok_status();
      A* a = static_cast<A*>(scratch.get());
      cudaMemsetAsync(a, 0, static_cast<std::size_t>(total) * sizeof(A), stream_of(s));
      if (n > 0)
        max_pool_backward_kernel<T, A><<<grid_for(n), kThreads, 0, stream_of(s)>>>(a, g, pg, ind, pi, plane_size, n);
      to_output_kernel<T, A><<<grid_for(total), kThreads, 0, stream_of(s)>>>(gx, a, total);
      return launched("max_pool2d_with_indices_backward");
    };
  });
  return launch;
}

Launch avg_pool2d(const DView& out, const DView& x, const PoolWindow& w) {
  const Planes px = planes_of(x, "pooling");
  const long long n = out.numel();
  return typed_launch(x.dtype, "avg_pool2d", n, [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    T* o = ptr<T>(out);
    const T* xp = ptr<const T>(x);
    return [=](cudaStream_t s, unsigned blocks) { avg_pool_kernel<T, A><<<blocks, kThreads, 0, s>>>(o, xp, px, w, n); };
  });
}

Launch avg_pool2d_backward(const DView& grad_input, const DView& grad_output, const PoolWindow& w) {
  const Planes pg = planes_of(grad_output, "pooling"), px = planes_of(grad_input, "pooling");
  const long long n = grad_input.numel();
  return typed_launch(grad_output.dtype, "avg_pool2d_backward", n, [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    T* gx = ptr<T>(grad_input);
    const T* g = ptr<const T>(grad_output);
    return [=](cudaStream_t s, unsigned blocks) {
      avg_pool_backward_kernel<T, A><<<blocks, kThreads, 0, s>>>(gx, g, pg, w, px.h, px.w, n);
    };
  });
}

Launch adaptive_avg_pool2d(const DView& out, const DView& x) {
  const Planes px = planes_of(x, "pooling"), po = planes_of(out, "pooling");
  const long long n = out.numel();
  return typed_launch(x.dtype, "_adaptive_avg_pool2d", n, [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    T* o = ptr<T>(out);
    const T* xp = ptr<const T>(x);
    return [=](cudaStream_t s, unsigned blocks) {
      adaptive_kernel<T, A><<<blocks, kThreads, 0, s>>>(o, xp, px, po.h, po.w, n);
    };
  });
}

Launch adaptive_avg_pool2d_backward(const DView& grad_input, const DView& grad_output) {
  const Planes pg = planes_of(grad_output, "pooling"), px = planes_of(grad_input, "pooling");
  const long long n = grad_input.numel();
  return typed_launch(grad_output.dtype, "_adaptive_avg_pool2d_backward", n, [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    T* gx = ptr<T>(grad_input);
    const T* g = ptr<const T>(grad_output);
    return [=](cudaStream_t s, unsigned blocks) {
      adaptive_backward_kernel<T, A><<<blocks, kThreads, 0, s>>>(gx, g, pg, px.h, px.w, n);
    };
  });
}

}  // namespace kb::backendbench::aten::cuda
