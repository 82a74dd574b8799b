// _sparse_coo_tensor_with_dims_and_tensors: the unchecked constructor of a
// sparse COO tensor from its parts,
//
//   _sparse_coo_tensor_with_dims_and_tensors(sparse_dim, dense_dim, size, indices, values,
//                                            *, dtype, layout, device, pin_memory, is_coalesced)
//
// indices [sparse_dim, nnz] int64, values [nnz] + size[sparse_dim:]. The
// result holds exactly these entries, uncoalesced: duplicates stay separate
// entries in their given order (to_dense() would sum them).
//
// kb's tensors are strided, so the result is written as its two parts, the
// outputs (indices, values) = (_indices(), _values()), with the dtype of
// `dtype` (values must already have it, as PyTorch requires). That is what
// BackendBench compares: its allclose is torch.testing.assert_close, which
// for two sparse COO tensors checks size, layout and dtype, then nnz, the
// indices for equality (uncoalesced, in stored order) and the values for
// closeness; it never converts to dense, so a coalesced or reordered result
// fails there and kb judges it the same way (the runner compares the
// indices output exactly: run.cpp's exact_outputs). The sparse size is an
// argument passed through and not an output here.
//
// The prepare function draws every index of sparse dim d uniformly in
// [0, size[d]) (BackendBench's random integers include negatives, which
// make an invalid sparse tensor); with nnz above the dim's size duplicates
// are frequent, as in the traced embedding gradients.
#include <fmt/format.h>

#include <cstring>

#include "../common/args.hpp"
#include "../families.hpp"
#include "coo_args.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

void copy_into(HostTensor& out, const HostTensor& in) {
  const std::size_t es = dtype_size(in.dtype);
  const std::int64_t n = in.numel();
  for (std::int64_t i = 0; i < n; ++i)
    std::memcpy(out.storage->data() + static_cast<std::size_t>(i) * es,
                in.storage->data() + static_cast<std::size_t>(in.storage_index(i)) * es, es);
}

Out sparse_coo_with_dims_and_tensors(Call& c) {
  Coo s = check_coo(c);
  const HostTensor& idx = tensor_arg(c, 3, "indices");
  const HostTensor& val = tensor_arg(c, 4, "values");
  HostTensor oi = empty_tensor(Dtype::i64, {s.sparse_dim, s.nnz}, c.meta);
  HostTensor ov = empty_tensor(val.dtype, val.shape, c.meta);
  if (c.meta) return {oi, ov};
  copy_into(oi, idx);
  copy_into(ov, val);
  return {oi, ov};
}

// Indices of sparse dim d uniform in [0, size[d]).
void prep_coo_indices(Call& c, Rng& rng) {
  Coo s = check_coo(c);
  HostTensor& idx = tensor_arg_mut(c, 3, "indices");
  if (idx.is_meta() || s.nnz == 0) return;
  for (std::int64_t d = 0; d < s.sparse_dim; ++d) {
    if (s.size[static_cast<std::size_t>(d)] <= 0) fail(fmt::format("no valid index: sparse dim {} has size 0", d));
    for (std::int64_t i = 0; i < s.nnz; ++i) {
      const std::int64_t at[2] = {d, i};
      idx.store(idx.index_of(at), static_cast<double>(rng.below(s.size[static_cast<std::size_t>(d)])));
    }
  }
}

const OpInfo kOps[] = {
    {"aten._sparse_coo_tensor_with_dims_and_tensors.default", "sparse", sparse_coo_with_dims_and_tensors,
     prep_coo_indices},
};

}  // namespace

std::span<const OpInfo> sparse_ops() { return kOps; }

}  // namespace kb::backendbench::aten
