// The factories' arguments, one definition for the CPU oracles (factory.cpp)
// and the CUDA plans (cuda/factory_cuda.cpp): sizes and strides, and
// bernoulli_.float's p and the seed of its draws (the splitmix64 stream, Rng,
// seeded by p's bits, so a call is repeatable and the two agree element for
// element).
#pragma once

#include <fmt/format.h>

#include <bit>
#include <cstdint>

#include "../common/args.hpp"

namespace kb::backendbench::aten {

// A list of non-negative sizes (or strides) at argument `pos`.
inline std::vector<std::int64_t> size_arg(const Call& c, std::size_t pos, std::string_view name) {
  auto v = int_list_arg(c, pos, name);
  if (!v) fail(fmt::format("{} must be a list of ints", name));
  for (std::int64_t d : *v)
    if (d < 0) fail(fmt::format("{} {} has a negative dim", name, shape_text(*v)));
  return *v;
}

// p of bernoulli_.float(self, p=0.5, generator=None), checked.
inline double bernoulli_p(const Call& c) {
  const double p = number_arg(c, 1, "p", 0.5);
  if (!(p >= 0 && p <= 1)) fail(fmt::format("p must be in [0, 1], got {}", p));
  if (has_arg(c, 2, "generator")) fail("a generator argument is not supported");
  return p;
}

inline std::uint64_t bernoulli_seed(double p) { return std::bit_cast<std::uint64_t>(p) ^ 0xB5297A4D3F84D5B5ull; }

}  // namespace kb::backendbench::aten
