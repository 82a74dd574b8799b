// reflection_pad2d and its backward: the last two dims of a 3-D or 4-D input
// padded by mirroring about the edge (the edge itself not repeated), padding
// [left, right, top, bottom], each smaller than the dim it pads, as PyTorch
// requires. The backward sums each output gradient into the input element it
// was copied from.
#include <fmt/format.h>

#include "../common/args.hpp"
#include "../families.hpp"
#include "pad_args.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

std::int64_t reflect(std::int64_t i, std::int64_t n) {
  if (i < 0) return -i;
  if (i >= n) return 2 * (n - 1) - i;
  return i;
}

// reflection_pad2d(self, padding)
Out reflection_pad2d(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  ReflectionPad s = reflection_pad_of(c, 1, x);
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
  ReflectionPad s = reflection_pad_of(c, 2, x);
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
