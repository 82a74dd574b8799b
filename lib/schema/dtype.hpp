// The 11 element types of FlashInfer Trace definitions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kb {

// Values pinned: they are exposed as kb_dtype in include/kb/kb.h.
enum class DType : std::uint8_t {
  float32 = 0,
  float16 = 1,
  bfloat16 = 2,
  float8_e4m3fn = 3,
  float8_e5m2 = 4,
  float4_e2m1 = 5,  // two values a byte
  int64 = 6,
  int32 = 7,
  int16 = 8,
  int8 = 9,
  bool_ = 10,
};
inline constexpr int dtype_count = 11;

// Canonical FlashInfer Trace spelling ("float8_e4m3fn", "bool").
std::string_view dtype_name(DType t) noexcept;
// Accepts the canonical names and the seed-001 alias "float8_e4m3".
std::optional<DType> dtype_from_name(std::string_view name) noexcept;
// Storage bits of one element (4 for float4_e2m1).
int dtype_bits(DType t) noexcept;
bool dtype_is_float(DType t) noexcept;
bool dtype_is_integer(DType t) noexcept;  // int8..int64 (not bool)
// Bytes needed for `elements` values, rounding float4 up to whole bytes.
std::int64_t dtype_storage_bytes(DType t, std::int64_t elements) noexcept;

}  // namespace kb
