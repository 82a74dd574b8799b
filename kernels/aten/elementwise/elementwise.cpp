// Elementwise ATen operators: unary and binary arithmetic with PyTorch's
// broadcasting and type promotion, activations and their backwards,
// comparisons, where, masked_fill, clamp. Values are computed in double and
// rounded once to the output dtype. Python scalars keep full precision (as
// PyTorch's CUDA kernels use them, in opmath precision, not cast to f16).
#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "../common/args.hpp"
#include "../families.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

// An operand that is a tensor or a Python scalar (broadcast as 0-D).
struct Opnd {
  HostTensor t;
  Operand promo;
};

Opnd tensor_or_scalar(const Call& c, std::size_t pos, std::string_view name, std::optional<double> dflt = {}) {
  const CallArg* a = c.find(pos, name);
  if (a && a->tensor) {
    require_real(*a->tensor, c.op);
    return Opnd{*a->tensor, operand(*a->tensor)};
  }
  Scalar s = scalar_arg(c, pos, name, dflt);
  HostTensor t = empty_tensor(Dtype::f64, {});
  t.store(0, s.value);
  return Opnd{t, Operand{s.category, Operand::scalar}};
}

double alpha_of(const Call& c, std::size_t pos) { return number_arg(c, pos, "alpha", 1.0); }

// out = f(a, b) with broadcasting; result dtype from promotion (or forced).
template <class F>
Out binary(Call& c, const Opnd& a, const Opnd& b, Dtype dtype, bool inplace, F f) {
  if (inplace) {
    HostTensor& self = tensor_arg_mut(c, 0, "self");
    broadcast_shapes(self.shape, b.t.shape);
    (void)broadcast_strides(b.t, self.shape);
    if (c.meta) return {self};
    map_into(self, {&self, &b.t}, [&](const double* v) { return f(v[0], v[1]); });
    return {self};
  }
  auto shape = broadcast_shapes(a.t.shape, b.t.shape);
  HostTensor out = empty_tensor(dtype, shape, c.meta);
  if (c.meta) return {out};
  map_into(out, {&a.t, &b.t}, [&](const double* v) { return f(v[0], v[1]); });
  return {out};
}

template <class F>
Out arith(Call& c, bool inplace, bool true_div, F f) {
  Opnd a = tensor_or_scalar(c, 0, "self");
  Opnd b = tensor_or_scalar(c, 1, "other");
  Dtype dt = result_type({a.promo, b.promo});
  if (true_div) dt = default_float_if_integral(dt);
  return binary(c, a, b, dt, inplace, [&](double x, double y) { return f(x, y); });
}

Out add_t(Call& c) {
  double al = alpha_of(c, 2);
  return arith(c, false, false, [al](double x, double y) { return x + al * y; });
}
Out add_inplace(Call& c) {
  double al = alpha_of(c, 2);
  return arith(c, true, false, [al](double x, double y) { return x + al * y; });
}
Out sub_t(Call& c) {
  double al = alpha_of(c, 2);
  return arith(c, false, false, [al](double x, double y) { return x - al * y; });
}
Out rsub_s(Call& c) {
  double al = alpha_of(c, 2);
  return arith(c, false, false, [al](double x, double y) { return y - al * x; });
}
Out mul_t(Call& c) { return arith(c, false, false, [](double x, double y) { return x * y; }); }
Out mul_inplace(Call& c) { return arith(c, true, false, [](double x, double y) { return x * y; }); }
Out div_t(Call& c) {
  if (has_arg(c, 2, "rounding_mode")) {
    std::string mode = string_arg(c, 2, "rounding_mode", "");
    if (mode == "trunc") return arith(c, false, false, [](double x, double y) { return std::trunc(x / y); });
    if (mode == "floor") return arith(c, false, false, [](double x, double y) { return std::floor(x / y); });
    fail(fmt::format("rounding_mode \"{}\" is not supported", mode));
  }
  return arith(c, false, true, [](double x, double y) { return x / y; });
}
Out div_inplace(Call& c) { return arith(c, true, true, [](double x, double y) { return x / y; }); }
Out minimum(Call& c) {
  return arith(c, false, false, [](double x, double y) { return std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y); });
}
Out maximum(Call& c) {
  return arith(c, false, false, [](double x, double y) { return std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y); });
}
Out bitwise_and(Call& c) {
  Opnd a = tensor_or_scalar(c, 0, "self"), b = tensor_or_scalar(c, 1, "other");
  Dtype dt = result_type({a.promo, b.promo});
  if (is_floating(dt)) fail("bitwise_and needs integral or bool tensors");
  return binary(c, a, b, dt, false, [](double x, double y) {
    return static_cast<double>(static_cast<std::int64_t>(x) & static_cast<std::int64_t>(y));
  });
}

// pow.Tensor_Scalar(self, exponent) / pow.Scalar(self, exponent)
double pow_value(double x, double e) { return std::pow(x, e); }
Out pow_tensor_scalar(Call& c) {
  Opnd a = tensor_or_scalar(c, 0, "self"), b = tensor_or_scalar(c, 1, "exponent");
  return binary(c, a, b, result_type({a.promo, b.promo}), false, pow_value);
}
Out pow_scalar(Call& c) {
  Opnd a = tensor_or_scalar(c, 0, "self"), b = tensor_or_scalar(c, 1, "exponent");
  return binary(c, a, b, result_type({a.promo, b.promo}), false, pow_value);
}

// ---- comparisons (bool output) ----
template <class F>
Out compare(Call& c, F f) {
  Opnd a = tensor_or_scalar(c, 0, "self"), b = tensor_or_scalar(c, 1, "other");
  return binary(c, a, b, Dtype::b8, false, [&](double x, double y) { return f(x, y) ? 1.0 : 0.0; });
}
Out eq(Call& c) { return compare(c, [](double x, double y) { return x == y; }); }
Out ne(Call& c) { return compare(c, [](double x, double y) { return x != y; }); }
Out lt(Call& c) { return compare(c, [](double x, double y) { return x < y; }); }
Out le(Call& c) { return compare(c, [](double x, double y) { return x <= y; }); }
Out gt(Call& c) { return compare(c, [](double x, double y) { return x > y; }); }
Out ge(Call& c) { return compare(c, [](double x, double y) { return x >= y; }); }

// ---- unary ----
enum class Rule { keep, floating, boolean };

template <class F>
Out unary(Call& c, Rule rule, bool inplace, F f) {
  if (inplace) {
    HostTensor& self = tensor_arg_mut(c, 0, "self");
    require_real(self, c.op);
    if (c.meta) return {self};
    map_into(self, {&self}, [&](const double* v) { return f(v[0]); });
    return {self};
  }
  const HostTensor& x = tensor_arg(c, 0, "self");
  require_real(x, c.op);
  Dtype dt = rule == Rule::boolean ? Dtype::b8 : rule == Rule::floating ? default_float_if_integral(x.dtype) : x.dtype;
  HostTensor out = empty_tensor(dt, x.shape, c.meta);
  if (c.meta) return {out};
  map_into(out, {&x}, [&](const double* v) { return f(v[0]); });
  return {out};
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double relu(double x) { return std::isnan(x) ? x : (x > 0 ? x : 0.0); }
double silu(double x) { return x * sigmoid(x); }
double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2)); }
constexpr double kGeluTanhC = 0.7978845608028654;  // sqrt(2 / pi)
double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(kGeluTanhC * (x + 0.044715 * x * x * x))); }
double hardswish(double x) { return x * std::min(std::max(x + 3.0, 0.0), 6.0) / 6.0; }
double hardsigmoid(double x) { return std::min(std::max(x + 3.0, 0.0), 6.0) / 6.0; }
double sgn(double x) { return std::isnan(x) ? x : (x > 0) - (x < 0); }

Out neg(Call& c) { return unary(c, Rule::keep, false, [](double x) { return -x; }); }
Out abs_(Call& c) { return unary(c, Rule::keep, false, [](double x) { return std::fabs(x); }); }
Out sgn_(Call& c) { return unary(c, Rule::keep, false, sgn); }
Out exp_(Call& c) { return unary(c, Rule::floating, false, [](double x) { return std::exp(x); }); }
Out sqrt_(Call& c) { return unary(c, Rule::floating, false, [](double x) { return std::sqrt(x); }); }
Out rsqrt_(Call& c) { return unary(c, Rule::floating, false, [](double x) { return 1.0 / std::sqrt(x); }); }
Out reciprocal(Call& c) { return unary(c, Rule::floating, false, [](double x) { return 1.0 / x; }); }
Out erf_(Call& c) { return unary(c, Rule::floating, false, [](double x) { return std::erf(x); }); }
Out sin_(Call& c) { return unary(c, Rule::floating, false, [](double x) { return std::sin(x); }); }
Out cos_(Call& c) { return unary(c, Rule::floating, false, [](double x) { return std::cos(x); }); }
Out log2_(Call& c) { return unary(c, Rule::floating, false, [](double x) { return std::log2(x); }); }
Out tanh_(Call& c) { return unary(c, Rule::floating, false, [](double x) { return std::tanh(x); }); }
Out sigmoid_op(Call& c) { return unary(c, Rule::floating, false, sigmoid); }
Out sigmoid_inplace(Call& c) { return unary(c, Rule::floating, true, sigmoid); }
Out relu_op(Call& c) { return unary(c, Rule::keep, false, relu); }
Out relu_inplace(Call& c) { return unary(c, Rule::keep, true, relu); }
Out silu_op(Call& c) { return unary(c, Rule::floating, false, silu); }
Out silu_inplace(Call& c) { return unary(c, Rule::floating, true, silu); }
Out hardswish_op(Call& c) { return unary(c, Rule::floating, false, hardswish); }
Out hardswish_inplace(Call& c) { return unary(c, Rule::floating, true, hardswish); }
Out hardsigmoid_op(Call& c) { return unary(c, Rule::floating, false, hardsigmoid); }
Out isinf_(Call& c) { return unary(c, Rule::boolean, false, [](double x) { return std::isinf(x) ? 1.0 : 0.0; }); }
Out isnan_(Call& c) { return unary(c, Rule::boolean, false, [](double x) { return std::isnan(x) ? 1.0 : 0.0; }); }
Out bitwise_not(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  if (is_floating(x.dtype)) fail("bitwise_not needs an integral or bool tensor");
  bool b = x.dtype == Dtype::b8;
  return unary(c, Rule::keep, false, [b](double v) {
    return b ? (v != 0 ? 0.0 : 1.0) : static_cast<double>(~static_cast<std::int64_t>(v));
  });
}

Out gelu_op(Call& c) {
  std::string approx = string_arg(c, 1, "approximate", "none");
  if (approx == "tanh") return unary(c, Rule::floating, false, gelu_tanh);
  if (approx != "none") fail(fmt::format("approximate=\"{}\" is not one of none, tanh", approx));
  return unary(c, Rule::floating, false, gelu_erf);
}

template <bool Inplace>
Out leaky_relu(Call& c) {
  double slope = number_arg(c, 1, "negative_slope", 0.01);
  return unary(c, Rule::floating, Inplace, [slope](double x) { return x > 0 ? x : x * slope; });
}

template <bool Inplace>
Out hardtanh(Call& c) {
  double lo = number_arg(c, 1, "min_val", -1.0), hi = number_arg(c, 2, "max_val", 1.0);
  return unary(c, Rule::keep, Inplace, [lo, hi](double x) { return std::isnan(x) ? x : std::min(std::max(x, lo), hi); });
}

Out elu(Call& c) {
  double alpha = number_arg(c, 1, "alpha", 1.0), scale = number_arg(c, 2, "scale", 1.0);
  double in_scale = number_arg(c, 3, "input_scale", 1.0);
  return unary(c, Rule::floating, false, [=](double x) {
    return x > 0 ? scale * x : scale * alpha * (std::exp(x * in_scale) - 1.0);
  });
}

// clamp(self, min=None, max=None): NaN propagates; min wins over max when min > max.
Out clamp(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  std::vector<Operand> ops{operand(x)};
  bool has_lo = has_arg(c, 1, "min"), has_hi = has_arg(c, 2, "max");
  if (!has_lo && !has_hi) fail("clamp: at least one of min and max must be given");
  Scalar lo{}, hi{};
  if (has_lo) ops.push_back({(lo = scalar_arg(c, 1, "min")).category, Operand::scalar});
  if (has_hi) ops.push_back({(hi = scalar_arg(c, 2, "max")).category, Operand::scalar});
  Dtype dt = result_type(ops);
  HostTensor out = empty_tensor(dt, x.shape, c.meta);
  if (c.meta) return {out};
  map_into(out, {&x}, [&](const double* v) {
    double y = v[0];
    if (std::isnan(y)) return y;
    if (has_lo) y = std::max(y, lo.value);
    if (has_hi) y = std::min(y, hi.value);
    return y;
  });
  return {out};
}

// ---- backwards: (grad_output, input-or-result, params...) ----
template <class F>
Out backward(Call& c, std::string_view second, F f) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const HostTensor& x = tensor_arg(c, 1, second);
  require_real(g, c.op);
  require_real(x, c.op);
  Dtype dt = result_type({operand(g), operand(x)});
  HostTensor out = empty_tensor(dt, broadcast_shapes(g.shape, x.shape), c.meta);
  if (c.meta) return {out};
  map_into(out, {&g, &x}, [&](const double* v) { return f(v[0], v[1]); });
  return {out};
}

Out threshold_backward(Call& c) {
  double th = number_arg(c, 2, "threshold");
  return backward(c, "self", [th](double g, double x) { return x <= th ? 0.0 : g; });
}
Out sigmoid_backward(Call& c) {
  return backward(c, "output", [](double g, double y) { return g * (1.0 - y) * y; });
}
Out tanh_backward(Call& c) {
  return backward(c, "output", [](double g, double y) { return g * (1.0 - y * y); });
}
Out silu_backward(Call& c) {
  return backward(c, "self", [](double g, double x) {
    double s = sigmoid(x);
    return g * s * (1.0 + x * (1.0 - s));
  });
}
Out gelu_backward(Call& c) {
  std::string approx = string_arg(c, 2, "approximate", "none");
  if (approx == "tanh") {
    return backward(c, "self", [](double g, double x) {
      double inner = kGeluTanhC * (x + 0.044715 * x * x * x);
      double t = std::tanh(inner);
      double dinner = kGeluTanhC * (1.0 + 3.0 * 0.044715 * x * x);
      return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dinner);
    });
  }
  if (approx != "none") fail(fmt::format("approximate=\"{}\" is not one of none, tanh", approx));
  return backward(c, "self", [](double g, double x) {
    double cdf = 0.5 * (1.0 + std::erf(x / std::numbers::sqrt2));
    double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
    return g * (cdf + x * pdf);
  });
}
Out hardswish_backward(Call& c) {
  return backward(c, "self", [](double g, double x) {
    if (x < -3.0) return 0.0;
    if (x <= 3.0) return g * (x / 3.0 + 0.5);
    return g;
  });
}
Out hardsigmoid_backward(Call& c) {
  return backward(c, "self", [](double g, double x) { return x > -3.0 && x < 3.0 ? g / 6.0 : 0.0; });
}
Out leaky_relu_backward(Call& c) {
  double slope = number_arg(c, 2, "negative_slope");
  return backward(c, "self", [slope](double g, double x) { return x > 0 ? g : g * slope; });
}
Out hardtanh_backward(Call& c) {
  double lo = number_arg(c, 2, "min_val"), hi = number_arg(c, 3, "max_val");
  return backward(c, "self", [lo, hi](double g, double x) { return x <= lo || x >= hi ? 0.0 : g; });
}

// ---- selection ----
Out where_self(Call& c) {
  const HostTensor& cond = tensor_arg(c, 0, "condition");
  Opnd a = tensor_or_scalar(c, 1, "self"), b = tensor_or_scalar(c, 2, "other");
  Dtype dt = result_type({a.promo, b.promo});
  auto shape = broadcast_shapes(cond.shape, broadcast_shapes(a.t.shape, b.t.shape));
  HostTensor out = empty_tensor(dt, shape, c.meta);
  if (c.meta) return {out};
  map_into(out, {&cond, &a.t, &b.t}, [](const double* v) { return v[0] != 0 ? v[1] : v[2]; });
  return {out};
}

template <bool Inplace>
Out masked_fill(Call& c) {
  const HostTensor& mask = tensor_arg(c, 1, "mask");
  if (mask.dtype != Dtype::b8) fail(fmt::format("mask must be a bool tensor, got {}", dtype_abbrev(mask.dtype)));
  Opnd val = tensor_or_scalar(c, 2, "value");
  if (val.t.rank() != 0) fail("value must be a 0-D tensor or a number");
  double fillv = c.meta ? 0.0 : val.t.load(val.t.offset);
  auto f = [fillv](const double* v) { return v[1] != 0 ? fillv : v[0]; };
  if (Inplace) {
    HostTensor& self = tensor_arg_mut(c, 0, "self");
    (void)broadcast_strides(mask, self.shape);
    if (c.meta) return {self};
    map_into(self, {&self, &mask}, f);
    return {self};
  }
  const HostTensor& self = tensor_arg(c, 0, "self");
  HostTensor out = empty_tensor(self.dtype, broadcast_shapes(self.shape, mask.shape), c.meta);
  if (c.meta) return {out};
  map_into(out, {&self, &mask}, f);
  return {out};
}

Out addcmul(Call& c) {
  const HostTensor& s = tensor_arg(c, 0, "self");
  const HostTensor& t1 = tensor_arg(c, 1, "tensor1");
  const HostTensor& t2 = tensor_arg(c, 2, "tensor2");
  double value = number_arg(c, 3, "value", 1.0);
  Dtype dt = result_type({operand(s), operand(t1), operand(t2)});
  HostTensor out = empty_tensor(dt, broadcast_shapes(s.shape, broadcast_shapes(t1.shape, t2.shape)), c.meta);
  if (c.meta) return {out};
  map_into(out, {&s, &t1, &t2}, [value](const double* v) { return v[0] + value * v[1] * v[2]; });
  return {out};
}

template <bool FromTensor>
Out fill_inplace(Call& c) {
  HostTensor& self = tensor_arg_mut(c, 0, "self");
  double v = 0;
  if constexpr (FromTensor) {
    const HostTensor& t = tensor_arg(c, 1, "value");
    if (t.rank() != 0) fail("fill_.Tensor: value must be a 0-D tensor");
    if (!c.meta) v = t.load(t.offset);
  } else {
    v = number_arg(c, 1, "value");
  }
  if (c.meta) return {self};
  map_into(self, {}, [v](const double*) { return v; });
  return {self};
}

const OpInfo kOps[] = {
    {"aten.add.Tensor", "elementwise", add_t, nullptr},
    {"aten.add_.Tensor", "elementwise", add_inplace, nullptr},
    {"aten.sub.Tensor", "elementwise", sub_t, nullptr},
    {"aten.rsub.Scalar", "elementwise", rsub_s, nullptr},
    {"aten.mul.Tensor", "elementwise", mul_t, nullptr},
    {"aten.mul.Scalar", "elementwise", mul_t, nullptr},
    {"aten.mul_.Tensor", "elementwise", mul_inplace, nullptr},
    {"aten.div.Tensor", "elementwise", div_t, nullptr},
    {"aten.div.Scalar", "elementwise", div_t, nullptr},
    {"aten.div_.Tensor", "elementwise", div_inplace, nullptr},
    {"aten.minimum.default", "elementwise", minimum, nullptr},
    {"aten.maximum.default", "elementwise", maximum, nullptr},
    {"aten.bitwise_and.Tensor", "elementwise", bitwise_and, nullptr},
    {"aten.pow.Tensor_Scalar", "elementwise", pow_tensor_scalar, nullptr},
    {"aten.pow.Scalar", "elementwise", pow_scalar, nullptr},
    {"aten.eq.Scalar", "elementwise", eq, nullptr},
    {"aten.eq.Tensor", "elementwise", eq, nullptr},
    {"aten.ne.Scalar", "elementwise", ne, nullptr},
    {"aten.lt.Scalar", "elementwise", lt, nullptr},
    {"aten.lt.Tensor", "elementwise", lt, nullptr},
    {"aten.le.Scalar", "elementwise", le, nullptr},
    {"aten.gt.Scalar", "elementwise", gt, nullptr},
    {"aten.gt.Tensor", "elementwise", gt, nullptr},
    {"aten.ge.Scalar", "elementwise", ge, nullptr},
    {"aten.neg.default", "elementwise", neg, nullptr},
    {"aten.abs.default", "elementwise", abs_, nullptr},
    {"aten.sgn.default", "elementwise", sgn_, nullptr},
    {"aten.exp.default", "elementwise", exp_, nullptr},
    {"aten.sqrt.default", "elementwise", sqrt_, nullptr},
    {"aten.rsqrt.default", "elementwise", rsqrt_, nullptr},
    {"aten.reciprocal.default", "elementwise", reciprocal, nullptr},
    {"aten.erf.default", "elementwise", erf_, nullptr},
    {"aten.sin.default", "elementwise", sin_, nullptr},
    {"aten.cos.default", "elementwise", cos_, nullptr},
    {"aten.log2.default", "elementwise", log2_, nullptr},
    {"aten.tanh.default", "elementwise", tanh_, nullptr},
    {"aten.sigmoid.default", "elementwise", sigmoid_op, nullptr},
    {"aten.sigmoid_.default", "elementwise", sigmoid_inplace, nullptr},
    {"aten.relu.default", "elementwise", relu_op, nullptr},
    {"aten.relu_.default", "elementwise", relu_inplace, nullptr},
    {"aten.silu.default", "elementwise", silu_op, nullptr},
    {"aten.silu_.default", "elementwise", silu_inplace, nullptr},
    {"aten.gelu.default", "elementwise", gelu_op, nullptr},
    {"aten.hardswish.default", "elementwise", hardswish_op, nullptr},
    {"aten.hardswish_.default", "elementwise", hardswish_inplace, nullptr},
    {"aten.hardsigmoid.default", "elementwise", hardsigmoid_op, nullptr},
    {"aten.leaky_relu.default", "elementwise", leaky_relu<false>, nullptr},
    {"aten.leaky_relu_.default", "elementwise", leaky_relu<true>, nullptr},
    {"aten.hardtanh.default", "elementwise", hardtanh<false>, nullptr},
    {"aten.hardtanh_.default", "elementwise", hardtanh<true>, nullptr},
    {"aten.elu.default", "elementwise", elu, nullptr},
    {"aten.clamp.default", "elementwise", clamp, nullptr},
    {"aten.isinf.default", "elementwise", isinf_, nullptr},
    {"aten.isnan.default", "elementwise", isnan_, nullptr},
    {"aten.bitwise_not.default", "elementwise", bitwise_not, nullptr},
    {"aten.threshold_backward.default", "elementwise", threshold_backward, nullptr},
    {"aten.sigmoid_backward.default", "elementwise", sigmoid_backward, nullptr},
    {"aten.tanh_backward.default", "elementwise", tanh_backward, nullptr},
    {"aten.silu_backward.default", "elementwise", silu_backward, nullptr},
    {"aten.gelu_backward.default", "elementwise", gelu_backward, nullptr},
    {"aten.hardswish_backward.default", "elementwise", hardswish_backward, nullptr},
    {"aten.hardsigmoid_backward.default", "elementwise", hardsigmoid_backward, nullptr},
    {"aten.leaky_relu_backward.default", "elementwise", leaky_relu_backward, nullptr},
    {"aten.hardtanh_backward.default", "elementwise", hardtanh_backward, nullptr},
    {"aten.where.self", "elementwise", where_self, nullptr},
    {"aten.masked_fill.Scalar", "elementwise", masked_fill<false>, nullptr},
    {"aten.masked_fill.Tensor", "elementwise", masked_fill<false>, nullptr},
    {"aten.masked_fill_.Scalar", "elementwise", masked_fill<true>, nullptr},
    {"aten.addcmul.default", "elementwise", addcmul, nullptr},
    {"aten.fill_.Scalar", "elementwise", fill_inplace<false>, nullptr},
    {"aten.fill_.Tensor", "elementwise", fill_inplace<true>, nullptr},
};

}  // namespace

std::span<const OpInfo> elementwise_ops() { return kOps; }

}  // namespace kb::backendbench::aten
