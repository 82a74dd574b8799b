// Reductions: sum, mean, amax/amin, max/min (full), any, var_mean, cumsum.
// Accumulation in double over the reduced elements of each output position.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "../common/args.hpp"
#include "../families.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

struct Plan {
  std::vector<bool> reduced;          // per input dim
  std::vector<std::int64_t> out_shape;
};

// dims empty (or absent) reduces every dim, as PyTorch's dim=[] / None do.
Plan plan_reduce(const HostTensor& x, const std::optional<std::vector<std::int64_t>>& dims, bool keepdim) {
  Plan p;
  p.reduced.assign(x.rank(), !dims || dims->empty());
  if (dims && !dims->empty())
    for (auto d : *dims) {
      auto w = static_cast<std::size_t>(wrap_dim(d, x.rank()));
      if (x.rank() == 0) continue;
      if (p.reduced[w]) fail(fmt::format("dim {} appears more than once", d));
      p.reduced[w] = true;
    }
  for (std::size_t i = 0; i < x.rank(); ++i) {
    if (!p.reduced[i]) p.out_shape.push_back(x.shape[i]);
    else if (keepdim) p.out_shape.push_back(1);
  }
  return p;
}

// Calls f(values of one output position) for every output element, in the
// row-major order of the output, storing what f returns via `store(i, ...)`.
template <class F>
void reduce_each(const HostTensor& x, const Plan& p, F&& f) {
  std::vector<std::int64_t> kept_shape, kept_strides, red_shape, red_strides;
  for (std::size_t i = 0; i < x.rank(); ++i) {
    if (p.reduced[i]) {
      red_shape.push_back(x.shape[i]);
      red_strides.push_back(x.strides[i]);
    } else {
      kept_shape.push_back(x.shape[i]);
      kept_strides.push_back(x.strides[i]);
    }
  }
  std::vector<double> vals;
  std::int64_t out_index = 0;
  auto visit_kept = [&](const std::int64_t* base) {
    vals.clear();
    for_each_offset(red_shape, {red_strides}, {base[0]}, [&](const std::int64_t* o) { vals.push_back(x.load(o[0])); });
    f(out_index++, vals);
  };
  std::int64_t kept_n = 1;
  for (auto s : kept_shape) kept_n *= s;
  if (kept_n == 0) return;
  for_each_offset(kept_shape, {kept_strides}, {x.offset}, visit_kept);
}

Dtype sum_dtype(const HostTensor& x, std::optional<Dtype> dt) {
  if (dt) return *dt;
  return is_floating(x.dtype) ? x.dtype : Dtype::i64;
}

double sum_of(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e;
  return s;
}

Out reduce_sum(Call& c, const std::optional<std::vector<std::int64_t>>& dims, bool keepdim, std::optional<Dtype> dt,
               bool mean) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  require_real(x, c.op);
  Plan p = plan_reduce(x, dims, keepdim);
  Dtype odt = sum_dtype(x, dt);
  if (mean && !is_floating(odt)) fail(fmt::format("mean needs a floating dtype, got {}", dtype_abbrev(odt)));
  HostTensor out = empty_tensor(odt, p.out_shape, c.meta);
  if (c.meta) return {out};
  reduce_each(x, p, [&](std::int64_t i, const std::vector<double>& v) {
    double s = sum_of(v);
    out.store(i, mean ? s / static_cast<double>(v.size()) : s);  // mean of nothing is NaN (0/0)
  });
  return {out};
}

Out sum_default(Call& c) { return reduce_sum(c, std::nullopt, false, dtype_arg(c, 1, "dtype"), false); }
Out sum_dim(Call& c) {
  return reduce_sum(c, int_list_arg(c, 1, "dim"), bool_arg(c, 2, "keepdim", false), dtype_arg(c, 3, "dtype"), false);
}
Out mean_default(Call& c) { return reduce_sum(c, std::nullopt, false, dtype_arg(c, 1, "dtype"), true); }
Out mean_dim(Call& c) {
  return reduce_sum(c, int_list_arg(c, 1, "dim"), bool_arg(c, 2, "keepdim", false), dtype_arg(c, 3, "dtype"), true);
}

template <bool Max>
double extreme(const std::vector<double>& v) {
  double m = Max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  for (double e : v) {
    if (std::isnan(e)) return e;
    m = Max ? std::max(m, e) : std::min(m, e);
  }
  return m;
}

template <bool Max>
Out amax(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  require_real(x, c.op);
  auto dims = int_list_arg(c, 1, "dim");
  Plan p = plan_reduce(x, dims, bool_arg(c, 2, "keepdim", false));
  for (std::size_t i = 0; i < x.rank(); ++i)
    if (p.reduced[i] && x.shape[i] == 0) fail("cannot reduce over a zero-size dim (amax/amin have no identity)");
  HostTensor out = empty_tensor(x.dtype, p.out_shape, c.meta);
  if (c.meta) return {out};
  reduce_each(x, p, [&](std::int64_t i, const std::vector<double>& v) { out.store(i, extreme<Max>(v)); });
  return {out};
}

template <bool Max>
Out max_all(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  require_real(x, c.op);
  if (x.numel() == 0) fail("max()/min() of an empty tensor has no value");
  HostTensor out = empty_tensor(x.dtype, {}, c.meta);
  if (c.meta) return {out};
  reduce_each(x, plan_reduce(x, std::nullopt, false),
              [&](std::int64_t i, const std::vector<double>& v) { out.store(i, extreme<Max>(v)); });
  return {out};
}

Out any_all(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  require_real(x, c.op);
  HostTensor out = empty_tensor(Dtype::b8, {}, c.meta);
  if (c.meta) return {out};
  reduce_each(x, plan_reduce(x, std::nullopt, false), [&](std::int64_t i, const std::vector<double>& v) {
    out.store(i, std::any_of(v.begin(), v.end(), [](double e) { return e != 0; }) ? 1.0 : 0.0);
  });
  return {out};
}

// var_mean.correction(self, dim=None, *, correction=None (1), keepdim=False) -> (var, mean)
Out var_mean(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  require_real(x, c.op);
  if (!is_floating(x.dtype)) fail("var_mean needs a floating tensor");
  double correction = has_arg(c, 99, "correction") ? number_arg(c, 99, "correction") : 1.0;
  Plan p = plan_reduce(x, int_list_arg(c, 1, "dim"), bool_arg(c, 99, "keepdim", false));
  HostTensor var = empty_tensor(x.dtype, p.out_shape, c.meta);
  HostTensor mean = empty_tensor(x.dtype, p.out_shape, c.meta);
  if (c.meta) return {var, mean};
  reduce_each(x, p, [&](std::int64_t i, const std::vector<double>& v) {
    double n = static_cast<double>(v.size());
    double m = sum_of(v) / n;
    double ss = 0;
    for (double e : v) ss += (e - m) * (e - m);
    double denom = std::max(0.0, n - correction);
    var.store(i, ss / denom);
    mean.store(i, m);
  });
  return {var, mean};
}

// cumsum(self, dim, *, dtype=None)
Out cumsum(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  require_real(x, c.op);
  auto dim = static_cast<std::size_t>(wrap_dim(int_arg(c, 1, "dim"), x.rank()));
  HostTensor out = empty_tensor(sum_dtype(x, dtype_arg(c, 2, "dtype")), x.shape, c.meta);
  if (c.meta) return {out};
  const std::int64_t len = x.rank() ? x.shape[dim] : 1;
  const std::int64_t xs = x.rank() ? x.strides[dim] : 0, os = x.rank() ? out.strides[dim] : 0;
  for_each_line(x.shape, dim, {&x, &out}, [&](const std::int64_t* b) {
    double s = 0;
    for (std::int64_t k = 0; k < len; ++k) {
      s += x.load(b[0] + k * xs);
      out.store(b[1] + k * os, s);
    }
  });
  return {out};
}

const OpInfo kOps[] = {
    {"aten.sum.default", "reduction", sum_default, nullptr},
    {"aten.sum.dim_IntList", "reduction", sum_dim, nullptr},
    {"aten.mean.default", "reduction", mean_default, nullptr},
    {"aten.mean.dim", "reduction", mean_dim, nullptr},
    {"aten.amax.default", "reduction", amax<true>, nullptr},
    {"aten.amin.default", "reduction", amax<false>, nullptr},
    {"aten.max.default", "reduction", max_all<true>, nullptr},
    {"aten.min.default", "reduction", max_all<false>, nullptr},
    {"aten.any.default", "reduction", any_all, nullptr},
    {"aten.var_mean.correction", "reduction", var_mean, nullptr},
    {"aten.cumsum.default", "reduction", cumsum, nullptr},
};

}  // namespace

std::span<const OpInfo> reduction_ops() { return kOps; }

}  // namespace kb::backendbench::aten
