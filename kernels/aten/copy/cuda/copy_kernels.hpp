// CUDA launchers of the copy family that the elementwise engine does not
// cover (copy_kernels.cu).
#pragma once

#include "../../common/device.hpp"

namespace kb::backendbench::aten::cuda {

// triu (upper) / tril: out (contiguous) = x where col - row >= diagonal (upper) or <= diagonal,
// else zero; any dtype (elements copied as bytes), x of any strides.
Launch triangle(const DView& out, const DView& x, std::int64_t diagonal, bool upper);

}  // namespace kb::backendbench::aten::cuda
