#include "cuda/runtime.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <atomic>
#include <vector>

namespace kb::cuda {

namespace {
// One flag for the process, not one per device: CUDA documents a sticky error
// as leaving the process in an inconsistent state, and so it is (two H100s,
// tests/plugin/test_plugin_gpu.cpp: after an illegal address on device 1,
// cudaStreamCreate on device 0 fails with the same error).
std::atomic<bool> g_broken{false};
constexpr unsigned char kGuard = 0xA5;

bool is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
  }
}
}  // namespace

Status check(int code, std::string_view what) {
  auto e = static_cast<cudaError_t>(code);
  if (e == cudaSuccess) return ok_status();
  bool sticky = is_sticky(e);
  if (sticky) g_broken = true;
  Code c = (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) ? Code::no_cuda_device
           : e == cudaErrorMemoryAllocation                              ? Code::out_of_memory
                                                                         : Code::cuda_error;
  return make_error(c, fmt::format("{}: {} ({}){}", what, cudaGetErrorString(e), cudaGetErrorName(e),
                                   sticky ? "; sticky error: the CUDA context is unusable" : ""));
}

bool context_is_broken() noexcept { return g_broken.load(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : base_(o.base_), size_(o.size_) {
  o.base_ = nullptr;
  o.size_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (base_) cudaFree(base_);
    base_ = o.base_;
    size_ = o.size_;
    o.base_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (base_) cudaFree(base_);
}

Result<bool> stream_is_capturing(void* stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  KB_TRY(check(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &capture), "cudaStreamIsCapturing"));
  return capture != cudaStreamCaptureStatusNone;
}

Result<DeviceBuffer> DeviceBuffer::allocate(std::size_t bytes) {
  DeviceBuffer b;
  // Round the data up to 256 bytes so the tail guard starts aligned.
  std::size_t padded = (bytes + 255) / 256 * 256;
  KB_TRY(check(cudaMalloc(&b.base_, padded + 2 * guard_bytes), fmt::format("cudaMalloc({} bytes)", bytes)));
  b.size_ = bytes;
  auto* base = static_cast<char*>(b.base_);
  KB_TRY(check(cudaMemset(base, kGuard, guard_bytes), "cudaMemset(guard)"));
  KB_TRY(check(cudaMemset(base + guard_bytes + bytes, kGuard, padded - bytes + guard_bytes), "cudaMemset(guard)"));
  return b;
}

Result<bool> DeviceBuffer::guards_intact() const {
  if (!base_) return true;
  std::size_t padded = (size_ + 255) / 256 * 256;
  std::vector<unsigned char> head(guard_bytes), tail(padded - size_ + guard_bytes);
  auto* base = static_cast<char*>(base_);
  KB_TRY(check(cudaMemcpy(head.data(), base, head.size(), cudaMemcpyDeviceToHost), "reading guard bytes"));
  KB_TRY(check(cudaMemcpy(tail.data(), base + guard_bytes + size_, tail.size(), cudaMemcpyDeviceToHost),
               "reading guard bytes"));
  for (auto c : head)
    if (c != kGuard) return false;
  for (auto c : tail)
    if (c != kGuard) return false;
  return true;
}

Result<DeviceCopy> allocate_like(DType dtype, const std::vector<std::int64_t>& shape) {
  DeviceCopy c;
  c.view.dtype = dtype;
  c.view.shape = shape;
  c.view.nbytes = static_cast<std::size_t>(dtype_storage_bytes(dtype, c.view.numel()));
  auto b = DeviceBuffer::allocate(c.view.nbytes);
  if (!b) return b.error();
  c.buffer = std::move(*b);
  c.view.data = c.buffer.data();
  return c;
}

Result<DeviceCopy> upload(const Tensor& t, void* stream) {
  auto c = allocate_like(t.dtype(), t.shape());
  if (!c) return c.error();
  KB_TRY(check(cudaMemcpyAsync(c->view.data, t.bytes(), t.nbytes(), cudaMemcpyHostToDevice,
                               static_cast<cudaStream_t>(stream)),
               "upload"));
  return c;
}

Status download(const DeviceTensor& src, Tensor& dst, void* stream) {
  if (src.nbytes != dst.nbytes())
    return make_error(Code::internal, fmt::format("download: {} device bytes into a {}-byte tensor", src.nbytes, dst.nbytes()));
  KB_TRY(check(cudaMemcpyAsync(dst.bytes(), src.data, src.nbytes, cudaMemcpyDeviceToHost,
                               static_cast<cudaStream_t>(stream)),
               "download"));
  return check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "download: synchronize");
}

Status memset_async(const DeviceTensor& t, int byte, void* stream) {
  return check(cudaMemsetAsync(t.data, byte, t.nbytes, static_cast<cudaStream_t>(stream)), "cudaMemsetAsync");
}

Result<Stream> Stream::create() {
  Stream s;
  cudaStream_t raw = nullptr;
  KB_TRY(check(cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking), "cudaStreamCreate"));
  s.s_ = raw;
  return s;
}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (s_) cudaStreamDestroy(static_cast<cudaStream_t>(s_));
    s_ = o.s_;
    o.s_ = nullptr;
  }
  return *this;
}

Stream::~Stream() {
  if (s_) cudaStreamDestroy(static_cast<cudaStream_t>(s_));
}

Status Stream::synchronize() const {
  return check(cudaStreamSynchronize(static_cast<cudaStream_t>(s_)), "cudaStreamSynchronize");
}

}  // namespace kb::cuda
