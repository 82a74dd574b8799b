// CUDA plans for reflection_pad2d and its backward: the oracle's padding
// checks (reflection_pad.cpp), then reflection_pad_kernels.cu.
#include <fmt/format.h>

#include "../../common/args.hpp"
#include "../../cuda_families.hpp"
#include "reflection_pad_kernels.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

struct Pad {
  std::int64_t left = 0, top = 0;
  std::vector<std::int64_t> out_shape;
};

Pad pad_of(const Call& c, std::size_t pos, const HostTensor& x) {
  if (x.rank() != 3 && x.rank() != 4) fail(fmt::format("input must be 3-D or 4-D, got {}", shape_text(x.shape)));
  auto p = int_list_arg(c, pos, "padding");
  if (!p || p->size() != 4) fail("padding must be [left, right, top, bottom]");
  const std::size_t r = x.rank();
  const std::int64_t h = x.shape[r - 2], w = x.shape[r - 1];
  for (std::int64_t v : *p)
    if (v < 0) fail("padding must not be negative");
  if ((*p)[0] >= w || (*p)[1] >= w || (*p)[2] >= h || (*p)[3] >= h)
    fail(fmt::format("padding {} must be smaller than the padded dims {}", shape_text(*p), shape_text({h, w})));
  Pad s{(*p)[0], (*p)[2], x.shape};
  s.out_shape[r - 2] = h + (*p)[2] + (*p)[3];
  s.out_shape[r - 1] = w + (*p)[0] + (*p)[1];
  return s;
}

// reflection_pad2d(self, padding)
Launch reflection_pad2d(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  Pad s = pad_of(c, 1, x);
  return cuda::reflection_pad2d(o[0], d.view(x), s.left, s.top);
}

// reflection_pad2d_backward(grad_output, self, padding)
Launch reflection_pad2d_backward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const HostTensor& x = tensor_arg(c, 1, "self");
  Pad s = pad_of(c, 2, x);
  if (g.shape != s.out_shape)
    fail(fmt::format("grad_output {} must be the padded shape {}", shape_text(g.shape), shape_text(s.out_shape)));
  if (g.dtype != x.dtype) fail("grad_output must have self's dtype on CUDA");
  return cuda::reflection_pad2d_backward(o[0], d.view(g), s.left, s.top);
}

const CudaOpInfo kOps[] = {
    {"aten.reflection_pad2d.default", reflection_pad2d},
    {"aten.reflection_pad2d_backward.default", reflection_pad2d_backward},
};

}  // namespace

std::span<const CudaOpInfo> padding_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
