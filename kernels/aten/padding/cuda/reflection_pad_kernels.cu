// kb's CUDA kernels for reflection_pad2d and its backward (see
// reflection_pad_kernels.hpp). Padding is smaller than the padded dim, so
// each input row (column) appears at most three times along its dim: itself,
// reflected about the leading edge, reflected about the trailing edge.
#include "../../common/cuda_typed.cuh"
#include "reflection_pad_kernels.hpp"

namespace kb::backendbench::aten::cuda {
namespace {

using namespace typed;

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
  KB_GRID_LOOP(i, n) {
    const long long c = i % OW, r = i / OW % OH, p = i / (OW * OH);
    out[i] = x[at(px, p, reflect(r - top, px.h), reflect(c - left, px.w))];
  }
}

template <class T, class A>
__global__ void pad_backward_kernel(T* gx, const T* g, Planes pg, long long H, long long W, long long left,
                                    long long top, long long n) {
  KB_GRID_LOOP(i, n) {
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
  const Planes px = planes_of(x, "reflection_pad2d"), po = planes_of(out, "reflection_pad2d");
  const long long n = out.numel();
  return typed_launch(x.dtype, "reflection_pad2d", n, [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    T* o = ptr<T>(out);
    const T* xp = ptr<const T>(x);
    return [=](cudaStream_t s, unsigned blocks) {
      pad_kernel<T, A><<<blocks, kThreads, 0, s>>>(o, xp, px, po.h, po.w, left, top, n);
    };
  });
}

Launch reflection_pad2d_backward(const DView& grad_input, const DView& grad_output, std::int64_t left,
                                 std::int64_t top) {
  const Planes pg = planes_of(grad_output, "reflection_pad2d"), px = planes_of(grad_input, "reflection_pad2d");
  const long long n = grad_input.numel();
  return typed_launch(grad_output.dtype, "reflection_pad2d_backward", n, [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    T* gx = ptr<T>(grad_input);
    const T* g = ptr<const T>(grad_output);
    return [=](cudaStream_t s, unsigned blocks) {
      pad_backward_kernel<T, A><<<blocks, kThreads, 0, s>>>(gx, g, pg, px.h, px.w, left, top, n);
    };
  });
}

}  // namespace kb::backendbench::aten::cuda
