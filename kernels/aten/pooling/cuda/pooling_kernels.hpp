// CUDA launchers of the 2-D pooling operators (pooling_kernels.cu); the
// window arithmetic is the CPU oracle's (pooling.cpp). Inputs are [C, H, W]
// or [N, C, H, W] with any strides; outputs are the runner's contiguous
// tensors. Plans (pooling_cuda.cpp) parse and check the arguments.
#pragma once

#include "../../common/device.hpp"

namespace kb::backendbench::aten::cuda {

struct PoolWindow {
  std::int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  std::int64_t oh = 1, ow = 1;         // pooled sizes
  bool include_pad = true;             // avg: count_include_pad
  std::int64_t divisor = 0;            // avg: divisor_override, 0 when absent
};

// max_pool2d_with_indices: the first maximum of each window in row-major order, a NaN over any number.
Launch max_pool2d(const DView& out, const DView& indices, const DView& x, const PoolWindow& w);
// max_pool2d_with_indices_backward: grad_input[plane, indices[o]] += grad_output[o] (indices checked in range).
Launch max_pool2d_backward(const DView& grad_input, const DView& grad_output, const DView& indices);
Launch avg_pool2d(const DView& out, const DView& x, const PoolWindow& w);
// avg_pool2d_backward, gathered: each input element sums the windows that cover it, in the oracle's order.
Launch avg_pool2d_backward(const DView& grad_input, const DView& grad_output, const PoolWindow& w);
Launch adaptive_avg_pool2d(const DView& out, const DView& x);
Launch adaptive_avg_pool2d_backward(const DView& grad_input, const DView& grad_output);

}  // namespace kb::backendbench::aten::cuda
