// CUDA plans for convolution and convolution_backward over kb's own kernels
// (conv_kernels.hpp). Arguments are parsed and checked by the oracle's
// conv_params (conv_geometry.hpp), so both sides refuse the same calls.
//
// The call's tensors map onto the non-transposed convolution's sides as in
// the oracle: a plain convolution's input is the "in" side and its output the
// "out" side; a transposed one's input is the "out" side and its output the
// "in" side (its weight is already [Co][Ci/G][k] of that convolution). So
//   convolution:           forward (plain) or backward data (transposed)
//   grad_input:            backward data (plain) or forward (transposed)
//   grad_weight:           backward weight with gy and x on their sides
//   grad_bias:             the sum of grad_output over all dims but 1.
#include <fmt/format.h>

#include "../../common/args.hpp"
#include "../../common/cuda_engine.hpp"
#include "../../cuda_families.hpp"
#include "../conv_geometry.hpp"
#include "conv_kernels.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

cuda::ConvShape shape_of(const ConvGeometry& g) {
  const std::size_t rank = g.in.size();
  if (rank < 1 || rank > 3) fail(fmt::format("convolution on CUDA takes 1 to 3 spatial dims, not {}", rank));
  cuda::ConvShape s;
  s.rank = static_cast<int>(rank);
  s.n = g.n, s.ci = g.ci, s.co = g.co, s.groups = g.groups;
  for (std::size_t d = 0; d < rank; ++d) {
    s.in[d] = g.in[d], s.out[d] = g.out[d], s.k[d] = g.k[d];
    s.stride[d] = g.stride[d], s.pad[d] = g.pad[d], s.dil[d] = g.dil[d];
  }
  return s;
}

// convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups)
Launch convolution(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "input");
  const HostTensor& w = tensor_arg(c, 1, "weight");
  const HostTensor* b = optional_tensor(c, 2, "bias");
  ConvParams p = conv_params(c, x, w, 3);
  const std::int64_t cy = p.y_shape[1];
  if (b && (b->rank() != 1 || b->shape[0] != cy)) fail(fmt::format("bias {} must be [{}]", shape_text(b->shape), cy));
  const cuda::ConvShape s = shape_of(p.g);
  DView bias;
  if (b) bias = d.view(*b);
  return p.transposed ? cuda::conv_backward_data(s, o[0], d.view(x), d.view(w), b ? &bias : nullptr)
                      : cuda::conv_forward(s, o[0], d.view(x), d.view(w), b ? &bias : nullptr);
}

// convolution_backward(grad_output, input, weight, bias_sizes?, stride, padding, dilation, transposed,
//                      output_padding, groups, output_mask) -> (grad_input, grad_weight, grad_bias)
Launch convolution_backward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& gy = tensor_arg(c, 0, "grad_output");
  const HostTensor& x = tensor_arg(c, 1, "input");
  const HostTensor& w = tensor_arg(c, 2, "weight");
  ConvParams p = conv_params(c, x, w, 4);
  if (gy.shape != p.y_shape)
    fail(fmt::format("grad_output {} must have the convolution's output shape {}", shape_text(gy.shape),
                     shape_text(p.y_shape)));
  if (gy.dtype != x.dtype) fail("grad_output and input must share one dtype");
  if (o.size() != 3) fail("internal: convolution_backward needs three outputs");
  const cuda::ConvShape s = shape_of(p.g);
  const DView vgy = d.view(gy), vx = d.view(x), vw = d.view(w);
  // The tensors on the non-transposed convolution's out side and in side.
  const DView& out_side = p.transposed ? vx : vgy;
  const DView& in_side = p.transposed ? vgy : vx;
  std::vector<Launch> steps;
  if (!o[0].undefined)
    steps.push_back(p.transposed ? cuda::conv_forward(s, o[0], vgy, vw, nullptr)
                                 : cuda::conv_backward_data(s, o[0], vgy, vw, nullptr));
  if (!o[1].undefined) steps.push_back(cuda::conv_backward_weight(s, o[1], out_side, in_side));
  if (!o[2].undefined) {
    std::vector<std::int64_t> dims{0};
    for (std::size_t k = 2; k < gy.shape.size(); ++k) dims.push_back(static_cast<std::int64_t>(k));
    // An empty batch sums nothing: zeros.
    steps.push_back(vgy.numel() == 0 ? cuda::fill(o[2], 0.0) : cuda::reduce(cuda::ROp::sum, o[2], vgy, dims, false));
  }
  return sequence(std::move(steps));
}

const CudaOpInfo kOps[] = {
    {"aten.convolution.default", convolution},
    {"aten.convolution_backward.default", convolution_backward},
};

}  // namespace

std::span<const CudaOpInfo> convolution_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
