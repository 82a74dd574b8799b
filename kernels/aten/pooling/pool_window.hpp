// The window arguments of the 2-D pooling operators, one definition for the
// CPU oracles (pooling.cpp) and the CUDA plans (cuda/pooling_cuda.cpp):
// sizes given as one or two values, PyTorch's output-size rule with
// ceil_mode, and its checks (positive sizes, padding at most half the
// effective kernel).
#pragma once

#include <fmt/format.h>

#include "../common/args.hpp"

namespace kb::backendbench::aten {

inline std::vector<std::int64_t> pair_arg(const Call& c, std::size_t pos, const char* name, std::vector<std::int64_t> dflt) {
  auto v = int_list_arg(c, pos, name);
  if (!v || v->empty()) return dflt;
  if (v->size() == 1) return {(*v)[0], (*v)[0]};
  if (v->size() != 2) fail(fmt::format("{} must hold 1 or 2 values, got {}", name, v->size()));
  return *v;
}

inline std::int64_t pooled_size(std::int64_t in, std::int64_t k, std::int64_t pad, std::int64_t stride, std::int64_t dil,
                         bool ceil_mode) {
  const std::int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  std::int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// A pooling window: kernel, stride, padding and dilation per spatial dim, ceil_mode, the output size.
struct PoolArgs {
  std::vector<std::int64_t> k, s, p, d{1, 1};
  bool ceil_mode = false;
  std::int64_t oh = 0, ow = 0;
};

// The window arguments starting at `at` (kernel_size, stride, padding[, dilation], ceil_mode) over an h x w plane.
inline PoolArgs pool_window(const Call& c, std::int64_t h, std::int64_t w, std::size_t at, bool dilation) {
  PoolArgs win;
  win.k = pair_arg(c, at, "kernel_size", {});
  if (win.k.empty()) fail("kernel_size is missing");
  win.s = pair_arg(c, at + 1, "stride", win.k);
  win.p = pair_arg(c, at + 2, "padding", {0, 0});
  if (dilation) win.d = pair_arg(c, at + 3, "dilation", {1, 1});
  win.ceil_mode = bool_arg(c, at + (dilation ? 4 : 3), "ceil_mode", false);
  for (int i = 0; i < 2; ++i) {
    if (win.k[i] < 1 || win.s[i] < 1 || win.d[i] < 1) fail("kernel_size, stride and dilation must be positive");
    const std::int64_t effective = (win.k[i] - 1) * win.d[i] + 1;
    if (win.p[i] < 0 || win.p[i] > effective / 2)
      fail(fmt::format("padding {} must be between 0 and half the effective kernel size {}", win.p[i], effective));
  }
  win.oh = pooled_size(h, win.k[0], win.p[0], win.s[0], win.d[0], win.ceil_mode);
  win.ow = pooled_size(w, win.k[1], win.p[1], win.s[1], win.d[1], win.ceil_mode);
  if (win.oh < 1 || win.ow < 1) fail(fmt::format("output size {}x{} is too small", win.oh, win.ow));
  return win;
}

// x's shape with its last two dims replaced by h and w.
inline std::vector<std::int64_t> with_plane(const HostTensor& x, std::int64_t h, std::int64_t w) {
  std::vector<std::int64_t> s(x.shape.begin(), x.shape.end() - 2);
  s.push_back(h);
  s.push_back(w);
  return s;
}

}  // namespace kb::backendbench::aten
