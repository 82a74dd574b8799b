// CUDA plan for topk (topk_kernels.cu), with the oracle's argument rules
// (norm_topk.cpp).
#include <fmt/format.h>

#include "../../common/args.hpp"
#include "../../cuda_families.hpp"
#include "topk_kernels.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

// topk(self, k, dim=-1, largest=True, sorted=True) -> (values, indices); always sorted, as the oracle.
Launch topk(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  require_real(x, c.op);
  const std::int64_t k = int_arg(c, 1, "k");
  const std::int64_t dim = wrap_dim(int_arg(c, 2, "dim", -1), x.rank());
  const bool largest = bool_arg(c, 3, "largest", true);
  const std::int64_t len = x.rank() ? x.shape[static_cast<std::size_t>(dim)] : 1;
  if (k < 0 || k > len) fail(fmt::format("k ({}) is out of range for a dim of size {}", k, len));
  return cuda::topk(o[0], o[1], d.view(x), x.rank() ? dim : 0, k, largest);
}

const CudaOpInfo kOps[] = {
    {"aten.topk.default", topk},
};

}  // namespace

std::span<const CudaOpInfo> topk_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
