// CUDA launchers of 2-D upsampling (upsample_kernels.cu). The plan
// (upsample_cuda.cpp) computes each spatial dim's taps on the host with the
// CPU oracle's arithmetic (upsample.cpp: PyTorch's float source coordinates),
// so the kernels pick the same elements with the same weights.
#pragma once

#include <vector>

#include "../../common/device.hpp"

namespace kb::backendbench::aten::cuda {

// One output position along a dim: its source indices and weights (nearest: i0 alone).
struct UpsampleTap {
  std::int64_t i0 = 0, i1 = 0;
  double w0 = 1, w1 = 0;
};

// out [N, C, OH, OW] (contiguous) from x [N, C, H, W] (any strides): nearest takes (i0, i0) alone,
// bilinear adds its four taps in the oracle's order.
Launch upsample2d(const DView& out, const DView& x, bool bilinear, const std::vector<UpsampleTap>& h,
                  const std::vector<UpsampleTap>& w);
// grad_input [N, C, H, W] (contiguous) = the adjoint of upsample2d applied to grad_output (any strides).
Launch upsample2d_backward(const DView& grad_input, const DView& grad_output, bool bilinear,
                           const std::vector<UpsampleTap>& h, const std::vector<UpsampleTap>& w);

}  // namespace kb::backendbench::aten::cuda
