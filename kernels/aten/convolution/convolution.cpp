// convolution and convolution_backward over any number of spatial dims (1-D,
// 2-D, 3-D ...), every stride, padding, dilation, group count and the
// transposed form, in double with one rounding to the output dtype. Inputs of
// any strides (channels-last included) are read through to_doubles; outputs
// are contiguous (the judge compares values, not strides).
//
// Everything is one direct convolution seen from its three sides. In the
// non-transposed direction an "input" x[N][Ci][in...] and weight
// w[Co][Ci/G][k...] give y[N][Co][out...], with input position
//   i_d = o_d * stride_d - padding_d + k_d * dilation_d
// for output position o and tap k (taps outside [0, in_d) read zero). Then
//   forward:      y  = sum over taps and the group's input channels of x * w
//   backward data: gx = the adjoint of forward in x (scatter of gy * w)
//   backward weight: gw = sum over batch and output positions of gy * x
// A transposed convolution with weight [Cx][Cy/G][k...] is the backward-data
// map of the non-transposed convolution whose "output" side is its input x
// (Co = Cx) and whose "input" side is its output y (Ci = Cy), the weight
// already in that convolution's [Co][Ci/G][k...] layout; its gradients are
// the forward map (grad_input) and backward-weight with the sides swapped.
#include <fmt/format.h>

#include <utility>

#include "../common/args.hpp"
#include "../families.hpp"
#include "conv_geometry.hpp"

namespace kb::backendbench::aten {

namespace {

std::vector<std::int64_t> per_dim(const Call& c, std::size_t pos, const char* name, std::size_t rank,
                                  std::int64_t dflt) {
  auto v = int_list_arg(c, pos, name);
  if (!v || v->empty()) return std::vector<std::int64_t>(rank, dflt);
  if (v->size() == 1) return std::vector<std::int64_t>(rank, (*v)[0]);
  if (v->size() != rank)
    fail(fmt::format("{} holds {} values for {} spatial dims", name, v->size(), rank));
  return *v;
}

}  // namespace

ConvParams conv_params(const Call& c, const HostTensor& x, const HostTensor& w, std::size_t at) {
  if (x.rank() < 3) fail(fmt::format("input must have rank >= 3 ([N, C, spatial...]), got {}", shape_text(x.shape)));
  if (w.rank() != x.rank())
    fail(fmt::format("weight {} must have the rank of input {}", shape_text(w.shape), shape_text(x.shape)));
  if (!is_floating(x.dtype) || w.dtype != x.dtype)
    fail(fmt::format("input and weight must share one floating dtype, got {} and {}", dtype_abbrev(x.dtype),
                     dtype_abbrev(w.dtype)));
  const std::size_t rank = x.rank() - 2;
  ConvParams p;
  ConvGeometry& g = p.g;
  g.stride = per_dim(c, at, "stride", rank, 1);
  g.pad = per_dim(c, at + 1, "padding", rank, 0);
  g.dil = per_dim(c, at + 2, "dilation", rank, 1);
  p.transposed = bool_arg(c, at + 3, "transposed", false);
  auto opad = per_dim(c, at + 4, "output_padding", rank, 0);
  g.groups = int_arg(c, at + 5, "groups", 1);
  if (g.groups < 1) fail(fmt::format("groups must be positive, got {}", g.groups));
  for (std::size_t d = 0; d < rank; ++d) {
    if (g.stride[d] < 1 || g.dil[d] < 1 || g.pad[d] < 0 || opad[d] < 0)
      fail("stride and dilation must be positive, padding and output_padding non-negative");
    if (p.transposed && opad[d] >= std::max(g.stride[d], g.dil[d]))
      fail(fmt::format("output_padding {} must be smaller than stride {} or dilation {}", opad[d], g.stride[d], g.dil[d]));
    if (!p.transposed && opad[d] != 0) fail("output_padding needs transposed=True");
  }
  g.n = x.shape[0];
  g.k.assign(w.shape.begin() + 2, w.shape.end());
  const std::vector<std::int64_t> xs(x.shape.begin() + 2, x.shape.end());
  if (w.shape[0] % g.groups != 0)
    fail(fmt::format("weight's dim 0 ({}) is not divisible by groups {}", w.shape[0], g.groups));
  // Weight [Co][Ci/G][k] of the non-transposed convolution in both forms.
  g.co = w.shape[0];
  g.ci = w.shape[1] * g.groups;
  std::vector<std::int64_t> ys(rank);
  if (!p.transposed) {
    if (x.shape[1] != g.ci)
      fail(fmt::format("input has {} channels, weight {} with groups {} expects {}", x.shape[1], shape_text(w.shape),
                       g.groups, g.ci));
    g.in = xs;
    for (std::size_t d = 0; d < rank; ++d) {
      const std::int64_t span = g.dil[d] * (g.k[d] - 1) + 1;
      if (xs[d] + 2 * g.pad[d] < span)
        fail(fmt::format("input spatial size {} (padded {}) is smaller than the dilated kernel {}", xs[d],
                         xs[d] + 2 * g.pad[d], span));
      ys[d] = (xs[d] + 2 * g.pad[d] - span) / g.stride[d] + 1;
    }
    g.out = ys;
  } else {
    if (x.shape[1] != g.co)
      fail(fmt::format("input has {} channels, transposed weight {} expects {}", x.shape[1], shape_text(w.shape), g.co));
    g.out = xs;
    for (std::size_t d = 0; d < rank; ++d) {
      ys[d] = (xs[d] - 1) * g.stride[d] - 2 * g.pad[d] + g.dil[d] * (g.k[d] - 1) + opad[d] + 1;
      if (ys[d] < 1) fail(fmt::format("transposed output size {} along spatial dim {} is not positive", ys[d], d));
    }
    g.in = ys;
  }
  p.x_shape = x.shape;
  p.y_shape = {x.shape[0], p.transposed ? g.ci : g.co};
  p.y_shape.insert(p.y_shape.end(), ys.begin(), ys.end());
  return p;
}

namespace {

using Geometry = ConvGeometry;
using Params = ConvParams;

using Out = std::vector<HostTensor>;

// Calls f(o, taps) for each output position o (row-major over out), taps
// holding the (tap index, input index) pairs that fall inside the input.
template <class F>
void for_each_output(const Geometry& g, F&& f) {
  const std::size_t rank = g.out.size();
  // tab[d][o_d * k_d + t_d]: input coordinate along d, or -1 outside the input.
  std::vector<std::vector<std::int64_t>> tab(rank);
  for (std::size_t d = 0; d < rank; ++d) {
    tab[d].resize(static_cast<std::size_t>(g.out[d] * g.k[d]));
    for (std::int64_t o = 0; o < g.out[d]; ++o)
      for (std::int64_t t = 0; t < g.k[d]; ++t) {
        std::int64_t i = o * g.stride[d] - g.pad[d] + t * g.dil[d];
        tab[d][static_cast<std::size_t>(o * g.k[d] + t)] = i >= 0 && i < g.in[d] ? i : -1;
      }
  }
  std::vector<std::int64_t> in_stride(rank, 1);
  for (std::size_t d = rank; d-- > 1;) in_stride[d - 1] = in_stride[d] * g.in[d];
  std::vector<std::int64_t> o(rank, 0), t(rank, 0);
  std::vector<std::pair<std::int64_t, std::int64_t>> taps;
  const std::int64_t n_out = g.out_count(), n_k = g.k_count();
  for (std::int64_t of = 0; of < n_out; ++of) {
    taps.clear();
    std::fill(t.begin(), t.end(), 0);
    for (std::int64_t tf = 0; tf < n_k; ++tf) {
      std::int64_t at = 0;
      bool inside = true;
      for (std::size_t d = 0; d < rank && inside; ++d) {
        std::int64_t i = tab[d][static_cast<std::size_t>(o[d] * g.k[d] + t[d])];
        inside = i >= 0;
        at += i * in_stride[d];
      }
      if (inside) taps.emplace_back(tf, at);
      for (std::size_t d = rank; d-- > 0;) {
        if (++t[d] < g.k[d]) break;
        t[d] = 0;
      }
    }
    f(of, taps);
    for (std::size_t d = rank; d-- > 0;) {
      if (++o[d] < g.out[d]) break;
      o[d] = 0;
    }
  }
}

// y[N][Co][out] = conv(x[N][Ci][in], w[Co][Ci/G][k])
std::vector<double> forward(const Geometry& g, const std::vector<double>& x, const std::vector<double>& w) {
  const std::int64_t I = g.in_count(), O = g.out_count(), K = g.k_count(), cig = g.ci / g.groups,
                     cog = g.co / g.groups;
  std::vector<double> y(static_cast<std::size_t>(g.n * g.co * O), 0.0);
  for_each_output(g, [&](std::int64_t o, const auto& taps) {
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t co = 0; co < g.co; ++co) {
        const std::int64_t grp = co / cog;
        double acc = 0;
        for (std::int64_t c = 0; c < cig; ++c) {
          const double* xr = x.data() + (n * g.ci + grp * cig + c) * I;
          const double* wr = w.data() + (co * cig + c) * K;
          for (auto [t, i] : taps) acc += xr[i] * wr[t];
        }
        y[static_cast<std::size_t>((n * g.co + co) * O + o)] = acc;
      }
  });
  return y;
}

// gx[N][Ci][in] = the adjoint of forward in x, applied to gy[N][Co][out]
std::vector<double> backward_data(const Geometry& g, const std::vector<double>& gy, const std::vector<double>& w) {
  const std::int64_t I = g.in_count(), O = g.out_count(), K = g.k_count(), cig = g.ci / g.groups,
                     cog = g.co / g.groups;
  std::vector<double> gx(static_cast<std::size_t>(g.n * g.ci * I), 0.0);
  for_each_output(g, [&](std::int64_t o, const auto& taps) {
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t co = 0; co < g.co; ++co) {
        const double v = gy[static_cast<std::size_t>((n * g.co + co) * O + o)];
        if (v == 0) continue;
        const std::int64_t grp = co / cog;
        for (std::int64_t c = 0; c < cig; ++c) {
          double* xr = gx.data() + (n * g.ci + grp * cig + c) * I;
          const double* wr = w.data() + (co * cig + c) * K;
          for (auto [t, i] : taps) xr[i] += v * wr[t];
        }
      }
  });
  return gx;
}

// gw[Co][Ci/G][k] = sum over n and out of gy * x
std::vector<double> backward_weight(const Geometry& g, const std::vector<double>& gy, const std::vector<double>& x) {
  const std::int64_t I = g.in_count(), O = g.out_count(), K = g.k_count(), cig = g.ci / g.groups,
                     cog = g.co / g.groups;
  std::vector<double> gw(static_cast<std::size_t>(g.co * cig * K), 0.0);
  for_each_output(g, [&](std::int64_t o, const auto& taps) {
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t co = 0; co < g.co; ++co) {
        const double v = gy[static_cast<std::size_t>((n * g.co + co) * O + o)];
        if (v == 0) continue;
        const std::int64_t grp = co / cog;
        for (std::int64_t c = 0; c < cig; ++c) {
          const double* xr = x.data() + (n * g.ci + grp * cig + c) * I;
          double* wr = gw.data() + (co * cig + c) * K;
          for (auto [t, i] : taps) wr[t] += v * xr[i];
        }
      }
  });
  return gw;
}

void store_all(HostTensor& t, const std::vector<double>& v) {
  for (std::size_t i = 0; i < v.size(); ++i) t.store(static_cast<std::int64_t>(i), v[i]);
}

// convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups)
Out convolution(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "input");
  const HostTensor& w = tensor_arg(c, 1, "weight");
  const HostTensor* b = optional_tensor(c, 2, "bias");
  Params p = conv_params(c, x, w, 3);
  const std::int64_t cy = p.y_shape[1];
  if (b && (b->rank() != 1 || b->shape[0] != cy))
    fail(fmt::format("bias {} must be [{}]", shape_text(b->shape), cy));
  HostTensor y = empty_tensor(x.dtype, p.y_shape, c.meta);
  if (c.meta) return {y};
  auto xv = to_doubles(x), wv = to_doubles(w);
  std::vector<double> yv = p.transposed ? backward_data(p.g, xv, wv) : forward(p.g, xv, wv);
  if (b && !yv.empty()) {  // an empty batch has no positions to add the bias to
    auto bv = to_doubles(*b);
    const std::int64_t s = static_cast<std::int64_t>(yv.size()) / (p.y_shape[0] * cy);
    for (std::size_t i = 0; i < yv.size(); ++i) yv[i] += bv[static_cast<std::size_t>((static_cast<std::int64_t>(i) / s) % cy)];
  }
  store_all(y, yv);
  return {y};
}

// convolution_backward(grad_output, input, weight, bias_sizes?, stride, padding, dilation, transposed,
//                      output_padding, groups, output_mask) -> (grad_input, grad_weight, grad_bias)
Out convolution_backward(Call& c) {
  const HostTensor& gy = tensor_arg(c, 0, "grad_output");
  const HostTensor& x = tensor_arg(c, 1, "input");
  const HostTensor& w = tensor_arg(c, 2, "weight");
  Params p = conv_params(c, x, w, 4);
  if (gy.shape != p.y_shape)
    fail(fmt::format("grad_output {} must have the convolution's output shape {}", shape_text(gy.shape),
                     shape_text(p.y_shape)));
  if (gy.dtype != x.dtype) fail("grad_output and input must share one dtype");
  const std::int64_t cy = p.y_shape[1];
  Out o{empty_tensor(x.dtype, x.shape, c.meta), empty_tensor(w.dtype, w.shape, c.meta),
        empty_tensor(gy.dtype, {cy}, c.meta)};
  apply_output_mask(c, 10, o);
  if (c.meta) return o;
  auto gyv = to_doubles(gy), xv = to_doubles(x), wv = to_doubles(w);
  if (!o[0].undefined) store_all(o[0], p.transposed ? forward(p.g, gyv, wv) : backward_data(p.g, gyv, wv));
  if (!o[1].undefined)
    store_all(o[1], p.transposed ? backward_weight(p.g, xv, gyv) : backward_weight(p.g, gyv, xv));
  if (!o[2].undefined) {
    std::vector<double> gb(static_cast<std::size_t>(cy), 0.0);
    // Positions per (batch, channel); an empty batch leaves the sums at zero.
    const std::int64_t s = gyv.empty() ? 1 : static_cast<std::int64_t>(gyv.size()) / (p.y_shape[0] * cy);
    for (std::size_t i = 0; i < gyv.size(); ++i) gb[static_cast<std::size_t>((static_cast<std::int64_t>(i) / s) % cy)] += gyv[i];
    store_all(o[2], gb);
  }
  return o;
}

const OpInfo kOps[] = {
    {"aten.convolution.default", "convolution", convolution, nullptr},
    {"aten.convolution_backward.default", "convolution", convolution_backward, nullptr},
};

}  // namespace

std::span<const OpInfo> convolution_ops() { return kOps; }

}  // namespace kb::backendbench::aten
