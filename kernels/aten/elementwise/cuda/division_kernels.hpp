// CUDA launchers of the rounding divisions and elu's backward
// (division_kernels.cu), with the CPU oracle's arithmetic (division.cpp):
// integers in int64 (exact), floats in double, rounded once to the output.
#pragma once

#include "../../common/device.hpp"

namespace kb::backendbench::aten::cuda {

enum class DivKind : int { floor_div, fmod, remainder };

// A binary operand: a view already broadcast to the output's shape (0-strides), or a constant.
struct BinaryIn {
  DView view;
  bool is_const = false;
  double value = 0;
};

// out = a (kind) b; integer outputs refuse nothing here: the plan checks divisors for zero.
Launch rounding_divide(DivKind kind, const DView& out, const BinaryIn& a, const BinaryIn& b);

// elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result).
Launch elu_backward(const DView& out, const BinaryIn& grad, const BinaryIn& self_or_result, double alpha,
                    double scale, double input_scale, bool is_result);

}  // namespace kb::backendbench::aten::cuda
