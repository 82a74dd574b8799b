// CUDA launchers of grid_sampler_2d and its backward (grid_sampler_kernels.cu);
// the plans (grid_sampler_cuda.cpp) check the arguments with the oracle's
// rules (../sampling.hpp).
#pragma once

#include "../../common/device.hpp"

namespace kb::backendbench::aten::cuda {

struct GridSampling {
  bool bilinear = true, border = false, align = false;
};

// out [N, C, Ho, Wo] (contiguous) = input [N, C, H, W] sampled at grid [N, Ho, Wo, 2] (any strides).
Launch grid_sampler_2d(const DView& out, const DView& input, const DView& grid, GridSampling s);
// grad_input (input's shape) and grad_grid (grid's shape), contiguous; an undefined one is skipped.
Launch grid_sampler_2d_backward(const DView& grad_input, const DView& grad_grid, const DView& grad_output,
                                const DView& input, const DView& grid, GridSampling s);

}  // namespace kb::backendbench::aten::cuda
