// The CUDA runtime as kb uses it: errors turned into kb statuses (sticky
// errors, which leave the context unusable, say so), device buffers with
// guard regions, host<->device copies, streams. Compiled only in CUDA builds;
// the header has no CUDA types, so CPU code may include it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/result.hpp"
#include "cuda/device_tensor.hpp"
#include "tensor/tensor.hpp"

namespace kb::cuda {

// OK, or Code::cuda_error "what: message (name)". For errors that poison the
// context (illegal address, launch failure, ...) the message adds
// "sticky error: the CUDA context is unusable" and context_is_broken() turns true.
Status check(int cuda_error, std::string_view what);
bool context_is_broken() noexcept;

// Whether `stream` (a cudaStream_t) is being captured into a CUDA graph:
// work that allocates, synchronizes or times must wait for an uncaptured call.
Result<bool> stream_is_capturing(void* stream);

// Device memory with guard regions before and after the data, filled with a
// pattern, so kernels writing out of bounds are caught.
class DeviceBuffer {
 public:
  static constexpr std::size_t guard_bytes = 64 * 1024;  // a tile or a row past the end lands in it
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  static Result<DeviceBuffer> allocate(std::size_t bytes);
  void* data() const { return base_ ? static_cast<char*>(base_) + guard_bytes : nullptr; }
  std::size_t size() const { return size_; }
  // True when both guard regions still hold the pattern (synchronizes).
  Result<bool> guards_intact() const;

 private:
  void* base_ = nullptr;
  std::size_t size_ = 0;
};

// A device copy of a host tensor (same dtype/shape) plus its view.
struct DeviceCopy {
  DeviceBuffer buffer;
  DeviceTensor view;
};
Result<DeviceCopy> upload(const Tensor& t, void* stream);
Result<DeviceCopy> allocate_like(DType dtype, const std::vector<std::int64_t>& shape);
Status download(const DeviceTensor& src, Tensor& dst, void* stream);
Status memset_async(const DeviceTensor& t, int byte, void* stream);

// An owned non-blocking stream.
class Stream {
 public:
  static Result<Stream> create();
  Stream() = default;
  Stream(Stream&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  Stream& operator=(Stream&& o) noexcept;
  ~Stream();
  void* get() const { return s_; }
  Status synchronize() const;

 private:
  void* s_ = nullptr;
};

}  // namespace kb::cuda
