// Element conversions between kb's dtypes and float32, bit-exact with
// PyTorch: round-to-nearest-even; float16/bfloat16/float8_e5m2 overflow to
// inf; float8_e4m3fn (no inf) overflows to NaN as torch's .to() does (|x| >
// 464, and +-inf; 464 itself ties to 448); float4_e2m1 (no inf/NaN; torch has
// no conversion) saturates to +-6. NaN stays NaN, except in float4_e2m1, which
// has none: there it saturates like inf, to +-6 by its sign. Checked against
// tables made without kb (tests/tensor/tables/make_tables.py).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/result.hpp"
#include "tensor/tensor.hpp"

namespace kb {

float half_to_float(std::uint16_t bits) noexcept;
std::uint16_t float_to_half(float v) noexcept;
float bf16_to_float(std::uint16_t bits) noexcept;
std::uint16_t float_to_bf16(float v) noexcept;
float fp8_e4m3fn_to_float(std::uint8_t bits) noexcept;
std::uint8_t float_to_fp8_e4m3fn(float v) noexcept;
float fp8_e5m2_to_float(std::uint8_t bits) noexcept;
std::uint8_t float_to_fp8_e5m2(float v) noexcept;
float fp4_e2m1_to_float(std::uint8_t nibble) noexcept;  // low 4 bits
std::uint8_t float_to_fp4_e2m1(float v) noexcept;       // returns a nibble

// Every element as float32 (integers and bools converted by value, rounded
// once to nearest even).
std::vector<float> to_float(const Tensor& t);
// Elements [first, first + out.size()) as float32, the same values (first
// even for float4_e2m1). The range must lie inside t.
void to_float_range(const Tensor& t, std::int64_t first, std::span<float> out);
// Element i as float32 / double.
double element_as_double(const Tensor& t, std::int64_t i);
// Stores float32 values into t's dtype (t.numel() values). Integers are
// rounded toward zero after clamping to the type's range (like torch's .to()
// for in-range values; out of range, torch's result is undefined) and NaN
// stores 0; bool stores v != 0 (NaN is true).
Status store_float(std::span<const float> values, Tensor& t);
// Stores values into elements [first, first + values.size()) of t (first
// even for float4_e2m1).
Status store_float_range(std::span<const float> values, Tensor& t, std::int64_t first);

}  // namespace kb
