// Rounding divisions and elu's backward:
//   floor_divide(self, other)   Python's //: the quotient rounded toward -inf
//   fmod.Scalar(self, other)    C's fmod: the remainder takes self's sign
//   remainder.Scalar(self, other) Python's %: the remainder takes other's sign
//   elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result)
// Integers are exact (int64 arithmetic; division by zero refused, as PyTorch
// raises); floats are computed in double and rounded once.
#include <fmt/format.h>

#include <cmath>

#include "../common/args.hpp"
#include "../families.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

enum class Div { floor_div, fmod, remainder };

std::int64_t int_div(std::int64_t a, std::int64_t b, Div k) {
  if (b == 0) fail("integer division by zero");
  if (b == -1) return k == Div::floor_div ? -a : 0;  // avoids INT64_MIN / -1
  const std::int64_t q = a / b, r = a % b;
  const bool adjust = r != 0 && ((r < 0) != (b < 0));
  switch (k) {
    case Div::floor_div: return adjust ? q - 1 : q;
    case Div::fmod: return r;
    case Div::remainder: return adjust ? r + b : r;
  }
  return 0;
}

double float_div(double a, double b, Div k) {
  switch (k) {
    case Div::fmod: return std::fmod(a, b);
    case Div::remainder: {
      double r = std::fmod(a, b);
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
    case Div::floor_div: {
      if (b == 0) return a / b;
      // Python's float //: (a - fmod(a, b)) / b, corrected toward -inf and rounded to the nearest integer.
      const double mod = std::fmod(a, b);
      double div = (a - mod) / b;
      if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1.0;
      if (div == 0) return std::copysign(0.0, a / b);
      double fl = std::floor(div);
      if (div - fl > 0.5) fl += 1.0;
      return fl;
    }
  }
  return 0;
}

template <Div K>
Out divide(Call& c) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  require_real(self, c.op);
  HostTensor other;
  Operand op_other;
  const CallArg* a = c.find(1, "other");
  if (a && a->tensor) {
    other = *a->tensor;
    require_real(other, c.op);
    op_other = operand(other);
  } else {
    Scalar s = scalar_arg(c, 1, "other");
    other = empty_tensor(Dtype::f64, {});
    other.store(0, s.value);
    op_other = Operand{s.category, Operand::scalar};
  }
  const Dtype dt = result_type({operand(self), op_other});
  if (dt == Dtype::b8) fail("boolean operands are not supported");
  HostTensor out = empty_tensor(dt, broadcast_shapes(self.shape, other.shape), c.meta);
  if (c.meta) return {out};
  if (is_integral(dt)) {
    map_into(out, {&self, &other}, [](const double* v) {
      return static_cast<double>(int_div(static_cast<std::int64_t>(v[0]), static_cast<std::int64_t>(v[1]), K));
    });
  } else {
    map_into(out, {&self, &other}, [](const double* v) { return float_div(v[0], v[1], K); });
  }
  return {out};
}

// elu_backward: is_result means self_or_result holds elu's output y (for x <= 0, y = scale * alpha * (exp(x * input_scale) - 1)).
Out elu_backward(Call& c) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const double alpha = number_arg(c, 1, "alpha"), scale = number_arg(c, 2, "scale"),
               input_scale = number_arg(c, 3, "input_scale");
  const bool is_result = bool_arg(c, 4, "is_result");
  const HostTensor& y = tensor_arg(c, 5, "self_or_result");
  require_real(g, c.op);
  require_real(y, c.op);
  if (is_result && alpha < 0) fail("elu_backward with is_result=True needs alpha >= 0");
  HostTensor out = empty_tensor(promote_types(g.dtype, y.dtype), broadcast_shapes(g.shape, y.shape), c.meta);
  if (c.meta) return {out};
  map_into(out, {&g, &y}, [&](const double* v) {
    const double go = v[0], s = v[1];
    if (is_result) return s <= 0 ? go * input_scale * (s + alpha * scale) : go * scale;
    return s <= 0 ? go * input_scale * alpha * scale * std::exp(s * input_scale) : go * scale;
  });
  return {out};
}

const OpInfo kOps[] = {
    {"aten.floor_divide.default", "elementwise", divide<Div::floor_div>, nullptr},
    {"aten.fmod.Scalar", "elementwise", divide<Div::fmod>, nullptr},
    {"aten.remainder.Scalar", "elementwise", divide<Div::remainder>, nullptr},
    {"aten.elu_backward.default", "elementwise", elu_backward, nullptr},
};

}  // namespace

std::span<const OpInfo> division_ops() { return kOps; }

}  // namespace kb::backendbench::aten
