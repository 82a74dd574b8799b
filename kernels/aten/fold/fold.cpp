// Sliding windows: im2col (unfold of a 4-D image into columns), col2im (fold,
// summing overlapping windows), their backwards (each is the other's
// adjoint: im2col_backward is col2im, col2im_backward is im2col), and
// unfold_backward (the gradient of Tensor.unfold(dim, size, step)).
//
// im2col of [N, C, H, W] (or [C, H, W]) with kernel (kh, kw), dilation,
// padding, stride gives [N, C * kh * kw, L], L = oh * ow, column
// (c * kh + i) * kw + j at position (y, x) holding
// input[c, y * sh - ph + i * dh, x * sw - pw + j * dw] (0 outside).
#include <fmt/format.h>

#include <array>

#include "../common/args.hpp"
#include "../families.hpp"
#include "fold_args.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

// The image [batch, C, H, W] <-> columns [batch, C*kh*kw, oh*ow] map, calling f(image index, column index).
template <class F>
void for_each_tap(std::int64_t batch, std::int64_t ch, std::int64_t h, std::int64_t w, const FoldArgs& k, F&& f) {
  const std::int64_t oh = fold_blocks(h, k.kh, k.dh, k.ph, k.sh), ow = fold_blocks(w, k.kw, k.dw, k.pw, k.sw);
  const std::int64_t rows = ch * k.kh * k.kw, l = oh * ow;
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t c = 0; c < ch; ++c)
      for (std::int64_t i = 0; i < k.kh; ++i)
        for (std::int64_t j = 0; j < k.kw; ++j) {
          const std::int64_t row = (c * k.kh + i) * k.kw + j;
          for (std::int64_t y = 0; y < oh; ++y) {
            const std::int64_t iy = y * k.sh - k.ph + i * k.dh;
            if (iy < 0 || iy >= h) continue;
            for (std::int64_t x = 0; x < ow; ++x) {
              const std::int64_t ix = x * k.sw - k.pw + j * k.dw;
              if (ix < 0 || ix >= w) continue;
              f(((n * ch + c) * h + iy) * w + ix, (n * rows + row) * l + y * ow + x);
            }
          }
        }
}

// im2col(self, kernel_size, dilation, padding, stride); col2im_backward has the same arguments.
Out im2col(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  const FoldArgs k = fold_window_of(c, 1);
  if (x.rank() != 3 && x.rank() != 4) fail(fmt::format("input must be 3-D or 4-D, got {}", shape_text(x.shape)));
  const bool batched = x.rank() == 4;
  const std::int64_t n = batched ? x.shape[0] : 1, ch = x.shape[x.rank() - 3], h = x.shape[x.rank() - 2],
                     w = x.shape[x.rank() - 1];
  const std::int64_t l = fold_blocks(h, k.kh, k.dh, k.ph, k.sh) * fold_blocks(w, k.kw, k.dw, k.pw, k.sw);
  std::vector<std::int64_t> shape{ch * k.kh * k.kw, l};
  if (batched) shape.insert(shape.begin(), n);
  HostTensor out = empty_tensor(x.dtype, shape, c.meta);
  if (c.meta) return {out};
  HostTensor xc = contiguous_copy(x);
  for_each_tap(n, ch, h, w, k, [&](std::int64_t img, std::int64_t col) { out.store(col, xc.load(img)); });
  return {out};
}

// col2im(self, output_size, kernel_size, dilation, padding, stride); im2col_backward has the same arguments.
Out col2im(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  const auto size = fold_pair_arg(c, 1, "output_size");
  const FoldArgs k = fold_window_of(c, 2);
  if (x.rank() != 2 && x.rank() != 3) fail(fmt::format("input must be 2-D or 3-D, got {}", shape_text(x.shape)));
  const bool batched = x.rank() == 3;
  const std::int64_t n = batched ? x.shape[0] : 1, rows = x.shape[x.rank() - 2], l = x.shape[x.rank() - 1];
  if (rows % (k.kh * k.kw) != 0)
    fail(fmt::format("input's dim {} ({}) must be divisible by the kernel's {} taps", x.rank() - 2, rows, k.kh * k.kw));
  const std::int64_t ch = rows / (k.kh * k.kw);
  const std::int64_t blocks_want =
      fold_blocks(size[0], k.kh, k.dh, k.ph, k.sh) * fold_blocks(size[1], k.kw, k.dw, k.pw, k.sw);
  if (l != blocks_want)
    fail(fmt::format("input holds {} blocks, output_size {} with these windows gives {}", l,
                     shape_text({size[0], size[1]}), blocks_want));
  std::vector<std::int64_t> shape{ch, size[0], size[1]};
  if (batched) shape.insert(shape.begin(), n);
  HostTensor out = empty_tensor(x.dtype, shape, c.meta);
  if (c.meta) return {out};
  std::vector<double> xv = to_doubles(x), acc(static_cast<std::size_t>(out.numel()), 0.0);
  for_each_tap(n, ch, size[0], size[1], k,
               [&](std::int64_t img, std::int64_t col) { acc[static_cast<std::size_t>(img)] += xv[static_cast<std::size_t>(col)]; });
  for (std::size_t i = 0; i < acc.size(); ++i) out.store(static_cast<std::int64_t>(i), acc[i]);
  return {out};
}

// unfold_backward(grad_in, input_sizes, dim, size, step): grad_in is
// input_sizes with dim replaced by the window count and a trailing dim of
// `size`; window j's element k goes back to position j * step + k of dim.
Out unfold_backward(Call& c) {
  const HostTensor& g = tensor_arg(c, 0, "grad_in");
  const UnfoldArgs u = unfold_backward_args(c, g);
  HostTensor out = empty_tensor(g.dtype, u.sizes, c.meta);
  if (c.meta) return {out};
  const std::int64_t outer = u.outer, inner = u.inner, len = u.len, size = u.size, step = u.step;
  const std::int64_t windows = (len - size) / step + 1;
  std::vector<double> gv = to_doubles(g), acc(static_cast<std::size_t>(out.numel()), 0.0);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t j = 0; j < windows; ++j)
      for (std::int64_t in = 0; in < inner; ++in)
        for (std::int64_t k = 0; k < size; ++k)
          acc[static_cast<std::size_t>((o * len + j * step + k) * inner + in)] +=
              gv[static_cast<std::size_t>(((o * windows + j) * inner + in) * size + k)];
  for (std::size_t i = 0; i < acc.size(); ++i) out.store(static_cast<std::int64_t>(i), acc[i]);
  return {out};
}

const OpInfo kOps[] = {
    {"aten.im2col.default", "fold", im2col, nullptr},
    {"aten.col2im_backward.default", "fold", im2col, nullptr},
    {"aten.col2im.default", "fold", col2im, nullptr},
    {"aten.im2col_backward.default", "fold", col2im, nullptr},
    {"aten.unfold_backward.default", "fold", unfold_backward, nullptr},
};

}  // namespace

std::span<const OpInfo> fold_ops() { return kOps; }

}  // namespace kb::backendbench::aten
