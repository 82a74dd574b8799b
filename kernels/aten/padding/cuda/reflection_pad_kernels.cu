// kb's CUDA kernels for reflection_pad2d and its backward (see
// reflection_pad_kernels.hpp). Padding is smaller than the padded dim, so
// each input row (column) appears at most three times along its dim: itself,
// reflected about the leading edge, reflected about the trailing edge.
#include "../../common/cuda_typed.cuh"
#include "reflection_pad_kernels.hpp"

namespace kb::backendbench::aten::cuda {
namespace {

using namespace typed;

constexpr int kThreads = 256;

unsigned grid_for(long long n) { return std::min<unsigned>(blocks_for(n, kThreads), 65535u * 8u); }

// [C, H, W] or [N, C, H, W] addressing by plane.
struct Planes {
  long long off = 0, s_outer = 0, s_inner = 0, inner = 1, sh = 0, sw = 0, h = 1, w = 1;
};
Planes planes_of(const DView& v) {
  const std::size_t r = v.shape.size();
  if (r != 3 && r != 4) fail("reflection_pad2d: expected a 3-D or 4-D tensor");
  Planes p;
  p.off = v.offset;
  if (r == 3) {
    p.s_inner = v.strides[0];
    p.inner = std::max<long long>(v.shape[0], 1);
  } else {
    p.s_outer = v.strides[0];
    p.s_inner = v.strides[1];
    p.inner = std::max<long long>(v.shape[1], 1);
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

__device__ __forceinline__ long long reflect(long long i, long long n) {
  if (i < 0) return -i;
  if (i >= n) return 2 * (n - 1) - i;
  return i;
}

// The output positions along a dim (ascending) whose reflection is input index i: up to 3.
__device__ __forceinline__ int sources(long long i, long long n, long long lo, long long on, long long* y) {
  int k = 0;
  if (i >= 1 && i <= lo) y[k++] = lo - i;
  y[k++] = i + lo;
  const long long r = lo + 2 * (n - 1) - i;
  if (r >= lo + n && r < on) y[k++] = r;
  return k;
}

template <class T, class A>
__global__ void pad_kernel(T* out, const T* x, Planes px, long long OH, long long OW, long long left, long long top,
                           long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long c = i % OW, r = i / OW % OH, p = i / (OW * OH);
    out[i] = x[at(px, p, reflect(r - top, px.h), reflect(c - left, px.w))];
  }
}

template <class T, class A>
__global__ void pad_backward_kernel(T* gx, const T* g, Planes pg, long long H, long long W, long long left,
                                    long long top, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long c = i % W, r = i / W % H, p = i / (W * H);
    long long ys[3], xs[3];
    const int ny = sources(r, H, top, pg.h, ys), nx = sources(c, W, left, pg.w, xs);
    A s = 0;
    for (int a = 0; a < ny; ++a)
      for (int b = 0; b < nx; ++b) s += ld<A>(g, at(pg, p, ys[a], xs[b]));
    st(gx, i, s);
  }
}

}  // namespace

Launch reflection_pad2d(const DView& out, const DView& x, std::int64_t left, std::int64_t top) {
  const Planes px = planes_of(x), po = planes_of(out);
  const long long n = out.numel();
  Launch launch;
  float_dispatch(x.dtype, "reflection_pad2d", [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    T* o = ptr<T>(out);
    const T* xp = ptr<const T>(x);
    launch = [=](void* s) -> Status {
      if (n > 0) pad_kernel<T, A><<<grid_for(n), kThreads, 0, stream_of(s)>>>(o, xp, px, po.h, po.w, left, top, n);
      return launched("reflection_pad2d");
    };
  });
  return launch;
}

Launch reflection_pad2d_backward(const DView& grad_input, const DView& grad_output, std::int64_t left,
                                 std::int64_t top) {
  const Planes pg = planes_of(grad_output), px = planes_of(grad_input);
  const long long n = grad_input.numel();
  Launch launch;
  float_dispatch(grad_output.dtype, "reflection_pad2d_backward", [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    T* gx = ptr<T>(grad_input);
    const T* g = ptr<const T>(grad_output);
    launch = [=](void* s) -> Status {
      if (n > 0)
        pad_backward_kernel<T, A><<<grid_for(n), kThreads, 0, stream_of(s)>>>(gx, g, pg, px.h, px.w, left, top, n);
      return launched("reflection_pad2d_backward");
    };
  });
  return launch;
}

}  // namespace kb::backendbench::aten::cuda
