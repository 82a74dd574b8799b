// The MoE GPU oracle (gpu_oracle.cu; CUDA builds only): the CPU oracle's computation in plain
// CUDA kernels (fp32 values, double sums). tests/gpu/test_moe_gpu_oracle checks it against the
// CPU oracle on a device.
#pragma once

#include "oracle/gpu_oracle.hpp"

namespace kb::kernels {

Status moe_gpu_oracle(const GpuOracleCall& c);

}  // namespace kb::kernels
