// 2-D upsampling over the last two dims of [N, C, H, W] (any strides):
// nearest and bilinear, and their backwards (the adjoint maps: each output
// element's gradient goes to the input elements it was computed from, with
// the same weights). In double with one rounding to the output dtype.
//
// PyTorch's index arithmetic, kept exactly where it picks elements:
//   the output size is output_size, else floor(in * scale_factor);
//   nearest: src = min(floor(dst * scale), in - 1) in float, with scale =
//     1 / scale_factor when one is given, else in / out;
//   bilinear: scale = (in - 1) / (out - 1) with align_corners (0 when
//     out == 1), else as nearest; src = scale * dst with align_corners, else
//     max(scale * (dst + 0.5) - 0.5, 0) (in float, double for f64); it mixes src's floor i0 and
//     i1 = i0 + (i0 < in - 1) with weights 1 - f and f, f = src - i0.
#include <fmt/format.h>

#include <cmath>

#include "../common/args.hpp"
#include "../families.hpp"
#include "upsample_taps.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

// Calls f(output flat index within plane, input flat index within plane, weight) for every tap.
template <class F>
void for_each_tap(const UpsampleSizes& s, bool bilinear, bool align, Dtype dtype, F&& f) {
  const std::int64_t W = s.in[1];
  for (std::int64_t oh = 0; oh < s.out[0]; ++oh)
    for (std::int64_t ow = 0; ow < s.out[1]; ++ow) {
      const std::int64_t o = oh * s.out[1] + ow;
      if (!bilinear) {
        f(o, nearest_src(nearest_scale(s, 0), oh, s.in[0]) * W + nearest_src(nearest_scale(s, 1), ow, s.in[1]), 1.0);
        continue;
      }
      BilinearTaps h = bilinear_taps(s, 0, align, oh, dtype), w = bilinear_taps(s, 1, align, ow, dtype);
      f(o, h.i0 * W + w.i0, h.w0 * w.w0);
      f(o, h.i0 * W + w.i1, h.w0 * w.w1);
      f(o, h.i1 * W + w.i0, h.w1 * w.w0);
      f(o, h.i1 * W + w.i1, h.w1 * w.w1);
    }
}

void store_all(HostTensor& t, const std::vector<double>& v) {
  for (std::size_t i = 0; i < v.size(); ++i) t.store(static_cast<std::int64_t>(i), v[i]);
}

Out upsample(Call& c, bool bilinear) {
  const HostTensor& x = tensor_arg(c, 0, "input");
  if (!is_floating(x.dtype)) fail("upsampling needs a floating input");
  const bool align = bilinear && bool_arg(c, 2, "align_corners");
  UpsampleSizes s = upsample_sizes(c, x.shape, 1, bilinear ? 3 : 2);
  HostTensor y = empty_tensor(x.dtype, {x.shape[0], x.shape[1], s.out[0], s.out[1]}, c.meta);
  if (c.meta) return {y};
  auto xv = to_doubles(x);
  const std::int64_t planes = x.shape[0] * x.shape[1], I = s.in[0] * s.in[1], O = s.out[0] * s.out[1];
  std::vector<double> out(static_cast<std::size_t>(planes * O), 0.0);
  for_each_tap(s, bilinear, align, x.dtype, [&](std::int64_t o, std::int64_t i, double w) {
    for (std::int64_t p = 0; p < planes; ++p) out[static_cast<std::size_t>(p * O + o)] += w * xv[static_cast<std::size_t>(p * I + i)];
  });
  store_all(y, out);
  return {y};
}

Out upsample_backward(Call& c, bool bilinear) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  auto input_size = int_list_arg(c, 2, "input_size");
  if (!input_size) fail("input_size is missing");
  const bool align = bilinear && bool_arg(c, 3, "align_corners");
  UpsampleSizes s = upsample_sizes(c, *input_size, 1, bilinear ? 4 : 3);
  const std::vector<std::int64_t> gshape{(*input_size)[0], (*input_size)[1], s.out[0], s.out[1]};
  if (g.shape != gshape) fail(fmt::format("grad_output {} must be {}", shape_text(g.shape), shape_text(gshape)));
  HostTensor gx = empty_tensor(g.dtype, *input_size, c.meta);
  if (c.meta) return {gx};
  auto gv = to_doubles(g);
  const std::int64_t planes = gshape[0] * gshape[1], I = s.in[0] * s.in[1], O = s.out[0] * s.out[1];
  std::vector<double> acc(static_cast<std::size_t>(planes * I), 0.0);
  for_each_tap(s, bilinear, align, g.dtype, [&](std::int64_t o, std::int64_t i, double w) {
    for (std::int64_t p = 0; p < planes; ++p) acc[static_cast<std::size_t>(p * I + i)] += w * gv[static_cast<std::size_t>(p * O + o)];
  });
  store_all(gx, acc);
  return {gx};
}

// upsample_nearest2d.vec(input, output_size?, scale_factors?)
Out upsample_nearest2d(Call& c) { return upsample(c, false); }
// upsample_nearest2d_backward.vec(grad_output, output_size?, input_size, scale_factors?)
Out upsample_nearest2d_backward(Call& c) { return upsample_backward(c, false); }
// upsample_bilinear2d.vec(input, output_size?, align_corners, scale_factors?)
Out upsample_bilinear2d(Call& c) { return upsample(c, true); }
// upsample_bilinear2d_backward.vec(grad_output, output_size?, input_size, align_corners, scale_factors?)
Out upsample_bilinear2d_backward(Call& c) { return upsample_backward(c, true); }

const OpInfo kOps[] = {
    {"aten.upsample_nearest2d.vec", "upsample", upsample_nearest2d, nullptr},
    {"aten.upsample_nearest2d_backward.vec", "upsample", upsample_nearest2d_backward, nullptr},
    {"aten.upsample_bilinear2d.vec", "upsample", upsample_bilinear2d, nullptr},
    {"aten.upsample_bilinear2d_backward.vec", "upsample", upsample_bilinear2d_backward, nullptr},
};

}  // namespace

std::span<const OpInfo> upsample_ops() { return kOps; }

}  // namespace kb::backendbench::aten
