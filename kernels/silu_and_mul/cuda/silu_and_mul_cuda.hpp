// kb_cuda_silu_and_mul's launcher: out[t, j] = silu(x[t, j]) * x[t, d + j]
// over a contiguous [rows, 2d] bf16/fp16 tensor. Plain host declarations.
#pragma once

#include <cstdint>

#include "common/result.hpp"
#include "schema/dtype.hpp"

namespace kb::kernels {

// Launch shape from silu_and_mul_launch_config(): a 2-D grid-stride loop,
// blockIdx.y over rows, blockIdx.x * block_threads + threadIdx.x over the
// row's vectors of `vector_width` elements.
struct SiluAndMulConfig {
  int vector_width = 1;  // 8 (16-byte accesses) or 1 (scalar fallback)
  int block_threads = 0;
  unsigned grid_x = 0, grid_y = 0;
  int rows_per_thread = 1;  // rows a thread takes at once (vector_width 8 only)
};

SiluAndMulConfig silu_and_mul_launch_config(std::int64_t rows, std::int64_t d, bool vectorizable);

// out [rows, d] = silu(x[:, :d]) * x[:, d:] with x [rows, 2d]: fp32 math,
// gate * sigmoid(gate) * up, rounded once to `dtype` (bfloat16 or float16).
// Launches on `stream` (a cudaStream_t); allocates nothing, no synchronization.
Status launch_silu_and_mul(const void* x, void* out, std::int64_t rows, std::int64_t d, DType dtype, void* stream);

}  // namespace kb::kernels
