#include "tensor/convert.hpp"

#include <fmt/format.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace kb {

namespace {

// A small binary float format: sign, `exp_bits` exponent bits, `man_bits`
// mantissa bits, exponent bias. The formats differ in how they spell inf and
// NaN and in what a value too large for them becomes.
struct MiniFloat {
  int exp_bits;
  int man_bits;
  int bias;
  // ieee: exponent all ones is inf (mantissa 0) or NaN; fn ("finite"): only
  // S.1111.111 is NaN; none: every pattern is a number.
  enum class Special { ieee, fn, none } special;
  // What rounds past the largest finite value (and +-inf) becomes.
  enum class Overflow { to_inf, to_nan, saturate } overflow;
  std::uint32_t nan_mag;  // magnitude bits written for a NaN input

  constexpr int sign_shift() const { return exp_bits + man_bits; }
  constexpr std::uint32_t mag_mask() const { return (1u << sign_shift()) - 1; }
  constexpr std::uint32_t man_mask() const { return (1u << man_bits) - 1; }
  constexpr std::uint32_t inf_mag() const { return ((1u << exp_bits) - 1) << man_bits; }
  constexpr std::uint32_t max_mag() const {  // largest finite magnitude
    switch (special) {
      case Special::ieee: return inf_mag() - 1;
      case Special::fn: return mag_mask() - 1;
      case Special::none: return mag_mask();
    }
    return 0;
  }
  constexpr std::uint32_t overflow_mag() const {
    switch (overflow) {
      case Overflow::to_inf: return inf_mag();
      case Overflow::to_nan: return nan_mag;
      case Overflow::saturate: return max_mag();
    }
    return 0;
  }
  // float32 bits of the smallest normal value of the format.
  constexpr std::uint32_t min_normal_f32() const { return static_cast<std::uint32_t>(127 + 1 - bias) << 23; }
  // float32 bits of the smallest magnitude that rounds past the largest finite
  // value: the midpoint between it and the next step of the grid when the
  // largest value's mantissa is odd (the tie goes up, to the even side), one
  // float32 ulp above that midpoint when it is even (float8_e4m3fn: 464 -> 448).
  constexpr std::uint32_t overflow_from_f32() const {
    std::uint32_t m = max_mag();
    auto e = static_cast<std::uint32_t>(static_cast<int>(m >> man_bits) - bias + 127);
    std::uint32_t max_f32 = (e << 23) | ((m & man_mask()) << (23 - man_bits));
    std::uint32_t mid = max_f32 + (1u << (22 - man_bits));
    return (m & 1) ? mid : mid + 1;
  }
};

// NaN results follow torch's c10 scalar conversions: float16 0x7E00 and
// float8_e5m2 0x7F, each with the input's sign (c10::detail::
// fp16_ieee_from_fp32_value, fp8e5m2_from_fp32_value). float8_e4m3fn has only
// S.1111.111 (fp8e4m3fn_from_fp32_value), and overflow and inf become it too.
// float4_e2m1 has no NaN and torch no conversion: NaN saturates like inf.
constexpr MiniFloat kHalf{5, 10, 15, MiniFloat::Special::ieee, MiniFloat::Overflow::to_inf, 0x7E00};
constexpr MiniFloat kE4M3FN{4, 3, 7, MiniFloat::Special::fn, MiniFloat::Overflow::to_nan, 0x7F};
constexpr MiniFloat kE5M2{5, 2, 15, MiniFloat::Special::ieee, MiniFloat::Overflow::to_inf, 0x7F};
constexpr MiniFloat kE2M1{2, 1, 1, MiniFloat::Special::none, MiniFloat::Overflow::saturate, 0x7};

static_assert(kHalf.overflow_from_f32() == 0x477FF000);    // 65520
static_assert(kE4M3FN.overflow_from_f32() == 0x43E80001);  // just above 464
static_assert(kE5M2.overflow_from_f32() == 0x47700000);    // 61440
static_assert(kE2M1.overflow_from_f32() == 0x40E00000);    // 7 (saturated to 6 either way)

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

// c ? x : y, written so the compiler keeps it branch-free.
constexpr std::uint32_t pick(bool c, std::uint32_t x, std::uint32_t y) {
  std::uint32_t mask = 0u - static_cast<std::uint32_t>(c);
  return (x & mask) | (y & ~mask);
}

// float32 -> format, round to nearest even. Branch-free (selects only): the
// same cost for every input, nothing to mispredict on mixed data.
template <const MiniFloat& F>
std::uint32_t encode(float x) {
  constexpr int shift = 23 - F.man_bits;  // float32 mantissa bits dropped
  // 2^(24 - bias - man_bits): a float whose ulp is the format's smallest
  // subnormal, so |x| + magic rounds |x| to a whole number of subnormals.
  constexpr float magic = std::bit_cast<float>(static_cast<std::uint32_t>(151 - F.bias - F.man_bits) << 23);
  std::uint32_t b = std::bit_cast<std::uint32_t>(x);
  std::uint32_t sign = (b >> 31) << F.sign_shift();
  std::uint32_t a = b & 0x7FFFFFFFu;
  // Normal: re-bias the exponent, round at bit `shift` (ties to even); a
  // carry out of the mantissa steps the exponent, as it should.
  std::uint32_t r = a - (static_cast<std::uint32_t>(127 - F.bias) << 23);
  std::uint32_t normal = (r + (1u << (shift - 1)) - 1 + ((r >> shift) & 1u)) >> shift;
  // Subnormal or zero: the float addition rounds to nearest even (the
  // default rounding mode); rounding up to 1 << man_bits subnormals gives the
  // smallest normal's pattern, as it should.
  std::uint32_t sub = std::bit_cast<std::uint32_t>(std::bit_cast<float>(a) + magic) - std::bit_cast<std::uint32_t>(magic);
  std::uint32_t m = pick(a < F.min_normal_f32(), sub, normal);
  m = pick(a >= F.overflow_from_f32(), F.overflow_mag(), m);  // +-inf too
  m = pick(a > 0x7F800000u, F.nan_mag, m);
  return sign | m;
}

}  // namespace

float half_to_float(std::uint16_t bits) noexcept { return decode_table<kHalf, 16>()[bits]; }
std::uint16_t float_to_half(float v) noexcept { return static_cast<std::uint16_t>(encode<kHalf>(v)); }

float bf16_to_float(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}
std::uint16_t float_to_bf16(float v) noexcept {
  // c10::detail::round_to_nearest_even: NaN becomes 0x7FC0 (sign dropped);
  // otherwise round the low 16 bits to nearest even. A carry into the
  // exponent is right, up to inf.
  std::uint32_t b = std::bit_cast<std::uint32_t>(v);
  std::uint32_t rounded = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
  return static_cast<std::uint16_t>((b & 0x7FFFFFFFu) > 0x7F800000u ? 0x7FC0u : rounded);
}

float fp8_e4m3fn_to_float(std::uint8_t bits) noexcept { return decode_table<kE4M3FN, 8>()[bits]; }
std::uint8_t float_to_fp8_e4m3fn(float v) noexcept { return static_cast<std::uint8_t>(encode<kE4M3FN>(v)); }
float fp8_e5m2_to_float(std::uint8_t bits) noexcept { return decode_table<kE5M2, 8>()[bits]; }
std::uint8_t float_to_fp8_e5m2(float v) noexcept { return static_cast<std::uint8_t>(encode<kE5M2>(v)); }
float fp4_e2m1_to_float(std::uint8_t nibble) noexcept { return decode_table<kE2M1, 4>()[nibble & 0xF]; }
std::uint8_t float_to_fp4_e2m1(float v) noexcept { return static_cast<std::uint8_t>(encode<kE2M1>(v)); }

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
  std::size_t n = static_cast<std::size_t>(t.numel());
  std::vector<float> out(n);
  float* o = out.data();
  switch (t.dtype()) {
    case DType::float32:
      if (n != 0) std::memcpy(o, t.bytes(), n * sizeof(float));
      break;
    case DType::float16: lookup(t.data<std::uint16_t>(), n, decode_table<kHalf, 16>(), o); break;
    case DType::bfloat16: {
      const std::uint16_t* s = t.data<std::uint16_t>();
      for (std::size_t i = 0; i < n; ++i) o[i] = std::bit_cast<float>(static_cast<std::uint32_t>(s[i]) << 16);
      break;
    }
    case DType::float8_e4m3fn: lookup(t.data<std::uint8_t>(), n, decode_table<kE4M3FN, 8>(), o); break;
    case DType::float8_e5m2: lookup(t.data<std::uint8_t>(), n, decode_table<kE5M2, 8>(), o); break;
    case DType::float4_e2m1: {
      const float* table = decode_table<kE2M1, 4>();
      const std::uint8_t* s = t.data<std::uint8_t>();
      for (std::size_t i = 0; i < n; ++i) o[i] = table[i % 2 == 0 ? s[i / 2] & 0xF : s[i / 2] >> 4];
      break;
    }
    case DType::int64: widen(t.data<std::int64_t>(), n, o); break;
    case DType::int32: widen(t.data<std::int32_t>(), n, o); break;
    case DType::int16: widen(t.data<std::int16_t>(), n, o); break;
    case DType::int8: widen(t.data<std::int8_t>(), n, o); break;
    case DType::bool_: {
      const std::uint8_t* s = t.data<std::uint8_t>();
      for (std::size_t i = 0; i < n; ++i) o[i] = s[i] != 0 ? 1.0f : 0.0f;
      break;
    }
  }
  return out;
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
