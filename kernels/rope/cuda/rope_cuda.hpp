// kb_cuda_rope's launcher: NeoX-style rotary embedding with a cos/sin cache
// (flashinfer.rope.apply_rope_with_cos_sin_cache), out of place. Plain host
// declarations (no CUDA types).
#pragma once

#include <cstdint>

#include "common/result.hpp"
#include "schema/dtype.hpp"

namespace kb::kernels {

// Launch shape from rope_launch_config(): blockIdx.y strides over tokens (two
// tokens, gridDim.y apart, an iteration);
// blockIdx.x * block_threads + threadIdx.x is one work item of a token: a
// (head, slot) pair, where a slot is either `vector_width` rotated pairs
// (x[i..i+V) with x[i+r/2..i+r/2+V)) or `vector_width` pass-through elements.
struct RopeConfig {
  int vector_width = 1;  // 8 (16-byte accesses) or 1 (scalar fallback)
  int block_threads = 0;
  std::int64_t items_per_token = 0;
  unsigned grid_x = 0, grid_y = 0;
};

RopeConfig rope_launch_config(std::int64_t tokens, std::int64_t qo_heads, std::int64_t kv_heads, std::int64_t head_size,
                              std::int64_t rotary_dim, bool vectorizable);

// q [tokens, qo_heads, head_size], k [tokens, kv_heads, head_size] in `dtype`
// (bfloat16 or float16); cos_sin_cache [max_seq_len, rotary_dim] float32
// (cos in the first half of a row, sin in the second); positions [tokens]
// int64 or int32 (`positions_dtype`). The first rotary_dim entries of every
// head are rotated NeoX-style, the rest copied. upcast = true: the math is
// fp32 (the reference's q.to(torch.float32)), each product and sum rounded to
// fp32 and the result rounded once to `dtype`; upcast = false: cos/sin and
// every product and sum rounded to `dtype`, as torch does in that dtype.
// A position outside [0, max_seq_len) reads nothing and turns that token's
// outputs to NaN. Launches on `stream`; allocates nothing, no synchronization.
Status launch_rope_neox(const void* q, const void* k, const float* cos_sin_cache, const void* positions,
                        DType positions_dtype, void* q_out, void* k_out, std::int64_t tokens, std::int64_t qo_heads,
                        std::int64_t kv_heads, std::int64_t head_size, std::int64_t rotary_dim,
                        std::int64_t max_seq_len, bool upcast, DType dtype, void* stream);

}  // namespace kb::kernels
