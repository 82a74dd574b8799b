// Strided host tensors for BackendBench operators: a storage buffer in the
// tensor's own dtype (f16 as its bits, ...) viewed through shape, strides (in
// elements) and an element offset, exactly as PyTorch lays them out. 0-strides
// overlap elements, permuted strides (channels-last) and gaps are kept. A
// tensor without storage is a "meta" tensor: shape and dtype only (used to
// ask an operator for its output shapes and dtypes without computing).
#pragma once

#include <cstddef>
#include <complex>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backendbench/trace.hpp"

namespace kb::backendbench {

struct HostTensor {
  Dtype dtype = Dtype::f32;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // elements, one per dim
  std::int64_t offset = 0;            // elements into storage
  std::shared_ptr<std::vector<std::byte>> storage;  // null: meta tensor
  bool undefined = false;  // an output PyTorch returns as None (e.g. output_mask False)
  // Values left for the device to generate (materialize_call's `defer_above`):
  // storage is empty, and the values are materialize_tensor's splitmix64
  // stream from this state (device_materialize.hpp fills device memory with
  // exactly the bytes the host would have written).
  std::optional<std::uint64_t> device_fill;

  std::size_t rank() const { return shape.size(); }
  std::int64_t numel() const;
  bool is_meta() const { return !storage; }
  // Elements of storage that the view reaches: 1 + sum((size-1)*stride), 0 when numel is 0.
  std::int64_t span() const;
  bool is_contiguous() const;

  // Storage element `index` (not a logical index) as double / stored from
  // double (rounded to nearest even for floats; integers truncated toward
  // zero after clamping to the type's range, NaN stores 0; bool is v != 0).
  double load(std::int64_t index) const;
  void store(std::int64_t index, double v);
  // Complex storage element `index` (c32: two f16 parts; c64: two floats;
  // c128: two doubles), real part first as PyTorch stores it. store_complex
  // rounds each part to nearest even like store(); real dtypes hold the real
  // part (load_complex gives imaginary part 0, store_complex drops it).
  std::complex<double> load_complex(std::int64_t index) const;
  void store_complex(std::int64_t index, std::complex<double> v);
  // Storage index of a logical multi-index.
  std::int64_t index_of(const std::int64_t* idx) const;
  // Logical element i (row-major over shape) as double (NaN for complex dtypes: use at_complex).
  double at(std::int64_t i) const;
  std::int64_t storage_index(std::int64_t i) const;  // of logical element i
  std::complex<double> at_complex(std::int64_t i) const { return load_complex(storage_index(i)); }
};

// Row-major strides of a shape.
std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape);
// Zero-filled contiguous tensor (meta when `meta`).
HostTensor empty_tensor(Dtype dtype, std::vector<std::int64_t> shape, bool meta = false);
// Zero-filled tensor with the given strides (storage of span() elements).
HostTensor empty_strided(Dtype dtype, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
                         bool meta = false);
// A contiguous copy (same dtype) of any view; meta stays meta.
HostTensor contiguous_copy(const HostTensor& t);
// Deep copy of the storage (same view).
HostTensor deep_copy(const HostTensor& t);
// Every logical element, row-major, as double.
std::vector<double> to_doubles(const HostTensor& t);

// Dtype categories and PyTorch's promote_types for the real dtypes.
bool is_floating(Dtype d) noexcept;
bool is_complex(Dtype d) noexcept;
bool is_integral(Dtype d) noexcept;  // ints and u8, not bool
Dtype promote_types(Dtype a, Dtype b) noexcept;

// "[2, 3]"
std::string shape_text(const std::vector<std::int64_t>& shape);

}  // namespace kb::backendbench
