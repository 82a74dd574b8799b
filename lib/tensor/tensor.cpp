#include "tensor/tensor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <new>

#include "common/limits.hpp"

namespace kb {

namespace {
// A pattern no plausible kernel writes by accident (not 0, not NaN-fill 0xFF).
constexpr std::uint8_t kGuard = 0xA5;
}  // namespace

std::optional<std::int64_t> checked_numel(std::span<const std::int64_t> shape) {
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > limits::max_tensor_elements / d) return std::nullopt;
    n *= d;
  }
  return n;
}

Result<Tensor> Tensor::shape_only(DType dtype, std::vector<std::int64_t> shape) {
  if (shape.size() > limits::max_tensor_rank)
    return make_error(Code::limit_exceeded, fmt::format("rank {} exceeds the limit of {}", shape.size(),
                                                        limits::max_tensor_rank));
  auto n = checked_numel(shape);
  if (!n)
    return make_error(Code::limit_exceeded, fmt::format("shape [{}] is negative or holds more than {} elements",
                                                        fmt::join(shape, ", "), limits::max_tensor_elements));
  if (dtype == DType::float4_e2m1 && *n % 2 != 0)
    return make_error(Code::invalid_argument,
                      fmt::format("float4_e2m1 stores two values a byte: shape [{}] has an odd element count",
                                  fmt::join(shape, ", ")));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = *n;
  t.nbytes_ = static_cast<std::size_t>(dtype_storage_bytes(dtype, *n));
  return t;
}

Result<Tensor> Tensor::allocate(DType dtype, std::vector<std::int64_t> shape) {
  auto s = shape_only(dtype, std::move(shape));
  if (!s) return s.error();
  Tensor t = std::move(*s);
  std::size_t total = t.nbytes_ + 2 * guard_bytes;
  t.storage_.reset(new (std::nothrow) std::byte[total]);
  if (!t.storage_)
    return make_error(Code::out_of_memory, fmt::format("cannot allocate {} bytes for a tensor", t.nbytes_));
  std::memset(t.storage_.get(), kGuard, guard_bytes);
  std::memset(t.storage_.get() + guard_bytes, 0, t.nbytes_);
  std::memset(t.storage_.get() + guard_bytes + t.nbytes_, kGuard, guard_bytes);
  return t;
}

void Tensor::fill_bytes(std::uint8_t value) {
  if (storage_) std::memset(bytes(), value, nbytes_);
}

bool Tensor::guards_intact() const {
  if (!storage_) return true;
  const std::byte* head = storage_.get();
  const std::byte* tail = storage_.get() + guard_bytes + nbytes_;
  for (std::size_t i = 0; i < guard_bytes; ++i)
    if (head[i] != std::byte{kGuard} || tail[i] != std::byte{kGuard}) return false;
  return true;
}

Tensor Tensor::clone() const {
  Tensor t;
  t.dtype_ = dtype_;
  t.shape_ = shape_;
  t.numel_ = numel_;
  t.nbytes_ = nbytes_;
  if (storage_) {
    std::size_t total = nbytes_ + 2 * guard_bytes;
    t.storage_.reset(new std::byte[total]);
    std::memcpy(t.storage_.get(), storage_.get(), total);
  }
  return t;
}

}  // namespace kb
