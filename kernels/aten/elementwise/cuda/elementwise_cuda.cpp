// CUDA plans for the elementwise operators: each maps its arguments onto one
// launch of the elementwise engine (common/cuda_engine.hpp); output shapes and
// dtypes come from the oracle's meta call, so promotion rules live in one place.
#include <fmt/format.h>

#include "../../common/args.hpp"
#include "../../common/cuda_engine.hpp"
#include "../../cuda_families.hpp"

namespace kb::backendbench::aten {
namespace {

using cuda::EOp;
using cuda::EIn;
using Outs = std::vector<DView>;

// A tensor argument as a device input, or a Python scalar as a constant.
EIn operand(const Call& c, const DeviceArgs& d, std::size_t pos, std::string_view name,
            std::optional<double> dflt = {}) {
  const CallArg* a = c.find(pos, name);
  if (a && a->tensor) {
    require_real(*a->tensor, c.op);
    return cuda::input(d.view(*a->tensor));
  }
  return cuda::constant(scalar_arg(c, pos, name, dflt).value);
}

Launch binary_op(Call& c, const DeviceArgs& d, Outs& o, EOp op, const char* second = "other",
                 std::array<double, 4> p = {}) {
  return cuda::elementwise(op, o[0], {operand(c, d, 0, "self"), operand(c, d, 1, second)}, p);
}

template <EOp Op>
Launch unary(Call& c, const DeviceArgs& d, Outs& o) {
  return cuda::elementwise(Op, o[0], {operand(c, d, 0, "self")});
}

template <EOp Op>
Launch arith(Call& c, const DeviceArgs& d, Outs& o) {
  return binary_op(c, d, o, Op, "other", {number_arg(c, 2, "alpha", 1.0), 0, 0, 0});
}

template <EOp Op>
Launch plain_binary(Call& c, const DeviceArgs& d, Outs& o) {
  return binary_op(c, d, o, Op);
}

Launch div_t(Call& c, const DeviceArgs& d, Outs& o) {
  if (has_arg(c, 2, "rounding_mode")) {
    std::string mode = string_arg(c, 2, "rounding_mode", "");
    if (mode == "trunc") return binary_op(c, d, o, EOp::div_trunc);
    if (mode == "floor") return binary_op(c, d, o, EOp::div_floor);
    fail(fmt::format("rounding_mode \"{}\" is not supported", mode));
  }
  return binary_op(c, d, o, EOp::div);
}

Launch pow_op(Call& c, const DeviceArgs& d, Outs& o) { return binary_op(c, d, o, EOp::pow, "exponent"); }

Launch gelu(Call& c, const DeviceArgs& d, Outs& o) {
  std::string approx = string_arg(c, 1, "approximate", "none");
  if (approx != "none" && approx != "tanh") fail(fmt::format("approximate=\"{}\" is not one of none, tanh", approx));
  return cuda::elementwise(approx == "tanh" ? EOp::gelu_tanh : EOp::gelu, o[0], {operand(c, d, 0, "self")});
}

Launch leaky_relu(Call& c, const DeviceArgs& d, Outs& o) {
  return cuda::elementwise(EOp::leaky_relu, o[0], {operand(c, d, 0, "self")}, {number_arg(c, 1, "negative_slope", 0.01), 0, 0, 0});
}

Launch hardtanh(Call& c, const DeviceArgs& d, Outs& o) {
  return cuda::elementwise(EOp::hardtanh, o[0], {operand(c, d, 0, "self")},
                           {number_arg(c, 1, "min_val", -1.0), number_arg(c, 2, "max_val", 1.0), 0, 0});
}

Launch elu(Call& c, const DeviceArgs& d, Outs& o) {
  return cuda::elementwise(EOp::elu, o[0], {operand(c, d, 0, "self")},
                           {number_arg(c, 1, "alpha", 1.0), number_arg(c, 2, "scale", 1.0),
                            number_arg(c, 3, "input_scale", 1.0), 0});
}

Launch clamp(Call& c, const DeviceArgs& d, Outs& o) {
  bool lo = has_arg(c, 1, "min"), hi = has_arg(c, 2, "max");
  if (!lo && !hi) fail("clamp: at least one of min and max must be given");
  return cuda::elementwise(EOp::clamp, o[0], {operand(c, d, 0, "self")},
                           {lo ? number_arg(c, 1, "min") : 0.0, hi ? number_arg(c, 2, "max") : 0.0, lo ? 1.0 : 0.0,
                            hi ? 1.0 : 0.0});
}

Launch bitwise_not(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  if (is_floating(x.dtype)) fail("bitwise_not needs an integral or bool tensor");
  return cuda::elementwise(x.dtype == Dtype::b8 ? EOp::logical_not : EOp::bit_not, o[0], {operand(c, d, 0, "self")});
}

// Backwards: (grad_output, input-or-result, params...).
Launch backward(Call& c, const DeviceArgs& d, Outs& o, EOp op, const char* second, std::array<double, 4> p = {}) {
  return cuda::elementwise(op, o[0], {operand(c, d, 0, "grad_output"), operand(c, d, 1, second)}, p);
}
Launch threshold_bw(Call& c, const DeviceArgs& d, Outs& o) {
  return backward(c, d, o, EOp::threshold_bw, "self", {number_arg(c, 2, "threshold"), 0, 0, 0});
}
Launch sigmoid_bw(Call& c, const DeviceArgs& d, Outs& o) { return backward(c, d, o, EOp::sigmoid_bw, "output"); }
Launch tanh_bw(Call& c, const DeviceArgs& d, Outs& o) { return backward(c, d, o, EOp::tanh_bw, "output"); }
Launch silu_bw(Call& c, const DeviceArgs& d, Outs& o) { return backward(c, d, o, EOp::silu_bw, "self"); }
Launch hardswish_bw(Call& c, const DeviceArgs& d, Outs& o) { return backward(c, d, o, EOp::hardswish_bw, "self"); }
Launch hardsigmoid_bw(Call& c, const DeviceArgs& d, Outs& o) { return backward(c, d, o, EOp::hardsigmoid_bw, "self"); }
Launch gelu_bw(Call& c, const DeviceArgs& d, Outs& o) {
  std::string approx = string_arg(c, 2, "approximate", "none");
  if (approx != "none" && approx != "tanh") fail(fmt::format("approximate=\"{}\" is not one of none, tanh", approx));
  return backward(c, d, o, approx == "tanh" ? EOp::gelu_tanh_bw : EOp::gelu_bw, "self");
}
Launch leaky_relu_bw(Call& c, const DeviceArgs& d, Outs& o) {
  return backward(c, d, o, EOp::leaky_relu_bw, "self", {number_arg(c, 2, "negative_slope"), 0, 0, 0});
}
Launch hardtanh_bw(Call& c, const DeviceArgs& d, Outs& o) {
  return backward(c, d, o, EOp::hardtanh_bw, "self", {number_arg(c, 2, "min_val"), number_arg(c, 3, "max_val"), 0, 0});
}

Launch where_self(Call& c, const DeviceArgs& d, Outs& o) {
  return cuda::elementwise(EOp::where, o[0],
                           {operand(c, d, 0, "condition"), operand(c, d, 1, "self"), operand(c, d, 2, "other")});
}

// masked_fill(self, mask, value): where(mask, value, self); a 0-D tensor value stays on the device.
Launch masked_fill(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& mask = tensor_arg(c, 1, "mask");
  if (mask.dtype != Dtype::b8) fail(fmt::format("mask must be a bool tensor, got {}", dtype_abbrev(mask.dtype)));
  EIn value = operand(c, d, 2, "value");
  if (!value.is_const && !value.view.shape.empty()) fail("value must be a 0-D tensor or a number");
  return cuda::elementwise(EOp::where, o[0], {cuda::input(d.view(mask)), value, operand(c, d, 0, "self")});
}

Launch addcmul(Call& c, const DeviceArgs& d, Outs& o) {
  return cuda::elementwise(EOp::addcmul, o[0],
                           {operand(c, d, 0, "self"), operand(c, d, 1, "tensor1"), operand(c, d, 2, "tensor2")},
                           {number_arg(c, 3, "value", 1.0), 0, 0, 0});
}

Launch fill_scalar(Call& c, const DeviceArgs&, Outs& o) { return cuda::fill(o[0], number_arg(c, 1, "value")); }
Launch fill_tensor(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& t = tensor_arg(c, 1, "value");
  if (t.rank() != 0) fail("fill_.Tensor: value must be a 0-D tensor");
  return cuda::copy(o[0], d.view(t));
}

const CudaOpInfo kOps[] = {
    {"aten.add.Tensor", arith<EOp::add>},
    {"aten.add_.Tensor", arith<EOp::add>},
    {"aten.sub.Tensor", arith<EOp::sub>},
    {"aten.rsub.Scalar", arith<EOp::rsub>},
    {"aten.mul.Tensor", plain_binary<EOp::mul>},
    {"aten.mul.Scalar", plain_binary<EOp::mul>},
    {"aten.mul_.Tensor", plain_binary<EOp::mul>},
    {"aten.div.Tensor", div_t},
    {"aten.div.Scalar", div_t},
    {"aten.div_.Tensor", plain_binary<EOp::div>},
    {"aten.minimum.default", plain_binary<EOp::minimum>},
    {"aten.maximum.default", plain_binary<EOp::maximum>},
    {"aten.bitwise_and.Tensor", plain_binary<EOp::bit_and>},
    {"aten.pow.Tensor_Scalar", pow_op},
    {"aten.pow.Scalar", pow_op},
    {"aten.eq.Scalar", plain_binary<EOp::eq>},
    {"aten.eq.Tensor", plain_binary<EOp::eq>},
    {"aten.ne.Scalar", plain_binary<EOp::ne>},
    {"aten.lt.Scalar", plain_binary<EOp::lt>},
    {"aten.lt.Tensor", plain_binary<EOp::lt>},
    {"aten.le.Scalar", plain_binary<EOp::le>},
    {"aten.gt.Scalar", plain_binary<EOp::gt>},
    {"aten.gt.Tensor", plain_binary<EOp::gt>},
    {"aten.ge.Scalar", plain_binary<EOp::ge>},
    {"aten.neg.default", unary<EOp::neg>},
    {"aten.abs.default", unary<EOp::abs>},
    {"aten.sgn.default", unary<EOp::sgn>},
    {"aten.exp.default", unary<EOp::exp>},
    {"aten.sqrt.default", unary<EOp::sqrt>},
    {"aten.rsqrt.default", unary<EOp::rsqrt>},
    {"aten.reciprocal.default", unary<EOp::reciprocal>},
    {"aten.erf.default", unary<EOp::erf>},
    {"aten.sin.default", unary<EOp::sin>},
    {"aten.cos.default", unary<EOp::cos>},
    {"aten.log2.default", unary<EOp::log2>},
    {"aten.tanh.default", unary<EOp::tanh>},
    {"aten.sigmoid.default", unary<EOp::sigmoid>},
    {"aten.sigmoid_.default", unary<EOp::sigmoid>},
    {"aten.relu.default", unary<EOp::relu>},
    {"aten.relu_.default", unary<EOp::relu>},
    {"aten.silu.default", unary<EOp::silu>},
    {"aten.silu_.default", unary<EOp::silu>},
    {"aten.gelu.default", gelu},
    {"aten.hardswish.default", unary<EOp::hardswish>},
    {"aten.hardswish_.default", unary<EOp::hardswish>},
    {"aten.hardsigmoid.default", unary<EOp::hardsigmoid>},
    {"aten.leaky_relu.default", leaky_relu},
    {"aten.leaky_relu_.default", leaky_relu},
    {"aten.hardtanh.default", hardtanh},
    {"aten.hardtanh_.default", hardtanh},
    {"aten.elu.default", elu},
    {"aten.clamp.default", clamp},
    {"aten.isinf.default", unary<EOp::isinf>},
    {"aten.isnan.default", unary<EOp::isnan>},
    {"aten.bitwise_not.default", bitwise_not},
    {"aten.threshold_backward.default", threshold_bw},
    {"aten.sigmoid_backward.default", sigmoid_bw},
    {"aten.tanh_backward.default", tanh_bw},
    {"aten.silu_backward.default", silu_bw},
    {"aten.gelu_backward.default", gelu_bw},
    {"aten.hardswish_backward.default", hardswish_bw},
    {"aten.hardsigmoid_backward.default", hardsigmoid_bw},
    {"aten.leaky_relu_backward.default", leaky_relu_bw},
    {"aten.hardtanh_backward.default", hardtanh_bw},
    {"aten.where.self", where_self},
    {"aten.masked_fill.Scalar", masked_fill},
    {"aten.masked_fill.Tensor", masked_fill},
    {"aten.masked_fill_.Scalar", masked_fill},
    {"aten.addcmul.default", addcmul},
    {"aten.fill_.Scalar", fill_scalar},
    {"aten.fill_.Tensor", fill_tensor},
};

}  // namespace

std::span<const CudaOpInfo> elementwise_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
