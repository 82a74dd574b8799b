// kb_cuda_moe's launcher (moe.cu): routing, the two grouped expert GEMMs and the combine of one
// MoE call (kernels/moe/form.hpp) on one stream. Plain host declarations; moe_solution.cpp reads
// the definition and the tensors into a MoeLaunch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/result.hpp"

namespace kb::kernels {

// Element types of the tensors the kernels read or write.
enum class MoeDType : int { f32 = 0, bf16 = 1, f16 = 2, e4m3 = 3, e5m2 = 4 };
// Routing of kernels/moe/form.hpp, same order.
enum class MoeRouting : int { deepseek = 0, renormalize = 1, sigmoid_top_k = 2, packed = 3 };

struct MoeLaunch {
  std::int64_t tokens = 0, hidden = 0, inter = 0;
  std::int64_t routed_experts = 0, local_experts = 0, local_offset = 0, top_k = 0;
  MoeRouting routing = MoeRouting::renormalize;
  std::int64_t n_group = 1, topk_group = 1;
  bool clamp_weight_sum = false;
  double scaling_factor = 1.0;
  bool weight_on_input = false;
  // fp8 block scales: BLOCK (a multiple of 32); 0 without block scales.
  std::int64_t block = 0;
  // GEMM1 on fp8 tensor cores (hidden_states and gemm1_weights e4m3, block scales, H % 32 == 0).
  bool fp8_gemm1 = false;
  // The device is an sm_90 (Hopper's wgmma): GEMM1 of the 128 x 128 block-scale forms runs on it.
  bool hopper = false;
  // bfloat16 parts the fp32 intermediate is split into for GEMM2 (2: 16 significant bits, 3: 24).
  int inter_parts = 3;
  // SMs of the device (0: unknown, K is never split). The K split of the expert GEMMs, and so
  // moe_workspace_bytes, depend on it.
  int sm_count = 0;

  const void* logits = nullptr;
  MoeDType logits_dtype = MoeDType::f32;
  const void* bias = nullptr;
  MoeDType bias_dtype = MoeDType::f32;
  const std::int32_t* topk_ids = nullptr;
  const void* x = nullptr;  // hidden_states [T, H]
  MoeDType x_dtype = MoeDType::f32;
  const void* x_scale = nullptr;  // hidden_states_scale [H / BLOCK, T]
  MoeDType x_scale_dtype = MoeDType::f32;
  const void* w13 = nullptr;  // [E_local, 2I, H]
  MoeDType w13_dtype = MoeDType::f32;
  const void* w13_scale = nullptr;  // [E_local, 2I / BLOCK, H / BLOCK]
  MoeDType w13_scale_dtype = MoeDType::f32;
  const void* w2 = nullptr;  // [E_local, H, I]
  MoeDType w2_dtype = MoeDType::f32;
  const void* w2_scale = nullptr;  // [E_local, H / BLOCK, I / BLOCK]
  MoeDType w2_scale_dtype = MoeDType::f32;
  // Per-expert scalars [E_local] (null: 1).
  const void* up_scale = nullptr;
  const void* gate_scale = nullptr;
  const void* out_scale = nullptr;
  MoeDType up_scale_dtype = MoeDType::f32, gate_scale_dtype = MoeDType::f32, out_scale_dtype = MoeDType::f32;

  void* out = nullptr;  // [T, H]
  MoeDType out_dtype = MoeDType::bf16;

  void* workspace = nullptr;  // moe_workspace_bytes(*this) bytes, 256-byte aligned
  void* stream = nullptr;     // cudaStream_t
};

// Scratch one call needs: routing lists and the tile table sized by tokens x top_k, the fp32 intermediate
// [tokens x top_k, I], the fp32 expert outputs [tokens x top_k, H] and, where a GEMM splits K
// (few rows routed for sm_count SMs), its double partial sums [splits, tokens x top_k, weight rows].
std::size_t moe_workspace_bytes(const MoeLaunch& m);

// Shared memory the routing kernel needs per token (one warp each); more than 48 KiB is refused.
std::size_t moe_routing_smem_per_token(const MoeLaunch& m);

// The shape rule of the expert GEMMs' path: true where `pairs` (tokens x top_k) routed evenly over
// `routed_experts`, at most one expert a row, put at most 4 rows on each chosen one of this rank's
// `local_experts`. Those calls run the row-streaming kernels (each chosen expert's weights streamed
// in work items of a 4-row tile x a block of weight rows, dotted on the CUDA cores; the tiles of
// one block run side by side and share its reads through L2) when every weight row is 16-byte
// aligned; the others the tensor-core kernels. Both compute any routing.
bool moe_few_rows(std::int64_t pairs, std::int64_t local_experts, std::int64_t routed_experts);

// True where GEMM1 of `m` runs on Hopper's fp8 wgmma (m.hopper, fp8_gemm1 with 128-wide blocks, H a
// multiple of 128, I of 64, not the row-streaming path, K not split); reads only m's shape fields.
bool moe_gemm1_on_wgmma(const MoeLaunch& m);

// Launches the whole call on m.stream: allocates nothing, does not synchronize.
Status launch_moe(const MoeLaunch& m);

}  // namespace kb::kernels
