// Host tensors: owning, contiguous row-major, with guard bytes around the data
// so a solution writing past its output is caught. Element access is through
// typed pointers (storage types: float, uint16_t bits for float16/bfloat16,
// uint8_t bits for float8, packed uint8_t pairs for float4, intN_t, uint8_t
// for bool) or through the float32 views in convert.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/result.hpp"
#include "schema/dtype.hpp"

namespace kb {

class Tensor {
 public:
  // Bytes of guard pattern before and after the data.
  static constexpr std::size_t guard_bytes = 4096;  // a page: a row or a block past the end lands in it

  Tensor() = default;
  // Zero-filled. Refuses shapes over limits::max_tensor_elements, negative
  // dims, and float4 tensors whose element count is odd (two values a byte).
  static Result<Tensor> allocate(DType dtype, std::vector<std::int64_t> shape);
  // Dtype, shape and size without storage (empty_storage() is true): a tensor
  // whose values live elsewhere (on a device), for code that reads only its
  // shape and size. Same checks as allocate(); its bytes must not be read.
  static Result<Tensor> shape_only(DType dtype, std::vector<std::int64_t> shape);

  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::size_t rank() const { return shape_.size(); }
  std::int64_t dim(std::size_t i) const { return shape_[i]; }
  std::int64_t numel() const { return numel_; }
  std::size_t nbytes() const { return nbytes_; }
  bool empty_storage() const { return !storage_; }

  std::byte* bytes() { return storage_.get() + guard_bytes; }
  const std::byte* bytes() const { return storage_.get() + guard_bytes; }
  std::span<std::byte> span() { return {bytes(), nbytes_}; }
  std::span<const std::byte> span() const { return {bytes(), nbytes_}; }
  template <class T>
  T* data() { return reinterpret_cast<T*>(bytes()); }
  template <class T>
  const T* data() const { return reinterpret_cast<const T*>(bytes()); }

  // Fills every byte of the data with `value` (e.g. 0xFF: NaN for every float dtype).
  void fill_bytes(std::uint8_t value);
  // True when the guard regions still hold their pattern.
  bool guards_intact() const;
  // Deep copy (same guards, same bytes).
  Tensor clone() const;

 private:
  DType dtype_ = DType::float32;
  std::vector<std::int64_t> shape_;
  std::int64_t numel_ = 0;
  std::size_t nbytes_ = 0;
  std::unique_ptr<std::byte[]> storage_;  // guard | data | guard
};

// Element count of a shape, or nullopt on a negative dim or overflow past
// limits::max_tensor_elements.
std::optional<std::int64_t> checked_numel(std::span<const std::int64_t> shape);

}  // namespace kb
