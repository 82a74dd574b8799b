// native_group_norm and native_group_norm_backward, in double.
// Input [N, C, *] seen as [N, group, C / group * HxW]; mean and rstd are
// [N, group] in the input's dtype (as PyTorch returns them on CUDA and CPU),
// the variance biased. The backward uses the given mean and rstd as they are,
// with PyTorch's closed form (so a saved mean/rstd that are not the input's
// own statistics give PyTorch's values, not the true gradient):
//   dx = rstd * gamma[c] * dy + c2 * x + c3, per (n, g):
//   c2 = (db_g * mean - ds_g) * rstd^3 / (D * HxW), c3 = -c2 * mean - db_g * rstd / (D * HxW),
//   ds_g = sum over the group of dy * x * gamma[c], db_g = sum of dy * gamma[c].
#include <fmt/format.h>

#include <cmath>

#include "../common/args.hpp"
#include "../families.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

struct Dims {
  std::int64_t n, c, hw, g, d;
};

Dims dims_of(const Call& c, std::size_t at, const HostTensor& x) {
  Dims s{int_arg(c, at, "N"), int_arg(c, at + 1, "C"), int_arg(c, at + 2, "HxW"), int_arg(c, at + 3, "group"), 0};
  if (s.n < 0 || s.c < 0 || s.hw < 0 || s.g <= 0) fail("N, C and HxW must be >= 0 and group > 0");
  if (s.c % s.g != 0) fail(fmt::format("C ({}) must be divisible by group ({})", s.c, s.g));
  if (x.numel() != s.n * s.c * s.hw)
    fail(fmt::format("input {} does not hold N * C * HxW = {} elements", shape_text(x.shape), s.n * s.c * s.hw));
  if (x.rank() < 2 || x.shape[0] != s.n || x.shape[1] != s.c) fail("input must be [N, C, *]");
  s.d = s.c / s.g;
  return s;
}

void check_channel_vector(const HostTensor* t, std::int64_t c, std::string_view what) {
  if (t && (t->rank() != 1 || t->shape[0] != c)) fail(fmt::format("{} must be [{}], got {}", what, c, shape_text(t->shape)));
}

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean, rstd)
Out group_norm(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "input");
  const HostTensor* w = optional_tensor(c, 1, "weight");
  const HostTensor* b = optional_tensor(c, 2, "bias");
  require_real(x, "input");
  Dims s = dims_of(c, 3, x);
  const double eps = number_arg(c, 7, "eps");
  check_channel_vector(w, s.c, "weight");
  check_channel_vector(b, s.c, "bias");
  Out outs{empty_tensor(x.dtype, x.shape, c.meta), empty_tensor(x.dtype, {s.n, s.g}, c.meta),
           empty_tensor(x.dtype, {s.n, s.g}, c.meta)};
  if (c.meta) return outs;
  std::vector<double> xv = to_doubles(x);
  const std::int64_t m = s.d * s.hw;
  for (std::int64_t n = 0; n < s.n; ++n)
    for (std::int64_t g = 0; g < s.g; ++g) {
      const std::int64_t base = (n * s.c + g * s.d) * s.hw;
      double mean = 0, var = 0;
      for (std::int64_t i = 0; i < m; ++i) mean += xv[static_cast<std::size_t>(base + i)];
      mean = m ? mean / static_cast<double>(m) : 0.0;
      for (std::int64_t i = 0; i < m; ++i) {
        double dx = xv[static_cast<std::size_t>(base + i)] - mean;
        var += dx * dx;
      }
      var = m ? var / static_cast<double>(m) : 0.0;
      const double rstd = 1.0 / std::sqrt(var + eps);
      for (std::int64_t ch = 0; ch < s.d; ++ch) {
        const std::int64_t cc = g * s.d + ch;
        const double gamma = w ? w->at(cc) : 1.0, beta = b ? b->at(cc) : 0.0;
        for (std::int64_t i = 0; i < s.hw; ++i) {
          const std::int64_t at = base + ch * s.hw + i;
          outs[0].store(at, (xv[static_cast<std::size_t>(at)] - mean) * rstd * gamma + beta);
        }
      }
      outs[1].store(n * s.g + g, mean);
      outs[2].store(n * s.g + g, rstd);
    }
  return outs;
}

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW, group, output_mask)
//   -> (grad_input, grad_weight, grad_bias)
Out group_norm_backward(Call& c) {
  const HostTensor& dy = tensor_arg(c, 0, "grad_out");
  const HostTensor& x = tensor_arg(c, 1, "input");
  const HostTensor& mean_t = tensor_arg(c, 2, "mean");
  const HostTensor& rstd_t = tensor_arg(c, 3, "rstd");
  const HostTensor* w = optional_tensor(c, 4, "weight");
  require_real(x, "input");
  Dims s = dims_of(c, 5, x);
  check_channel_vector(w, s.c, "weight");
  if (dy.shape != x.shape) fail(fmt::format("grad_out {} must have input's shape {}", shape_text(dy.shape), shape_text(x.shape)));
  if (mean_t.numel() != s.n * s.g || rstd_t.numel() != s.n * s.g)
    fail(fmt::format("mean and rstd must hold N * group = {} values", s.n * s.g));
  Out outs{empty_tensor(x.dtype, x.shape, c.meta), empty_tensor(x.dtype, {s.c}, c.meta),
           empty_tensor(x.dtype, {s.c}, c.meta)};
  apply_output_mask(c, 9, outs);
  if (c.meta) return outs;
  std::vector<double> xv = to_doubles(x), gv = to_doubles(dy), mv = to_doubles(mean_t), rv = to_doubles(rstd_t);
  std::vector<double> dw(static_cast<std::size_t>(s.c), 0.0), db(static_cast<std::size_t>(s.c), 0.0);
  const std::int64_t group_size = s.d * s.hw;
  const double scale = group_size > 0 ? 1.0 / static_cast<double>(group_size) : 0.0;
  for (std::int64_t n = 0; n < s.n; ++n)
    for (std::int64_t g = 0; g < s.g; ++g) {
      const double mean = mv[static_cast<std::size_t>(n * s.g + g)], rstd = rv[static_cast<std::size_t>(n * s.g + g)];
      double ds_g = 0, db_g = 0;
      for (std::int64_t ch = 0; ch < s.d; ++ch) {
        const std::int64_t cc = g * s.d + ch;
        const double gamma = w ? w->at(cc) : 1.0;
        double ds = 0, dbs = 0;
        for (std::int64_t i = 0; i < s.hw; ++i) {
          const auto at = static_cast<std::size_t>((n * s.c + cc) * s.hw + i);
          ds += gv[at] * xv[at];
          dbs += gv[at];
        }
        ds_g += ds * gamma;
        db_g += dbs * gamma;
        // dweight = sum dy * (x - mean) * rstd = (ds - dbs * mean) * rstd; dbias = sum dy
        dw[static_cast<std::size_t>(cc)] += (ds - dbs * mean) * rstd;
        db[static_cast<std::size_t>(cc)] += dbs;
      }
      const double c2 = (db_g * mean - ds_g) * rstd * rstd * rstd * scale;
      const double c3 = -c2 * mean - db_g * rstd * scale;
      if (outs[0].undefined) continue;
      for (std::int64_t ch = 0; ch < s.d; ++ch) {
        const std::int64_t cc = g * s.d + ch;
        const double c1 = rstd * (w ? w->at(cc) : 1.0);
        for (std::int64_t i = 0; i < s.hw; ++i) {
          const std::int64_t at = (n * s.c + cc) * s.hw + i;
          outs[0].store(at, c1 * gv[static_cast<std::size_t>(at)] + c2 * xv[static_cast<std::size_t>(at)] + c3);
        }
      }
    }
  for (std::int64_t cc = 0; cc < s.c; ++cc) {
    if (!outs[1].undefined) outs[1].store(cc, dw[static_cast<std::size_t>(cc)]);
    if (!outs[2].undefined) outs[2].store(cc, db[static_cast<std::size_t>(cc)]);
  }
  return outs;
}

const OpInfo kOps[] = {
    {"aten.native_group_norm.default", "group_norm", group_norm, nullptr},
    {"aten.native_group_norm_backward.default", "group_norm", group_norm_backward, nullptr},
};

}  // namespace

std::span<const OpInfo> group_norm_ops() { return kOps; }

}  // namespace kb::backendbench::aten
