// CUDA plans for cumsum and var_mean.correction (scan_kernels.cu), with the
// oracle's argument rules (reduction.cpp).
#include <fmt/format.h>

#include "../../common/args.hpp"
#include "../../cuda_families.hpp"
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

const CudaOpInfo kOps[] = {
    {"aten.cumsum.default", cumsum},
    {"aten.var_mean.correction", var_mean},
};

}  // namespace

std::span<const CudaOpInfo> scan_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
