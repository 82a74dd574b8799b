// _softmax / _log_softmax and their backwards, along one dim, in double.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "../common/args.hpp"
#include "../families.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

struct Line {
  std::size_t dim;
  std::int64_t len;
};
Line line_of(const HostTensor& x, std::int64_t dim) {
  auto d = static_cast<std::size_t>(wrap_dim(dim, x.rank()));
  return Line{d, x.rank() ? x.shape[d] : 1};
}
std::int64_t stride_of(const HostTensor& t, std::size_t d) { return t.rank() ? t.strides[d] : 0; }

// _softmax(self, dim, half_to_float) / _log_softmax(self, dim, half_to_float)
template <bool Log>
Out softmax(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  if (!is_floating(x.dtype)) fail(fmt::format("softmax needs a floating tensor, got {}", dtype_abbrev(x.dtype)));
  Line ln = line_of(x, int_arg(c, 1, "dim"));
  bool half_to_float = bool_arg(c, 2, "half_to_float");
  if (half_to_float && x.dtype != Dtype::f16 && x.dtype != Dtype::bf16)
    fail("half_to_float=True needs an f16 or bf16 input");
  HostTensor out = empty_tensor(half_to_float ? Dtype::f32 : x.dtype, x.shape, c.meta);
  if (c.meta) return {out};
  const std::int64_t xs = stride_of(x, ln.dim), os = stride_of(out, ln.dim);
  std::vector<double> v(static_cast<std::size_t>(ln.len));
  for_each_line(x.shape, ln.dim, {&x, &out}, [&](const std::int64_t* b) {
    double m = -std::numeric_limits<double>::infinity();
    for (std::int64_t k = 0; k < ln.len; ++k) {
      v[k] = x.load(b[0] + k * xs);
      m = std::isnan(v[k]) || std::isnan(m) ? std::numeric_limits<double>::quiet_NaN() : std::max(m, v[k]);
    }
    if (std::isinf(m) && m < 0) m = 0;  // a line of -inf: exp gives 0/0 = NaN, as PyTorch does
    double s = 0;
    for (std::int64_t k = 0; k < ln.len; ++k) s += std::exp(v[k] - m);
    for (std::int64_t k = 0; k < ln.len; ++k)
      out.store(b[1] + k * os, Log ? v[k] - m - std::log(s) : std::exp(v[k] - m) / s);
  });
  return {out};
}

// _softmax_backward_data(grad_output, output, dim, input_dtype):
//   grad_input = y * (g - sum(g * y))
// _log_softmax_backward_data(grad_output, output, dim, input_dtype):
//   grad_input = g - exp(y) * sum(g)
template <bool Log>
Out softmax_backward(Call& c) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const HostTensor& y = tensor_arg(c, 1, "output");
  if (g.shape != y.shape) fail(fmt::format("grad_output {} and output {} differ in shape", shape_text(g.shape), shape_text(y.shape)));
  if (!is_floating(g.dtype) || !is_floating(y.dtype)) fail("softmax backward needs floating tensors");
  Line ln = line_of(g, int_arg(c, 2, "dim"));
  auto in_dt = dtype_arg(c, 3, "input_dtype");
  if (!in_dt) fail("input_dtype is missing");
  // PyTorch returns grad_output's dtype unless the forward ran half_to_float
  // (grad f32, input f16), when it returns input_dtype.
  Dtype odt = (g.dtype != *in_dt) ? *in_dt : g.dtype;
  HostTensor out = empty_tensor(odt, g.shape, c.meta);
  if (c.meta) return {out};
  const std::int64_t gs = stride_of(g, ln.dim), ys = stride_of(y, ln.dim), os = stride_of(out, ln.dim);
  for_each_line(g.shape, ln.dim, {&g, &y, &out}, [&](const std::int64_t* b) {
    double s = 0;
    for (std::int64_t k = 0; k < ln.len; ++k) {
      double gv = g.load(b[0] + k * gs);
      s += Log ? gv : gv * y.load(b[1] + k * ys);
    }
    for (std::int64_t k = 0; k < ln.len; ++k) {
      double gv = g.load(b[0] + k * gs), yv = y.load(b[1] + k * ys);
      out.store(b[2] + k * os, Log ? gv - std::exp(yv) * s : yv * (gv - s));
    }
  });
  return {out};
}

const OpInfo kOps[] = {
    {"aten._softmax.default", "softmax", softmax<false>, nullptr},
    {"aten._log_softmax.default", "softmax", softmax<true>, nullptr},
    {"aten._softmax_backward_data.default", "softmax", softmax_backward<false>, nullptr},
    {"aten._log_softmax_backward_data.default", "softmax", softmax_backward<true>, nullptr},
};

}  // namespace

std::span<const OpInfo> softmax_ops() { return kOps; }

}  // namespace kb::backendbench::aten
