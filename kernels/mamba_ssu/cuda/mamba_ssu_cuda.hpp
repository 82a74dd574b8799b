// kb_cuda_mamba_ssu's launcher: Mamba2's selective state update over a slot
// cache, one decode step. Plain host declarations.
#pragma once

#include <cstdint>

#include "common/result.hpp"
#include "schema/dtype.hpp"

namespace kb::kernels {

// Device pointers and sizes of one call: state and new_state [cache, H, P, N]
// (one dtype), x, dt [batch, H, P], A [H, P, N], B, C [batch, G, N], D,
// dt_bias [H, P], state_batch_indices [batch] (int32 or int64; negative:
// padding), output [batch, H, P].
struct MambaSsuArgs {
  const void* state = nullptr;
  void* new_state = nullptr;
  DType state_dt = DType::bfloat16;
  const void *x = nullptr, *dt = nullptr, *A = nullptr, *B = nullptr, *C = nullptr, *D = nullptr, *dt_bias = nullptr;
  DType x_dt = DType::bfloat16, dt_dt = DType::bfloat16, A_dt = DType::float32, B_dt = DType::bfloat16,
        C_dt = DType::bfloat16, D_dt = DType::bfloat16, dt_bias_dt = DType::bfloat16;
  const void* slots = nullptr;
  DType slots_dt = DType::int32;
  void* out = nullptr;
  DType out_dt = DType::bfloat16;
  std::int64_t batch = 0, H = 0, P = 0, N = 0, G = 0, cache = 0;
};

// Launch shape from mamba_ssu_launch_config(): grid.x over the cache's slots
// plus one (the padding rows' zero outputs), grid.y CTAs a slot, each taking
// every grid_y-th of the `chunks` chunks of `rows_cta` rows of the flattened
// [H * P] rows; 128 threads, 16 lanes a row, `vec_width` x `vecs` state
// elements a lane.
struct MambaSsuConfig {
  int vec_width = 0;  // elements a 16-byte vector holds (8 for 16-bit, 4 for fp32), 1: scalar path; 0: no kernel
  int vecs = 0;       // vectors a lane holds per row
  int rows_thread = 0;
  int rows_cta = 0;
  std::int64_t chunks = 0;
  unsigned grid_y = 0;
  std::int64_t stage_groups = 0;  // groups of B and C one CTA stages in shared memory
  std::size_t smem_bytes = 0;
};

// `cache` slots on a device of `sm_count` SMs.
MambaSsuConfig mamba_ssu_launch_config(DType state_dt, std::int64_t H, std::int64_t P, std::int64_t N, std::int64_t G,
                                       std::int64_t cache, int sm_count, bool vectorizable);

// Launches on `stream` (a cudaStream_t); allocates nothing, no synchronization.
Status launch_mamba_ssu(const MambaSsuArgs& args, void* stream);

}  // namespace kb::kernels
