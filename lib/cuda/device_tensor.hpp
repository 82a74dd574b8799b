// Views of tensors in GPU memory, as kb's CUDA solutions receive them. Plain
// data (no CUDA types), so every header stays includable in CPU-only builds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "schema/dtype.hpp"
#include "schema/model.hpp"

namespace kb::cuda {

// A contiguous row-major tensor on the current CUDA device. Not owning.
struct DeviceTensor {
  DType dtype = DType::float32;
  std::vector<std::int64_t> shape;
  void* data = nullptr;
  std::size_t nbytes = 0;

  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
  std::int64_t dim(std::size_t i) const { return shape[i]; }
  template <class T>
  T* as() const { return static_cast<T*>(data); }
};

// One input: a device tensor, or a Python scalar passed by value.
struct DeviceArg {
  const DeviceTensor* tensor = nullptr;
  std::optional<ScalarValue> scalar;
};

}  // namespace kb::cuda
