// The MoE GPU oracle (gpu_oracle.cu; CUDA builds only): the CPU oracle's computation in plain
// fp32 CUDA kernels. It is not yet in find_gpu_oracle's table, which holds only GPU oracles
// that have agreed with their CPU oracle on a device: tests/gpu/test_moe_gpu_oracle is that check.
#pragma once

#include "oracle/gpu_oracle.hpp"

namespace kb::kernels {

Status moe_gpu_oracle(const GpuOracleCall& c);

}  // namespace kb::kernels
