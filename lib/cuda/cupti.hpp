// The GPU's own start and end timestamps of each kernel, from CUPTI's
// activity API (libcupti opened at run time, like NVML): a second clock beside
// the CUDA events of timing.hpp. Events time the stream between two markers,
// launch and event overhead included (an empty kernel reads ~3 us cold);
// CUPTI's records span the kernels alone, as Nsight Compute's duration does.
//
// One recording at a time per process (CUPTI delivers records through
// process-wide callbacks). Profilers that also use CUPTI (Nsight Compute, the
// PyTorch profiler) cannot run in the same process while it records.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace kb::cuda {

struct KernelSpan {
  std::uint64_t start_ns = 0, end_ns = 0;  // the device's clock, in ns
};

// Whether CUPTI can record kernels here; the reason when not (no libcupti,
// a build without cupti.h, or CUPTI refused).
bool cupti_available(std::string* why = nullptr);

// Records every kernel that runs on the current context between begin() and
// end(). end() waits for nothing itself: synchronize the work first.
class KernelRecorder {
 public:
  KernelRecorder() = default;
  ~KernelRecorder();
  KernelRecorder(const KernelRecorder&) = delete;
  KernelRecorder& operator=(const KernelRecorder&) = delete;

  Status begin();
  // The kernels recorded since begin(), in the order CUPTI delivered them.
  Result<std::vector<KernelSpan>> end();

 private:
  bool active_ = false;
};

}  // namespace kb::cuda
