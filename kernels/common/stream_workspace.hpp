// Scratch device memory of kb's CUDA solutions, one buffer per (device,
// stream). kb's solutions allocate nothing per call: a call that needs
// scratch (split partials, a plan's work list, routed rows) takes its
// stream's buffer, allocated by the first call that needs it (in kb's
// harness: the correctness call or the warm-up, outside the timed region)
// and grown only when a later call needs more; kept until the process exits.
// Launches on one stream run in order, so calls on the same stream may share
// the bytes; growing waits for the stream first, since its earlier launches
// may still read the old buffer. While the stream is being captured into a
// graph a buffer too small is not grown: the call fails with
// cudaErrorStreamCaptureUnsupported (a warm-up call outside the capture sizes
// it).
//
// Each user owns a StreamWorkspaces of its own (a static, never destroyed:
// freeing device memory from a static destructor could run after the CUDA
// runtime has shut down), so two families' buffers never alias: a decode
// call between a prefill plan and its runs cannot take the plan away.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <mutex>
#include <utility>

namespace kb::kernels {

class StreamWorkspaces {
 public:
  // Prepares a new buffer (e.g. zeroes counters) on the stream before it is
  // handed out; an error leaves no buffer.
  using Init = cudaError_t (*)(void* mem, std::size_t bytes, cudaStream_t stream);

  // min_bytes: the least a buffer is allocated with, so that small calls of
  // growing sizes do not reallocate each time.
  explicit StreamWorkspaces(std::size_t min_bytes = 0, Init init = nullptr) : min_bytes_(min_bytes), init_(init) {}
  StreamWorkspaces(const StreamWorkspaces&) = delete;
  StreamWorkspaces& operator=(const StreamWorkspaces&) = delete;

  // At least `bytes` of `stream`'s buffer on the current device in *out.
  // may_grow false: a buffer too small is cudaErrorInvalidValue (a call
  // that must find what an earlier one left there).
  cudaError_t get(cudaStream_t stream, std::size_t bytes, void** out, bool may_grow = true) {
    int device = 0;
    if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = bufs_[{device, static_cast<void*>(stream)}];
    if (slot.second >= bytes) {
      *out = slot.first;
      return cudaSuccess;
    }
    if (!may_grow) return cudaErrorInvalidValue;
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (cudaError_t e = cudaStreamIsCapturing(stream, &cap); e != cudaSuccess) return e;
    if (cap != cudaStreamCaptureStatusNone) return cudaErrorStreamCaptureUnsupported;
    if (slot.first) {
      if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) return e;
      cudaFree(slot.first);
      slot = {nullptr, 0};
    }
    const std::size_t want = std::max(bytes, min_bytes_);
    void* mem = nullptr;
    if (cudaError_t e = cudaMalloc(&mem, want); e != cudaSuccess) return e;
    if (cudaError_t e = init_ ? init_(mem, want, stream) : cudaSuccess; e != cudaSuccess) {
      cudaFree(mem);
      return e;
    }
    slot = {mem, want};
    *out = mem;
    return cudaSuccess;
  }

 private:
  const std::size_t min_bytes_;
  const Init init_;
  std::mutex mu_;
  std::map<std::pair<int, void*>, std::pair<void*, std::size_t>> bufs_;
};

}  // namespace kb::kernels
