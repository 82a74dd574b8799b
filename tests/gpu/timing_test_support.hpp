// What the timer tests (test_cupti_timing, test_timing_throttle) share: the
// kb kernels they time, a check that prints and counts, a CUDA error as a kb
// status, and their setup (a device, a stream, its SM count).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <string>

#include "common/result.hpp"
#include "cuda/device.hpp"

namespace kb::cuda {
cudaError_t launch_copy_kernel(void* dst, const void* src, std::size_t bytes, int sm_count, cudaStream_t stream);
cudaError_t launch_empty_kernel(cudaStream_t stream);
}  // namespace kb::cuda

namespace kb_timing_test {

inline int g_failures = 0;

inline void expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++g_failures;
}

inline kb::Status cuda_status(cudaError_t e) {
  if (e == cudaSuccess) return kb::ok_status();
  return kb::Error{kb::Code::cuda_error, cudaGetErrorString(e)};
}

// The test's exit code when it cannot start: 77 (skipped) without a CUDA
// device, 1 where CUDA refuses a stream; 0 when *stream and *sms are set.
inline int open_device(cudaStream_t* stream, int* sms) {
  auto n = kb::cuda::device_count();
  if (!n) {
    std::printf("skipped: no CUDA device (%s)\n", n.error().message.c_str());
    return 77;
  }
  if (cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) {
    std::printf("FAIL: CUDA setup\n");
    return 1;
  }
  return 0;
}

}  // namespace kb_timing_test
