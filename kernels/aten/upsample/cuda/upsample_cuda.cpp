// CUDA plans for upsample_nearest2d / upsample_bilinear2d and their
// backwards: the oracle's size rules and PyTorch's source-coordinate
// arithmetic (upsample.cpp) evaluated on the host per output row and column,
// handed to upsample_kernels.cu as tap tables.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "../../common/args.hpp"
#include "../../cuda_families.hpp"
#include "upsample_kernels.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;
using cuda::UpsampleTap;

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

std::vector<UpsampleTap> nearest_taps(const Sizes& s, int d) {
  const float scale = s.factor[d] > 0 ? static_cast<float>(1.0 / s.factor[d])
                                      : static_cast<float>(s.in[d]) / static_cast<float>(s.out[d]);
  std::vector<UpsampleTap> taps(static_cast<std::size_t>(s.out[d]));
  for (std::int64_t dst = 0; dst < s.out[d]; ++dst) {
    UpsampleTap& t = taps[static_cast<std::size_t>(dst)];
    t.i0 = t.i1 = std::min(static_cast<std::int64_t>(std::floor(static_cast<float>(dst) * scale)), s.in[d] - 1);
  }
  return taps;
}

// The source coordinate in T: PyTorch's accumulate type (float for f16, bf16 and f32; double for f64).
template <class T>
std::vector<UpsampleTap> bilinear_taps(const Sizes& s, int d, bool align) {
  const std::int64_t in = s.in[d], out = s.out[d];
  T scale;
  if (align) scale = out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0);
  else scale = s.factor[d] > 0 ? static_cast<T>(1.0 / s.factor[d]) : static_cast<T>(in) / static_cast<T>(out);
  std::vector<UpsampleTap> taps(static_cast<std::size_t>(out));
  for (std::int64_t dst = 0; dst < out; ++dst) {
    T src = align ? scale * static_cast<T>(dst) : std::max(scale * (static_cast<T>(dst) + T(0.5)) - T(0.5), T(0));
    auto i0 = static_cast<std::int64_t>(src);
    T f = src - static_cast<T>(i0);
    taps[static_cast<std::size_t>(dst)] = {i0, i0 + (i0 < in - 1 ? 1 : 0), static_cast<double>(T(1) - f),
                                           static_cast<double>(f)};
  }
  return taps;
}

std::vector<UpsampleTap> taps(const Sizes& s, int d, bool bilinear, bool align, Dtype dtype) {
  if (!bilinear) return nearest_taps(s, d);
  return dtype == Dtype::f64 ? bilinear_taps<double>(s, d, align) : bilinear_taps<float>(s, d, align);
}

Launch upsample(Call& c, const DeviceArgs& dev, Outs& o, bool bilinear) {
  const HostTensor& x = tensor_arg(c, 0, "input");
  if (!is_floating(x.dtype)) fail("upsampling needs a floating input");
  const bool align = bilinear && bool_arg(c, 2, "align_corners");
  Sizes s = sizes(c, x.shape, 1, bilinear ? 3 : 2);
  return cuda::upsample2d(o[0], dev.view(x), bilinear, taps(s, 0, bilinear, align, x.dtype),
                          taps(s, 1, bilinear, align, x.dtype));
}

Launch upsample_backward(Call& c, const DeviceArgs& dev, Outs& o, bool bilinear) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  auto input_size = int_list_arg(c, 2, "input_size");
  if (!input_size) fail("input_size is missing");
  const bool align = bilinear && bool_arg(c, 3, "align_corners");
  Sizes s = sizes(c, *input_size, 1, bilinear ? 4 : 3);
  const std::vector<std::int64_t> gshape{(*input_size)[0], (*input_size)[1], s.out[0], s.out[1]};
  if (g.shape != gshape) fail(fmt::format("grad_output {} must be {}", shape_text(g.shape), shape_text(gshape)));
  return cuda::upsample2d_backward(o[0], dev.view(g), bilinear, taps(s, 0, bilinear, align, g.dtype),
                                   taps(s, 1, bilinear, align, g.dtype));
}

Launch upsample_nearest2d(Call& c, const DeviceArgs& d, Outs& o) { return upsample(c, d, o, false); }
Launch upsample_nearest2d_backward(Call& c, const DeviceArgs& d, Outs& o) { return upsample_backward(c, d, o, false); }
Launch upsample_bilinear2d(Call& c, const DeviceArgs& d, Outs& o) { return upsample(c, d, o, true); }
Launch upsample_bilinear2d_backward(Call& c, const DeviceArgs& d, Outs& o) { return upsample_backward(c, d, o, true); }

const CudaOpInfo kOps[] = {
    {"aten.upsample_nearest2d.vec", upsample_nearest2d},
    {"aten.upsample_nearest2d_backward.vec", upsample_nearest2d_backward},
    {"aten.upsample_bilinear2d.vec", upsample_bilinear2d},
    {"aten.upsample_bilinear2d_backward.vec", upsample_bilinear2d_backward},
};

}  // namespace

std::span<const CudaOpInfo> upsample_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
