// A small seeded generator (splitmix64): the same (seed, stream) gives the
// same bits on every machine, so a trace's seed reproduces its inputs.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace kb {

class Rng {
 public:
  // `stream` separates independent sequences under one seed (e.g. one per input).
  Rng(std::uint64_t seed, std::string_view stream) : state_(seed ^ hash(stream)) {}
  explicit Rng(std::uint64_t state) : state_(state) {}

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [lo, hi) (hi > lo); the tiny modulo bias is irrelevant here.
  std::int64_t uniform_int(std::int64_t lo, std::int64_t hi) {
    auto span = static_cast<std::uint64_t>(hi - lo);
    return lo + static_cast<std::int64_t>(next() % span);
  }
  // Standard normal (Box-Muller).
  double normal() {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

  static std::uint64_t hash(std::string_view s) {
    std::uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
    for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
    return h;
  }

 private:
  std::uint64_t state_;
};

}  // namespace kb
