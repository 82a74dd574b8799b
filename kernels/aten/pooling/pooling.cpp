// 2-D pooling over the last two dims of [C, H, W] or [N, C, H, W] inputs (any
// strides), in double with one rounding to the output dtype: max pooling with
// indices and its backward, average pooling and its backward, adaptive
// average pooling and its backward. Windows, output sizes, ceil_mode,
// count_include_pad and divisor_override follow PyTorch's definitions:
//   out = floor_or_ceil((in + 2 p - d (k - 1) - 1) / s) + 1, and with ceil_mode
//   the last window must start inside the input or the left padding;
//   adaptive windows are [floor(o in / out), ceil((o + 1) in / out)).
// Max pooling takes the first maximum of a window in row-major order, and a
// NaN over any number (the NaN found last, as PyTorch's kernels do); its
// indices are flat positions h * W + w within the plane.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "../common/args.hpp"
#include "../families.hpp"
#include "pool_window.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

struct Planes {
  std::int64_t planes = 1, h = 1, w = 1;
};
Planes planes_of(const HostTensor& x, const char* what) {
  if (x.rank() != 3 && x.rank() != 4)
    fail(fmt::format("{} must be [C, H, W] or [N, C, H, W], got {}", what, shape_text(x.shape)));
  Planes p;
  for (std::size_t d = 0; d + 2 < x.rank(); ++d) p.planes *= x.shape[d];
  p.h = x.shape[x.rank() - 2];
  p.w = x.shape[x.rank() - 1];
  return p;
}

PoolArgs window(const Call& c, const Planes& pl, std::size_t at, bool dilation) {
  return pool_window(c, pl.h, pl.w, at, dilation);
}

void store_all(HostTensor& t, const std::vector<double>& v) {
  for (std::size_t i = 0; i < v.size(); ++i) t.store(static_cast<std::int64_t>(i), v[i]);
}

// Max over each window: values and flat in-plane indices.
void max_pool(const std::vector<double>& x, const Planes& pl, const PoolArgs& win, std::vector<double>& out,
              std::vector<std::int64_t>& idx) {
  out.assign(static_cast<std::size_t>(pl.planes * win.oh * win.ow), 0.0);
  idx.assign(out.size(), 0);
  for (std::int64_t p = 0; p < pl.planes; ++p)
    for (std::int64_t oh = 0; oh < win.oh; ++oh)
      for (std::int64_t ow = 0; ow < win.ow; ++ow) {
        std::int64_t hs = oh * win.s[0] - win.p[0], ws = ow * win.s[1] - win.p[1];
        std::int64_t he = std::min(hs + (win.k[0] - 1) * win.d[0] + 1, pl.h);
        std::int64_t we = std::min(ws + (win.k[1] - 1) * win.d[1] + 1, pl.w);
        while (hs < 0) hs += win.d[0];
        while (ws < 0) ws += win.d[1];
        double best = -std::numeric_limits<double>::infinity();
        std::int64_t at = hs * pl.w + ws;
        for (std::int64_t h = hs; h < he; h += win.d[0])
          for (std::int64_t w = ws; w < we; w += win.d[1]) {
            double v = x[static_cast<std::size_t>((p * pl.h + h) * pl.w + w)];
            if (v > best || std::isnan(v)) {
              best = v;
              at = h * pl.w + w;
            }
          }
        auto o = static_cast<std::size_t>((p * win.oh + oh) * win.ow + ow);
        out[o] = best;
        idx[o] = at;
      }
}

// max_pool2d_with_indices(self, kernel_size, stride=[], padding=0, dilation=1, ceil_mode=False)
Out max_pool2d_with_indices(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  require_real(x, "self");
  Planes pl = planes_of(x, "self");
  PoolArgs win = window(c, pl, 1, true);
  HostTensor y = empty_tensor(x.dtype, with_plane(x, win.oh, win.ow), c.meta);
  HostTensor ind = empty_tensor(Dtype::i64, y.shape, c.meta);
  if (c.meta) return {y, ind};
  std::vector<double> out;
  std::vector<std::int64_t> idx;
  max_pool(to_doubles(x), pl, win, out, idx);
  store_all(y, out);
  for (std::size_t i = 0; i < idx.size(); ++i) ind.store(static_cast<std::int64_t>(i), static_cast<double>(idx[i]));
  return {y, ind};
}

// max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices)
Out max_pool2d_with_indices_backward(Call& c) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const HostTensor& x = tensor_arg(c, 1, "self");
  const HostTensor& ind = tensor_arg(c, 7, "indices");
  Planes pl = planes_of(x, "self");
  PoolArgs win = window(c, pl, 2, true);
  auto want = with_plane(x, win.oh, win.ow);
  if (g.shape != want || ind.shape != want)
    fail(fmt::format("grad_output {} and indices {} must be {}", shape_text(g.shape), shape_text(ind.shape),
                     shape_text(want)));
  if (ind.dtype != Dtype::i64) fail("indices must be i64");
  HostTensor gx = empty_tensor(g.dtype, x.shape, c.meta);
  if (c.meta) return {gx};
  auto gv = to_doubles(g), iv = to_doubles(ind);
  std::vector<double> acc(static_cast<std::size_t>(pl.planes * pl.h * pl.w), 0.0);
  const std::int64_t per = win.oh * win.ow;
  for (std::size_t o = 0; o < gv.size(); ++o) {
    auto at = static_cast<std::int64_t>(iv[o]);
    if (at < 0 || at >= pl.h * pl.w) fail(fmt::format("index {} out of range for a {}x{} plane", at, pl.h, pl.w));
    acc[static_cast<std::size_t>(static_cast<std::int64_t>(o) / per * pl.h * pl.w + at)] += gv[o];
  }
  store_all(gx, acc);
  return {gx};
}

// BackendBench's random integers are not the argmax positions the backward
// expects; they become the forward's indices on `self`, as in training.
void prepare_max_pool_backward(Call& c, Rng&) {
  const HostTensor& x = tensor_arg(c, 1, "self");
  HostTensor& ind = tensor_arg_mut(c, 7, "indices");
  Planes pl = planes_of(x, "self");
  PoolArgs win = window(c, pl, 2, true);
  if (ind.shape != with_plane(x, win.oh, win.ow)) fail("indices must have the pooled shape");
  std::vector<double> out;
  std::vector<std::int64_t> idx;
  max_pool(to_doubles(x), pl, win, out, idx);
  std::vector<std::int64_t> at(ind.rank(), 0);
  for (std::int64_t k = 0; k < ind.numel(); ++k) {
    ind.store(ind.index_of(at.data()), static_cast<double>(idx[static_cast<std::size_t>(k)]));
    for (std::size_t d = ind.rank(); d-- > 0;) {
      if (++at[d] < ind.shape[d]) break;
      at[d] = 0;
    }
  }
}

// The average-pooling window of output (oh, ow): its clipped bounds and divisor.
struct AvgCell {
  std::int64_t hs, he, ws, we;
  double divisor;
};
AvgCell avg_cell(const Planes& pl, const PoolArgs& win, std::int64_t oh, std::int64_t ow, bool include_pad,
                 std::optional<std::int64_t> divisor) {
  std::int64_t hs = oh * win.s[0] - win.p[0], ws = ow * win.s[1] - win.p[1];
  std::int64_t he = std::min(hs + win.k[0], pl.h + win.p[0]), we = std::min(ws + win.k[1], pl.w + win.p[1]);
  const std::int64_t padded = (he - hs) * (we - ws);
  hs = std::max<std::int64_t>(hs, 0);
  ws = std::max<std::int64_t>(ws, 0);
  he = std::min(he, pl.h);
  we = std::min(we, pl.w);
  double div = divisor ? static_cast<double>(*divisor)
                       : static_cast<double>(include_pad ? padded : (he - hs) * (we - ws));
  return {hs, he, ws, we, div};
}

struct AvgArgs {
  PoolArgs win;
  bool include_pad = true;
  std::optional<std::int64_t> divisor;
};
AvgArgs avg_args(const Call& c, const Planes& pl, std::size_t at) {
  AvgArgs a;
  a.win = window(c, pl, at, false);
  a.include_pad = bool_arg(c, at + 4, "count_include_pad", true);
  if (has_arg(c, at + 5, "divisor_override")) {
    a.divisor = int_arg(c, at + 5, "divisor_override");
    if (*a.divisor == 0) fail("divisor_override must not be zero");
  }
  return a;
}

// avg_pool2d(self, kernel_size, stride=[], padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None)
Out avg_pool2d(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  if (!is_floating(x.dtype)) fail("avg_pool2d needs a floating input");
  Planes pl = planes_of(x, "self");
  AvgArgs a = avg_args(c, pl, 1);
  HostTensor y = empty_tensor(x.dtype, with_plane(x, a.win.oh, a.win.ow), c.meta);
  if (c.meta) return {y};
  auto xv = to_doubles(x);
  std::vector<double> out(static_cast<std::size_t>(y.numel()));
  for (std::int64_t p = 0; p < pl.planes; ++p)
    for (std::int64_t oh = 0; oh < a.win.oh; ++oh)
      for (std::int64_t ow = 0; ow < a.win.ow; ++ow) {
        AvgCell cell = avg_cell(pl, a.win, oh, ow, a.include_pad, a.divisor);
        double s = 0;
        for (std::int64_t h = cell.hs; h < cell.he; ++h)
          for (std::int64_t w = cell.ws; w < cell.we; ++w) s += xv[static_cast<std::size_t>((p * pl.h + h) * pl.w + w)];
        out[static_cast<std::size_t>((p * a.win.oh + oh) * a.win.ow + ow)] = s / cell.divisor;
      }
  store_all(y, out);
  return {y};
}

// avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
Out avg_pool2d_backward(Call& c) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const HostTensor& x = tensor_arg(c, 1, "self");
  Planes pl = planes_of(x, "self");
  AvgArgs a = avg_args(c, pl, 2);
  if (g.shape != with_plane(x, a.win.oh, a.win.ow))
    fail(fmt::format("grad_output {} must be {}", shape_text(g.shape), shape_text(with_plane(x, a.win.oh, a.win.ow))));
  HostTensor gx = empty_tensor(g.dtype, x.shape, c.meta);
  if (c.meta) return {gx};
  auto gv = to_doubles(g);
  std::vector<double> acc(static_cast<std::size_t>(pl.planes * pl.h * pl.w), 0.0);
  for (std::int64_t p = 0; p < pl.planes; ++p)
    for (std::int64_t oh = 0; oh < a.win.oh; ++oh)
      for (std::int64_t ow = 0; ow < a.win.ow; ++ow) {
        AvgCell cell = avg_cell(pl, a.win, oh, ow, a.include_pad, a.divisor);
        double v = gv[static_cast<std::size_t>((p * a.win.oh + oh) * a.win.ow + ow)] / cell.divisor;
        for (std::int64_t h = cell.hs; h < cell.he; ++h)
          for (std::int64_t w = cell.ws; w < cell.we; ++w) acc[static_cast<std::size_t>((p * pl.h + h) * pl.w + w)] += v;
      }
  store_all(gx, acc);
  return {gx};
}

std::int64_t adaptive_start(std::int64_t o, std::int64_t in, std::int64_t out) { return o * in / out; }
std::int64_t adaptive_end(std::int64_t o, std::int64_t in, std::int64_t out) { return ((o + 1) * in + out - 1) / out; }

// Calls f(plane, oh, ow, hs, he, ws, we) for each adaptive window.
template <class F>
void adaptive_windows(const Planes& pl, std::int64_t oh_n, std::int64_t ow_n, F&& f) {
  for (std::int64_t p = 0; p < pl.planes; ++p)
    for (std::int64_t oh = 0; oh < oh_n; ++oh)
      for (std::int64_t ow = 0; ow < ow_n; ++ow)
        f(p, oh, ow, adaptive_start(oh, pl.h, oh_n), adaptive_end(oh, pl.h, oh_n), adaptive_start(ow, pl.w, ow_n),
          adaptive_end(ow, pl.w, ow_n));
}

// _adaptive_avg_pool2d(self, output_size)
Out adaptive_avg_pool2d(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  if (!is_floating(x.dtype)) fail("adaptive_avg_pool2d needs a floating input");
  Planes pl = planes_of(x, "self");
  auto os = pair_arg(c, 1, "output_size", {});
  if (os.empty() || os[0] < 1 || os[1] < 1) fail("output_size must hold two positive sizes");
  HostTensor y = empty_tensor(x.dtype, with_plane(x, os[0], os[1]), c.meta);
  if (c.meta) return {y};
  auto xv = to_doubles(x);
  std::vector<double> out(static_cast<std::size_t>(y.numel()));
  adaptive_windows(pl, os[0], os[1], [&](auto p, auto oh, auto ow, auto hs, auto he, auto ws, auto we) {
    double s = 0;
    for (std::int64_t h = hs; h < he; ++h)
      for (std::int64_t w = ws; w < we; ++w) s += xv[static_cast<std::size_t>((p * pl.h + h) * pl.w + w)];
    out[static_cast<std::size_t>((p * os[0] + oh) * os[1] + ow)] = s / static_cast<double>((he - hs) * (we - ws));
  });
  store_all(y, out);
  return {y};
}

// _adaptive_avg_pool2d_backward(grad_output, self)
Out adaptive_avg_pool2d_backward(Call& c) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const HostTensor& x = tensor_arg(c, 1, "self");
  Planes pl = planes_of(x, "self");
  Planes gp = planes_of(g, "grad_output");
  if (gp.planes != pl.planes || g.rank() != x.rank())
    fail(fmt::format("grad_output {} does not match self {}", shape_text(g.shape), shape_text(x.shape)));
  HostTensor gx = empty_tensor(g.dtype, x.shape, c.meta);
  if (c.meta) return {gx};
  auto gv = to_doubles(g);
  std::vector<double> acc(static_cast<std::size_t>(pl.planes * pl.h * pl.w), 0.0);
  adaptive_windows(pl, gp.h, gp.w, [&](auto p, auto oh, auto ow, auto hs, auto he, auto ws, auto we) {
    double v = gv[static_cast<std::size_t>((p * gp.h + oh) * gp.w + ow)] / static_cast<double>((he - hs) * (we - ws));
    for (std::int64_t h = hs; h < he; ++h)
      for (std::int64_t w = ws; w < we; ++w) acc[static_cast<std::size_t>((p * pl.h + h) * pl.w + w)] += v;
  });
  store_all(gx, acc);
  return {gx};
}

const OpInfo kOps[] = {
    {"aten.max_pool2d_with_indices.default", "pooling", max_pool2d_with_indices, nullptr},
    {"aten.max_pool2d_with_indices_backward.default", "pooling", max_pool2d_with_indices_backward,
     prepare_max_pool_backward},
    {"aten.avg_pool2d.default", "pooling", avg_pool2d, nullptr},
    {"aten.avg_pool2d_backward.default", "pooling", avg_pool2d_backward, nullptr},
    {"aten._adaptive_avg_pool2d.default", "pooling", adaptive_avg_pool2d, nullptr},
    {"aten._adaptive_avg_pool2d_backward.default", "pooling", adaptive_avg_pool2d_backward, nullptr},
};

}  // namespace

std::span<const OpInfo> pooling_ops() { return kOps; }

}  // namespace kb::backendbench::aten
