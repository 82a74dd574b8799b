// The window arguments of im2col / col2im and the arguments of
// unfold_backward, one definition for the CPU oracles (fold.cpp) and the CUDA
// plans (cuda/fold_cuda.cpp).
#pragma once

#include <fmt/format.h>

#include <array>

#include "../common/args.hpp"

namespace kb::backendbench::aten {

struct FoldArgs {
  std::int64_t kh, kw, dh, dw, ph, pw, sh, sw;
};

inline std::array<std::int64_t, 2> fold_pair_arg(const Call& c, std::size_t pos, std::string_view name) {
  auto v = int_list_arg(c, pos, name);
  if (!v || v->size() != 2) fail(fmt::format("{} must be a list of two ints", name));
  return {(*v)[0], (*v)[1]};
}

// kernel_size, dilation, padding, stride from position `pos` on.
inline FoldArgs fold_window_of(const Call& c, std::size_t pos) {
  auto k = fold_pair_arg(c, pos, "kernel_size"), d = fold_pair_arg(c, pos + 1, "dilation"),
       p = fold_pair_arg(c, pos + 2, "padding"), s = fold_pair_arg(c, pos + 3, "stride");
  FoldArgs w{k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1]};
  if (w.kh <= 0 || w.kw <= 0 || w.dh <= 0 || w.dw <= 0 || w.sh <= 0 || w.sw <= 0 || w.ph < 0 || w.pw < 0)
    fail("kernel_size, dilation and stride must be positive and padding not negative");
  return w;
}

// The number of window positions along a dim of `size`.
inline std::int64_t fold_blocks(std::int64_t size, std::int64_t k, std::int64_t d, std::int64_t p, std::int64_t s) {
  const std::int64_t span = size + 2 * p - (d * (k - 1) + 1);
  if (span < 0)
    fail(fmt::format("a dim of {} padded by {} is smaller than the dilated kernel {}", size, p, d * (k - 1) + 1));
  return span / s + 1;
}

// unfold_backward(grad_in, input_sizes, dim, size, step), checked: the input is `sizes`, seen as
// [outer, len, inner] around `dim`.
struct UnfoldArgs {
  std::vector<std::int64_t> sizes;
  std::int64_t outer = 1, len = 1, inner = 1, size = 0, step = 1;
};

inline UnfoldArgs unfold_backward_args(const Call& c, const HostTensor& g) {
  auto sizes = int_list_arg(c, 1, "input_sizes");
  if (!sizes) fail("input_sizes must be a list of ints");
  UnfoldArgs a;
  a.sizes = *sizes;
  const std::size_t rank = sizes->size();
  const auto dim = static_cast<std::size_t>(wrap_dim(int_arg(c, 2, "dim"), rank == 0 ? 1 : rank));
  a.size = int_arg(c, 3, "size");
  a.step = int_arg(c, 4, "step");
  if (a.size < 0 || a.step <= 0) fail("size must be >= 0 and step > 0");
  a.len = rank ? (*sizes)[dim] : 1;
  if (a.size > a.len) fail(fmt::format("size {} is larger than the dim's {}", a.size, a.len));
  const std::int64_t windows = (a.len - a.size) / a.step + 1;
  std::vector<std::int64_t> want = *sizes;
  if (rank) want[dim] = windows;
  want.push_back(a.size);
  if (g.shape != want) fail(fmt::format("grad_in {} must be {}", shape_text(g.shape), shape_text(want)));
  for (std::size_t d = 0; d < rank; ++d) {
    if (d < dim) a.outer *= (*sizes)[d];
    if (d > dim) a.inner *= (*sizes)[d];
  }
  return a;
}

}  // namespace kb::backendbench::aten
