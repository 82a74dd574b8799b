// CUDA launchers of reflection_pad2d and its backward
// (reflection_pad_kernels.cu); the plan (reflection_pad_cuda.cpp) checks the
// padding as the CPU oracle does (reflection_pad.cpp).
#pragma once

#include "../../common/device.hpp"

namespace kb::backendbench::aten::cuda {

// out (contiguous, padded) = x (3-D or 4-D, any strides) mirrored about its edges.
Launch reflection_pad2d(const DView& out, const DView& x, std::int64_t left, std::int64_t top);
// grad_input (contiguous) gathers, for each input element, the output gradients copied from it,
// in the oracle's row-major order (no atomics).
Launch reflection_pad2d_backward(const DView& grad_input, const DView& grad_output, std::int64_t left,
                                 std::int64_t top);

}  // namespace kb::backendbench::aten::cuda
