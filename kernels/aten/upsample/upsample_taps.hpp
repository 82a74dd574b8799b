// The arguments of upsample_nearest2d / upsample_bilinear2d and their
// backwards, and PyTorch's source-coordinate arithmetic, one definition for
// the CPU oracle (upsample.cpp, which documents the rules) and the CUDA plans
// (cuda/upsample_cuda.cpp, which turns them into tap tables).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "../common/args.hpp"

namespace kb::backendbench::aten {

inline std::optional<std::vector<double>> float_list_arg(const Call& c, std::size_t pos, const char* name) {
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
struct UpsampleSizes {
  std::int64_t in[2] = {1, 1}, out[2] = {1, 1};
  double factor[2] = {0, 0};
};

inline UpsampleSizes upsample_sizes(const Call& c, const std::vector<std::int64_t>& input_shape, std::size_t out_pos,
                                    std::size_t scale_pos) {
  if (input_shape.size() != 4) fail(fmt::format("input must be [N, C, H, W], got {}", shape_text(input_shape)));
  UpsampleSizes s;
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

inline float nearest_scale(const UpsampleSizes& s, int d) {
  return s.factor[d] > 0 ? static_cast<float>(1.0 / s.factor[d])
                         : static_cast<float>(s.in[d]) / static_cast<float>(s.out[d]);
}
inline std::int64_t nearest_src(float scale, std::int64_t dst, std::int64_t in) {
  return std::min(static_cast<std::int64_t>(std::floor(static_cast<float>(dst) * scale)), in - 1);
}

// The taps of bilinear output position dst along one dim, the source
// coordinate computed in T (PyTorch's accumulate type: float for f16, bf16 and
// f32, double for f64).
struct BilinearTaps {
  std::int64_t i0, i1;
  double w0, w1;
};
template <class T>
BilinearTaps bilinear_taps(const UpsampleSizes& s, int d, bool align, std::int64_t dst) {
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
inline BilinearTaps bilinear_taps(const UpsampleSizes& s, int d, bool align, std::int64_t dst, Dtype dtype) {
  return dtype == Dtype::f64 ? bilinear_taps<double>(s, d, align, dst) : bilinear_taps<float>(s, d, align, dst);
}

}  // namespace kb::backendbench::aten
