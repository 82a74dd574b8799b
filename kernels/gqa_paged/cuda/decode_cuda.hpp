// Launchers of kb's paged-KV decode kernels (kernels/common/paged_decode.cuh):
// kb_cuda_gqa_paged_decode and kb_cuda_mla_paged_decode. Plain host
// declarations (no CUDA types), so C++ code (solutions, tests, the benchmark
// driver) can call them.
#pragma once

#include <cstdint>

#include "common/result.hpp"

namespace kb::kernels {

// GQA decode over a paged NHD cache, bf16, head_dim 128 or 256, group
// (num_qo_heads / num_kv_heads) 1..16:
//   q [batch, H_q, D], k_cache / v_cache [num_pages, page_size, H_kv, D],
//   kv_indptr [batch + 1], kv_indices [num_kv_indices] (int32),
//   kv_last_page_len [batch] (int32) or null (every page full),
//   output [batch, H_q, D] bf16, lse [batch, H_q] fp32 base 2 (or null).
// Every pointer 16-byte aligned, tensors contiguous, on the current device.
// Launches on `stream` (a cudaStream_t), never synchronizes; the first call
// that splits the keys on a stream allocates that stream's workspace
// (see paged_decode::workspace_for).
struct GqaPagedDecodeArgs {
  const void* q = nullptr;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  const std::int32_t* kv_indptr = nullptr;
  const std::int32_t* kv_indices = nullptr;
  const std::int32_t* kv_last_page_len = nullptr;
  void* output = nullptr;
  float* lse = nullptr;
  std::int64_t batch = 0, num_qo_heads = 0, num_kv_heads = 0, head_dim = 0, page_size = 0, num_pages = 0,
               num_kv_indices = 0;
  double sm_scale = 0;
};
// `splits_used` (optional) receives the number of KV splits chosen.
Status launch_gqa_paged_decode(const GqaPagedDecodeArgs& a, void* stream, int* splits_used = nullptr);

// MLA decode (absorbed): logits = (q_nope . ckv + q_pe . kpe) * sm_scale,
// output = softmax . ckv. bf16, head_dim_ckv 512, head_dim_kpe 64, any H_q:
//   q_nope [batch, H_q, 512], q_pe [batch, H_q, 64],
//   ckv_cache [num_pages, page_size, 512], kpe_cache [num_pages, page_size, 64],
//   index tensors as above, output [batch, H_q, 512] bf16, lse [batch, H_q] fp32 base 2 (or null).
struct MlaPagedDecodeArgs {
  const void* q_nope = nullptr;
  const void* q_pe = nullptr;
  const void* ckv_cache = nullptr;
  const void* kpe_cache = nullptr;
  const std::int32_t* kv_indptr = nullptr;
  const std::int32_t* kv_indices = nullptr;
  const std::int32_t* kv_last_page_len = nullptr;
  void* output = nullptr;
  float* lse = nullptr;
  std::int64_t batch = 0, num_qo_heads = 0, head_dim_ckv = 0, head_dim_kpe = 0, page_size = 0, num_pages = 0,
               num_kv_indices = 0;
  double sm_scale = 0;
};
Status launch_mla_paged_decode(const MlaPagedDecodeArgs& a, void* stream, int* splits_used = nullptr);

}  // namespace kb::kernels
