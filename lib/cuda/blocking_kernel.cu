// A kernel that holds its stream until the host releases it (or ~2 s pass,
// so a forgotten release cannot hang the GPU). kb queues it, then all timed
// samples, then releases it: the GPU starts the samples back to back.
#include <cuda_runtime.h>

namespace kb::cuda {

namespace {
__global__ void wait_for_host(volatile int* flag, long long timeout_cycles) {
  long long start = clock64();
  while (*flag == 0) {
    if (clock64() - start > timeout_cycles) break;
  }
}
}  // namespace

cudaError_t launch_blocking_kernel(volatile int* host_flag, cudaStream_t stream) {
  // About 2 s at 2 GHz.
  wait_for_host<<<1, 1, 0, stream>>>(host_flag, 4'000'000'000LL);
  return cudaGetLastError();
}

}  // namespace kb::cuda
