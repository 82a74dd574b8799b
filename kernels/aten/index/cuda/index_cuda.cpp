// CUDA plans for the gathering index operators (index_select, gather,
// embedding) through the engine's gather kernel. Indices are the valid ones
// the family's prepare functions made; negative ones count from the end.
#include <fmt/format.h>

#include "../../common/args.hpp"
#include "../../common/cuda_engine.hpp"
#include "../../cuda_families.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

std::size_t dim_of(const Call& c, std::size_t pos, const HostTensor& t) {
  return t.rank() ? static_cast<std::size_t>(wrap_dim(int_arg(c, pos, "dim"), t.rank())) : 0;
}

// index_select(self, dim, index): out[.., j, ..] = self[.., index[j], ..]
Launch index_select(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  const HostTensor& index = tensor_arg(c, 2, "index");
  if (index.rank() > 1) fail("index_select: index must be 0-D or 1-D");
  if (self.rank() == 0) return cuda::copy(o[0], d.view(self));
  const std::size_t dim = dim_of(c, 1, self);
  std::vector<std::int64_t> ss = self.strides, is(self.rank(), 0);
  ss[dim] = 0;
  is[dim] = index.rank() ? index.strides[0] : 0;
  return cuda::gather(o[0], d.view(self), ss, d.view(index), is, self.strides[dim], self.shape[dim]);
}

// gather(self, dim, index): out[i] = self[i with i[dim] = index[i]]
Launch gather(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  const HostTensor& index = tensor_arg(c, 2, "index");
  if (self.rank() == 0 || index.rank() != self.rank()) {
    if (self.rank() > 1 || index.rank() > 1) fail("gather: index and self must have the same rank");
    std::vector<std::int64_t> ss(index.rank(), 0), is = index.strides;
    return cuda::gather(o[0], d.view(self), ss, d.view(index), is, self.rank() ? self.strides[0] : 0,
                        self.rank() ? self.shape[0] : 1);
  }
  const std::size_t dim = dim_of(c, 1, self);
  std::vector<std::int64_t> ss = self.strides;
  ss[dim] = 0;
  return cuda::gather(o[0], d.view(self), ss, d.view(index), index.strides, self.strides[dim], self.shape[dim]);
}

// embedding(weight [V, D], indices): out[i..., :] = weight[indices[i...], :]
Launch embedding(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& w = tensor_arg(c, 0, "weight");
  const HostTensor& idx = tensor_arg(c, 1, "indices");
  if (w.rank() != 2) fail("embedding: weight must be 2-D");
  std::vector<std::int64_t> ss(idx.rank(), 0), is = idx.strides;
  ss.push_back(w.strides[1]);
  is.push_back(0);
  return cuda::gather(o[0], d.view(w), ss, d.view(idx), is, w.strides[0], w.shape[0]);
}

const CudaOpInfo kOps[] = {
    {"aten.index_select.default", index_select},
    {"aten.gather.default", gather},
    {"aten.embedding.default", embedding},
};

}  // namespace

std::span<const CudaOpInfo> index_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
