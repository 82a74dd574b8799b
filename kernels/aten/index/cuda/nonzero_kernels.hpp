// CUDA nonzero (nonzero_kernels.cu). Its output's shape depends on the
// values, so the plan counts first (nonzero_count, synchronous) and sizes the
// output; the launch counts again, as PyTorch's nonzero does, and refuses a
// count that differs from the planned one.
#pragma once

#include <cstdint>

#include "../../common/device.hpp"

namespace kb::backendbench::aten::cuda {

// The number of elements of x (any real dtype, any strides) that are nonzero or NaN. Waits for the device.
std::int64_t nonzero_count(const DView& x);
// out [count, rank] i64 (contiguous) = the coordinates of those elements in row-major order.
Launch nonzero(const DView& out, const DView& x, std::int64_t count);

}  // namespace kb::backendbench::aten::cuda
