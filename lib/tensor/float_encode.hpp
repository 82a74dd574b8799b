// float32 -> the narrow float formats (float16, bfloat16, float8_e4m3fn,
// float8_e5m2, float4_e2m1), round to nearest even, as bit patterns. One
// definition for host C++ and for CUDA device code (nvcc compiles the same
// functions for both), so a value kb encodes on the host and on a GPU has the
// same bits. convert.hpp documents the rules (bit-exact with PyTorch) and
// tests/tensor proves them against tables made without kb.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KB_HOST_DEVICE __host__ __device__
#else
#define KB_HOST_DEVICE
#endif

namespace kb::encode {

KB_HOST_DEVICE inline std::uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
#endif
}

KB_HOST_DEVICE inline float bits_float(std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float x;
  std::memcpy(&x, &b, 4);
  return x;
#endif
}

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
inline constexpr MiniFloat kHalf{5, 10, 15, MiniFloat::Special::ieee, MiniFloat::Overflow::to_inf, 0x7E00};
inline constexpr MiniFloat kE4M3FN{4, 3, 7, MiniFloat::Special::fn, MiniFloat::Overflow::to_nan, 0x7F};
inline constexpr MiniFloat kE5M2{5, 2, 15, MiniFloat::Special::ieee, MiniFloat::Overflow::to_inf, 0x7F};
inline constexpr MiniFloat kE2M1{2, 1, 1, MiniFloat::Special::none, MiniFloat::Overflow::saturate, 0x7};

static_assert(kHalf.overflow_from_f32() == 0x477FF000);    // 65520
static_assert(kE4M3FN.overflow_from_f32() == 0x43E80001);  // just above 464
static_assert(kE5M2.overflow_from_f32() == 0x47700000);    // 61440
static_assert(kE2M1.overflow_from_f32() == 0x40E00000);    // 7 (saturated to 6 either way)

// c ? x : y, written so the compiler keeps it branch-free.
KB_HOST_DEVICE constexpr std::uint32_t pick(bool c, std::uint32_t x, std::uint32_t y) {
  std::uint32_t mask = 0u - static_cast<std::uint32_t>(c);
  return (x & mask) | (y & ~mask);
}

// float32 -> format, round to nearest even. Branch-free (selects only): the
// same cost for every input, nothing to mispredict on mixed data. The
// format's constants are taken as local constants first, so device code reads
// no host object.
template <const MiniFloat& F>
KB_HOST_DEVICE inline std::uint32_t encode(float x) {
  constexpr int shift = 23 - F.man_bits;  // float32 mantissa bits dropped
  constexpr int sign_shift = F.sign_shift();
  constexpr std::uint32_t rebias = static_cast<std::uint32_t>(127 - F.bias) << 23;
  constexpr std::uint32_t min_normal = F.min_normal_f32();
  constexpr std::uint32_t overflow_from = F.overflow_from_f32();
  constexpr std::uint32_t overflow_mag = F.overflow_mag();
  constexpr std::uint32_t nan_mag = F.nan_mag;
  // 2^(24 - bias - man_bits): a float whose ulp is the format's smallest
  // subnormal, so |x| + magic rounds |x| to a whole number of subnormals.
  constexpr std::uint32_t magic_bits = static_cast<std::uint32_t>(151 - F.bias - F.man_bits) << 23;
  const float magic = bits_float(magic_bits);
  std::uint32_t b = float_bits(x);
  std::uint32_t sign = (b >> 31) << sign_shift;
  std::uint32_t a = b & 0x7FFFFFFFu;
  // Normal: re-bias the exponent, round at bit `shift` (ties to even); a
  // carry out of the mantissa steps the exponent, as it should.
  std::uint32_t r = a - rebias;
  std::uint32_t normal = (r + (1u << (shift - 1)) - 1 + ((r >> shift) & 1u)) >> shift;
  // Subnormal or zero: the float addition rounds to nearest even (the
  // default rounding mode; device code adds with __fadd_rn, which nvcc never
  // merges into a multiply-add); rounding up to 1 << man_bits subnormals gives the
  // smallest normal's pattern, as it should.
#if defined(__CUDA_ARCH__)
  const float sum = __fadd_rn(bits_float(a), magic);
#else
  const float sum = bits_float(a) + magic;
#endif
  std::uint32_t sub = float_bits(sum) - magic_bits;
  std::uint32_t m = pick(a < min_normal, sub, normal);
  m = pick(a >= overflow_from, overflow_mag, m);  // +-inf too
  m = pick(a > 0x7F800000u, nan_mag, m);
  return sign | m;
}

KB_HOST_DEVICE inline std::uint16_t to_half(float v) { return static_cast<std::uint16_t>(encode<kHalf>(v)); }
KB_HOST_DEVICE inline std::uint8_t to_fp8_e4m3fn(float v) { return static_cast<std::uint8_t>(encode<kE4M3FN>(v)); }
KB_HOST_DEVICE inline std::uint8_t to_fp8_e5m2(float v) { return static_cast<std::uint8_t>(encode<kE5M2>(v)); }
KB_HOST_DEVICE inline std::uint8_t to_fp4_e2m1(float v) { return static_cast<std::uint8_t>(encode<kE2M1>(v)); }

// c10::detail::round_to_nearest_even: NaN becomes 0x7FC0 (sign dropped);
// otherwise round the low 16 bits to nearest even. A carry into the exponent
// is right, up to inf.
KB_HOST_DEVICE inline std::uint16_t to_bf16(float v) {
  std::uint32_t b = float_bits(v);
  std::uint32_t rounded = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
  return static_cast<std::uint16_t>((b & 0x7FFFFFFFu) > 0x7F800000u ? 0x7FC0u : rounded);
}

}  // namespace kb::encode
