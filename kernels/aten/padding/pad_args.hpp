// reflection_pad2d's padding argument, checked once for the CPU oracle
// (reflection_pad.cpp) and the CUDA plans (cuda/reflection_pad_cuda.cpp):
// [left, right, top, bottom], none negative, each smaller than the dim it
// pads; the padded shape and plane sizes.
#pragma once

#include <fmt/format.h>

#include "../common/args.hpp"

namespace kb::backendbench::aten {

struct ReflectionPad {
  std::int64_t planes, h, w, oh, ow, left, top;
  std::vector<std::int64_t> out_shape;
};

inline ReflectionPad reflection_pad_of(const Call& c, std::size_t pos, const HostTensor& x) {
  if (x.rank() != 3 && x.rank() != 4) fail(fmt::format("input must be 3-D or 4-D, got {}", shape_text(x.shape)));
  auto p = int_list_arg(c, pos, "padding");
  if (!p || p->size() != 4) fail("padding must be [left, right, top, bottom]");
  const std::size_t r = x.rank();
  ReflectionPad s{1, x.shape[r - 2], x.shape[r - 1], 0, 0, (*p)[0], (*p)[2], x.shape};
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

}  // namespace kb::backendbench::aten
