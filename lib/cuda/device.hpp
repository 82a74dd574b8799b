// CUDA device discovery. Safe to call on any machine: a build without CUDA
// answers Code::unsupported; a CUDA build on a machine with no driver or no
// GPU answers Code::no_cuda_device with the CUDA runtime's reason.
#pragma once

#include <string>
#include <vector>

#include "common/result.hpp"

namespace kb::cuda {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int sm_count = 0;
  int compute_major = 0;
  int compute_minor = 0;
  std::size_t memory_bytes = 0;
  std::size_t l2_bytes = 0;
};

// True when kb was built with CUDA.
bool built_with_cuda() noexcept;
// Number of usable devices (>= 1), or no_cuda_device / unsupported.
Result<int> device_count();
Result<DeviceInfo> device_info(int ordinal);
// Versions for evaluation environments: "driver", "runtime", "cublasLt".
std::vector<std::pair<std::string, std::string>> library_versions();

}  // namespace kb::cuda
