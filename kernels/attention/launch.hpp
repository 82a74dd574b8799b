// Launchers of kb's attention kernels: paged decode (decode.cuh;
// kb_cuda_gqa_paged_decode, kb_cuda_mla_paged_decode) and causal prefill
// (prefill.cuh, prefill_wgmma.cuh; kb_cuda_gqa_paged_prefill,
// kb_cuda_gqa_ragged_prefill, kb_cuda_mla_ragged_prefill through
// launch_gqa_prefill, kb_cuda_mla_paged_prefill through
// launch_mla_paged_prefill). Plain host declarations (no CUDA types), so C++
// code (solutions, tests, the benchmark driver) can call them. Each returns a
// status: unsupported shapes say which ones the kernel handles.
#pragma once

#include <cstdint>

#include "common/result.hpp"

namespace kb::kernels {

// The head dims kb's GQA kernels handle, in decode, paged prefill and ragged
// prefill alike (qk == vo), plus qk 192 / vo 128 in prefill (mla_ragged).
// dispatch.cuh instantiates one kernel per entry and derives its tiles from
// the head dim; the solutions' supports() and the launchers' argument checks
// read these, so a definition is refused where no kernel exists for it.
inline constexpr int kGqaHeadDims[] = {64, 96, 128, 192, 256};
inline constexpr const char* kGqaHeadDimsText = "64, 96, 128, 192 and 256";
inline constexpr bool gqa_head_dim_supported(std::int64_t head_dim) {
  for (int d : kGqaHeadDims)
    if (head_dim == d) return true;
  return false;
}
// Decode holds a KV head's query heads in the 16 rows of one mma tile
// (paged_decode::kRows): the group H_q / H_kv is 1 .. 16. Prefill takes one
// query head a CTA and has no bound on the group.
inline constexpr std::int64_t kGqaDecodeMaxGroup = 16;
inline constexpr bool gqa_decode_supports_head_dim(std::int64_t head_dim) { return gqa_head_dim_supported(head_dim); }
inline constexpr bool gqa_prefill_is_qk192(std::int64_t head_dim_qk, std::int64_t head_dim_vo) {
  return head_dim_qk == 192 && head_dim_vo == 128;
}
inline constexpr bool gqa_prefill_supports_head_dims(std::int64_t head_dim_qk, std::int64_t head_dim_vo) {
  return (head_dim_qk == head_dim_vo && gqa_head_dim_supported(head_dim_qk)) ||
         gqa_prefill_is_qk192(head_dim_qk, head_dim_vo);
}

// GQA decode over a paged NHD cache, bf16, head_dim one of kGqaHeadDims,
// group (num_qo_heads / num_kv_heads) 1..16, any page size:
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

// What one prefill call does. The plan (work list in a per-stream device workspace)
// depends on the batch layout (qo_indptr, kv_indptr, kv_last_page_len) and
// the shapes, not on page ids or data: a caller replaying one batch layout on
// one stream may plan once (plan_only) and then launch run_only;
// kb's solutions use plan_and_run (two kernels, nothing on the host).
// GQA at page sizes that are not a multiple of 64, with enough query tokens,
// also copies the pages the table names into table order before the
// attention (one more kernel in the run): the plan reserves that per-stream
// buffer (2 x num_kv_indices x page_size x H_kv x 256 bytes, at most 1 GiB,
// kept until exit; where it cannot be had, e.g. under stream capture, the
// call runs the kernel whose producer gathers the rows itself).
enum class PrefillMode { plan_and_run, plan_only, run_only };

// Causal prefill with bottom-right aligned masks, bf16, fp32 lse in base 2.
//   q [total_q, H_q, head_dim_qk], output [total_q, H_q, head_dim_vo] bf16,
//   lse [total_q, H_q] fp32 (or null), qo_indptr / kv_indptr [batch + 1] int32.
// Paged (`paged`): k / v [num_pages, page_size, H_kv, dim],
//   kv_indptr in pages, kv_indices page ids, kv_last_page_len [batch] or null.
// Ragged: k [kv_rows, H_kv, head_dim_qk], v [kv_rows, H_kv,
//   head_dim_vo], kv_indptr in rows.
// Supported dims: qk == vo one of kGqaHeadDims (GQA, group H_q / H_kv any)
// and qk 192 / vo 128 (mla_ragged). Every pointer 16-byte aligned, contiguous, on the
// current device; launches on `stream`, never synchronizes.
struct GqaPrefillArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const std::int32_t* qo_indptr = nullptr;
  const std::int32_t* kv_indptr = nullptr;
  const std::int32_t* kv_indices = nullptr;  // paged only
  const std::int32_t* kv_last_page_len = nullptr;
  void* output = nullptr;
  float* lse = nullptr;
  std::int64_t batch = 0, total_q = 0, num_qo_heads = 0, num_kv_heads = 0, head_dim_qk = 0, head_dim_vo = 0;
  bool paged = false;
  std::int64_t page_size = 1;       // paged only
  std::int64_t num_kv_indices = 0;  // paged only
  std::int64_t kv_rows = 0;         // paged: number of pages; ragged: rows of k / v
  double sm_scale = 0;
};
Status launch_gqa_prefill(const GqaPrefillArgs& a, void* stream, PrefillMode mode = PrefillMode::plan_and_run);

// MLA (absorbed) causal prefill over paged ckv / kpe caches: logits =
// (q_nope . ckv + q_pe . kpe) * sm_scale, output = softmax . ckv, ckv 512 +
// kpe 64, any H_q (16 heads per CTA):
//   q_nope [total_q, H_q, 512], q_pe [total_q, H_q, 64],
//   ckv_cache [num_pages, page_size, 512], kpe_cache [num_pages, page_size, 64],
//   output [total_q, H_q, 512] bf16, lse [total_q, H_q] fp32 (or null).
struct MlaPagedPrefillArgs {
  const void* q_nope = nullptr;
  const void* q_pe = nullptr;
  const void* ckv_cache = nullptr;
  const void* kpe_cache = nullptr;
  const std::int32_t* qo_indptr = nullptr;
  const std::int32_t* kv_indptr = nullptr;
  const std::int32_t* kv_indices = nullptr;
  const std::int32_t* kv_last_page_len = nullptr;
  void* output = nullptr;
  float* lse = nullptr;
  std::int64_t batch = 0, total_q = 0, num_qo_heads = 0, head_dim_ckv = 0, head_dim_kpe = 0, page_size = 1,
               num_pages = 0, num_kv_indices = 0;
  double sm_scale = 0;
};
Status launch_mla_paged_prefill(const MlaPagedPrefillArgs& a, void* stream,
                                PrefillMode mode = PrefillMode::plan_and_run);

}  // namespace kb::kernels
