// native_layer_norm and native_layer_norm_backward, in double.
// Statistics (mean, rstd) have shape input.shape[:axis] + [1] * len(normalized_shape)
// and dtype f32 for f16/bf16 inputs (PyTorch's accumulate type on CUDA), the
// input's dtype otherwise.
#include <fmt/format.h>

#include <cmath>

#include "../common/args.hpp"
#include "../families.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

Dtype acc_dtype(Dtype d) { return d == Dtype::f16 || d == Dtype::bf16 ? Dtype::f32 : d; }

struct Split {
  std::size_t axis;           // first normalized dim
  std::int64_t rows = 1, n = 1;
  std::vector<std::int64_t> stat_shape;
};

Split split_of(const HostTensor& x, const std::vector<std::int64_t>& normalized) {
  if (normalized.size() > x.rank())
    fail(fmt::format("normalized_shape {} has more dims than input {}", shape_text(normalized), shape_text(x.shape)));
  Split s;
  s.axis = x.rank() - normalized.size();
  for (std::size_t i = 0; i < normalized.size(); ++i)
    if (x.shape[s.axis + i] != normalized[i])
      fail(fmt::format("normalized_shape {} does not match the input's trailing dims {}", shape_text(normalized),
                       shape_text(x.shape)));
  for (std::size_t i = 0; i < x.rank(); ++i) {
    if (i < s.axis) {
      s.rows *= x.shape[i];
      s.stat_shape.push_back(x.shape[i]);
    } else {
      s.n *= x.shape[i];
      s.stat_shape.push_back(1);
    }
  }
  return s;
}

void check_param(const HostTensor* p, const std::vector<std::int64_t>& normalized, const char* what) {
  if (p && p->shape != normalized)
    fail(fmt::format("{} has shape {}, expected normalized_shape {}", what, shape_text(p->shape), shape_text(normalized)));
}

// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd)
Out layer_norm(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "input");
  if (!is_floating(x.dtype)) fail("layer_norm needs a floating input");
  auto normalized = int_list_arg(c, 1, "normalized_shape").value_or(std::vector<std::int64_t>{});
  const HostTensor* w = optional_tensor(c, 2, "weight");
  const HostTensor* bias = optional_tensor(c, 3, "bias");
  double eps = number_arg(c, 4, "eps");
  Split s = split_of(x, normalized);
  check_param(w, normalized, "weight");
  check_param(bias, normalized, "bias");
  HostTensor out = empty_tensor(x.dtype, x.shape, c.meta);
  HostTensor mean = empty_tensor(acc_dtype(x.dtype), s.stat_shape, c.meta);
  HostTensor rstd = empty_tensor(acc_dtype(x.dtype), s.stat_shape, c.meta);
  if (c.meta) return {out, mean, rstd};
  std::vector<double> xv = to_doubles(x);
  std::vector<double> wv = w ? to_doubles(*w) : std::vector<double>{};
  std::vector<double> bv = bias ? to_doubles(*bias) : std::vector<double>{};
  for (std::int64_t r = 0; r < s.rows; ++r) {
    const double* row = xv.data() + r * s.n;
    double m = 0;
    for (std::int64_t k = 0; k < s.n; ++k) m += row[k];
    m /= static_cast<double>(s.n);
    double var = 0;
    for (std::int64_t k = 0; k < s.n; ++k) var += (row[k] - m) * (row[k] - m);
    var /= static_cast<double>(s.n);
    double rs = 1.0 / std::sqrt(var + eps);
    mean.store(r, m);
    rstd.store(r, rs);
    for (std::int64_t k = 0; k < s.n; ++k) {
      double y = (row[k] - m) * rs;
      if (w) y *= wv[k];
      if (bias) y += bv[k];
      out.store(r * s.n + k, y);
    }
  }
  return {out, mean, rstd};
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?, bias?, output_mask)
//   -> (grad_input, grad_weight, grad_bias); outputs masked off are None.
Out layer_norm_backward(Call& c) {
  const HostTensor& g = tensor_arg(c, 0, "grad_out");
  const HostTensor& x = tensor_arg(c, 1, "input");
  auto normalized = int_list_arg(c, 2, "normalized_shape").value_or(std::vector<std::int64_t>{});
  const HostTensor& mean = tensor_arg(c, 3, "mean");
  const HostTensor& rstd = tensor_arg(c, 4, "rstd");
  const HostTensor* w = optional_tensor(c, 5, "weight");
  const HostTensor* bias = optional_tensor(c, 6, "bias");
  if (g.shape != x.shape) fail("grad_out and input differ in shape");
  Split s = split_of(x, normalized);
  check_param(w, normalized, "weight");
  if (mean.numel() != s.rows || rstd.numel() != s.rows)
    fail(fmt::format("mean/rstd hold {}/{} values, expected {}", mean.numel(), rstd.numel(), s.rows));
  HostTensor gx = empty_tensor(x.dtype, x.shape, c.meta);
  HostTensor gw = empty_tensor(w ? w->dtype : x.dtype, normalized, c.meta);
  HostTensor gb = empty_tensor(bias ? bias->dtype : (w ? w->dtype : x.dtype), normalized, c.meta);
  if (c.meta) {
    Out o{gx, gw, gb};
    apply_output_mask(c, 7, o);
    return o;
  }
  std::vector<double> xv = to_doubles(x), gv = to_doubles(g), mv = to_doubles(mean), rv = to_doubles(rstd);
  std::vector<double> wv = w ? to_doubles(*w) : std::vector<double>(static_cast<std::size_t>(s.n), 1.0);
  std::vector<double> gwv(static_cast<std::size_t>(s.n), 0.0), gbv(static_cast<std::size_t>(s.n), 0.0);
  const double n = static_cast<double>(s.n);
  for (std::int64_t r = 0; r < s.rows; ++r) {
    const double* xr = xv.data() + r * s.n;
    const double* gr = gv.data() + r * s.n;
    double sum_dy = 0, sum_dy_xhat = 0;
    for (std::int64_t k = 0; k < s.n; ++k) {
      double xhat = (xr[k] - mv[r]) * rv[r];
      double dy = gr[k] * wv[k];
      sum_dy += dy;
      sum_dy_xhat += dy * xhat;
      gwv[k] += gr[k] * xhat;
      gbv[k] += gr[k];
    }
    for (std::int64_t k = 0; k < s.n; ++k) {
      double xhat = (xr[k] - mv[r]) * rv[r];
      double dy = gr[k] * wv[k];
      gx.store(r * s.n + k, rv[r] / n * (n * dy - sum_dy - xhat * sum_dy_xhat));
    }
  }
  for (std::int64_t k = 0; k < s.n; ++k) {
    gw.store(k, gwv[k]);
    gb.store(k, gbv[k]);
  }
  Out o{gx, gw, gb};
  apply_output_mask(c, 7, o);
  return o;
}

const OpInfo kOps[] = {
    {"aten.native_layer_norm.default", "layer_norm", layer_norm, nullptr},
    {"aten.native_layer_norm_backward.default", "layer_norm", layer_norm_backward, nullptr},
};

}  // namespace

std::span<const OpInfo> layer_norm_ops() { return kOps; }

}  // namespace kb::backendbench::aten
