// unsqueeze_(self, dim): self becomes a view with a new dim of size 1 at
// `dim` (in [-rank - 1, rank]); its stride is size * stride of the dim it
// precedes (1 at the end), as PyTorch gives it. Storage is untouched.
#include <fmt/format.h>

#include "../common/args.hpp"
#include "../families.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

Out unsqueeze_inplace(Call& c) {
  HostTensor& self = tensor_arg_mut(c, 0, "self");
  const auto dim = static_cast<std::size_t>(wrap_dim(int_arg(c, 1, "dim"), self.rank() + 1));
  const std::int64_t stride = dim >= self.rank() ? 1 : self.shape[dim] * self.strides[dim];
  self.shape.insert(self.shape.begin() + static_cast<std::ptrdiff_t>(dim), 1);
  self.strides.insert(self.strides.begin() + static_cast<std::ptrdiff_t>(dim), stride);
  return {self};
}

const OpInfo kOps[] = {
    {"aten.unsqueeze_.default", "copy", unsqueeze_inplace, nullptr},
};

}  // namespace

std::span<const OpInfo> inplace_view_ops() { return kOps; }

}  // namespace kb::backendbench::aten
