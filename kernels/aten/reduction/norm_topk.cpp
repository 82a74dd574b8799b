// norm.ScalarOpt_dim (vector p-norms over dims), topk, and mse_loss with its
// backward. Sums in double, rounded once to the output dtype.
//
// topk orders by value (NaN greatest, as PyTorch) and breaks ties by the
// lower index; PyTorch's CUDA kernel leaves the order of equal values
// unspecified, so with ties its indices may differ from these while the
// values agree.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "../common/args.hpp"
#include "../families.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

// The elements of x grouped by output position of a reduction over `reduced` dims.
struct Groups {
  std::vector<std::int64_t> out_shape;
  std::vector<std::vector<double>> values;  // one per output element, row-major
};

Groups group_by(const HostTensor& x, const std::vector<bool>& reduced, bool keepdim) {
  Groups g;
  std::vector<std::int64_t> kept_shape, kept_strides, red_shape, red_strides;
  for (std::size_t i = 0; i < x.rank(); ++i) {
    if (reduced[i]) {
      red_shape.push_back(x.shape[i]);
      red_strides.push_back(x.strides[i]);
      if (keepdim) g.out_shape.push_back(1);
    } else {
      kept_shape.push_back(x.shape[i]);
      kept_strides.push_back(x.strides[i]);
      g.out_shape.push_back(x.shape[i]);
    }
  }
  if (x.is_meta()) return g;
  for_each_offset(kept_shape, {kept_strides}, {x.offset}, [&](const std::int64_t* base) {
    std::vector<double> v;
    for_each_offset(red_shape, {red_strides}, {base[0]}, [&](const std::int64_t* o) { v.push_back(x.load(o[0])); });
    g.values.push_back(std::move(v));
  });
  return g;
}

// norm.ScalarOpt_dim(self, p, dim, keepdim=False): p = None means 2.
Out norm_dim(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  if (!is_floating(x.dtype)) fail(fmt::format("norm needs a floating input, got {}", dtype_abbrev(x.dtype)));
  const double p = has_arg(c, 1, "p") ? number_arg(c, 1, "p") : 2.0;
  auto dims = int_list_arg(c, 2, "dim");
  const bool keepdim = bool_arg(c, 3, "keepdim", false);
  std::vector<bool> reduced(x.rank(), !dims || dims->empty());
  if (dims)
    for (auto d : *dims) {
      if (x.rank() == 0) continue;
      auto w = static_cast<std::size_t>(wrap_dim(d, x.rank()));
      if (reduced[w] && !dims->empty()) fail(fmt::format("dim {} appears more than once", d));
      reduced[w] = true;
    }
  Groups g = group_by(x, reduced, keepdim);
  HostTensor out = empty_tensor(x.dtype, g.out_shape, c.meta);
  if (c.meta) return {out};
  for (std::size_t i = 0; i < g.values.size(); ++i) {
    double r = 0;
    const auto& v = g.values[i];
    if (std::isinf(p) && p > 0) {
      for (double e : v) r = std::isnan(e) || std::isnan(r) ? std::numeric_limits<double>::quiet_NaN() : std::max(r, std::fabs(e));
    } else if (std::isinf(p)) {
      r = v.empty() ? std::numeric_limits<double>::infinity() : std::fabs(v[0]);
      for (double e : v) r = std::isnan(e) || std::isnan(r) ? std::numeric_limits<double>::quiet_NaN() : std::min(r, std::fabs(e));
    } else if (p == 0) {
      for (double e : v) r += e != 0 ? 1.0 : 0.0;
    } else {
      for (double e : v) r += std::pow(std::fabs(e), p);
      r = p == 1 ? r : p == 2 ? std::sqrt(r) : std::pow(r, 1.0 / p);
    }
    out.store(static_cast<std::int64_t>(i), r);
  }
  return {out};
}

// topk(self, k, dim=-1, largest=True, sorted=True) -> (values, indices)
Out topk(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  require_real(x, c.op);
  const std::int64_t k = int_arg(c, 1, "k");
  const auto dim = static_cast<std::size_t>(wrap_dim(int_arg(c, 2, "dim", -1), x.rank()));
  const bool largest = bool_arg(c, 3, "largest", true);
  const std::int64_t len = x.rank() ? x.shape[dim] : 1;
  if (k < 0 || k > len) fail(fmt::format("k ({}) is out of range for a dim of size {}", k, len));
  std::vector<std::int64_t> shape = x.shape;
  if (x.rank()) shape[dim] = k;
  Out outs{empty_tensor(x.dtype, shape, c.meta), empty_tensor(Dtype::i64, shape, c.meta)};
  if (c.meta) return outs;
  const std::int64_t step = x.rank() ? x.strides[dim] : 0, ostep = x.rank() ? outs[0].strides[dim] : 0;
  std::vector<double> v(static_cast<std::size_t>(len));
  std::vector<std::int64_t> order(static_cast<std::size_t>(len));
  HostTensor o0 = outs[0], o1 = outs[1];
  for_each_line(x.shape, dim, {&x, &o0}, [&](const std::int64_t* base) {
    for (std::int64_t i = 0; i < len; ++i) v[static_cast<std::size_t>(i)] = x.load(base[0] + i * step);
    std::iota(order.begin(), order.end(), std::int64_t{0});
    // NaN ranks above every number (largest) and below none (smallest: still first among the largest, as PyTorch).
    auto before = [&](std::int64_t a, std::int64_t b) {
      const double va = v[static_cast<std::size_t>(a)], vb = v[static_cast<std::size_t>(b)];
      const bool na = std::isnan(va), nb = std::isnan(vb);
      if (na || nb) return largest ? (na && !nb) : (!na && nb);
      return largest ? va > vb : va < vb;
    };
    std::stable_sort(order.begin(), order.end(), before);
    for (std::int64_t j = 0; j < k; ++j) {
      const std::int64_t src = order[static_cast<std::size_t>(j)];
      outs[0].store(base[1] + j * ostep, v[static_cast<std::size_t>(src)]);
      outs[1].store(base[1] + j * ostep, static_cast<double>(src));
    }
  });
  return outs;
}

// mse_loss(self, target, reduction=1): (self - target)^2, reduced by 0 none, 1 mean, 2 sum.
Out mse_loss(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  const HostTensor& t = tensor_arg(c, 1, "target");
  const std::int64_t reduction = int_arg(c, 2, "reduction", 1);
  if (reduction < 0 || reduction > 2) fail(fmt::format("reduction {} is not 0, 1 or 2", reduction));
  const auto shape = broadcast_shapes(x.shape, t.shape);
  const Dtype dt = promote_types(x.dtype, t.dtype);
  HostTensor out = empty_tensor(dt, reduction == 0 ? shape : std::vector<std::int64_t>{}, c.meta);
  if (c.meta) return {out};
  if (reduction == 0) {
    map_into(out, {&x, &t}, [](const double* v) { return (v[0] - v[1]) * (v[0] - v[1]); });
    return {out};
  }
  HostTensor sq = empty_tensor(Dtype::f64, shape);
  map_into(sq, {&x, &t}, [](const double* v) { return (v[0] - v[1]) * (v[0] - v[1]); });
  double s = 0;
  for (std::int64_t i = 0; i < sq.numel(); ++i) s += sq.load(i);
  out.store(0, reduction == 1 ? s / static_cast<double>(sq.numel()) : s);
  return {out};
}

// mse_loss_backward(grad_output, self, target, reduction): 2 (self - target) grad_output, / numel for mean.
Out mse_loss_backward(Call& c) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const HostTensor& x = tensor_arg(c, 1, "self");
  const HostTensor& t = tensor_arg(c, 2, "target");
  const std::int64_t reduction = int_arg(c, 3, "reduction");
  if (reduction < 0 || reduction > 2) fail(fmt::format("reduction {} is not 0, 1 or 2", reduction));
  const auto shape = broadcast_shapes(broadcast_shapes(x.shape, t.shape), g.shape);
  HostTensor out = empty_tensor(promote_types(g.dtype, promote_types(x.dtype, t.dtype)), shape, c.meta);
  if (c.meta) return {out};
  std::int64_t n = 1;
  for (auto d : broadcast_shapes(x.shape, t.shape)) n *= d;
  const double norm = reduction == 1 ? 2.0 / static_cast<double>(n) : 2.0;
  map_into(out, {&g, &x, &t}, [&](const double* v) { return norm * (v[1] - v[2]) * v[0]; });
  return {out};
}

const OpInfo kOps[] = {
    {"aten.norm.ScalarOpt_dim", "reduction", norm_dim, nullptr},
    {"aten.topk.default", "reduction", topk, nullptr},
    {"aten.mse_loss.default", "reduction", mse_loss, nullptr},
    {"aten.mse_loss_backward.default", "reduction", mse_loss_backward, nullptr},
};

}  // namespace

std::span<const OpInfo> norm_topk_ops() { return kOps; }

}  // namespace kb::backendbench::aten
