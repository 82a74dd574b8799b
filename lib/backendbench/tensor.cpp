// Strided host tensors (see tensor.hpp).
#include "backendbench/tensor.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "tensor/convert.hpp"

namespace kb::backendbench {

std::int64_t HostTensor::numel() const {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

std::int64_t HostTensor::span() const {
  std::int64_t n = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return 0;
    n += (shape[i] - 1) * strides[i];
  }
  return n;
}

bool HostTensor::is_contiguous() const {
  std::int64_t expect = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

namespace {

template <class T>
T read_as(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <class T>
void write_as(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

template <class I>
I to_int(double v) {
  if (std::isnan(v)) return 0;
  constexpr double lo = static_cast<double>(std::numeric_limits<I>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<I>::max());
  if (v <= lo) return std::numeric_limits<I>::min();
  if (v >= hi) return std::numeric_limits<I>::max();
  return static_cast<I>(std::trunc(v));
}

}  // namespace

double HostTensor::load(std::int64_t index) const {
  const std::byte* p = storage->data() + static_cast<std::size_t>(index) * dtype_size(dtype);
  switch (dtype) {
    case Dtype::f16: return half_to_float(read_as<std::uint16_t>(p));
    case Dtype::bf16: return bf16_to_float(read_as<std::uint16_t>(p));
    case Dtype::f32: return read_as<float>(p);
    case Dtype::f64: return read_as<double>(p);
    case Dtype::i8: return read_as<std::int8_t>(p);
    case Dtype::i16: return read_as<std::int16_t>(p);
    case Dtype::i32: return read_as<std::int32_t>(p);
    case Dtype::i64: return static_cast<double>(read_as<std::int64_t>(p));
    case Dtype::u8: return read_as<std::uint8_t>(p);
    case Dtype::b8: return read_as<std::uint8_t>(p) != 0 ? 1.0 : 0.0;
    case Dtype::c32: case Dtype::c64: case Dtype::c128:
      return std::numeric_limits<double>::quiet_NaN();  // complex: operators refuse these
  }
  return 0;
}

void HostTensor::store(std::int64_t index, double v) {
  std::byte* p = storage->data() + static_cast<std::size_t>(index) * dtype_size(dtype);
  switch (dtype) {
    // Round once from double to the target: through float for f16/bf16 (the
    // double -> float step is exact for every value f16/bf16 can tell apart
    // except ties at float precision, far below the judge's tolerance).
    case Dtype::f16: write_as(p, float_to_half(static_cast<float>(v))); return;
    case Dtype::bf16: write_as(p, float_to_bf16(static_cast<float>(v))); return;
    case Dtype::f32: write_as(p, static_cast<float>(v)); return;
    case Dtype::f64: write_as(p, v); return;
    case Dtype::i8: write_as(p, to_int<std::int8_t>(v)); return;
    case Dtype::i16: write_as(p, to_int<std::int16_t>(v)); return;
    case Dtype::i32: write_as(p, to_int<std::int32_t>(v)); return;
    case Dtype::i64: write_as(p, to_int<std::int64_t>(v)); return;
    case Dtype::u8: write_as(p, to_int<std::uint8_t>(v)); return;
    case Dtype::b8: write_as(p, static_cast<std::uint8_t>(v != 0 ? 1 : 0)); return;
    case Dtype::c32: case Dtype::c64: case Dtype::c128: return;
  }
}

std::complex<double> HostTensor::load_complex(std::int64_t index) const {
  const std::byte* p = storage->data() + static_cast<std::size_t>(index) * dtype_size(dtype);
  switch (dtype) {
    case Dtype::c32: return {half_to_float(read_as<std::uint16_t>(p)), half_to_float(read_as<std::uint16_t>(p + 2))};
    case Dtype::c64: return {read_as<float>(p), read_as<float>(p + 4)};
    case Dtype::c128: return {read_as<double>(p), read_as<double>(p + 8)};
    default: return {load(index), 0.0};
  }
}

void HostTensor::store_complex(std::int64_t index, std::complex<double> v) {
  std::byte* p = storage->data() + static_cast<std::size_t>(index) * dtype_size(dtype);
  switch (dtype) {
    case Dtype::c32:
      write_as(p, float_to_half(static_cast<float>(v.real())));
      write_as(p + 2, float_to_half(static_cast<float>(v.imag())));
      return;
    case Dtype::c64:
      write_as(p, static_cast<float>(v.real()));
      write_as(p + 4, static_cast<float>(v.imag()));
      return;
    case Dtype::c128:
      write_as(p, v.real());
      write_as(p + 8, v.imag());
      return;
    default: store(index, v.real()); return;
  }
}

std::int64_t HostTensor::index_of(const std::int64_t* idx) const {
  std::int64_t o = offset;
  for (std::size_t i = 0; i < shape.size(); ++i) o += idx[i] * strides[i];
  return o;
}

std::int64_t HostTensor::storage_index(std::int64_t i) const {
  std::int64_t o = offset;
  for (std::size_t d = shape.size(); d-- > 0;) {
    o += (i % shape[d]) * strides[d];
    i /= shape[d];
  }
  return o;
}

double HostTensor::at(std::int64_t i) const { return load(storage_index(i)); }

std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> s(shape.size());
  std::int64_t acc = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= std::max<std::int64_t>(shape[i], 1);
  }
  return s;
}

HostTensor empty_strided(Dtype dtype, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides, bool meta) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.strides = std::move(strides);
  if (!meta)
    t.storage = std::make_shared<std::vector<std::byte>>(static_cast<std::size_t>(t.span()) * dtype_size(dtype));
  return t;
}

HostTensor empty_tensor(Dtype dtype, std::vector<std::int64_t> shape, bool meta) {
  auto st = contiguous_strides(shape);
  return empty_strided(dtype, std::move(shape), std::move(st), meta);
}

HostTensor contiguous_copy(const HostTensor& t) {
  HostTensor out = empty_tensor(t.dtype, t.shape, t.is_meta());
  if (t.is_meta()) return out;
  const std::size_t es = dtype_size(t.dtype);
  const std::int64_t n = t.numel();
  std::vector<std::int64_t> idx(t.rank(), 0);
  std::int64_t src = t.offset;
  for (std::int64_t i = 0; i < n; ++i) {
    std::memcpy(out.storage->data() + static_cast<std::size_t>(i) * es, t.storage->data() + src * es, es);
    for (std::size_t d = t.rank(); d-- > 0;) {
      if (++idx[d] < t.shape[d]) {
        src += t.strides[d];
        break;
      }
      src -= (t.shape[d] - 1) * t.strides[d];
      idx[d] = 0;
    }
  }
  return out;
}

HostTensor deep_copy(const HostTensor& t) {
  HostTensor out = t;
  if (t.storage) out.storage = std::make_shared<std::vector<std::byte>>(*t.storage);
  return out;
}

std::vector<double> to_doubles(const HostTensor& t) {
  HostTensor c = contiguous_copy(t);
  std::vector<double> v(static_cast<std::size_t>(c.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = c.load(static_cast<std::int64_t>(i));
  return v;
}

bool is_floating(Dtype d) noexcept {
  return d == Dtype::f16 || d == Dtype::bf16 || d == Dtype::f32 || d == Dtype::f64;
}
bool is_complex(Dtype d) noexcept { return d == Dtype::c32 || d == Dtype::c64 || d == Dtype::c128; }
bool is_integral(Dtype d) noexcept {
  return d == Dtype::i8 || d == Dtype::i16 || d == Dtype::i32 || d == Dtype::i64 || d == Dtype::u8;
}

namespace {
int int_rank(Dtype d) {
  switch (d) {
    case Dtype::i8: return 1;
    case Dtype::i16: return 2;
    case Dtype::i32: return 3;
    case Dtype::i64: return 4;
    default: return 0;
  }
}
int float_bits(Dtype d) {
  switch (d) {
    case Dtype::f16: case Dtype::bf16: case Dtype::c32: return 16;
    case Dtype::f32: case Dtype::c64: return 32;
    default: return 64;
  }
}
}  // namespace

Dtype promote_types(Dtype a, Dtype b) noexcept {
  if (a == b) return a;
  if (a == Dtype::b8) return b;
  if (b == Dtype::b8) return a;
  if (is_complex(a) || is_complex(b)) {
    int bits = std::max(float_bits(a), float_bits(b));
    if (!is_complex(a) && !is_floating(a)) bits = float_bits(b);
    if (!is_complex(b) && !is_floating(b)) bits = float_bits(a);
    return bits == 16 ? Dtype::c32 : bits == 32 ? Dtype::c64 : Dtype::c128;
  }
  if (is_floating(a) && is_floating(b)) {
    if ((a == Dtype::f16 && b == Dtype::bf16) || (a == Dtype::bf16 && b == Dtype::f16)) return Dtype::f32;
    return float_bits(a) >= float_bits(b) ? a : b;
  }
  if (is_floating(a)) return a;
  if (is_floating(b)) return b;
  // Both integral, different.
  if (a == Dtype::u8 || b == Dtype::u8) {
    Dtype s = a == Dtype::u8 ? b : a;
    return s == Dtype::i8 ? Dtype::i16 : s;
  }
  return int_rank(a) >= int_rank(b) ? a : b;
}

std::string shape_text(const std::vector<std::int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

}  // namespace kb::backendbench
