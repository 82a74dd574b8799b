// kb's CUDA kernels for grid_sampler_2d and its backward (see
// grid_sampler_kernels.hpp and the CPU oracle, ../grid_sampler.cpp): one
// thread per grid point, its pixel coordinates computed in double as the
// oracle does (so nearest's ties to even and bilinear's floor fall as
// there), the channels in a loop. The backward scatters into grad_input
// through atomics on an fp32 (fp64 for f64 or the reference) scratch, rounded
// once into grad_input; grad_grid is the sum over channels and taps of
// dweight * input * grad_output, times d(pixel)/d(normalized).
#include "../../common/cuda_typed.cuh"
#include "grid_sampler_kernels.hpp"

namespace kb::backendbench::aten::cuda {
namespace {

using namespace typed;

struct View4 {
  long long off = 0, s[4] = {};
  __device__ __forceinline__ long long at(long long a, long long b, long long c, long long d) const {
    return off + a * s[0] + b * s[1] + c * s[2] + d * s[3];
  }
};
View4 view4(const DView& v) {
  if (v.shape.size() != 4) fail("grid_sampler_2d: expected a 4-D tensor");
  View4 r;
  r.off = v.offset;
  for (int d = 0; d < 4; ++d) r.s[d] = v.strides[static_cast<std::size_t>(d)];
  return r;
}

struct Dims {
  long long n, c, h, w, oh, ow;
};

// Pixel coordinate of a normalized one, and d(pixel)/d(normalized) (0 where border padding clamps it).
__device__ __forceinline__ double unnormalize(double g, long long size, GridSampling s, double* m) {
  double v;
  if (s.align) {
    *m = static_cast<double>(size - 1) / 2;
    v = (g + 1) * *m;
  } else {
    *m = static_cast<double>(size) / 2;
    v = ((g + 1) * static_cast<double>(size) - 1) / 2;
  }
  if (s.border) {
    const double hi = static_cast<double>(size - 1);
    if (v <= 0) {
      *m = 0;
      return 0;
    }
    if (v >= hi) {
      *m = 0;
      return hi;
    }
  }
  return v;
}

// The taps of one sample: f(y, x, weight, dweight/dix, dweight/diy) for those inside the image.
template <class F>
__device__ __forceinline__ void taps(double ix, double iy, long long h, long long w, bool bilinear, F&& f) {
  auto inside = [&](long long y, long long x) { return y >= 0 && y < h && x >= 0 && x < w; };
  if (!bilinear) {
    const auto x = static_cast<long long>(rint(ix)), y = static_cast<long long>(rint(iy));
    if (inside(y, x)) f(y, x, 1.0, 0.0, 0.0);
    return;
  }
  const double fx = floor(ix), fy = floor(iy);
  const auto x0 = static_cast<long long>(fx), y0 = static_cast<long long>(fy);
  const double tx = ix - fx, ty = iy - fy;
  if (inside(y0, x0)) f(y0, x0, (1 - tx) * (1 - ty), -(1 - ty), -(1 - tx));
  if (inside(y0, x0 + 1)) f(y0, x0 + 1, tx * (1 - ty), 1 - ty, -tx);
  if (inside(y0 + 1, x0)) f(y0 + 1, x0, (1 - tx) * ty, -ty, 1 - tx);
  if (inside(y0 + 1, x0 + 1)) f(y0 + 1, x0 + 1, tx * ty, ty, tx);
}

template <class T, class A>
__global__ void forward_kernel(T* out, const T* x, View4 xv, const T* grid, View4 gv, Dims d, GridSampling s) {
  KB_GRID_LOOP(i, d.n * d.oh * d.ow) {
    const long long ox = i % d.ow, oy = i / d.ow % d.oh, n = i / (d.ow * d.oh);
    double mx, my;
    const double ix = unnormalize(ld<double>(grid, gv.at(n, oy, ox, 0)), d.w, s, &mx);
    const double iy = unnormalize(ld<double>(grid, gv.at(n, oy, ox, 1)), d.h, s, &my);
    for (long long c = 0; c < d.c; ++c) {
      A v = 0;
      taps(ix, iy, d.h, d.w, s.bilinear, [&](long long ty, long long tx, double wt, double, double) {
        v += static_cast<A>(wt) * ld<A>(x, xv.at(n, c, ty, tx));
      });
      st(out, ((n * d.c + c) * d.oh + oy) * d.ow + ox, v);
    }
  }
}

template <class T, class A>
__global__ void backward_kernel(A* gin, T* ggrid, const T* g, View4 gov, const T* x, View4 xv, const T* grid,
                                View4 gv, Dims d, GridSampling s) {
  KB_GRID_LOOP(i, d.n * d.oh * d.ow) {
    const long long ox = i % d.ow, oy = i / d.ow % d.oh, n = i / (d.ow * d.oh);
    double mx, my;
    const double ix = unnormalize(ld<double>(grid, gv.at(n, oy, ox, 0)), d.w, s, &mx);
    const double iy = unnormalize(ld<double>(grid, gv.at(n, oy, ox, 1)), d.h, s, &my);
    A dix = 0, diy = 0;
    for (long long c = 0; c < d.c; ++c) {
      const A gout = ld<A>(g, gov.at(n, c, oy, ox));
      taps(ix, iy, d.h, d.w, s.bilinear, [&](long long ty, long long tx, double wt, double dwx, double dwy) {
        if (gin) atomicAdd(gin + ((n * d.c + c) * d.h + ty) * d.w + tx, static_cast<A>(wt) * gout);
        if (ggrid) {
          const A xval = ld<A>(x, xv.at(n, c, ty, tx)) * gout;
          dix += static_cast<A>(dwx) * xval;
          diy += static_cast<A>(dwy) * xval;
        }
      });
    }
    if (ggrid) {
      st(ggrid, i * 2, dix * static_cast<A>(mx));
      st(ggrid, i * 2 + 1, diy * static_cast<A>(my));
    }
  }
}

template <class T, class A>
__global__ void round_kernel(T* out, const A* acc, long long n) {
  KB_GRID_LOOP(i, n) st(out, i, acc[i]);
}

Dims dims_of(const DView& input, const DView& grid) {
  return Dims{input.shape[0], input.shape[1], input.shape[2], input.shape[3], grid.shape[1], grid.shape[2]};
}

void same_dtype(const DView& a, const DView& b, const char* what) {
  if (a.dtype != b.dtype)
    fail(std::string(what) + ": input, grid and grad_output must share one dtype on CUDA");
}

}  // namespace

Launch grid_sampler_2d(const DView& out, const DView& input, const DView& grid, GridSampling s) {
  same_dtype(input, grid, "grid_sampler_2d");
  const View4 xv = view4(input), gv = view4(grid);
  const Dims d = dims_of(input, grid);
  const long long points = d.c > 0 ? d.n * d.oh * d.ow : 0;
  return typed_launch(input.dtype, "grid_sampler_2d", points, [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    T* o = ptr<T>(out);
    const T* xp = ptr<const T>(input);
    const T* gp = ptr<const T>(grid);
    return [=](cudaStream_t st, unsigned blocks) {
      forward_kernel<T, A><<<blocks, kThreads, 0, st>>>(o, xp, xv, gp, gv, d, s);
    };
  });
}

Launch grid_sampler_2d_backward(const DView& grad_input, const DView& grad_grid, const DView& grad_output,
                                const DView& input, const DView& grid, GridSampling s) {
  same_dtype(input, grid, "grid_sampler_2d_backward");
  same_dtype(input, grad_output, "grid_sampler_2d_backward");
  if (!grad_grid.undefined) same_dtype(grid, grad_grid, "grid_sampler_2d_backward");
  const View4 xv = view4(input), gv = view4(grid), gov = view4(grad_output);
  const Dims d = dims_of(input, grid);
  const long long points = d.n * d.oh * d.ow, in_elems = input.numel();
  const bool want_gin = !grad_input.undefined;
  Launch launch;
  float_dispatch(input.dtype, "grid_sampler_2d_backward", [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    std::shared_ptr<void> scratch = want_gin ? device_alloc(sizeof(A) * static_cast<std::size_t>(std::max(in_elems, 1LL)))
                                             : nullptr;
    A* gin = static_cast<A*>(scratch.get());
    T* gi = want_gin ? ptr<T>(grad_input) : nullptr;
    T* gg = grad_grid.undefined ? nullptr : ptr<T>(grad_grid);
    const T* gop = ptr<const T>(grad_output);
    const T* xp = ptr<const T>(input);
    const T* gp = ptr<const T>(grid);
    launch = [=](void* st) -> Status {
      cudaStream_t stream = stream_of(st);
      if (gin && in_elems > 0)
        if (cudaError_t e = cudaMemsetAsync(gin, 0, sizeof(A) * static_cast<std::size_t>(in_elems), stream); e != cudaSuccess)
          return make_error(Code::cuda_error, std::string("grid_sampler_2d_backward: ") + cudaGetErrorString(e));
      if (points > 0 && (gin || gg))
        backward_kernel<T, A><<<grid_for(points), kThreads, 0, stream>>>(gin, gg, gop, gov, xp, xv, gp, gv, d, s);
      if (auto r = launched("grid_sampler_2d_backward"); !r) return r;
      if (gin && in_elems > 0) round_kernel<T, A><<<grid_for(in_elems), kThreads, 0, stream>>>(gi, gin, in_elems);
      (void)scratch;
      return launched("grid_sampler_2d_backward");
    };
  });
  return launch;
}

}  // namespace kb::backendbench::aten::cuda
