#include "tensor/convert.hpp"

#include "tensor/float_encode.hpp"

#include <fmt/format.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace kb {

namespace {

using encode::MiniFloat;
using encode::kHalf;
using encode::kE4M3FN;
using encode::kE5M2;
using encode::kE2M1;

// Exact value of a pattern (used to build the decode tables).
float decode_exact(const MiniFloat& f, std::uint32_t bits) {
  bool neg = (bits >> f.sign_shift()) & 1u;
  std::uint32_t mag = bits & f.mag_mask();
  std::uint32_t e = mag >> f.man_bits;
  std::uint32_t m = mag & f.man_mask();
  double v;
  if (f.special == MiniFloat::Special::ieee && e == (1u << f.exp_bits) - 1) {
    v = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (f.special == MiniFloat::Special::fn && mag == f.mag_mask()) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - f.bias - f.man_bits);
  } else {
    v = std::ldexp(static_cast<double>(m | (1u << f.man_bits)), static_cast<int>(e) - f.bias - f.man_bits);
  }
  return static_cast<float>(neg ? -v : v);  // exact: every value is a float32
}

// Decode table of every pattern of a format with `Bits` bits, built once.
template <const MiniFloat& F, int Bits>
const float* decode_table() {
  static const std::array<float, (1u << Bits)> table = [] {
    std::array<float, (1u << Bits)> t{};
    for (std::uint32_t p = 0; p < t.size(); ++p) t[p] = decode_exact(F, p);
    return t;
  }();
  return table.data();
}

}  // namespace

float half_to_float(std::uint16_t bits) noexcept { return decode_table<kHalf, 16>()[bits]; }
std::uint16_t float_to_half(float v) noexcept { return encode::to_half(v); }

float bf16_to_float(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}
std::uint16_t float_to_bf16(float v) noexcept { return encode::to_bf16(v); }

float fp8_e4m3fn_to_float(std::uint8_t bits) noexcept { return decode_table<kE4M3FN, 8>()[bits]; }
std::uint8_t float_to_fp8_e4m3fn(float v) noexcept { return encode::to_fp8_e4m3fn(v); }
float fp8_e5m2_to_float(std::uint8_t bits) noexcept { return decode_table<kE5M2, 8>()[bits]; }
std::uint8_t float_to_fp8_e5m2(float v) noexcept { return encode::to_fp8_e5m2(v); }
float fp4_e2m1_to_float(std::uint8_t nibble) noexcept { return decode_table<kE2M1, 4>()[nibble & 0xF]; }
std::uint8_t float_to_fp4_e2m1(float v) noexcept { return encode::to_fp4_e2m1(v); }

double element_as_double(const Tensor& t, std::int64_t i) {
  switch (t.dtype()) {
    case DType::float32: return t.data<float>()[i];
    case DType::float16: return half_to_float(t.data<std::uint16_t>()[i]);
    case DType::bfloat16: return bf16_to_float(t.data<std::uint16_t>()[i]);
    case DType::float8_e4m3fn: return fp8_e4m3fn_to_float(t.data<std::uint8_t>()[i]);
    case DType::float8_e5m2: return fp8_e5m2_to_float(t.data<std::uint8_t>()[i]);
    case DType::float4_e2m1: {
      // Element 2k is the low nibble of byte k, 2k+1 the high one (the packing
      // of torch's float4_e2m1fn_x2 in its own tests).
      std::uint8_t byte = t.data<std::uint8_t>()[i / 2];
      return fp4_e2m1_to_float(i % 2 == 0 ? byte & 0xF : byte >> 4);
    }
    case DType::int64: return static_cast<double>(t.data<std::int64_t>()[i]);
    case DType::int32: return t.data<std::int32_t>()[i];
    case DType::int16: return t.data<std::int16_t>()[i];
    case DType::int8: return t.data<std::int8_t>()[i];
    case DType::bool_: return t.data<std::uint8_t>()[i] != 0;
  }
  return 0;
}

namespace {
// out[i] = table[src[i]]
template <class S>
void lookup(const S* src, std::size_t n, const float* table, float* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = table[src[i]];
}
// out[i] = float(src[i]), one rounding (int64 -> float direct, as torch does:
// going through double first could round twice).
template <class S>
void widen(const S* src, std::size_t n, float* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(src[i]);
}
}  // namespace

std::vector<float> to_float(const Tensor& t) {
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  to_float_range(t, 0, out);
  return out;
}

void to_float_range(const Tensor& t, std::int64_t first, std::span<float> out) {
  const std::size_t n = out.size(), f = static_cast<std::size_t>(first);
  float* o = out.data();
  switch (t.dtype()) {
    case DType::float32:
      if (n != 0) std::memcpy(o, t.data<float>() + f, n * sizeof(float));
      break;
    case DType::float16: lookup(t.data<std::uint16_t>() + f, n, decode_table<kHalf, 16>(), o); break;
    case DType::bfloat16: {
      const std::uint16_t* s = t.data<std::uint16_t>() + f;
      for (std::size_t i = 0; i < n; ++i) o[i] = std::bit_cast<float>(static_cast<std::uint32_t>(s[i]) << 16);
      break;
    }
    case DType::float8_e4m3fn: lookup(t.data<std::uint8_t>() + f, n, decode_table<kE4M3FN, 8>(), o); break;
    case DType::float8_e5m2: lookup(t.data<std::uint8_t>() + f, n, decode_table<kE5M2, 8>(), o); break;
    case DType::float4_e2m1: {
      const float* table = decode_table<kE2M1, 4>();
      const std::uint8_t* s = t.data<std::uint8_t>();
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t e = f + i;
        o[i] = table[e % 2 == 0 ? s[e / 2] & 0xF : s[e / 2] >> 4];
      }
      break;
    }
    case DType::int64: widen(t.data<std::int64_t>() + f, n, o); break;
    case DType::int32: widen(t.data<std::int32_t>() + f, n, o); break;
    case DType::int16: widen(t.data<std::int16_t>() + f, n, o); break;
    case DType::int8: widen(t.data<std::int8_t>() + f, n, o); break;
    case DType::bool_: {
      const std::uint8_t* s = t.data<std::uint8_t>() + f;
      for (std::size_t i = 0; i < n; ++i) o[i] = s[i] != 0 ? 1.0f : 0.0f;
      break;
    }
  }
}

namespace {
// Truncates toward zero after clamping to I's range; NaN -> 0. (C++ leaves
// out-of-range float -> int undefined and torch inherits that; CUDA's cvt
// saturates and maps NaN to 0, which kb does everywhere.)
template <class I>
I to_int(float v) {
  if (std::isnan(v)) return 0;
  double d = std::trunc(static_cast<double>(v));
  if (d <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (d >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(d);
}

// out[i] = f(v[i]). Blocks of a fixed size let -O2 vectorize the body.
template <class D, class F>
void convert_each(std::span<const float> v, D* __restrict out, F f) {
  constexpr std::size_t block = 16;
  const float* __restrict in = v.data();
  std::size_t n = v.size(), i = 0;
  for (; i + block <= n; i += block)
    for (std::size_t k = 0; k < block; ++k) out[i + k] = f(in[i + k]);
  for (; i < n; ++i) out[i] = f(in[i]);
}
}  // namespace

Status store_float(std::span<const float> v, Tensor& t) {
  if (static_cast<std::int64_t>(v.size()) != t.numel())
    return make_error(Code::invalid_argument,
                      fmt::format("store_float: {} values for a tensor of {} elements", v.size(), t.numel()));
  return store_float_range(v, t, 0);
}

Status store_float_range(std::span<const float> v, Tensor& t, std::int64_t first) {
  std::size_t n = v.size();
  if (first < 0 || first + static_cast<std::int64_t>(n) > t.numel() || (t.dtype() == DType::float4_e2m1 && first % 2))
    return make_error(Code::invalid_argument,
                      fmt::format("store_float_range: [{}, {}) does not fit a tensor of {} elements", first,
                                  first + static_cast<std::int64_t>(n), t.numel()));
  auto f = static_cast<std::size_t>(first);
  switch (t.dtype()) {
    case DType::float32:
      if (n != 0) std::memcpy(t.data<float>() + f, v.data(), n * sizeof(float));
      break;
    case DType::float16: convert_each(v, t.data<std::uint16_t>() + f, [](float x) { return float_to_half(x); }); break;
    case DType::bfloat16: convert_each(v, t.data<std::uint16_t>() + f, [](float x) { return float_to_bf16(x); }); break;
    case DType::float8_e4m3fn: convert_each(v, t.data<std::uint8_t>() + f, [](float x) { return float_to_fp8_e4m3fn(x); }); break;
    case DType::float8_e5m2: convert_each(v, t.data<std::uint8_t>() + f, [](float x) { return float_to_fp8_e5m2(x); }); break;
    case DType::float4_e2m1: {
      // Element 2k in the low nibble of byte k; an odd tail (allocate refuses
      // odd counts) would leave the high nibble 0.
      std::uint8_t* out = t.data<std::uint8_t>() + f / 2;
      for (std::size_t i = 0; i < n; i += 2) {
        std::uint8_t lo = float_to_fp4_e2m1(v[i]);
        std::uint8_t hi = i + 1 < n ? float_to_fp4_e2m1(v[i + 1]) : 0;
        out[i / 2] = static_cast<std::uint8_t>(lo | (hi << 4));
      }
      break;
    }
    case DType::int64: convert_each(v, t.data<std::int64_t>() + f, to_int<std::int64_t>); break;
    case DType::int32: convert_each(v, t.data<std::int32_t>() + f, to_int<std::int32_t>); break;
    case DType::int16: convert_each(v, t.data<std::int16_t>() + f, to_int<std::int16_t>); break;
    case DType::int8: convert_each(v, t.data<std::int8_t>() + f, to_int<std::int8_t>); break;
    case DType::bool_: convert_each(v, t.data<std::uint8_t>() + f, [](float x) -> std::uint8_t { return x != 0; }); break;
  }
  return ok_status();
}

}  // namespace kb
