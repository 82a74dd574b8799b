// CUDA plans for cumsum and var_mean.correction (scan_kernels.cu), and for
// norm.ScalarOpt_dim, mse_loss and mse_loss_backward (norm_loss_kernels.cu),
// with the oracles' argument rules (reduction.cpp, norm_topk.cpp).
#include <fmt/format.h>

#include "../../common/args.hpp"
#include "../../cuda_families.hpp"
#include "norm_loss_kernels.hpp"
#include "scan_kernels.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

// cumsum(self, dim, *, dtype=None)
Launch cumsum(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  require_real(x, c.op);
  const std::int64_t dim = wrap_dim(int_arg(c, 1, "dim"), x.rank());
  return cuda::cumsum(o[0], d.view(x), x.rank() ? dim : 0);
}

// var_mean.correction(self, dim=None, *, correction=None (1), keepdim=False) -> (var, mean)
Launch var_mean(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  require_real(x, c.op);
  if (!is_floating(x.dtype)) fail("var_mean needs a floating tensor");
  const double correction = has_arg(c, 99, "correction") ? number_arg(c, 99, "correction") : 1.0;
  auto dims = int_list_arg(c, 1, "dim");
  std::vector<bool> reduced(x.rank(), !dims || dims->empty());
  if (dims && !dims->empty())
    for (auto dim : *dims) {
      auto w = static_cast<std::size_t>(wrap_dim(dim, x.rank()));
      if (x.rank() == 0) continue;
      if (reduced[w]) fail(fmt::format("dim {} appears more than once", dim));
      reduced[w] = true;
    }
  return cuda::var_mean(o[0], o[1], d.view(x), reduced, correction);
}

// norm.ScalarOpt_dim(self, p, dim, keepdim=False): p = None means 2.
Launch norm_dim(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  if (!is_floating(x.dtype)) fail(fmt::format("norm needs a floating input, got {}", dtype_abbrev(x.dtype)));
  const double p = has_arg(c, 1, "p") ? number_arg(c, 1, "p") : 2.0;
  auto dims = int_list_arg(c, 2, "dim");
  std::vector<bool> reduced(x.rank(), !dims || dims->empty());
  if (dims)
    for (auto dim : *dims) {
      if (x.rank() == 0) continue;
      auto w = static_cast<std::size_t>(wrap_dim(dim, x.rank()));
      if (reduced[w] && !dims->empty()) fail(fmt::format("dim {} appears more than once", dim));
      reduced[w] = true;
    }
  return cuda::vector_norm(o[0], d.view(x), reduced, p);
}

DView broadcast_view(const HostTensor& t, const DeviceArgs& d, const std::vector<std::int64_t>& shape) {
  DView v = d.view(t);
  v.strides = broadcast_strides(t, shape);
  v.shape = shape;
  return v;
}

// mse_loss(self, target, reduction=1)
Launch mse_loss(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  const HostTensor& t = tensor_arg(c, 1, "target");
  const std::int64_t reduction = int_arg(c, 2, "reduction", 1);
  if (reduction < 0 || reduction > 2) fail(fmt::format("reduction {} is not 0, 1 or 2", reduction));
  const auto shape = broadcast_shapes(x.shape, t.shape);
  return cuda::mse_loss(o[0], broadcast_view(x, d, shape), broadcast_view(t, d, shape), reduction);
}

// mse_loss_backward(grad_output, self, target, reduction)
Launch mse_loss_backward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const HostTensor& x = tensor_arg(c, 1, "self");
  const HostTensor& t = tensor_arg(c, 2, "target");
  const std::int64_t reduction = int_arg(c, 3, "reduction");
  if (reduction < 0 || reduction > 2) fail(fmt::format("reduction {} is not 0, 1 or 2", reduction));
  const auto xt = broadcast_shapes(x.shape, t.shape);
  const auto shape = broadcast_shapes(xt, g.shape);
  std::int64_t n = 1;
  for (auto s : xt) n *= s;
  const double norm = reduction == 1 ? 2.0 / static_cast<double>(n) : 2.0;
  return cuda::mse_loss_backward(o[0], broadcast_view(g, d, shape), broadcast_view(x, d, shape),
                                 broadcast_view(t, d, shape), norm);
}

const CudaOpInfo kOps[] = {
    {"aten.cumsum.default", cumsum},
    {"aten.var_mean.correction", var_mean},
    {"aten.norm.ScalarOpt_dim", norm_dim},
    {"aten.mse_loss.default", mse_loss},
    {"aten.mse_loss_backward.default", mse_loss_backward},
};

}  // namespace

std::span<const CudaOpInfo> scan_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
