#include "tensor/convert.hpp"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace kb {

namespace {

// A small binary float format: sign, `exp_bits` exponent bits, `man_bits`
// mantissa bits. How it spells overflow and NaN differs per format.
struct MiniFloat {
  int exp_bits;
  int man_bits;
  int bias;
  int max_exp;           // unbiased exponent of the largest finite value
  double max_finite;
  enum class Overflow { to_inf, to_nan, saturate } overflow;
  std::uint32_t inf_bits;   // magnitude bits of inf (to_inf formats)
  std::uint32_t nan_bits;   // magnitude bits of the NaN kb writes (0 = no NaN)
};

constexpr MiniFloat kHalf{5, 10, 15, 15, 65504.0, MiniFloat::Overflow::to_inf, 0x7C00, 0x7E00};
constexpr MiniFloat kE4M3FN{4, 3, 7, 8, 448.0, MiniFloat::Overflow::to_nan, 0, 0x7F};
constexpr MiniFloat kE5M2{5, 2, 15, 15, 57344.0, MiniFloat::Overflow::to_inf, 0x7C, 0x7F};
constexpr MiniFloat kE2M1{2, 1, 1, 2, 6.0, MiniFloat::Overflow::saturate, 0, 0};

// Decode: exponent field all ones means inf/NaN only in IEEE-like formats.
double decode(const MiniFloat& f, std::uint32_t bits) {
  std::uint32_t sign = bits >> (f.exp_bits + f.man_bits) & 1u;
  std::uint32_t mag = bits & ((1u << (f.exp_bits + f.man_bits)) - 1);
  std::uint32_t e = mag >> f.man_bits;
  std::uint32_t m = mag & ((1u << f.man_bits) - 1);
  double v;
  if (f.overflow == MiniFloat::Overflow::to_inf && e == (1u << f.exp_bits) - 1) {
    v = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (f.overflow == MiniFloat::Overflow::to_nan && mag == f.nan_bits) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - f.bias - f.man_bits);
  } else {
    v = std::ldexp(static_cast<double>(m + (1u << f.man_bits)), static_cast<int>(e) - f.bias - f.man_bits);
  }
  return sign ? -v : v;
}

// Encode with round-to-nearest-even on the exact value.
std::uint32_t encode(const MiniFloat& f, float x) {
  std::uint32_t sign_bit = 1u << (f.exp_bits + f.man_bits);
  bool neg = std::signbit(x);
  std::uint32_t sign = neg ? sign_bit : 0;
  if (std::isnan(x)) {
    if (f.nan_bits == 0) return sign | ((1u << (f.exp_bits + f.man_bits)) - 1);  // no NaN: largest value
    return sign | f.nan_bits;
  }
  double a = std::fabs(static_cast<double>(x));
  double top_ulp = std::ldexp(1.0, f.max_exp - f.man_bits);
  if (a >= f.max_finite + top_ulp / 2) {  // rounds past the largest finite value
    switch (f.overflow) {
      case MiniFloat::Overflow::to_inf: return sign | f.inf_bits;
      case MiniFloat::Overflow::to_nan: return sign | f.nan_bits;
      case MiniFloat::Overflow::saturate: return sign | ((1u << (f.exp_bits + f.man_bits)) - 1);
    }
  }
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  e -= 1;             // a = m' * 2^e, m' in [1, 2)
  int min_exp = 1 - f.bias;
  if (e < min_exp) e = min_exp;
  double ulp = std::ldexp(1.0, e - f.man_bits);
  double q = std::nearbyint(a / ulp);  // default rounding mode: to nearest even
  auto qi = static_cast<std::uint32_t>(q);
  if (qi == (2u << f.man_bits)) {  // mantissa carried into the next binade
    qi >>= 1;
    ++e;
  }
  if (qi < (1u << f.man_bits)) return sign | qi;  // subnormal (e == min_exp)
  std::uint32_t exp_field = static_cast<std::uint32_t>(e + f.bias);
  return sign | (exp_field << f.man_bits) | (qi - (1u << f.man_bits));
}

}  // namespace

float half_to_float(std::uint16_t bits) noexcept { return static_cast<float>(decode(kHalf, bits)); }
std::uint16_t float_to_half(float v) noexcept { return static_cast<std::uint16_t>(encode(kHalf, v)); }

float bf16_to_float(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}
std::uint16_t float_to_bf16(float v) noexcept {
  if (std::isnan(v)) return 0x7FC0;  // torch drops the sign of NaN here
  std::uint32_t b = std::bit_cast<std::uint32_t>(v);
  b += 0x7FFFu + ((b >> 16) & 1u);
  return static_cast<std::uint16_t>(b >> 16);
}

float fp8_e4m3fn_to_float(std::uint8_t bits) noexcept { return static_cast<float>(decode(kE4M3FN, bits)); }
std::uint8_t float_to_fp8_e4m3fn(float v) noexcept { return static_cast<std::uint8_t>(encode(kE4M3FN, v)); }
float fp8_e5m2_to_float(std::uint8_t bits) noexcept { return static_cast<float>(decode(kE5M2, bits)); }
std::uint8_t float_to_fp8_e5m2(float v) noexcept { return static_cast<std::uint8_t>(encode(kE5M2, v)); }
float fp4_e2m1_to_float(std::uint8_t nibble) noexcept { return static_cast<float>(decode(kE2M1, nibble & 0xF)); }
std::uint8_t float_to_fp4_e2m1(float v) noexcept { return static_cast<std::uint8_t>(encode(kE2M1, v)); }

double element_as_double(const Tensor& t, std::int64_t i) {
  const std::byte* p = t.bytes();
  switch (t.dtype()) {
    case DType::float32: return t.data<float>()[i];
    case DType::float16: return half_to_float(t.data<std::uint16_t>()[i]);
    case DType::bfloat16: return bf16_to_float(t.data<std::uint16_t>()[i]);
    case DType::float8_e4m3fn: return fp8_e4m3fn_to_float(t.data<std::uint8_t>()[i]);
    case DType::float8_e5m2: return fp8_e5m2_to_float(t.data<std::uint8_t>()[i]);
    case DType::float4_e2m1: {
      // Element 2k is the low nibble of byte k (torch's float4_e2m1fn_x2).
      auto byte = static_cast<std::uint8_t>(p[i / 2]);
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

std::vector<float> to_float(const Tensor& t) {
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  if (t.dtype() == DType::float32) {
    std::memcpy(out.data(), t.bytes(), t.nbytes());
    return out;
  }
  for (std::int64_t i = 0; i < t.numel(); ++i) out[static_cast<std::size_t>(i)] = static_cast<float>(element_as_double(t, i));
  return out;
}

namespace {
template <class I>
I to_int(float v) {
  if (std::isnan(v)) return 0;
  double d = std::trunc(static_cast<double>(v));
  if (d <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (d >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(d);
}
}  // namespace

Status store_float(std::span<const float> v, Tensor& t) {
  if (static_cast<std::int64_t>(v.size()) != t.numel())
    return make_error(Code::invalid_argument,
                      fmt::format("store_float: {} values for a tensor of {} elements", v.size(), t.numel()));
  std::size_t n = v.size();
  switch (t.dtype()) {
    case DType::float32: std::memcpy(t.bytes(), v.data(), n * sizeof(float)); break;
    case DType::float16: for (std::size_t i = 0; i < n; ++i) t.data<std::uint16_t>()[i] = float_to_half(v[i]); break;
    case DType::bfloat16: for (std::size_t i = 0; i < n; ++i) t.data<std::uint16_t>()[i] = float_to_bf16(v[i]); break;
    case DType::float8_e4m3fn: for (std::size_t i = 0; i < n; ++i) t.data<std::uint8_t>()[i] = float_to_fp8_e4m3fn(v[i]); break;
    case DType::float8_e5m2: for (std::size_t i = 0; i < n; ++i) t.data<std::uint8_t>()[i] = float_to_fp8_e5m2(v[i]); break;
    case DType::float4_e2m1:
      for (std::size_t i = 0; i + 1 < n + 1; i += 2) {
        std::uint8_t lo = float_to_fp4_e2m1(v[i]);
        std::uint8_t hi = i + 1 < n ? float_to_fp4_e2m1(v[i + 1]) : 0;
        t.data<std::uint8_t>()[i / 2] = static_cast<std::uint8_t>(lo | (hi << 4));
      }
      break;
    case DType::int64: for (std::size_t i = 0; i < n; ++i) t.data<std::int64_t>()[i] = to_int<std::int64_t>(v[i]); break;
    case DType::int32: for (std::size_t i = 0; i < n; ++i) t.data<std::int32_t>()[i] = to_int<std::int32_t>(v[i]); break;
    case DType::int16: for (std::size_t i = 0; i < n; ++i) t.data<std::int16_t>()[i] = to_int<std::int16_t>(v[i]); break;
    case DType::int8: for (std::size_t i = 0; i < n; ++i) t.data<std::int8_t>()[i] = to_int<std::int8_t>(v[i]); break;
    case DType::bool_: for (std::size_t i = 0; i < n; ++i) t.data<std::uint8_t>()[i] = v[i] != 0; break;
  }
  return ok_status();
}

}  // namespace kb
