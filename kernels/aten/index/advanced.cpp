// Advanced indexing: index.Tensor (self[indices] with a list of index
// tensors and Nones), index_put / index_put_ / _index_put_impl_
// (self[indices] = values, or += with accumulate), and nonzero.
//
// PyTorch's rules, as implemented here: a bool or u8 index is a mask over as
// many dims as it has, replaced by its nonzero() coordinates; the integer
// index tensors broadcast together to a shape B; when the indexed dims are
// adjacent, B takes their place in the result, else B comes first and the
// unindexed dims follow in order. Indices may be negative (counted from the
// end). With accumulate=False and a position written twice, PyTorch leaves
// the winner unspecified; the oracle's later write wins.
#include <fmt/format.h>

#include <map>

#include "../common/args.hpp"
#include "../families.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

bool is_mask(const HostTensor& t) { return t.dtype == Dtype::b8 || t.dtype == Dtype::u8; }

// The indexing plan of self[indices]: one entry per dim of self (null: not indexed).
struct Plan {
  std::vector<HostTensor> owned;            // integer indices made from masks
  std::vector<const HostTensor*> per_dim;   // size rank
  std::vector<std::int64_t> bshape;         // broadcast shape of the index tensors
  std::vector<std::size_t> free;            // unindexed dims, in order
  std::size_t insert = 0;                   // where B goes among the free dims
  std::vector<std::int64_t> out_shape;
};

Plan plan_indexing(const HostTensor& self, const std::vector<const HostTensor*>& indices, bool meta) {
  Plan p;
  std::size_t dim = 0;
  p.owned.reserve(indices.size() * 8 + self.rank());
  std::vector<const HostTensor*> per_dim;
  for (const HostTensor* t : indices) {
    if (!t) {
      per_dim.push_back(nullptr);
      ++dim;
      continue;
    }
    if (is_mask(*t)) {
      if (dim + t->rank() > self.rank()) fail("too many indices for the tensor's dimensions");
      for (std::size_t k = 0; k < t->rank(); ++k)
        if (t->shape[k] != self.shape[dim + k])
          fail(fmt::format("the mask's shape {} does not match the indexed tensor's shape {} at dim {}",
                           shape_text(t->shape), shape_text(self.shape), dim + k));
      if (meta) fail("a mask index gives a result whose shape depends on the mask's values");
      std::vector<std::vector<std::int64_t>> coords(t->rank());
      std::vector<std::int64_t> idx(t->rank(), 0);
      for (std::int64_t i = 0; i < t->numel(); ++i) {
        std::int64_t r = i;
        for (std::size_t k = t->rank(); k-- > 0;) {
          idx[k] = r % t->shape[k];
          r /= t->shape[k];
        }
        if (t->load(t->index_of(idx.data())) != 0)
          for (std::size_t k = 0; k < t->rank(); ++k) coords[k].push_back(idx[k]);
      }
      for (std::size_t k = 0; k < t->rank(); ++k) {
        HostTensor li = empty_tensor(Dtype::i64, {static_cast<std::int64_t>(coords[k].size())});
        for (std::size_t j = 0; j < coords[k].size(); ++j) li.store(static_cast<std::int64_t>(j), static_cast<double>(coords[k][j]));
        p.owned.push_back(std::move(li));
        per_dim.push_back(&p.owned.back());
      }
      dim += t->rank();
      continue;
    }
    if (!is_integral(t->dtype)) fail(fmt::format("index tensors must be integral or bool, got {}", dtype_abbrev(t->dtype)));
    per_dim.push_back(t);
    ++dim;
  }
  if (per_dim.size() > self.rank())
    fail(fmt::format("too many indices for a tensor of rank {}: {}", self.rank(), per_dim.size()));
  per_dim.resize(self.rank(), nullptr);
  p.per_dim = per_dim;
  bool any = false, gap = false, seen_after = false;
  std::size_t first = 0;
  for (std::size_t d = 0; d < per_dim.size(); ++d) {
    if (per_dim[d]) {
      p.bshape = any ? broadcast_shapes(p.bshape, per_dim[d]->shape) : per_dim[d]->shape;
      if (!any) first = d;
      if (seen_after) gap = true;
      any = true;
    } else {
      p.free.push_back(d);
      if (any) seen_after = true;
    }
  }
  if (!any) fail("index needs at least one index tensor");
  std::size_t before = 0;
  for (std::size_t d : p.free)
    if (d < first) ++before;
  p.insert = gap ? 0 : before;
  for (std::size_t k = 0; k < p.insert; ++k) p.out_shape.push_back(self.shape[p.free[k]]);
  p.out_shape.insert(p.out_shape.end(), p.bshape.begin(), p.bshape.end());
  for (std::size_t k = p.insert; k < p.free.size(); ++k) p.out_shape.push_back(self.shape[p.free[k]]);
  return p;
}

// Calls f(self storage index, result logical index) for every element of self[indices].
template <class F>
void for_each_indexed(const HostTensor& self, const Plan& p, F&& f) {
  const std::size_t nb = p.bshape.size();
  std::vector<std::vector<std::int64_t>> istrides(self.rank());
  for (std::size_t d = 0; d < self.rank(); ++d)
    if (p.per_dim[d]) istrides[d] = broadcast_strides(*p.per_dim[d], p.bshape);
  std::int64_t total = 1;
  for (auto s : p.out_shape) total *= s;
  std::vector<std::int64_t> oi(p.out_shape.size());
  for (std::int64_t i = 0; i < total; ++i) {
    std::int64_t r = i;
    for (std::size_t k = oi.size(); k-- > 0;) {
      oi[k] = r % p.out_shape[k];
      r /= p.out_shape[k];
    }
    std::int64_t src = self.offset;
    for (std::size_t k = 0; k < p.free.size(); ++k) {
      std::size_t at = k < p.insert ? k : k + nb;
      src += oi[at] * self.strides[p.free[k]];
    }
    for (std::size_t d = 0; d < self.rank(); ++d) {
      const HostTensor* t = p.per_dim[d];
      if (!t) continue;
      std::int64_t o = t->offset;
      for (std::size_t k = 0; k < nb; ++k) o += oi[p.insert + k] * istrides[d][k];
      double v = t->load(o);
      auto j = static_cast<std::int64_t>(v);
      const std::int64_t n = self.shape[d];
      if (j < -n || j >= n) fail(fmt::format("index {} is out of bounds for dimension {} with size {}", j, d, n));
      if (j < 0) j += n;
      src += j * self.strides[d];
    }
    f(src, i);
  }
}

// Every integer index tensor gets values in [0, size of the dim it indexes).
void prep_indices(Call& c, Rng& rng) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  CallArg* a = c.find(1, "indices");
  if (!a || (a->value->kind != Kind::list && a->value->kind != Kind::tuple)) fail("indices must be a list");
  std::size_t dim = 0, k = 0;
  for (const Value& v : a->value->children) {
    if (v.kind != Kind::tensor) {
      ++dim;
      continue;
    }
    HostTensor& t = a->tensors[k++];
    if (is_mask(t)) {
      dim += t.rank();
      continue;
    }
    if (dim >= self.rank()) fail("too many indices for the tensor's dimensions");
    if (!t.is_meta() && t.numel() > 0) {
      if (self.shape[dim] <= 0) fail(fmt::format("no valid index: dim {} of self has size 0", dim));
      const std::int64_t span = t.span() + t.offset;
      for (std::int64_t i = 0; i < span; ++i) t.store(i, static_cast<double>(rng.below(self.shape[dim])));
    }
    ++dim;
  }
}

Out index_tensor(Call& c) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  Plan p = plan_indexing(self, optional_tensor_list(c, 1, "indices"), c.meta);
  HostTensor out = empty_tensor(self.dtype, p.out_shape, c.meta);
  if (c.meta) return {out};
  for_each_indexed(self, p, [&](std::int64_t src, std::int64_t i) { out.store(i, self.load(src)); });
  return {out};
}

// index_put(self, indices, values, accumulate=False) and the in-place forms.
template <bool Inplace>
Out index_put(Call& c) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  const HostTensor& values = tensor_arg(c, 2, "values");
  const bool accumulate = bool_arg(c, 3, "accumulate", false);
  if (values.dtype != self.dtype)
    fail(fmt::format("values ({}) must have self's dtype ({})", dtype_abbrev(values.dtype), dtype_abbrev(self.dtype)));
  Plan p = plan_indexing(self, optional_tensor_list(c, 1, "indices"), c.meta);
  bool fits = values.rank() <= p.out_shape.size();
  for (std::size_t k = 0; fits && k < values.rank(); ++k) {
    const std::int64_t v = values.shape[values.rank() - 1 - k], o = p.out_shape[p.out_shape.size() - 1 - k];
    fits = v == o || v == 1;
  }
  if (!fits)
    fail(fmt::format("values of shape {} cannot be broadcast to the indexed shape {}", shape_text(values.shape),
                     shape_text(p.out_shape)));
  HostTensor out = Inplace ? self : c.meta ? empty_tensor(self.dtype, self.shape, true) : contiguous_copy(self);
  if (c.meta) return {out};
  // Sums in double: each position's accumulated value is rounded once.
  const std::vector<std::int64_t> vstrides = broadcast_strides(values, p.out_shape);
  std::vector<std::pair<std::int64_t, double>> writes;
  for_each_indexed(out, p, [&](std::int64_t dst, std::int64_t i) {
    std::int64_t r = i, o = values.offset;
    for (std::size_t k = p.out_shape.size(); k-- > 0;) {
      o += (r % p.out_shape[k]) * vstrides[k];
      r /= p.out_shape[k];
    }
    writes.emplace_back(dst, values.load(o));
  });
  if (accumulate) {
    std::map<std::int64_t, double> sums;
    for (auto& [dst, v] : writes) {
      auto [it, fresh] = sums.emplace(dst, out.load(dst));
      it->second += v;
    }
    for (auto& [dst, v] : sums) out.store(dst, v);
  } else {
    for (auto& [dst, v] : writes) out.store(dst, v);
  }
  return {out};
}

// nonzero(self) -> [nnz, rank] i64, the coordinates of nonzero elements in row-major order.
// Its shape depends on the values: the meta call answers only where that is
// known without them (no elements).
Out nonzero(Call& c) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  const auto rank = static_cast<std::int64_t>(self.rank());
  if (c.meta) {
    if (self.numel() != 0)
      fail("nonzero's output shape depends on its input's values, which a meta call does not have");
    return {empty_tensor(Dtype::i64, {0, rank}, true)};
  }
  std::vector<std::int64_t> coords, idx(self.rank(), 0);
  std::int64_t nnz = 0;
  for (std::int64_t i = 0; i < self.numel(); ++i) {
    std::int64_t r = i;
    for (std::size_t k = self.rank(); k-- > 0;) {
      idx[k] = r % self.shape[k];
      r /= self.shape[k];
    }
    double v = self.load(self.index_of(idx.data()));
    if (v != 0 || v != v) {
      coords.insert(coords.end(), idx.begin(), idx.end());
      ++nnz;
    }
  }
  HostTensor out = empty_tensor(Dtype::i64, {nnz, rank});
  for (std::size_t i = 0; i < coords.size(); ++i) out.store(static_cast<std::int64_t>(i), static_cast<double>(coords[i]));
  return {out};
}

const OpInfo kOps[] = {
    {"aten.index.Tensor", "index", index_tensor, prep_indices},
    {"aten.index_put.default", "index", index_put<false>, prep_indices},
    {"aten.index_put_.default", "index", index_put<true>, prep_indices},
    {"aten._index_put_impl_.default", "index", index_put<true>, prep_indices},
    {"aten.nonzero.default", "index", nonzero, nullptr},
};

}  // namespace

std::span<const OpInfo> advanced_index_ops() { return kOps; }

}  // namespace kb::backendbench::aten
