// GPU oracles: straightforward CUDA kernels on fp32 values with fp32 or
// double sums (no tensor cores, no tricks), for workloads too large for the
// CPU oracle. Each is
// cross-checked against its CPU oracle on small shapes (tests/gpu). CUDA
// builds only; find_gpu_oracle answers nullptr elsewhere.
#pragma once

#include <span>

#include "common/result.hpp"
#include "cuda/device_tensor.hpp"
#include "oracle/oracle.hpp"

namespace kb {

struct GpuOracleCall {
  const Definition& definition;
  const AxisValues& axes;
  std::span<const cuda::DeviceArg> inputs;
  std::span<const cuda::DeviceTensor> outputs;
  void* stream = nullptr;
};
using GpuOracleFn = Status (*)(const GpuOracleCall&);

// The GPU oracle of a definition's op_type, or nullptr. Each one here is
// checked against its CPU oracle on a device by a GPU test, and only enters
// this table once that passes: tests/gpu/test_gpu_oracles (gemm, norms, rope,
// attention; the attention ones also on every edge case and shipped workload
// of test_cuda_attention / test_cuda_prefill --gpu-oracle),
// tests/gpu/test_moe_gpu_oracle, tests/kernels/test_linear_gpu_oracles (gdn,
// mamba_ssu, dsa_paged). Sampling has none: its judge compares distributions
// on the host (harness/sampling_judge.hpp).
GpuOracleFn find_gpu_oracle(const Definition& d);

}  // namespace kb
