// CUDA plans for reflection_pad2d and its backward: the oracle's padding
// checks (../pad_args.hpp), then reflection_pad_kernels.cu.
#include <fmt/format.h>

#include "../../common/args.hpp"
#include "../../cuda_families.hpp"
#include "../pad_args.hpp"
#include "reflection_pad_kernels.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

// reflection_pad2d(self, padding)
Launch reflection_pad2d(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  ReflectionPad s = reflection_pad_of(c, 1, x);
  return cuda::reflection_pad2d(o[0], d.view(x), s.left, s.top);
}

// reflection_pad2d_backward(grad_output, self, padding)
Launch reflection_pad2d_backward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const HostTensor& x = tensor_arg(c, 1, "self");
  ReflectionPad s = reflection_pad_of(c, 2, x);
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
