// kb's CUDA kernels for im2col, col2im and unfold_backward (see fold_kernels.hpp).
#include "../../common/cuda_typed.cuh"
#include "fold_kernels.hpp"

namespace kb::backendbench::aten::cuda {
namespace {

using namespace typed;

struct Geometry {
  long long batch, ch, h, w, oh, ow;
  FoldWindow k;
};

template <class T, class A>
__global__ void im2col_kernel(T* out, const T* x, Strided sx, Geometry g, long long n) {
  const long long L = g.oh * g.ow, taps = g.k.kh * g.k.kw, rows = g.ch * taps;
  KB_GRID_LOOP(e, n) {
    const long long pos = e % L, row = e / L % rows, b = e / (L * rows);
    const long long c = row / taps, i = row % taps / g.k.kw, j = row % g.k.kw;
    const long long y = pos / g.ow, xo = pos % g.ow;
    const long long iy = y * g.k.sh - g.k.ph + i * g.k.dh, ix = xo * g.k.sw - g.k.pw + j * g.k.dw;
    if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) {
      st(out, e, A(0));
      continue;
    }
    out[e] = x[offset_of(sx, ((b * g.ch + c) * g.h + iy) * g.w + ix)];
  }
}

template <class T, class A>
__global__ void col2im_kernel(T* out, const T* cols, Strided sc, Geometry g, long long n) {
  const long long L = g.oh * g.ow, taps = g.k.kh * g.k.kw, rows = g.ch * taps;
  KB_GRID_LOOP(e, n) {
    const long long ix = e % g.w, iy = e / g.w % g.h, c = e / (g.w * g.h) % g.ch, b = e / (g.w * g.h * g.ch);
    A s = 0;
    for (long long i = 0; i < g.k.kh; ++i) {
      const long long ty = iy + g.k.ph - i * g.k.dh;
      if (ty < 0 || ty % g.k.sh != 0 || ty / g.k.sh >= g.oh) continue;
      const long long y = ty / g.k.sh;
      for (long long j = 0; j < g.k.kw; ++j) {
        const long long tx = ix + g.k.pw - j * g.k.dw;
        if (tx < 0 || tx % g.k.sw != 0 || tx / g.k.sw >= g.ow) continue;
        const long long row = (c * g.k.kh + i) * g.k.kw + j;
        s += ld<A>(cols, offset_of(sc, (b * rows + row) * L + y * g.ow + tx / g.k.sw));
      }
    }
    st(out, e, s);
  }
}

template <class T, class A>
__global__ void unfold_backward_kernel(T* out, const T* grad, Strided sg, long long len, long long inner,
                                       long long size, long long step, long long windows, long long n) {
  KB_GRID_LOOP(e, n) {
    const long long in = e % inner, p = e / inner % len, o = e / (inner * len);
    // Windows j with j * step <= p < j * step + size, in ascending order.
    const long long j0 = p - size + 1 <= 0 ? 0 : (p - size + 1 + step - 1) / step;
    const long long j1 = p / step < windows - 1 ? p / step : windows - 1;
    A s = 0;
    for (long long j = j0; j <= j1; ++j) {
      const long long k = p - j * step;
      s += ld<A>(grad, offset_of(sg, ((o * windows + j) * inner + in) * size + k));
    }
    st(out, e, s);
  }
}

}  // namespace

Launch im2col(const DView& out, const DView& image, std::int64_t batch, std::int64_t channels, std::int64_t h,
              std::int64_t w, const FoldWindow& k) {
  Geometry g{batch, channels, h, w, 0, 0, k};
  g.oh = (h + 2 * k.ph - (k.dh * (k.kh - 1) + 1)) / k.sh + 1;
  g.ow = (w + 2 * k.pw - (k.dw * (k.kw - 1) + 1)) / k.sw + 1;
  const Strided sx = strided(image);
  const long long n = out.numel();
  return typed_launch(image.dtype, "im2col", n, [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    T* o = ptr<T>(out);
    const T* x = ptr<const T>(image);
    return [=](cudaStream_t s, unsigned blocks) { im2col_kernel<T, A><<<blocks, kThreads, 0, s>>>(o, x, sx, g, n); };
  });
}

Launch col2im(const DView& out, const DView& columns, std::int64_t batch, std::int64_t channels, std::int64_t h,
              std::int64_t w, const FoldWindow& k) {
  Geometry g{batch, channels, h, w, 0, 0, k};
  g.oh = (h + 2 * k.ph - (k.dh * (k.kh - 1) + 1)) / k.sh + 1;
  g.ow = (w + 2 * k.pw - (k.dw * (k.kw - 1) + 1)) / k.sw + 1;
  const Strided sc = strided(columns);
  const long long n = out.numel();
  return typed_launch(columns.dtype, "col2im", n, [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    T* o = ptr<T>(out);
    const T* c = ptr<const T>(columns);
    return [=](cudaStream_t s, unsigned blocks) { col2im_kernel<T, A><<<blocks, kThreads, 0, s>>>(o, c, sc, g, n); };
  });
}

Launch unfold_backward(const DView& out, const DView& grad, std::int64_t outer, std::int64_t len, std::int64_t inner,
                       std::int64_t size, std::int64_t step) {
  (void)outer;
  const Strided sg = strided(grad);
  const long long windows = (len - size) / step + 1, n = out.numel();
  return typed_launch(grad.dtype, "unfold_backward", n, [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    T* o = ptr<T>(out);
    const T* gp = ptr<const T>(grad);
    return [=](cudaStream_t s, unsigned blocks) { unfold_backward_kernel<T, A><<<blocks, kThreads, 0, s>>>(o, gp, sg, len, inner, size, step,
                                                                                 windows, n); };
  });
}

}  // namespace kb::backendbench::aten::cuda
