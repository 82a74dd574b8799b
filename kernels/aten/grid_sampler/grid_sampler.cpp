// grid_sampler_2d and its backward: input [N, C, H, W] sampled at grid
// [N, Ho, Wo, 2] ((x, y) in [-1, 1]) into [N, C, Ho, Wo].
// Unnormalization: align_corners maps -1 and 1 to the centres of the corner
// pixels ((g + 1) / 2 * (size - 1)), else to their outer edges
// (((g + 1) * size - 1) / 2). Interpolation 0 (bilinear) and 1 (nearest,
// ties to even); padding 0 (zeros: taps outside read 0) and 1 (border: the
// coordinate clamped to [0, size - 1], its gradient 0 where clamped).
// Bicubic interpolation and reflection padding are refused (kb has no oracle
// for them).
#include <fmt/format.h>

#include <cmath>

#include "../common/args.hpp"
#include "../families.hpp"
#include "sampling.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

// Pixel coordinate of a normalized one and d(pixel)/d(normalized).
std::pair<double, double> unnormalize(double g, std::int64_t size, const Sampling& s) {
  double v, m;
  if (s.align) {
    m = static_cast<double>(size - 1) / 2;
    v = (g + 1) * m;
  } else {
    m = static_cast<double>(size) / 2;
    v = ((g + 1) * static_cast<double>(size) - 1) / 2;
  }
  if (s.border) {
    const double hi = static_cast<double>(size - 1);
    if (v <= 0) return {0.0, 0.0};
    if (v >= hi) return {hi, 0.0};
  }
  return {v, m};
}

// Visits the taps of one sample: f(y, x, weight, dweight/dix, dweight/diy) for those inside the image.
template <class F>
void taps(double ix, double iy, const Sampling& s, F&& f) {
  auto inside = [&](std::int64_t y, std::int64_t x) { return y >= 0 && y < s.h && x >= 0 && x < s.w; };
  if (!s.bilinear) {
    auto x = static_cast<std::int64_t>(std::nearbyint(ix)), y = static_cast<std::int64_t>(std::nearbyint(iy));
    if (inside(y, x)) f(y, x, 1.0, 0.0, 0.0);
    return;
  }
  const double fx = std::floor(ix), fy = std::floor(iy);
  const auto x0 = static_cast<std::int64_t>(fx), y0 = static_cast<std::int64_t>(fy);
  const double tx = ix - fx, ty = iy - fy;
  if (inside(y0, x0)) f(y0, x0, (1 - tx) * (1 - ty), -(1 - ty), -(1 - tx));
  if (inside(y0, x0 + 1)) f(y0, x0 + 1, tx * (1 - ty), 1 - ty, -tx);
  if (inside(y0 + 1, x0)) f(y0 + 1, x0, (1 - tx) * ty, -ty, 1 - tx);
  if (inside(y0 + 1, x0 + 1)) f(y0 + 1, x0 + 1, tx * ty, ty, tx);
}

// grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners)
Out grid_sampler_2d(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "input");
  const HostTensor& grid = tensor_arg(c, 1, "grid");
  Sampling s = sampling_of(c, x, grid, 2);
  HostTensor out = empty_tensor(x.dtype, {s.n, s.c, s.oh, s.ow}, c.meta);
  if (c.meta) return {out};
  std::vector<double> xv = to_doubles(x), gv = to_doubles(grid);
  for (std::int64_t n = 0; n < s.n; ++n)
    for (std::int64_t y = 0; y < s.oh; ++y)
      for (std::int64_t xo = 0; xo < s.ow; ++xo) {
        const auto gi = static_cast<std::size_t>(((n * s.oh + y) * s.ow + xo) * 2);
        const double ix = unnormalize(gv[gi], s.w, s).first, iy = unnormalize(gv[gi + 1], s.h, s).first;
        for (std::int64_t ch = 0; ch < s.c; ++ch) {
          double v = 0;
          taps(ix, iy, s, [&](std::int64_t ty, std::int64_t tx, double wt, double, double) {
            v += wt * xv[static_cast<std::size_t>(((n * s.c + ch) * s.h + ty) * s.w + tx)];
          });
          out.store(((n * s.c + ch) * s.oh + y) * s.ow + xo, v);
        }
      }
  return {out};
}

// grid_sampler_2d_backward(grad_output, input, grid, interpolation_mode, padding_mode, align_corners,
//                          output_mask) -> (grad_input, grad_grid)
Out grid_sampler_2d_backward(Call& c) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const HostTensor& x = tensor_arg(c, 1, "input");
  const HostTensor& grid = tensor_arg(c, 2, "grid");
  Sampling s = sampling_of(c, x, grid, 3);
  check_grad_output(g, s);
  Out outs{empty_tensor(x.dtype, x.shape, c.meta), empty_tensor(grid.dtype, grid.shape, c.meta)};
  apply_output_mask(c, 6, outs);
  if (c.meta) return outs;
  std::vector<double> xv = to_doubles(x), gridv = to_doubles(grid), go = to_doubles(g);
  std::vector<double> gin(static_cast<std::size_t>(x.numel()), 0.0), ggrid(gridv.size(), 0.0);
  for (std::int64_t n = 0; n < s.n; ++n)
    for (std::int64_t y = 0; y < s.oh; ++y)
      for (std::int64_t xo = 0; xo < s.ow; ++xo) {
        const auto gi = static_cast<std::size_t>(((n * s.oh + y) * s.ow + xo) * 2);
        const auto [ix, mx] = unnormalize(gridv[gi], s.w, s);
        const auto [iy, my] = unnormalize(gridv[gi + 1], s.h, s);
        double dix = 0, diy = 0;
        for (std::int64_t ch = 0; ch < s.c; ++ch) {
          const double gout = go[static_cast<std::size_t>(((n * s.c + ch) * s.oh + y) * s.ow + xo)];
          taps(ix, iy, s, [&](std::int64_t ty, std::int64_t tx, double wt, double dwx, double dwy) {
            const auto at = static_cast<std::size_t>(((n * s.c + ch) * s.h + ty) * s.w + tx);
            gin[at] += wt * gout;
            dix += dwx * xv[at] * gout;
            diy += dwy * xv[at] * gout;
          });
        }
        ggrid[gi] = dix * mx;
        ggrid[gi + 1] = diy * my;
      }
  if (!outs[0].undefined)
    for (std::size_t i = 0; i < gin.size(); ++i) outs[0].store(static_cast<std::int64_t>(i), gin[i]);
  if (!outs[1].undefined)
    for (std::size_t i = 0; i < ggrid.size(); ++i) outs[1].store(static_cast<std::int64_t>(i), ggrid[i]);
  return outs;
}

const OpInfo kOps[] = {
    {"aten.grid_sampler_2d.default", "grid_sampler", grid_sampler_2d, nullptr},
    {"aten.grid_sampler_2d_backward.default", "grid_sampler", grid_sampler_2d_backward, nullptr},
};

}  // namespace

std::span<const OpInfo> grid_sampler_ops() { return kOps; }

}  // namespace kb::backendbench::aten
