#include "schema/dtype.hpp"

namespace kb {

namespace {
struct DTypeRow {
  DType type;
  std::string_view name;
  int bits;
};
constexpr DTypeRow kRows[dtype_count] = {
    {DType::float32, "float32", 32},       {DType::float16, "float16", 16},
    {DType::bfloat16, "bfloat16", 16},     {DType::float8_e4m3fn, "float8_e4m3fn", 8},
    {DType::float8_e5m2, "float8_e5m2", 8}, {DType::float4_e2m1, "float4_e2m1", 4},
    {DType::int64, "int64", 64},           {DType::int32, "int32", 32},
    {DType::int16, "int16", 16},           {DType::int8, "int8", 8},
    {DType::bool_, "bool", 8},
};
}  // namespace

std::string_view dtype_name(DType t) noexcept {
  auto i = static_cast<unsigned>(t);
  return i < dtype_count ? kRows[i].name : std::string_view("?");
}

std::optional<DType> dtype_from_name(std::string_view name) noexcept {
  for (const auto& row : kRows)
    if (row.name == name) return row.type;
  if (name == "float8_e4m3") return DType::float8_e4m3fn;  // seed-001 spelling
  return std::nullopt;
}

int dtype_bits(DType t) noexcept {
  auto i = static_cast<unsigned>(t);
  return i < dtype_count ? kRows[i].bits : 0;
}

bool dtype_is_float(DType t) noexcept {
  switch (t) {
    case DType::float32: case DType::float16: case DType::bfloat16:
    case DType::float8_e4m3fn: case DType::float8_e5m2: case DType::float4_e2m1:
      return true;
    default:
      return false;
  }
}

bool dtype_is_integer(DType t) noexcept {
  return t == DType::int64 || t == DType::int32 || t == DType::int16 || t == DType::int8;
}

std::int64_t dtype_storage_bytes(DType t, std::int64_t elements) noexcept {
  if (t == DType::float4_e2m1) return (elements + 1) / 2;
  return elements * (dtype_bits(t) / 8);
}

}  // namespace kb
