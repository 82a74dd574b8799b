// CUDA plans for the gathering index operators (index_select, gather,
// embedding) through the engine's gather kernel, and for the accumulating
// ones (scatter_add(_), index_add(_), embedding_dense_backward, nll_loss
// forward and backward) through index_scatter_kernels.cu, advanced indexing
// (index.Tensor, index_put(_)) through index_advanced_kernels.cu, nonzero
// through nonzero_kernels.cu. Indices are the
// valid ones the family's prepare functions made; negative ones count from
// the end. The accumulating plans check every index on the host, as the
// oracles do, before any kernel reads one.
#include <fmt/format.h>

#include "../../common/args.hpp"
#include "../../common/cuda_engine.hpp"
#include "../../cuda_families.hpp"
#include "index_scatter_kernels.hpp"
#include "nonzero_kernels.hpp"

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

// Every element of `idx` (logical order) lies in [-n, n).
void check_indices(const HostTensor& idx, std::int64_t n) {
  if (!is_integral(idx.dtype)) fail(fmt::format("index tensor must be integral, got {}", dtype_abbrev(idx.dtype)));
  for (std::int64_t i = 0; i < idx.numel(); ++i) {
    const double v = idx.at(i);
    if (!(v >= -9.0e18 && v <= 9.0e18)) fail(fmt::format("index {} is not an integer index", v));
    const auto k = static_cast<std::int64_t>(v);
    if (k < -n || k >= n) fail(fmt::format("index {} is out of bounds for a dim of size {}", k, n));
  }
}

// scatter_add(self, dim, index, src) and scatter_add_
Launch scatter_add(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  const HostTensor& index = tensor_arg(c, 2, "index");
  const HostTensor& src = tensor_arg(c, 3, "src");
  if (index.rank() != self.rank() || src.rank() != self.rank())
    fail("scatter_add: self, index and src must have the same rank");
  if (self.rank() == 0) fail("scatter_add: 0-D self is not supported on CUDA");
  const std::size_t dim = dim_of(c, 1, self);
  for (std::size_t k = 0; k < index.rank(); ++k)
    if (index.shape[k] > src.shape[k] || (k != dim && index.shape[k] > self.shape[k]))
      fail("scatter_add: index is larger than src or self");
  check_indices(index, self.shape[dim]);
  return cuda::scatter_add(o[0], d.view(self), static_cast<std::int64_t>(dim), d.view(index), d.view(src));
}

// index_add(self, dim, index, source, alpha=1) and index_add_
Launch index_add(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  const HostTensor& index = tensor_arg(c, 2, "index");
  const HostTensor& src = tensor_arg(c, 3, "source");
  const double alpha = number_arg(c, 4, "alpha", 1.0);
  if (index.rank() > 1) fail("index_add: index must be 0-D or 1-D");
  if (self.rank() == 0) fail("index_add: 0-D self is not supported on CUDA");
  const std::size_t dim = dim_of(c, 1, self);
  std::vector<std::int64_t> expect = self.shape;
  expect[dim] = index.numel();
  if (src.shape != expect)
    fail(fmt::format("index_add: source has shape {}, expected {}", shape_text(src.shape), shape_text(expect)));
  check_indices(index, self.shape[dim]);
  return cuda::index_add(o[0], d.view(self), static_cast<std::int64_t>(dim), d.view(index), d.view(src), alpha);
}

// embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
Launch embedding_dense_backward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const HostTensor& idx = tensor_arg(c, 1, "indices");
  const std::int64_t num = int_arg(c, 2, "num_weights");
  const std::int64_t padding = int_arg(c, 3, "padding_idx", -1);
  const bool scale = bool_arg(c, 4, "scale_grad_by_freq", false);
  if (g.rank() == 0) fail("grad_output must have a trailing embedding dim");
  if (g.numel() != idx.numel() * g.shape.back()) fail("grad_output does not match indices");
  check_indices(idx, num);
  return cuda::embedding_dense_backward(o[0], d.view(g), d.view(idx), padding, scale);
}

// nll_loss's shapes: self [N, C] with target [N], or self [C] with a 0-D target.
bool nll_batched(const HostTensor& x, const HostTensor& t) {
  if (x.rank() == 1) {
    if (t.rank() != 0) fail("nll_loss: 1-D input needs a 0-D target");
    return false;
  }
  if (x.rank() == 2) {
    if (t.rank() != 1 || t.shape[0] != x.shape[0]) fail("nll_loss: target must be [N]");
    return true;
  }
  fail("nll_loss: input must be 1-D or 2-D");
}

void check_targets(const HostTensor& t, std::int64_t classes, std::int64_t ignore) {
  if (!is_integral(t.dtype)) fail(fmt::format("target must be integral, got {}", dtype_abbrev(t.dtype)));
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.at(i);
    if (!(v >= -9.0e18 && v <= 9.0e18)) fail(fmt::format("target {} is not an integer", v));
    const auto cls = static_cast<std::int64_t>(v);
    if (cls != ignore && (cls < 0 || cls >= classes))
      fail(fmt::format("target {} is out of bounds for {} classes", cls, classes));
  }
}

// nll_loss_forward(self, target, weight?, reduction, ignore_index) -> (output, total_weight)
Launch nll_loss_forward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  const HostTensor& t = tensor_arg(c, 1, "target");
  const HostTensor* w = optional_tensor(c, 2, "weight");
  const std::int64_t reduction = int_arg(c, 3, "reduction");
  const std::int64_t ignore = int_arg(c, 4, "ignore_index");
  const bool batched = nll_batched(x, t);
  check_targets(t, x.shape.back(), ignore);
  std::optional<DView> wv;
  if (w) wv = d.view(*w);
  return cuda::nll_loss_forward(o[0], o[1], d.view(x), d.view(t), wv ? &*wv : nullptr, reduction, ignore, batched);
}

// nll_loss_backward(grad_output, self, target, weight?, reduction, ignore_index, total_weight)
Launch nll_loss_backward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const HostTensor& x = tensor_arg(c, 1, "self");
  const HostTensor& t = tensor_arg(c, 2, "target");
  const HostTensor* w = optional_tensor(c, 3, "weight");
  const std::int64_t reduction = int_arg(c, 4, "reduction");
  const std::int64_t ignore = int_arg(c, 5, "ignore_index");
  const HostTensor& tw = tensor_arg(c, 6, "total_weight");
  const bool batched = nll_batched(x, t);
  check_targets(t, x.shape.back(), ignore);
  if (g.numel() < 1 || tw.numel() < 1) fail("nll_loss_backward: grad_output and total_weight must not be empty");
  std::optional<DView> wv;
  if (w) wv = d.view(*w);
  return cuda::nll_loss_backward(o[0], d.view(g), d.view(t), wv ? &*wv : nullptr, d.view(tw), reduction, ignore,
                                 batched, x.shape.back());
}

// ---- advanced indexing (the CPU oracle's rules, advanced.cpp; integer indices only) ----

// self[indices] as an AdvancedIndex over target strides `ts` from `base`; the indexed shape in `shape`.
cuda::AdvancedIndex advanced_index(const HostTensor& self, const std::vector<const HostTensor*>& indices,
                                   const DeviceArgs& d, const std::vector<std::int64_t>& ts, std::int64_t base) {
  std::vector<const HostTensor*> per_dim;
  for (const HostTensor* t : indices) {
    if (t && (t->dtype == Dtype::b8 || t->dtype == Dtype::u8)) fail("mask indices are not supported on CUDA");
    if (t && !is_integral(t->dtype))
      fail(fmt::format("index tensors must be integral or bool, got {}", dtype_abbrev(t->dtype)));
    per_dim.push_back(t);
  }
  if (per_dim.size() > self.rank())
    fail(fmt::format("too many indices for a tensor of rank {}: {}", self.rank(), per_dim.size()));
  per_dim.resize(self.rank(), nullptr);
  std::vector<std::int64_t> bshape;
  std::vector<std::size_t> free;
  bool any = false, gap = false, seen_after = false;
  std::size_t first = 0;
  for (std::size_t k = 0; k < per_dim.size(); ++k) {
    if (per_dim[k]) {
      bshape = any ? broadcast_shapes(bshape, per_dim[k]->shape) : per_dim[k]->shape;
      if (!any) first = k;
      if (seen_after) gap = true;
      any = true;
    } else {
      free.push_back(k);
      if (any) seen_after = true;
    }
  }
  if (!any) fail("index needs at least one index tensor");
  std::size_t before = 0;
  for (std::size_t k : free)
    if (k < first) ++before;
  const std::size_t insert = gap ? 0 : before, nb = bshape.size();
  cuda::AdvancedIndex ix;
  ix.base = base;
  for (std::size_t k = 0; k < insert; ++k) ix.shape.push_back(self.shape[free[k]]);
  ix.shape.insert(ix.shape.end(), bshape.begin(), bshape.end());
  for (std::size_t k = insert; k < free.size(); ++k) ix.shape.push_back(self.shape[free[k]]);
  ix.free_stride.assign(ix.shape.size(), 0);
  for (std::size_t k = 0; k < free.size(); ++k) ix.free_stride[k < insert ? k : k + nb] = ts[free[k]];
  for (std::size_t k = 0; k < per_dim.size(); ++k) {
    const HostTensor* t = per_dim[k];
    if (!t) continue;
    const std::int64_t n = self.shape[k];
    for (std::int64_t i = 0; i < t->numel(); ++i) {
      const double v = t->at(i);
      if (!(v >= -9.0e18 && v <= 9.0e18)) fail(fmt::format("index {} is not an integer index", v));
      const auto j = static_cast<std::int64_t>(v);
      if (j < -n || j >= n) fail(fmt::format("index {} is out of bounds for dimension {} with size {}", j, k, n));
    }
    cuda::AdvancedIndex::Index e;
    e.view = d.view(*t);
    e.strides.assign(ix.shape.size(), 0);
    const std::vector<std::int64_t> bs = broadcast_strides(*t, bshape);
    for (std::size_t b = 0; b < nb; ++b) e.strides[insert + b] = bs[b];
    e.dim_stride = ts[k];
    e.dim_size = n;
    ix.indices.push_back(std::move(e));
  }
  return ix;
}

// index.Tensor(self, indices)
Launch index_tensor(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  cuda::AdvancedIndex ix = advanced_index(self, optional_tensor_list(c, 1, "indices"), d, self.strides, self.offset);
  if (ix.shape != o[0].shape) fail("internal: index.Tensor's result shape differs from the oracle's");
  return cuda::index_gather(o[0], d.view(self), ix);
}

// index_put(self, indices, values, accumulate=False), index_put_, _index_put_impl_(..., unsafe)
Launch index_put(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  const HostTensor& values = tensor_arg(c, 2, "values");
  const bool accumulate = bool_arg(c, 3, "accumulate", false);
  if (values.dtype != self.dtype)
    fail(fmt::format("values ({}) must have self's dtype ({})", dtype_abbrev(values.dtype), dtype_abbrev(self.dtype)));
  cuda::AdvancedIndex ix =
      advanced_index(self, optional_tensor_list(c, 1, "indices"), d, contiguous_strides(self.shape), 0);
  bool fits = values.rank() <= ix.shape.size();
  for (std::size_t k = 0; fits && k < values.rank(); ++k) {
    const std::int64_t v = values.shape[values.rank() - 1 - k], s = ix.shape[ix.shape.size() - 1 - k];
    fits = v == s || v == 1;
  }
  if (!fits)
    fail(fmt::format("values of shape {} cannot be broadcast to the indexed shape {}", shape_text(values.shape),
                     shape_text(ix.shape)));
  return cuda::index_put(o[0], d.view(self), ix, d.view(values), broadcast_strides(values, ix.shape), accumulate);
}

// nonzero(self) -> [nnz, rank] i64, sized by a count on the device (the shape depends on the values).
Launch nonzero(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  const DView x = d.view(self);
  const std::int64_t count = cuda::nonzero_count(x);
  o[0] = cuda::device_empty(Dtype::i64, {count, static_cast<std::int64_t>(self.rank())});
  return cuda::nonzero(o[0], x, count);
}

const CudaOpInfo kOps[] = {
    {"aten.index_select.default", index_select},
    {"aten.gather.default", gather},
    {"aten.embedding.default", embedding},
    {"aten.scatter_add.default", scatter_add},
    {"aten.scatter_add_.default", scatter_add},
    {"aten.index_add.default", index_add},
    {"aten.index_add_.default", index_add},
    {"aten.embedding_dense_backward.default", embedding_dense_backward},
    {"aten.nll_loss_forward.default", nll_loss_forward},
    {"aten.nll_loss_backward.default", nll_loss_backward},
    {"aten.index.Tensor", index_tensor},
    {"aten.index_put.default", index_put},
    {"aten.index_put_.default", index_put},
    {"aten._index_put_impl_.default", index_put},
    {"aten.nonzero.default", nonzero},
};

}  // namespace

std::span<const CudaOpInfo> index_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
