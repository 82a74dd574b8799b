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

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

std::optional<std::vector<double>> float_list_arg(const Call& c, std::size_t pos, const char* name) {
  if (!has_arg(c, pos, name)) return std::nullopt;
  const Value& v = *c.find(pos, name)->value;
  if (v.kind != Kind::list && v.kind != Kind::tuple) fail(fmt::format("{} must be a list of numbers", name));
  std::vector<double> out;
  for (const Value& e : v.children) {
    if (e.kind == Kind::floating) out.push_back(e.float_value);
    else if (e.kind == Kind::integer && e.int_value) out.push_back(static_cast<double>(*e.int_value));
    else fail(fmt::format("{} must be a list of numbers", name));
  }
  return out;
}

// Output sizes and the scale factors given (0: none) for the two spatial dims.
struct Sizes {
  std::int64_t in[2] = {1, 1}, out[2] = {1, 1};
  double factor[2] = {0, 0};
};

Sizes sizes(const Call& c, const std::vector<std::int64_t>& input_shape, std::size_t out_pos, std::size_t scale_pos) {
  if (input_shape.size() != 4) fail(fmt::format("input must be [N, C, H, W], got {}", shape_text(input_shape)));
  Sizes s;
  s.in[0] = input_shape[2];
  s.in[1] = input_shape[3];
  auto os = int_list_arg(c, out_pos, "output_size");
  auto sf = float_list_arg(c, scale_pos, "scale_factors");
  if (os && sf) fail("give output_size or scale_factors, not both");
  if (!os && !sf) fail("output_size or scale_factors is needed");
  for (int d = 0; d < 2; ++d) {
    if (os) {
      if (os->size() != 2) fail("output_size must hold 2 sizes");
      s.out[d] = (*os)[d];
    } else {
      if (sf->size() != 2) fail("scale_factors must hold 2 values");
      s.factor[d] = (*sf)[d];
      s.out[d] = static_cast<std::int64_t>(std::floor(static_cast<double>(s.in[d]) * s.factor[d]));
    }
    if (s.out[d] < 1 || s.in[d] < 1) fail(fmt::format("sizes {} -> {} must be positive", s.in[d], s.out[d]));
  }
  return s;
}

float nearest_scale(const Sizes& s, int d) {
  return s.factor[d] > 0 ? static_cast<float>(1.0 / s.factor[d])
                         : static_cast<float>(s.in[d]) / static_cast<float>(s.out[d]);
}
std::int64_t nearest_src(float scale, std::int64_t dst, std::int64_t in) {
  return std::min(static_cast<std::int64_t>(std::floor(static_cast<float>(dst) * scale)), in - 1);
}

// The taps of bilinear output position dst along one dim, the source
// coordinate computed in T (PyTorch's accumulate type: float for f16, bf16 and
// f32, double for f64).
struct Taps {
  std::int64_t i0, i1;
  double w0, w1;
};
template <class T>
Taps bilinear_taps(const Sizes& s, int d, bool align, std::int64_t dst) {
  const std::int64_t in = s.in[d], out = s.out[d];
  T scale;
  if (align) scale = out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0);
  else scale = s.factor[d] > 0 ? static_cast<T>(1.0 / s.factor[d]) : static_cast<T>(in) / static_cast<T>(out);
  T src = align ? scale * static_cast<T>(dst) : std::max(scale * (static_cast<T>(dst) + T(0.5)) - T(0.5), T(0));
  auto i0 = static_cast<std::int64_t>(src);
  std::int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
  T f = src - static_cast<T>(i0);
  return {i0, i1, static_cast<double>(T(1) - f), static_cast<double>(f)};
}
Taps bilinear_taps(const Sizes& s, int d, bool align, std::int64_t dst, Dtype dtype) {
  return dtype == Dtype::f64 ? bilinear_taps<double>(s, d, align, dst) : bilinear_taps<float>(s, d, align, dst);
}

// Calls f(output flat index within plane, input flat index within plane, weight) for every tap.
template <class F>
void for_each_tap(const Sizes& s, bool bilinear, bool align, Dtype dtype, F&& f) {
  const std::int64_t W = s.in[1];
  for (std::int64_t oh = 0; oh < s.out[0]; ++oh)
    for (std::int64_t ow = 0; ow < s.out[1]; ++ow) {
      const std::int64_t o = oh * s.out[1] + ow;
      if (!bilinear) {
        f(o, nearest_src(nearest_scale(s, 0), oh, s.in[0]) * W + nearest_src(nearest_scale(s, 1), ow, s.in[1]), 1.0);
        continue;
      }
      Taps h = bilinear_taps(s, 0, align, oh, dtype), w = bilinear_taps(s, 1, align, ow, dtype);
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
  Sizes s = sizes(c, x.shape, 1, bilinear ? 3 : 2);
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
  Sizes s = sizes(c, *input_size, 1, bilinear ? 4 : 3);
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
