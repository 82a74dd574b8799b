// kb-golden-v1: the generator of the goldens' large float inputs, bit for bit
// as tests/goldens/make/golden_lib.py describes it (see that file's docstring):
//
//   seed  = FNV-1a 64 of the UTF-8 bytes of "DEF/NAME"
//   z_i   = splitmix64 of counter i: x = seed + (i + 1) * 0x9E3779B97F4A7C15;
//           z = (x ^ x >> 30) * 0xBF58476D1CE4E5B9; z = (z ^ z >> 27) * 0x94D049BB133111EB; z ^= z >> 31
//   u_i   = (z_i >> 40) * 2^-24                   (float32, in [0, 1))
//   v_i   = (2 * u_i - 1) * SCALE                  (float32 arithmetic)
//   value = v_i rounded to the tensor's dtype (round-to-nearest-even)
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "schema/dtype.hpp"
#include "tensor/tensor.hpp"

namespace kb::golden {

std::uint64_t fnv1a64(std::string_view text);
// u_0 .. u_{n-1} for tensor `name` of definition `definition`.
std::vector<float> uniform01(std::string_view definition, std::string_view name, std::int64_t n);
// The kb-golden-v1 tensor: shape, dtype and SCALE as the golden's metadata says.
Result<Tensor> generated(std::string_view definition, std::string_view name, DType dtype,
                         const std::vector<std::int64_t>& shape, float scale = 1.0f);

}  // namespace kb::golden
