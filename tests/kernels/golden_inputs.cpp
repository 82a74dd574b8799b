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

namespace {

// u_i of kb-golden-v1 for counter i.
inline float uniform_at(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t x = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  std::uint64_t z = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * 0x1.0p-24f;
}

inline float value_at(std::uint64_t seed, std::uint64_t i, float scale) {
  float two_u = 2.0f * uniform_at(seed, i);  // exact
  float centred = two_u - 1.0f;              // exact: a multiple of 2^-23 in [-1, 1)
  return centred * scale;                    // one float32 rounding
}

std::uint64_t seed_of(std::string_view definition, std::string_view name) {
  return fnv1a64(fmt::format("{}/{}", definition, name));
}

}  // namespace

std::vector<float> uniform01(std::string_view definition, std::string_view name, std::int64_t n) {
  const std::uint64_t seed = seed_of(definition, name);
  std::vector<float> u(static_cast<std::size_t>(n < 0 ? 0 : n));
  for (std::size_t i = 0; i < u.size(); ++i) u[i] = uniform_at(seed, i);
  return u;
}

Result<Tensor> generated(std::string_view definition, std::string_view name, DType dtype,
                         const std::vector<std::int64_t>& shape, float scale) {
  if (!dtype_is_float(dtype))
    return make_error(Code::invalid_argument,
                      fmt::format("kb-golden-v1 generates float tensors only ({} is {})", name, dtype_name(dtype)));
  auto t = Tensor::allocate(dtype, shape);
  if (!t) return std::move(t).error();
  const std::uint64_t seed = seed_of(definition, name);
  const auto n = static_cast<std::uint64_t>(t->numel());
  // One pass straight into the tensor for the common dtypes (the same
  // conversions store_float uses); the rest through store_float.
  switch (dtype) {
    case DType::float32:
      for (std::uint64_t i = 0; i < n; ++i) t->data<float>()[i] = value_at(seed, i, scale);
      break;
    case DType::float16:
      for (std::uint64_t i = 0; i < n; ++i) t->data<std::uint16_t>()[i] = float_to_half(value_at(seed, i, scale));
      break;
    case DType::bfloat16:
      for (std::uint64_t i = 0; i < n; ++i) t->data<std::uint16_t>()[i] = float_to_bf16(value_at(seed, i, scale));
      break;
    default: {
      std::vector<float> v(n);
      for (std::uint64_t i = 0; i < n; ++i) v[i] = value_at(seed, i, scale);
      KB_TRY(store_float(v, *t));
    }
  }
  return std::move(*t);
}

}  // namespace kb::golden
