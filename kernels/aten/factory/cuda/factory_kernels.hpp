// CUDA launcher of bernoulli_.float (factory_kernels.cu); the plan
// (factory_cuda.cpp) checks p as the oracle does (../factory.cpp).
#pragma once

#include <cstdint>

#include "../../common/device.hpp"

namespace kb::backendbench::aten::cuda {

// self (any strides, any real dtype) = 1 where draw i of the splitmix64 stream seeded by `seed` is below p, else 0,
// with i the row-major position: the oracle's draws, so the two agree element for element.
Launch bernoulli(const DView& self, double p, std::uint64_t seed);

}  // namespace kb::backendbench::aten::cuda
