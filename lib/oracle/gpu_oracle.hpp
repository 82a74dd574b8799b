// GPU oracles: straightforward CUDA kernels computing in fp32 (no tensor
// cores, no tricks), for workloads too large for the CPU oracle. Each is
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

// The GPU oracle of a definition's op_type, or nullptr. The judge
// (harness/gpu_eval.cpp) takes only oracles that have agreed with their CPU
// oracle on a device; `include_unchecked` also answers those written but not
// yet run there (the attention ones, 2026-11-27: tests/gpu/test_gpu_oracles
// asks for them, and once it passes on a GPU they join the judge's list).
GpuOracleFn find_gpu_oracle(const Definition& d, bool include_unchecked = false);

}  // namespace kb
