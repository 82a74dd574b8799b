// Operators that take index tensors: index_select, gather, scatter_add,
// index_add, embedding (+ dense backward), nll_loss (forward, backward).
// Each has a prepare function that fills its index argument with valid
// indices (BackendBench's random integers in [-9, 9] are not), seeded.
#include <fmt/format.h>

#include "../common/args.hpp"
#include "../families.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

// Every storage element of an integer tensor becomes a value in [0, n).
void fill_indices(HostTensor& t, std::int64_t n, Rng& rng) {
  if (!is_integral(t.dtype)) fail(fmt::format("index tensor must be integral, got {}", dtype_abbrev(t.dtype)));
  if (t.is_meta() || t.numel() == 0) return;
  if (n <= 0) fail("no valid index: the indexed dim has size 0");
  const std::int64_t span = t.span() + t.offset;
  for (std::int64_t i = 0; i < span; ++i) t.store(i, static_cast<double>(rng.below(n)));
}

std::int64_t index_value(double v) {
  if (!(v >= -9.0e18 && v <= 9.0e18)) fail(fmt::format("target {} is not an integer", v));
  return static_cast<std::int64_t>(v);
}

std::int64_t index_at(const HostTensor& idx, std::int64_t storage, std::int64_t n) {
  double v = idx.load(storage);
  if (!(v >= -9.0e18 && v <= 9.0e18)) fail(fmt::format("index {} is not an integer index", v));
  auto i = static_cast<std::int64_t>(v);
  if (i < -n || i >= n) fail(fmt::format("index {} is out of bounds for a dim of size {}", i, n));
  return i < 0 ? i + n : i;
}

std::size_t dim_of(const Call& c, std::size_t pos, const HostTensor& self) {
  return static_cast<std::size_t>(wrap_dim(int_arg(c, pos, "dim"), self.rank()));
}
std::int64_t size_at(const HostTensor& t, std::size_t d) { return t.rank() ? t.shape[d] : 1; }

// index_select(self, dim, index): out has self's shape with shape[dim] = len(index).
void prep_index_select(Call& c, Rng& rng) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  fill_indices(tensor_arg_mut(c, 2, "index"), size_at(self, dim_of(c, 1, self)), rng);
}
Out index_select(Call& c) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  const HostTensor& index = tensor_arg(c, 2, "index");
  auto dim = dim_of(c, 1, self);
  if (index.rank() > 1) fail("index_select: index must be 0-D or 1-D");
  std::vector<std::int64_t> shape = self.shape;
  if (self.rank()) shape[dim] = index.numel();
  HostTensor out = empty_tensor(self.dtype, shape, c.meta);
  if (c.meta) return {out};
  const std::int64_t n = size_at(self, dim);
  for (std::int64_t j = 0; j < index.numel(); ++j) {
    std::int64_t k = index_at(index, index.offset + j * (index.rank() ? index.strides[0] : 0), n);
    HostTensor src = self, dst = out;
    if (self.rank()) {
      src.offset += k * self.strides[dim];
      src.shape[dim] = 1;
      dst.offset += j * out.strides[dim];
      dst.shape[dim] = 1;
    }
    map_into(dst, {&src}, [](const double* v) { return v[0]; });
  }
  return {out};
}

// gather(self, dim, index): out[i][j][k] = self[i][index[i][j][k]][k] (dim = 1); out has index's shape.
void prep_gather(Call& c, Rng& rng) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  fill_indices(tensor_arg_mut(c, 2, "index"), size_at(self, dim_of(c, 1, self)), rng);
}
Out gather(Call& c) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  const HostTensor& index = tensor_arg(c, 2, "index");
  auto dim = dim_of(c, 1, self);
  if (index.rank() != self.rank() && !(index.rank() <= 1 && self.rank() <= 1))
    fail("gather: index and self must have the same rank");
  for (std::size_t d = 0; d < index.rank() && d < self.rank(); ++d)
    if (d != dim && index.shape[d] > self.shape[d])
      fail(fmt::format("gather: index {} is larger than self {} outside dim {}", shape_text(index.shape),
                       shape_text(self.shape), dim));
  HostTensor out = empty_tensor(self.dtype, index.shape, c.meta);
  if (c.meta) return {out};
  const std::int64_t n = size_at(self, dim);
  std::vector<std::int64_t> pos(index.rank(), 0);
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    std::int64_t r = i;
    for (std::size_t d = index.rank(); d-- > 0;) {
      pos[d] = r % index.shape[d];
      r /= index.shape[d];
    }
    std::int64_t k = index_at(index, index.index_of(pos.data()), n);
    std::int64_t o = self.offset;
    for (std::size_t d = 0; d < self.rank(); ++d) o += (d == dim ? k : pos[d]) * self.strides[d];
    out.store(i, self.load(o));
  }
  return {out};
}

// scatter_add(self, dim, index, src) / index_add(self, dim, index, source, alpha=1): out = self.clone(); accumulate.
void prep_scatter_add(Call& c, Rng& rng) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  fill_indices(tensor_arg_mut(c, 2, "index"), size_at(self, dim_of(c, 1, self)), rng);
}
template <bool Inplace>
Out scatter_add(Call& c) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  const HostTensor& index = tensor_arg(c, 2, "index");
  const HostTensor& src = tensor_arg(c, 3, "src");
  auto dim = dim_of(c, 1, self);
  if (index.rank() != self.rank() || src.rank() != self.rank()) fail("scatter_add: self, index and src must have the same rank");
  for (std::size_t d = 0; d < index.rank(); ++d)
    if (index.shape[d] > src.shape[d] || (d != dim && index.shape[d] > self.shape[d]))
      fail("scatter_add: index is larger than src or self");
  HostTensor out = Inplace ? self : empty_tensor(self.dtype, self.shape, c.meta);
  if (c.meta) return {out};
  std::vector<double> acc = to_doubles(self);
  const std::int64_t n = size_at(self, dim);
  std::vector<std::int64_t> pos(index.rank(), 0);
  for (std::int64_t i = 0; i < index.numel(); ++i) {
    std::int64_t r = i;
    for (std::size_t d = index.rank(); d-- > 0;) {
      pos[d] = r % index.shape[d];
      r /= index.shape[d];
    }
    std::int64_t k = index_at(index, index.index_of(pos.data()), n);
    std::int64_t flat = 0;
    for (std::size_t d = 0; d < self.rank(); ++d) flat = flat * self.shape[d] + (d == dim ? k : pos[d]);
    acc[static_cast<std::size_t>(flat)] += src.load(src.index_of(pos.data()));
  }
  HostTensor contiguous = empty_tensor(self.dtype, self.shape);
  for (std::size_t i = 0; i < acc.size(); ++i) contiguous.store(static_cast<std::int64_t>(i), acc[i]);
  map_into(out, {&contiguous}, [](const double* v) { return v[0]; });
  return {out};
}

void prep_index_add(Call& c, Rng& rng) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  fill_indices(tensor_arg_mut(c, 2, "index"), size_at(self, dim_of(c, 1, self)), rng);
}
template <bool Inplace>
Out index_add(Call& c) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  const HostTensor& index = tensor_arg(c, 2, "index");
  const HostTensor& src = tensor_arg(c, 3, "source");
  double alpha = number_arg(c, 4, "alpha", 1.0);
  auto dim = dim_of(c, 1, self);
  if (index.rank() > 1) fail("index_add: index must be 0-D or 1-D");
  std::vector<std::int64_t> expect = self.shape;
  if (self.rank()) expect[dim] = index.numel();
  if (src.shape != expect) fail(fmt::format("index_add: source has shape {}, expected {}", shape_text(src.shape), shape_text(expect)));
  HostTensor out = Inplace ? self : empty_tensor(self.dtype, self.shape, c.meta);
  if (c.meta) return {out};
  std::vector<double> acc = to_doubles(self), sv = to_doubles(src);
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < self.rank(); ++d) {
    if (d < dim) outer *= self.shape[d];
    if (d > dim) inner *= self.shape[d];
  }
  const std::int64_t n = size_at(self, dim), m = index.numel();
  for (std::int64_t j = 0; j < m; ++j) {
    std::int64_t k = index_at(index, index.offset + j * (index.rank() ? index.strides[0] : 0), n);
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t in = 0; in < inner; ++in)
        acc[static_cast<std::size_t>((o * n + k) * inner + in)] += alpha * sv[static_cast<std::size_t>((o * m + j) * inner + in)];
  }
  HostTensor contiguous = empty_tensor(self.dtype, self.shape);
  for (std::size_t i = 0; i < acc.size(); ++i) contiguous.store(static_cast<std::int64_t>(i), acc[i]);
  map_into(out, {&contiguous}, [](const double* v) { return v[0]; });
  return {out};
}

// embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False)
void prep_embedding(Call& c, Rng& rng) {
  const HostTensor& w = tensor_arg(c, 0, "weight");
  if (w.rank() != 2) fail("embedding: weight must be 2-D");
  fill_indices(tensor_arg_mut(c, 1, "indices"), w.shape[0], rng);
}
Out embedding(Call& c) {
  const HostTensor& w = tensor_arg(c, 0, "weight");
  const HostTensor& idx = tensor_arg(c, 1, "indices");
  if (w.rank() != 2) fail("embedding: weight must be 2-D");
  std::vector<std::int64_t> shape = idx.shape;
  shape.push_back(w.shape[1]);
  HostTensor out = empty_tensor(w.dtype, shape, c.meta);
  if (c.meta) return {out};
  const std::int64_t d = w.shape[1];
  HostTensor ic = contiguous_copy(idx);
  for (std::int64_t i = 0; i < ic.numel(); ++i) {
    std::int64_t row = index_at(ic, i, w.shape[0]);
    for (std::int64_t j = 0; j < d; ++j) out.store(i * d + j, w.load(w.offset + row * w.strides[0] + j * w.strides[1]));
  }
  return {out};
}

// embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
void prep_embedding_backward(Call& c, Rng& rng) {
  fill_indices(tensor_arg_mut(c, 1, "indices"), int_arg(c, 2, "num_weights"), rng);
}
Out embedding_dense_backward(Call& c) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const HostTensor& idx = tensor_arg(c, 1, "indices");
  std::int64_t num = int_arg(c, 2, "num_weights");
  std::int64_t padding = int_arg(c, 3, "padding_idx", -1);
  bool scale = bool_arg(c, 4, "scale_grad_by_freq", false);
  if (g.rank() == 0) fail("grad_output must have a trailing embedding dim");
  const std::int64_t d = g.shape.back();
  if (g.numel() != idx.numel() * d) fail("grad_output does not match indices");
  HostTensor out = empty_tensor(g.dtype, {num, d}, c.meta);
  if (c.meta) return {out};
  std::vector<double> acc(static_cast<std::size_t>(num * d), 0.0), gv = to_doubles(g);
  std::vector<std::int64_t> freq(static_cast<std::size_t>(num), 0);
  HostTensor ic = contiguous_copy(idx);
  for (std::int64_t i = 0; i < ic.numel(); ++i) ++freq[static_cast<std::size_t>(index_at(ic, i, num))];
  for (std::int64_t i = 0; i < ic.numel(); ++i) {
    std::int64_t row = index_at(ic, i, num);
    if (row == padding) continue;
    double s = scale ? 1.0 / static_cast<double>(freq[static_cast<std::size_t>(row)]) : 1.0;
    for (std::int64_t j = 0; j < d; ++j) acc[static_cast<std::size_t>(row * d + j)] += s * gv[static_cast<std::size_t>(i * d + j)];
  }
  for (std::size_t i = 0; i < acc.size(); ++i) out.store(static_cast<std::int64_t>(i), acc[i]);
  return {out};
}

// nll_loss_forward(self [N, C] or [C], target [N] or [], weight?, reduction (0 none, 1 mean, 2 sum), ignore_index)
//   -> (output, total_weight)
void prep_nll(Call& c, std::size_t self_pos, std::size_t target_pos, Rng& rng) {
  const HostTensor& x = tensor_arg(c, self_pos, "self");
  fill_indices(tensor_arg_mut(c, target_pos, "target"), x.rank() ? x.shape.back() : 0, rng);
}
void prep_nll_forward(Call& c, Rng& rng) { prep_nll(c, 0, 1, rng); }
void prep_nll_backward(Call& c, Rng& rng) { prep_nll(c, 1, 2, rng); }

struct Nll {
  std::int64_t n = 1, classes = 0;
  bool batched = false;
};
Nll nll_shape(const HostTensor& x, const HostTensor& t) {
  Nll s;
  if (x.rank() == 1) {
    s.classes = x.shape[0];
    if (t.rank() != 0) fail("nll_loss: 1-D input needs a 0-D target");
  } else if (x.rank() == 2) {
    s.batched = true;
    s.n = x.shape[0];
    s.classes = x.shape[1];
    if (t.rank() != 1 || t.shape[0] != s.n) fail("nll_loss: target must be [N]");
  } else {
    fail("nll_loss: input must be 1-D or 2-D");
  }
  return s;
}

Out nll_loss_forward(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  const HostTensor& t = tensor_arg(c, 1, "target");
  const HostTensor* w = optional_tensor(c, 2, "weight");
  std::int64_t reduction = int_arg(c, 3, "reduction");
  std::int64_t ignore = int_arg(c, 4, "ignore_index");
  Nll s = nll_shape(x, t);
  std::vector<std::int64_t> oshape;
  if (reduction == 0 && s.batched) oshape = {s.n};
  HostTensor out = empty_tensor(x.dtype, oshape, c.meta);
  HostTensor total = empty_tensor(x.dtype, {}, c.meta);
  if (c.meta) return {out, total};
  double sum = 0, wsum = 0;
  for (std::int64_t i = 0; i < s.n; ++i) {
    std::int64_t cls = index_value(t.at(i));
    double li = 0;
    if (cls != ignore) {
      if (cls < 0 || cls >= s.classes) fail(fmt::format("target {} is out of bounds for {} classes", cls, s.classes));
      double wi = w ? w->at(cls) : 1.0;
      li = -wi * x.at(i * s.classes + cls);
      wsum += wi;
    }
    sum += li;
    if (reduction == 0 && s.batched) out.store(i, li);
  }
  if (reduction == 0 && !s.batched) out.store(0, sum);
  if (reduction == 1) out.store(0, sum / wsum);
  if (reduction == 2) out.store(0, sum);
  total.store(0, reduction == 0 ? 0.0 : wsum);
  return {out, total};
}

// nll_loss_backward(grad_output, self, target, weight?, reduction, ignore_index, total_weight)
Out nll_loss_backward(Call& c) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const HostTensor& x = tensor_arg(c, 1, "self");
  const HostTensor& t = tensor_arg(c, 2, "target");
  const HostTensor* w = optional_tensor(c, 3, "weight");
  std::int64_t reduction = int_arg(c, 4, "reduction");
  std::int64_t ignore = int_arg(c, 5, "ignore_index");
  const HostTensor& tw = tensor_arg(c, 6, "total_weight");
  Nll s = nll_shape(x, t);
  HostTensor out = empty_tensor(x.dtype, x.shape, c.meta);
  if (c.meta) return {out};
  const double total = tw.at(0);
  for (std::int64_t i = 0; i < s.n; ++i) {
    std::int64_t cls = index_value(t.at(i));
    if (cls == ignore) continue;
    if (cls < 0 || cls >= s.classes) fail(fmt::format("target {} is out of bounds for {} classes", cls, s.classes));
    double wi = w ? w->at(cls) : 1.0;
    double gi = reduction == 0 && s.batched ? g.at(i) : g.at(0);
    double v = -wi * gi;
    if (reduction == 1) v /= total;
    out.store(i * s.classes + cls, v);
  }
  return {out};
}

const OpInfo kOps[] = {
    {"aten.index_select.default", "index", index_select, prep_index_select},
    {"aten.gather.default", "index", gather, prep_gather},
    {"aten.scatter_add.default", "index", scatter_add<false>, prep_scatter_add},
    {"aten.scatter_add_.default", "index", scatter_add<true>, prep_scatter_add},
    {"aten.index_add.default", "index", index_add<false>, prep_index_add},
    {"aten.index_add_.default", "index", index_add<true>, prep_index_add},
    {"aten.embedding.default", "index", embedding, prep_embedding},
    {"aten.embedding_dense_backward.default", "index", embedding_dense_backward, prep_embedding_backward},
    {"aten.nll_loss_forward.default", "index", nll_loss_forward, prep_nll_forward},
    {"aten.nll_loss_backward.default", "index", nll_loss_backward, prep_nll_backward},
};

}  // namespace

std::span<const OpInfo> index_ops() { return kOps; }

}  // namespace kb::backendbench::aten
