// kb_cuda_rmsnorm's launcher: RMSNorm and fused add + RMSNorm over rows of a
// contiguous [rows, hidden] bf16/fp16 tensor, one pass over global memory.
// Plain host declarations (no CUDA types), so C++ code can call it.
#pragma once

#include <cstdint>

#include "common/result.hpp"
#include "schema/dtype.hpp"

namespace kb::kernels {

// How one launch is shaped, from rmsnorm_launch_config().
struct RmsnormConfig {
  enum class Path {
    warp,   // `threads_per_row` (<= 32) lanes of one warp per row, row in registers
    block,  // one block per row, row in registers
    loop,   // one block per row, two passes (second read hits L2); `vector_width` 8 or 1
  };
  Path path = Path::loop;
  int vector_width = 1;      // elements per access: 8 (16 bytes) or 1 (scalar fallback)
  int vecs_per_thread = 0;   // warp/block paths: 16-byte vectors each thread keeps in registers
  int threads_per_row = 0;
  int block_threads = 0;
  std::int64_t grid = 0;     // blocks
};

// Up to this many rows, rows of 129..1024 16-byte vectors get one wide block
// each (one vector per thread; rmsnorm.cu says why).
inline constexpr std::int64_t kRmsnormWideRows = 64;

// The launch shape for `rows` rows of `hidden` elements; `vectorizable` is
// false when 16-byte accesses are impossible (hidden % 8 != 0 or a pointer
// not 16-byte aligned).
RmsnormConfig rmsnorm_launch_config(std::int64_t hidden, std::int64_t rows, bool vectorizable);

// output[r, :] = (x * inv_rms) * weight, x = hidden_states[r, :] (+ residual[r, :]),
// inv_rms = 1 / sqrt(mean(x^2) + eps); fp32 math, rounded once to `dtype`.
// `residual` may be null (plain RMSNorm). Every tensor is `dtype`
// (bfloat16 or float16), contiguous, on the current device. Launches on
// `stream` (a cudaStream_t); allocates nothing, does not synchronize.
Status launch_rmsnorm(const void* hidden_states, const void* residual, const void* weight, void* output,
                      std::int64_t rows, std::int64_t hidden, double eps, DType dtype, void* stream);

}  // namespace kb::kernels
