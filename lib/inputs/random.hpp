// kb's seeded random values: one definition for host C++ and CUDA device code
// (nvcc compiles these functions for both), so a tensor generated on a GPU
// has the bytes the host generator gives it.
//
// Counter-based: draw k of a stream is splitmix64's output for state
// key + k * 0x9E3779B97F4A7C15 (k from 1), a function of (key, k) alone. A
// random tensor's key is seed ^ FNV-1a(input name) (stream_key); its element
// i depends only on (key, i), never on the tensor's size or on how many
// threads or GPU blocks fill it:
//   floating dtypes  N(0, 1) by Box-Muller from draws 2i+1 and 2i+2, rounded
//                    to float32, then to the dtype (float8 and float4 formats
//                    clamped to [-2, 2] first, as FlashInfer-Bench does)
//   int8             -128 + draw(i+1) % 256
//   int16/32/64      -1024 + draw(i+1) % 2048
//   bool             draw(i+1) & 1
// Box-Muller's logarithm and cosine are computed here from additions,
// multiplications, divisions and square roots alone, each correctly rounded
// and never fused into a multiply-add (device code uses the _rn intrinsics,
// which nvcc never contracts; host code keeps each product in a register
// before it is added), so host and device agree to the bit where libm and
// CUDA's math library would differ in the last place.
//
// Rng (host only) walks one stream sequentially: the index structures are
// built from it (StructureBuilder), with the same normal().
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "schema/dtype.hpp"
#include "tensor/float_encode.hpp"

namespace kb::random {

inline constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ull;

KB_HOST_DEVICE inline std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Draw k (k >= 1) of the stream with key `key`.
KB_HOST_DEVICE inline std::uint64_t draw(std::uint64_t key, std::uint64_t k) { return mix(key + k * kGamma); }

// The stream of input `name` under `seed` (FNV-1a of the name).
inline std::uint64_t stream_key(std::uint64_t seed, std::string_view name) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001B3ull;
  return seed ^ h;
}

// Uniform in [0, 1) from a draw's top 53 bits (exact).
KB_HOST_DEVICE inline double uniform(std::uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

// ---- correctly rounded, never fused double arithmetic ------------------------

#if !defined(__CUDA_ARCH__) && (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define KB_RANDOM_OPAQUE(r) __asm__("" : "+x"(r))
#elif !defined(__CUDA_ARCH__) && (defined(__GNUC__) || defined(__clang__)) && defined(__aarch64__)
#define KB_RANDOM_OPAQUE(r) __asm__("" : "+w"(r))
#elif !defined(__CUDA_ARCH__) && defined(__FP_FAST_FMA)
#define KB_RANDOM_OPAQUE(r) \
  do {                      \
    volatile double v_ = r; \
    r = v_;                 \
  } while (0)
#else
#define KB_RANDOM_OPAQUE(r) ((void)0)
#endif

KB_HOST_DEVICE inline double dmul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  double r = a * b;
  KB_RANDOM_OPAQUE(r);  // the compiler cannot see a product to fuse into the next addition
  return r;
#endif
}
KB_HOST_DEVICE inline double dadd(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
KB_HOST_DEVICE inline double dsub(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
KB_HOST_DEVICE inline double ddiv(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}
KB_HOST_DEVICE inline double dsqrt(double a) {
#if defined(__CUDA_ARCH__)
  return __dsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

KB_HOST_DEVICE inline std::uint64_t double_bits(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint64_t>(__double_as_longlong(x));
#else
  std::uint64_t b;
  std::memcpy(&b, &x, 8);
  return b;
#endif
}
KB_HOST_DEVICE inline double bits_double(std::uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(b));
#else
  double x;
  std::memcpy(&x, &b, 8);
  return x;
#endif
}

// Natural logarithm of a positive normal double: x = m 2^e with m in
// [dsqrt(1/2), dsqrt(2)), log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172,
// by its series to s^21 (the rest is below 1e-18 of the sum).
KB_HOST_DEVICE inline double log_positive(double x) {
  const std::uint64_t b = double_bits(x);
  int e = static_cast<int>((b >> 52) & 0x7FF) - 1023;
  double m = bits_double((b & 0xFFFFFFFFFFFFFull) | (1023ull << 52));  // [1, 2)
  if (m > 0x1.6a09e667f3bcdp+0) {  // dsqrt(2)
    m = dmul(m, 0.5);                // exact
    e += 1;
  }
  const double s = ddiv(dsub(m, 1.0), dadd(m, 1.0));  // m - 1 is exact (Sterbenz)
  const double z = dmul(s, s);
  // 1/21, 1/19, ..., 1/3, 1
  constexpr double c[] = {0x1.8618618618618p-5, 0x1.af286bca1af28p-5, 0x1.e1e1e1e1e1e1ep-5, 0x1.1111111111111p-4,
                          0x1.3b13b13b13b14p-4, 0x1.745d1745d1746p-4, 0x1.c71c71c71c71cp-4, 0x1.2492492492492p-3,
                          0x1.999999999999ap-3, 0x1.5555555555555p-2, 0x1.0000000000000p+0};
  double p = c[0];
  for (int k = 1; k < 11; ++k) p = dadd(dmul(p, z), c[k]);
  const double log_m = dmul(dmul(2.0, s), p);
  return dadd(dmul(static_cast<double>(e), 0x1.62e42fefa39efp-1), log_m);  // e ln 2 + log m
}

// cos(2 pi u) for u in [0, 1): the quadrant from 4u (exact), the angle in
// the quadrant folded to [0, pi/4], then Taylor series of sin and cos there
// to the 17th and 16th power (the rest is below 1e-17).
KB_HOST_DEVICE inline double cos_turns(double u) {
  const double t = dmul(u, 4.0);  // exact
  const int q = static_cast<int>(t);
  const double f = dsub(t, static_cast<double>(q));  // exact, in [0, 1)
  const bool upper = f > 0.5;
  const double g = upper ? dsub(1.0, f) : f;  // exact, in [0, 0.5]
  const double phi = dmul(g, 0x1.921fb54442d18p+0);  // g pi/2 in [0, pi/4]
  const double p2 = dmul(phi, phi);
  // (-1)^k / (2k)! and (-1)^k / (2k+1)!, k = 8 .. 0
  constexpr double cc[] = {0x1.ae7f3e733b81fp-45, -0x1.93974a8c07c9dp-37, 0x1.1eed8eff8d898p-29,
                           -0x1.27e4fb7789f5cp-22, 0x1.a01a01a01a01ap-16, -0x1.6c16c16c16c17p-10,
                           0x1.5555555555555p-5,  -0x1.0000000000000p-1,  0x1.0000000000000p+0};
  constexpr double sc[] = {0x1.952c77030ad4ap-49, -0x1.ae7f3e733b81fp-41, 0x1.6124613a86d09p-33,
                           -0x1.ae64567f544e4p-26, 0x1.71de3a556c734p-19, -0x1.a01a01a01a01ap-13,
                           0x1.1111111111111p-7,  -0x1.5555555555555p-3,  0x1.0000000000000p+0};
  double c = cc[0], s = sc[0];
  for (int k = 1; k < 9; ++k) {
    c = dadd(dmul(c, p2), cc[k]);
    s = dadd(dmul(s, p2), sc[k]);
  }
  s = dmul(s, phi);
  // Over the quadrant's angle a = f pi/2: cos a and sin a.
  const double cos_a = upper ? s : c, sin_a = upper ? c : s;
  switch (q) {
    case 0: return cos_a;
    case 1: return -sin_a;
    case 2: return -cos_a;
    default: return sin_a;
  }
}

// N(0, 1) from two draws (Box-Muller, cosine branch).
KB_HOST_DEVICE inline double normal(std::uint64_t draw1, std::uint64_t draw2) {
  double u1 = uniform(draw1);
  const double u2 = uniform(draw2);
  if (u1 < 1e-300) u1 = 1e-300;
  return dmul(dsqrt(dmul(-2.0, log_positive(u1))), cos_turns(u2));
}

KB_HOST_DEVICE inline float to_float(double x) {
#if defined(__CUDA_ARCH__)
  return __double2float_rn(x);
#else
  return static_cast<float>(x);
#endif
}

// ---- elements of a random tensor ---------------------------------------------

// Element i of a random floating tensor as float32: N(0, 1), clamped to
// [-2, 2] for the formats whose range would saturate.
KB_HOST_DEVICE inline float normal_element(std::uint64_t key, std::uint64_t i, bool clamp) {
  double x = normal(draw(key, 2 * i + 1), draw(key, 2 * i + 2));
  if (clamp) x = x < -2.0 ? -2.0 : (x > 2.0 ? 2.0 : x);
  return to_float(x);
}

// Element i of a random integer tensor: lo + draw % (hi - lo), hi > lo.
KB_HOST_DEVICE inline std::int64_t int_element(std::uint64_t key, std::uint64_t i, std::int64_t lo, std::int64_t hi) {
  return lo + static_cast<std::int64_t>(draw(key, i + 1) % static_cast<std::uint64_t>(hi - lo));
}

// Storage unit j of a random tensor of dtype T: element j, or for
// float4_e2m1 byte j (element 2j in its low nibble, 2j+1 in its high one).
template <DType T>
KB_HOST_DEVICE inline auto unit(std::uint64_t key, std::uint64_t j) {
  if constexpr (T == DType::float32) {
    return normal_element(key, j, false);
  } else if constexpr (T == DType::float16) {
    return encode::to_half(normal_element(key, j, false));
  } else if constexpr (T == DType::bfloat16) {
    return encode::to_bf16(normal_element(key, j, false));
  } else if constexpr (T == DType::float8_e4m3fn) {
    return encode::to_fp8_e4m3fn(normal_element(key, j, true));
  } else if constexpr (T == DType::float8_e5m2) {
    return encode::to_fp8_e5m2(normal_element(key, j, true));
  } else if constexpr (T == DType::float4_e2m1) {
    return static_cast<std::uint8_t>(encode::to_fp4_e2m1(normal_element(key, 2 * j, true)) |
                                     (encode::to_fp4_e2m1(normal_element(key, 2 * j + 1, true)) << 4));
  } else if constexpr (T == DType::int64) {
    return int_element(key, j, -1024, 1024);
  } else if constexpr (T == DType::int32) {
    return static_cast<std::int32_t>(int_element(key, j, -1024, 1024));
  } else if constexpr (T == DType::int16) {
    return static_cast<std::int16_t>(int_element(key, j, -1024, 1024));
  } else if constexpr (T == DType::int8) {
    return static_cast<std::int8_t>(int_element(key, j, -128, 128));
  } else {
    static_assert(T == DType::bool_);
    return static_cast<std::uint8_t>(draw(key, j + 1) & 1);
  }
}
template <DType T>
using unit_t = decltype(unit<T>(0, 0));

// Storage units of a tensor of `numel` elements (float4_e2m1: two a byte).
KB_HOST_DEVICE constexpr std::int64_t units(DType t, std::int64_t numel) {
  return t == DType::float4_e2m1 ? numel / 2 : numel;
}

// ---- a sequential stream (host) ----------------------------------------------

class Rng {
 public:
  Rng(std::uint64_t seed, std::string_view stream) : key_(stream_key(seed, stream)) {}

  std::uint64_t next() { return draw(key_, ++k_); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return random::uniform(next()); }
  // Uniform integer in [lo, hi) (hi > lo); the tiny modulo bias is irrelevant here.
  std::int64_t uniform_int(std::int64_t lo, std::int64_t hi) {
    auto span = static_cast<std::uint64_t>(hi - lo);
    return lo + static_cast<std::int64_t>(next() % span);
  }
  // Standard normal (the Box-Muller above, two draws).
  double normal() {
    const std::uint64_t a = next();
    return random::normal(a, next());
  }
  // The value the (i + 1)-th normal() from here would return, without moving
  // the stream; skip_normals(n) then moves it past n normal() calls. A large
  // block is so filled on several threads with the bytes sequential calls give.
  double normal_ahead(std::uint64_t i) const { return random::normal(draw(key_, k_ + 2 * i + 1), draw(key_, k_ + 2 * i + 2)); }
  void skip_normals(std::uint64_t n) { k_ += 2 * n; }

 private:
  std::uint64_t key_;
  std::uint64_t k_ = 0;
};

}  // namespace kb::random

namespace kb {

// A seeded random tensor: element i is a function of (key, i) alone, the
// same on the host (fill_random, inputs.hpp) and on a device (device_fill.hpp).
struct RandomRecipe {
  std::uint64_t key = 0;  // random::stream_key(seed, input name)
  DType dtype = DType::float32;
  std::int64_t numel = 0;
};

// The recipe of a fresh draw of a random tensor: the draw numbered `serial`
// under `salt` (one per evaluation) of the input `r` describes. Timed calls
// of an outside CUDA solution run on such draws (a serial per call, counted
// on the device), and the few whose outputs are judged are regenerated from
// (recipe, salt, serial) on the host or the device.
KB_HOST_DEVICE inline std::uint64_t fresh_key(std::uint64_t key, std::uint64_t salt, std::uint64_t serial) {
  return random::mix(key ^ random::mix(salt + serial * random::kGamma));
}
inline RandomRecipe fresh_recipe(const RandomRecipe& r, std::uint64_t salt, std::uint64_t serial) {
  return RandomRecipe{fresh_key(r.key, salt, serial), r.dtype, r.numel};
}

}  // namespace kb
