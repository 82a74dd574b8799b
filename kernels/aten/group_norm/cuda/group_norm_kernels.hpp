// CUDA launchers of native_group_norm and its backward
// (group_norm_kernels.cu), in double with one rounding per output, with the
// CPU oracle's formulas (group_norm.cpp). Plans (group_norm_cuda.cpp) check
// the arguments.
#pragma once

#include "../../common/device.hpp"

namespace kb::backendbench::aten::cuda {

struct GroupNormDims {
  std::int64_t n = 0, c = 0, hw = 0, g = 1;
};

// out (contiguous, x's shape), mean and rstd ([N, group], contiguous).
Launch group_norm(const DView& out, const DView& mean, const DView& rstd, const DView& x, const DView* weight,
                  const DView* bias, const GroupNormDims& d, double eps);

// grad_input, grad_weight, grad_bias (each skipped when undefined).
Launch group_norm_backward(const DView& grad_input, const DView& grad_weight, const DView& grad_bias,
                           const DView& grad_out, const DView& x, const DView& mean, const DView& rstd,
                           const DView* weight, const GroupNormDims& d);

}  // namespace kb::backendbench::aten::cuda
