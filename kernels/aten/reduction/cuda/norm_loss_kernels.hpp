// CUDA launchers of norm.ScalarOpt_dim, mse_loss and mse_loss_backward
// (norm_loss_kernels.cu), in double with one rounding per output, with the
// CPU oracle's arithmetic (norm_topk.cpp).
#pragma once

#include "../../common/device.hpp"

namespace kb::backendbench::aten::cuda {

// out (contiguous, the reduced shape) = the p-norm over `reduced` dims of x (p = +-inf, 0, or any
// other value); one warp per output.
Launch vector_norm(const DView& out, const DView& x, const std::vector<bool>& reduced, double p);

// mse_loss: x and target already broadcast to `shape` (0-strides); reduction 0 writes out (contiguous,
// `shape`), 1 and 2 a scalar (mean, sum) from per-block partial sums added in order.
Launch mse_loss(const DView& out, const DView& x, const DView& target, std::int64_t reduction);

// mse_loss_backward: out (contiguous) = norm * (x - target) * grad over broadcast operands.
Launch mse_loss_backward(const DView& out, const DView& grad, const DView& x, const DView& target, double norm);

}  // namespace kb::backendbench::aten::cuda
