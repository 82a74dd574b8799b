// CUDA launchers of cumsum and var_mean (scan_kernels.cu), with the CPU
// oracle's arithmetic (reduction.cpp): double sums (int64 for integer
// outputs), one rounding to the output dtype.
#pragma once

#include "../../common/device.hpp"

namespace kb::backendbench::aten::cuda {

// out (contiguous, x's shape) = inclusive prefix sums of x along `dim`; one warp per line.
Launch cumsum(const DView& out, const DView& x, std::int64_t dim);

// var and mean (contiguous, the reduced shape) over `reduced` dims of x: the mean, then the
// squared deviations from it, divided by max(0, n - correction); one warp per output.
Launch var_mean(const DView& var, const DView& mean, const DView& x, const std::vector<bool>& reduced,
                double correction);

}  // namespace kb::backendbench::aten::cuda
