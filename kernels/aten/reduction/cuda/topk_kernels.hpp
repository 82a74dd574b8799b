// CUDA launcher of topk (topk_kernels.cu); the plan (topk_cuda.cpp) checks
// the arguments as the CPU oracle does (norm_topk.cpp).
#pragma once

#include "../../common/device.hpp"

namespace kb::backendbench::aten::cuda {

// values and indices (contiguous, x's shape with k along `dim`) = the k largest (smallest) elements of each line
// of x along `dim`, in the oracle's order: by value, NaN above every number, -0 equal to +0, equal values by the
// lower index.
Launch topk(const DView& values, const DView& indices, const DView& x, std::int64_t dim, std::int64_t k,
            bool largest);

}  // namespace kb::backendbench::aten::cuda
