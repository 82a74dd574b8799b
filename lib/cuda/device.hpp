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
  std::string pci_bus_id;  // "0000:19:00.0" (cudaDeviceGetPCIBusId): names the physical GPU whatever
                           // CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER make of the ordinals
};

// True when kb was built with CUDA.
bool built_with_cuda() noexcept;
// Number of usable devices (>= 1), or no_cuda_device / unsupported.
Result<int> device_count();
Result<DeviceInfo> device_info(int ordinal);
// The calling thread's current device (cudaGetDevice), or no_cuda_device / unsupported.
Result<int> current_device();
// device_info of the calling thread's current device.
Result<DeviceInfo> current_device_info();
// Makes `ordinal` the calling thread's current device (cudaSetDevice). invalid_argument, naming the
// ordinal and how many devices there are, when it does not exist.
Status select_device(int ordinal);
// "cuda" -> -1 (the current device), "cuda:N" -> N; invalid_argument otherwise. Any build.
Result<int> parse_cuda_device(const std::string& text);
// Versions for evaluation environments: "driver", "runtime", "cublasLt".
std::vector<std::pair<std::string, std::string>> library_versions();

}  // namespace kb::cuda
