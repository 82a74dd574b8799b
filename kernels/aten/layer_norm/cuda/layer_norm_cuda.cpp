// CUDA plans for native_layer_norm and its backward: the engine's row kernel
// over the normalized (last) dims (fp32 statistics, two passes for the
// variance); the backward's weight and bias grads are column sums in fp64.
#include "../../common/args.hpp"
#include "../../common/cuda_engine.hpp"
#include "../../cuda_families.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

Launch layer_norm(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "input");
  auto normalized = int_list_arg(c, 1, "normalized_shape").value_or(std::vector<std::int64_t>{});
  if (normalized.size() > x.rank()) fail("normalized_shape has more dims than the input");
  const HostTensor* w = optional_tensor(c, 2, "weight");
  const HostTensor* b = optional_tensor(c, 3, "bias");
  std::optional<DView> wv, bv;
  if (w) wv = d.view(*w);
  if (b) bv = d.view(*b);
  return cuda::layer_norm(o[0], o[1], o[2], d.view(x), wv ? &*wv : nullptr, bv ? &*bv : nullptr,
                          static_cast<std::int64_t>(normalized.size()), number_arg(c, 4, "eps"));
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?, bias?, output_mask)
Launch layer_norm_backward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& g = tensor_arg(c, 0, "grad_out");
  const HostTensor& x = tensor_arg(c, 1, "input");
  auto normalized = int_list_arg(c, 2, "normalized_shape").value_or(std::vector<std::int64_t>{});
  if (normalized.size() > x.rank()) fail("normalized_shape has more dims than the input");
  const HostTensor* w = optional_tensor(c, 5, "weight");
  std::optional<DView> wv;
  if (w) wv = d.view(*w);
  return cuda::layer_norm_backward(o[0], o[1], o[2], d.view(g), d.view(x), d.view(tensor_arg(c, 3, "mean")),
                                   d.view(tensor_arg(c, 4, "rstd")), wv ? &*wv : nullptr,
                                   static_cast<std::int64_t>(normalized.size()));
}

const CudaOpInfo kOps[] = {
    {"aten.native_layer_norm.default", layer_norm},
    {"aten.native_layer_norm_backward.default", layer_norm_backward},
};

}  // namespace

std::span<const CudaOpInfo> layer_norm_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
