// CUDA plans for the embedding-bag operators: the oracle's argument checks
// (embedding_bag.cpp), and its index and bag-range checks on the host copy of
// the index tensors, so the kernels only read valid rows.
#include <fmt/format.h>

#include "../../common/args.hpp"
#include "../../cuda_families.hpp"
#include "../bag_args.hpp"
#include "embedding_bag_kernels.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

void check_rows(const HostTensor& indices, std::int64_t rows) {
  for (std::int64_t i = 0; i < indices.shape[0]; ++i) {
    const std::int64_t row = index_element(indices, i);
    if (row < 0 || row >= rows) fail(fmt::format("index {} is out of range for {} weight rows", row, rows));
  }
}

// _embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
//                per_sample_weights=None, include_last_offset=False, padding_idx=-1)
Launch embedding_bag(Call& c, const DeviceArgs& dev, Outs& o) {
  const HostTensor& w = tensor_arg(c, 0, "weight");
  const HostTensor& indices = tensor_arg(c, 1, "indices");
  const HostTensor& offsets = tensor_arg(c, 2, "offsets");
  const BagArgs a = bag_args_of(c);
  const std::int64_t mode = a.mode, padding = a.padding, n = a.n, bags = a.bags;
  const HostTensor* psw = a.per_sample_weights;
  check_rows(indices, w.shape[0]);
  for (std::int64_t b = 0; b < bags; ++b) {
    const std::int64_t begin = b == 0 ? 0 : index_element(offsets, b);
    const std::int64_t end = b + 1 < bags ? index_element(offsets, b + 1) : n;
    if (begin < 0 || end > n || end < begin)
      fail(fmt::format("bag {} spans [{}, {}), outside the {} indices", b, begin, end, n));
  }
  std::optional<DView> pv;
  if (psw) pv = dev.view(*psw);
  return cuda::embedding_bag(o[0], o[1], o[2], o[3], dev.view(w), dev.view(indices), dev.view(offsets),
                             pv ? &*pv : nullptr, mode, bags, padding);
}

// _embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode, padding_idx=-1)
Launch per_sample_weights_backward(Call& c, const DeviceArgs& dev, Outs& o) {
  const HostTensor& g = tensor_arg(c, 0, "grad");
  const HostTensor& w = tensor_arg(c, 1, "weight");
  const HostTensor& indices = tensor_arg(c, 2, "indices");
  const HostTensor& offset2bag = tensor_arg(c, 4, "offset2bag");
  const std::int64_t mode = int_arg(c, 5, "mode");
  const std::int64_t padding = int_arg(c, 6, "padding_idx", -1);
  if (mode != 0) fail("per_sample_weights are only supported for mode sum");
  if (w.rank() != 2 || g.rank() != 2 || g.shape[1] != w.shape[1])
    fail(fmt::format("grad {} and weight {} must be 2-D with the same width", shape_text(g.shape), shape_text(w.shape)));
  require_index_vector(indices, "indices");
  require_index_vector(offset2bag, "offset2bag");
  const std::int64_t n = indices.shape[0];
  if (offset2bag.shape[0] != n) fail("offset2bag must have one entry per index");
  check_rows(indices, w.shape[0]);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t bag = index_element(offset2bag, i);
    if (bag < 0 || bag >= g.shape[0]) fail(fmt::format("offset2bag {} is out of range for {} bags", bag, g.shape[0]));
  }
  return cuda::embedding_bag_per_sample_weights_backward(o[0], dev.view(g), dev.view(w), dev.view(indices),
                                                         dev.view(offset2bag), padding);
}

const CudaOpInfo kOps[] = {
    {"aten._embedding_bag.default", embedding_bag},
    {"aten._embedding_bag_per_sample_weights_backward.default", per_sample_weights_backward},
};

}  // namespace

std::span<const CudaOpInfo> embedding_bag_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
