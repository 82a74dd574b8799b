// What the dsa_paged kernels keep per device and stream.
//
// workspace_for: per-(device, stream) scratch memory: split
// partials of the sparse attention, the indexer's scores. Grown by the first
// call that needs more, kept until exit. Calls on one stream run in order, so
// two launches on it may reuse the same bytes; a larger request waits for
// the stream before the old buffer is freed. Allocation is refused under
// stream capture (the call returns the error; a warm-up call outside the
// capture sizes the buffer).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <mutex>
#include <utility>

namespace kb::kernels::dsa_cuda {

inline cudaError_t workspace_for(cudaStream_t stream, std::size_t bytes, void** out) {
  struct State {
    std::mutex mu;
    std::map<std::pair<int, void*>, std::pair<void*, std::size_t>> bufs;
  };
  static State* st = new State;  // never freed: no teardown after the CUDA runtime's
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(st->mu);
  auto& slot = st->bufs[{device, static_cast<void*>(stream)}];
  if (slot.second >= bytes) {
    *out = slot.first;
    return cudaSuccess;
  }
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  if (cudaError_t e = cudaStreamIsCapturing(stream, &cap); e != cudaSuccess) return e;
  if (cap != cudaStreamCaptureStatusNone) return cudaErrorStreamCaptureUnsupported;
  if (slot.first) {
    if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) return e;
    cudaFree(slot.first);
    slot = {nullptr, 0};
  }
  const std::size_t want = std::max<std::size_t>(bytes, std::size_t{1} << 20);
  void* mem = nullptr;
  if (cudaError_t e = cudaMalloc(&mem, want); e != cudaSuccess) return e;
  slot = {mem, want};
  *out = mem;
  return cudaSuccess;
}

// Lets `kernel` use up to the device's opt-in shared memory a CTA, once per
// (kernel, device): launches of different sizes then never race on the
// attribute.
inline cudaError_t allow_max_smem(const void* kernel) {
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, bool>* done = new std::map<std::pair<const void*, int>, bool>;
  int device = 0, max_smem = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(mu);
  if (done->count({kernel, device})) return cudaSuccess;
  if (cudaError_t e = cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device); e != cudaSuccess)
    return e;
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem); e != cudaSuccess)
    return e;
  (*done)[{kernel, device}] = true;
  return cudaSuccess;
}

}  // namespace kb::kernels::dsa_cuda
