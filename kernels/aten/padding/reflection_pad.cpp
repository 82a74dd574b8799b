// reflection_pad2d and its backward: the last two dims of a 3-D or 4-D input
// padded by mirroring about the edge (the edge itself not repeated), padding
// [left, right, top, bottom], each smaller than the dim it pads, as PyTorch
// requires. The backward sums each output gradient into the input element it
// was copied from.
#include <fmt/format.h>

#include "../common/args.hpp"
#include "../families.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

struct Pad {
  std::int64_t planes, h, w, oh, ow, left, top;
  std::vector<std::int64_t> out_shape;
};

Pad pad_of(const Call& c, std::size_t pos, const HostTensor& x) {
  if (x.rank() != 3 && x.rank() != 4) fail(fmt::format("input must be 3-D or 4-D, got {}", shape_text(x.shape)));
  auto p = int_list_arg(c, pos, "padding");
  if (!p || p->size() != 4) fail("padding must be [left, right, top, bottom]");
  const std::size_t r = x.rank();
  Pad s{1, x.shape[r - 2], x.shape[r - 1], 0, 0, (*p)[0], (*p)[2], x.shape};
  for (std::size_t d = 0; d + 2 < r; ++d) s.planes *= x.shape[d];
  const std::int64_t right = (*p)[1], bottom = (*p)[3];
  for (std::int64_t v : *p)
    if (v < 0) fail("padding must not be negative");
  if (s.left >= s.w || right >= s.w || s.top >= s.h || bottom >= s.h)
    fail(fmt::format("padding {} must be smaller than the padded dims {}", shape_text(*p), shape_text({s.h, s.w})));
  s.oh = s.h + s.top + bottom;
  s.ow = s.w + s.left + right;
  s.out_shape[r - 2] = s.oh;
  s.out_shape[r - 1] = s.ow;
  return s;
}

std::int64_t reflect(std::int64_t i, std::int64_t n) {
  if (i < 0) return -i;
  if (i >= n) return 2 * (n - 1) - i;
  return i;
}

// reflection_pad2d(self, padding)
Out reflection_pad2d(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  Pad s = pad_of(c, 1, x);
  HostTensor out = empty_tensor(x.dtype, s.out_shape, c.meta);
  if (c.meta) return {out};
  HostTensor xc = contiguous_copy(x);
  for (std::int64_t p = 0; p < s.planes; ++p)
    for (std::int64_t y = 0; y < s.oh; ++y)
      for (std::int64_t xo = 0; xo < s.ow; ++xo)
        out.store((p * s.oh + y) * s.ow + xo,
                  xc.load((p * s.h + reflect(y - s.top, s.h)) * s.w + reflect(xo - s.left, s.w)));
  return {out};
}

// reflection_pad2d_backward(grad_output, self, padding)
Out reflection_pad2d_backward(Call& c) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const HostTensor& x = tensor_arg(c, 1, "self");
  Pad s = pad_of(c, 2, x);
  if (g.shape != s.out_shape)
    fail(fmt::format("grad_output {} must be the padded shape {}", shape_text(g.shape), shape_text(s.out_shape)));
  HostTensor out = empty_tensor(x.dtype, x.shape, c.meta);
  if (c.meta) return {out};
  std::vector<double> gv = to_doubles(g), acc(static_cast<std::size_t>(x.numel()), 0.0);
  for (std::int64_t p = 0; p < s.planes; ++p)
    for (std::int64_t y = 0; y < s.oh; ++y)
      for (std::int64_t xo = 0; xo < s.ow; ++xo)
        acc[static_cast<std::size_t>((p * s.h + reflect(y - s.top, s.h)) * s.w + reflect(xo - s.left, s.w))] +=
            gv[static_cast<std::size_t>((p * s.oh + y) * s.ow + xo)];
  for (std::size_t i = 0; i < acc.size(); ++i) out.store(static_cast<std::int64_t>(i), acc[i]);
  return {out};
}

const OpInfo kOps[] = {
    {"aten.reflection_pad2d.default", "padding", reflection_pad2d, nullptr},
    {"aten.reflection_pad2d_backward.default", "padding", reflection_pad2d_backward, nullptr},
};

}  // namespace

std::span<const OpInfo> padding_ops() { return kOps; }

}  // namespace kb::backendbench::aten
