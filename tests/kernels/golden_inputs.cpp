#include "golden_inputs.hpp"

#include <fmt/format.h>

#include <string>

#include "tensor/convert.hpp"

namespace kb::golden {

std::uint64_t fnv1a64(std::string_view text) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001B3ull;
  }
  return h;
}

std::vector<float> uniform01(std::string_view definition, std::string_view name, std::int64_t n) {
  std::string key = fmt::format("{}/{}", definition, name);
  const std::uint64_t seed = fnv1a64(key);
  std::vector<float> u(static_cast<std::size_t>(n < 0 ? 0 : n));
  for (std::size_t i = 0; i < u.size(); ++i) {
    std::uint64_t x = seed + (static_cast<std::uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ull;
    std::uint64_t z = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    u[i] = static_cast<float>(z >> 40) * 0x1.0p-24f;
  }
  return u;
}

Result<Tensor> generated(std::string_view definition, std::string_view name, DType dtype,
                         const std::vector<std::int64_t>& shape, float scale) {
  if (!dtype_is_float(dtype))
    return make_error(Code::invalid_argument,
                      fmt::format("kb-golden-v1 generates float tensors only ({} is {})", name, dtype_name(dtype)));
  auto t = Tensor::allocate(dtype, shape);
  if (!t) return std::move(t).error();
  std::vector<float> v = uniform01(definition, name, t->numel());
  for (float& x : v) {
    float two_u = 2.0f * x;       // exact
    float centred = two_u - 1.0f;  // exact: a multiple of 2^-23 in [-1, 1)
    x = centred * scale;           // one float32 rounding
  }
  KB_TRY(store_float(v, *t));
  return std::move(*t);
}

}  // namespace kb::golden
