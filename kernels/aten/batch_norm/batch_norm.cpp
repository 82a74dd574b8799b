// native_batch_norm and native_batch_norm_backward over channel dim 1, in double.
// Saved statistics are f32 for f16/bf16 inputs (PyTorch's CUDA accumulate
// type); in eval mode they are empty ([0]), as PyTorch's CUDA kernel returns.
// The running statistics are not updated (BackendBench compares outputs only).
#include <fmt/format.h>

#include <cmath>

#include "../common/args.hpp"
#include "../families.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

Dtype acc_dtype(Dtype d) { return d == Dtype::f16 || d == Dtype::bf16 ? Dtype::f32 : d; }

struct Layout {
  std::int64_t n = 1, c = 1, s = 1;  // x[n][c][s]
};
Layout layout_of(const HostTensor& x) {
  if (x.rank() < 2) fail(fmt::format("batch_norm needs an input of rank >= 2, got {}", shape_text(x.shape)));
  Layout l;
  l.n = x.shape[0];
  l.c = x.shape[1];
  for (std::size_t i = 2; i < x.rank(); ++i) l.s *= x.shape[i];
  return l;
}
std::vector<double> per_channel(const HostTensor* t, std::int64_t c, double dflt, const char* what) {
  if (!t) return std::vector<double>(static_cast<std::size_t>(c), dflt);
  if (t->numel() != c) fail(fmt::format("{} holds {} values for {} channels", what, t->numel(), c));
  return to_doubles(*t);
}

// native_batch_norm(input, weight?, bias?, running_mean?, running_var?, training, momentum, eps)
Out batch_norm(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "input");
  if (!is_floating(x.dtype)) fail("batch_norm needs a floating input");
  Layout l = layout_of(x);
  const HostTensor* w = optional_tensor(c, 1, "weight");
  const HostTensor* b = optional_tensor(c, 2, "bias");
  const HostTensor* rm = optional_tensor(c, 3, "running_mean");
  const HostTensor* rv = optional_tensor(c, 4, "running_var");
  bool training = bool_arg(c, 5, "training");
  double eps = number_arg(c, 7, "eps");
  if (!training && (!rm || !rv)) fail("eval mode needs running_mean and running_var");
  std::vector<std::int64_t> stat_shape{training ? l.c : 0};
  HostTensor out = empty_tensor(x.dtype, x.shape, c.meta);
  HostTensor smean = empty_tensor(acc_dtype(x.dtype), stat_shape, c.meta);
  HostTensor sinv = empty_tensor(acc_dtype(x.dtype), stat_shape, c.meta);
  if (c.meta) return {out, smean, sinv};
  auto xv = to_doubles(x);
  auto wv = per_channel(w, l.c, 1.0, "weight"), bv = per_channel(b, l.c, 0.0, "bias");
  std::vector<double> mean(static_cast<std::size_t>(l.c)), inv(static_cast<std::size_t>(l.c));
  if (training) {
    const double cnt = static_cast<double>(l.n * l.s);
    for (std::int64_t ch = 0; ch < l.c; ++ch) {
      double m = 0, v = 0;
      for (std::int64_t i = 0; i < l.n; ++i)
        for (std::int64_t k = 0; k < l.s; ++k) m += xv[static_cast<std::size_t>((i * l.c + ch) * l.s + k)];
      m /= cnt;
      for (std::int64_t i = 0; i < l.n; ++i)
        for (std::int64_t k = 0; k < l.s; ++k) {
          double d = xv[static_cast<std::size_t>((i * l.c + ch) * l.s + k)] - m;
          v += d * d;
        }
      v /= cnt;
      mean[ch] = m;
      inv[ch] = 1.0 / std::sqrt(v + eps);
      smean.store(ch, m);
      sinv.store(ch, inv[ch]);
    }
  } else {
    auto rmv = per_channel(rm, l.c, 0.0, "running_mean"), rvv = per_channel(rv, l.c, 1.0, "running_var");
    for (std::int64_t ch = 0; ch < l.c; ++ch) {
      mean[ch] = rmv[ch];
      inv[ch] = 1.0 / std::sqrt(rvv[ch] + eps);
    }
  }
  for (std::int64_t i = 0; i < l.n; ++i)
    for (std::int64_t ch = 0; ch < l.c; ++ch)
      for (std::int64_t k = 0; k < l.s; ++k) {
        auto at = static_cast<std::size_t>((i * l.c + ch) * l.s + k);
        out.store(static_cast<std::int64_t>(at), (xv[at] - mean[ch]) * inv[ch] * wv[ch] + bv[ch]);
      }
  return {out, smean, sinv};
}

// native_batch_norm_backward(grad_out, input, weight?, running_mean?, running_var?, save_mean?, save_invstd?,
//                            train, eps, output_mask) -> (grad_input, grad_weight, grad_bias)
Out batch_norm_backward(Call& c) {
  const HostTensor& g = tensor_arg(c, 0, "grad_out");
  const HostTensor& x = tensor_arg(c, 1, "input");
  const HostTensor* w = optional_tensor(c, 2, "weight");
  const HostTensor* rm = optional_tensor(c, 3, "running_mean");
  const HostTensor* rv = optional_tensor(c, 4, "running_var");
  const HostTensor* sm = optional_tensor(c, 5, "save_mean");
  const HostTensor* si = optional_tensor(c, 6, "save_invstd");
  bool train = bool_arg(c, 7, "train");
  double eps = number_arg(c, 8, "eps");
  if (g.shape != x.shape) fail("grad_out and input differ in shape");
  Layout l = layout_of(x);
  Dtype wdt = w ? w->dtype : x.dtype;
  HostTensor gx = empty_tensor(x.dtype, x.shape, c.meta);
  HostTensor gw = empty_tensor(wdt, {l.c}, c.meta);
  HostTensor gb = empty_tensor(wdt, {l.c}, c.meta);
  if (c.meta) {
    Out o{gx, gw, gb};
    apply_output_mask(c, 9, o);
    return o;
  }
  std::vector<double> mean, inv;
  if (train) {
    if (!sm || !si) fail("train=True needs save_mean and save_invstd");
    mean = per_channel(sm, l.c, 0.0, "save_mean");
    inv = per_channel(si, l.c, 1.0, "save_invstd");
  } else {
    if (!rm || !rv) fail("train=False needs running_mean and running_var");
    mean = per_channel(rm, l.c, 0.0, "running_mean");
    inv = per_channel(rv, l.c, 1.0, "running_var");
    for (auto& v : inv) v = 1.0 / std::sqrt(v + eps);
  }
  auto xv = to_doubles(x), gv = to_doubles(g);
  auto wv = per_channel(w, l.c, 1.0, "weight");
  const double cnt = static_cast<double>(l.n * l.s);
  for (std::int64_t ch = 0; ch < l.c; ++ch) {
    double sum_g = 0, sum_gx = 0;
    for (std::int64_t i = 0; i < l.n; ++i)
      for (std::int64_t k = 0; k < l.s; ++k) {
        auto at = static_cast<std::size_t>((i * l.c + ch) * l.s + k);
        sum_g += gv[at];
        sum_gx += gv[at] * (xv[at] - mean[ch]) * inv[ch];
      }
    gw.store(ch, sum_gx);
    gb.store(ch, sum_g);
    for (std::int64_t i = 0; i < l.n; ++i)
      for (std::int64_t k = 0; k < l.s; ++k) {
        auto at = static_cast<std::size_t>((i * l.c + ch) * l.s + k);
        double v;
        if (train) {
          double xhat = (xv[at] - mean[ch]) * inv[ch];
          v = wv[ch] * inv[ch] / cnt * (cnt * gv[at] - sum_g - xhat * sum_gx);
        } else {
          v = gv[at] * inv[ch] * wv[ch];
        }
        gx.store(static_cast<std::int64_t>(at), v);
      }
  }
  Out o{gx, gw, gb};
  apply_output_mask(c, 9, o);
  return o;
}

const OpInfo kOps[] = {
    {"aten.native_batch_norm.default", "batch_norm", batch_norm, nullptr},
    {"aten.native_batch_norm_backward.default", "batch_norm", batch_norm_backward, nullptr},
};

}  // namespace

std::span<const OpInfo> batch_norm_ops() { return kOps; }

}  // namespace kb::backendbench::aten
