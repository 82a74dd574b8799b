// A device allocation for GPU tests: room for `nbytes` with guard bytes
// (kPattern) on both sides, so a kernel that writes around its tensor is
// caught; `shift` moves the data off its 16-byte alignment (a misaligned
// tensor). Used by GuardedCall (gpu_test_support.hpp) and the GPU tests.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kb_gpu_test {

class DeviceBuffer {
 public:
  static constexpr std::size_t kGuard = 256;
  static constexpr unsigned char kPattern = 0xA5;

  explicit DeviceBuffer(std::size_t nbytes, std::size_t shift = 0)
      : nbytes_(nbytes), lead_(kGuard + shift), total_(nbytes + 2 * kGuard + shift) {
    check(cudaMalloc(&base_, total_), "cudaMalloc");
    check(cudaMemset(base_, kPattern, total_), "cudaMemset");
  }
  ~DeviceBuffer() {
    if (base_) cudaFree(base_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return static_cast<unsigned char*>(base_) + lead_; }
  std::size_t nbytes() const { return nbytes_; }

  // The bytes before and after the data (the shift included) still hold kPattern.
  bool guards_intact() const {
    const std::size_t tail = total_ - lead_ - nbytes_;
    for (auto [off, len] : {std::pair{std::size_t{0}, lead_}, std::pair{lead_ + nbytes_, tail}}) {
      std::vector<unsigned char> g(len);
      check(cudaMemcpy(g.data(), static_cast<unsigned char*>(base_) + off, len, cudaMemcpyDeviceToHost),
            "cudaMemcpy (guards)");
      for (unsigned char c : g)
        if (c != kPattern) return false;
    }
    return true;
  }

 private:
  static void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess)
      throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
  }

  void* base_ = nullptr;
  std::size_t nbytes_ = 0, lead_ = 0, total_ = 0;
};

}  // namespace kb_gpu_test
