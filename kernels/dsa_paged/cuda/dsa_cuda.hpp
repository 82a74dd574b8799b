// Launchers of kb's CUDA kernels for op_type "dsa_paged" (DeepSeek sparse
// attention): the sparse MLA attention over each token's selected cache rows
// (sparse_attention.cu) and the fp8 top-k indexer (topk_indexer.cu). Plain
// host declarations (no CUDA types), so solutions and tests can call them.
// Each launches on `stream` (a cudaStream_t) and never synchronizes; a call
// that needs scratch memory takes it from the stream's workspace
// (device_state.cuh), allocated by the first call that needs that much (so not
// under stream capture). Unsupported shapes return Code::unsupported naming
// what the kernel handles.
#pragma once

#include <cstdint>

#include "common/result.hpp"
#include "schema/dtype.hpp"

namespace kb::kernels {

// Sparse MLA attention (absorbed form), per token t and head h over the rows
// r = sparse_indices[t, j] != -1 of the caches flattened to
// [num_pages * page_size, dim]:
//   logit  = (q_nope[t, h] . ckv[r] + q_pe[t, h] . kpe[r]) * sm_scale
//   output = softmax(logits) . ckv                 (rounded to the output dtype)
//   lse    = logsumexp(logits) / ln 2              (base 2; optional)
// A token without valid rows gets output 0 and lse -inf. An index outside
// [0, rows) other than -1 weighs nothing (the CPU oracle reports it).
// q_nope [T, H, Dc], q_pe [T, H, Dp], ckv [rows, Dc], kpe [rows, Dp] in one
// 16-bit dtype (bfloat16 or float16); output [T, H, Dc] that dtype or
// float32; lse [T, H] float32 or null; sparse_indices [T, K] int32.
// Dc and Dp even, Dc <= 2048; tensors contiguous, 4-byte aligned. Tensor
// cores (mma.sync) for bf16 in and out with Dc in {128, 256, 512, 1024},
// Dp % 32 == 0 and 16-byte aligned inputs; fp32 FMA for the rest.
struct DsaSparseAttentionArgs {
  const void* q_nope = nullptr;
  const void* q_pe = nullptr;
  const void* ckv = nullptr;
  const void* kpe = nullptr;
  const std::int32_t* sparse_indices = nullptr;
  void* output = nullptr;
  float* lse = nullptr;
  DType dtype = DType::bfloat16;      // q_nope, q_pe, ckv, kpe
  DType out_dtype = DType::bfloat16;  // output
  std::int64_t tokens = 0, heads = 0, dim_ckv = 0, dim_kpe = 0, rows = 0, topk = 0;
  float sm_scale = 0;
};
// Why these shapes and dtypes cannot run (empty when they can); launch_
// refuses the same.
const char* dsa_sparse_attention_unsupported(DType dtype, DType out_dtype, std::int64_t dim_ckv, std::int64_t dim_kpe);
// Whether a call of these dtypes and dims runs on tensor cores (given
// 16-byte aligned inputs); the fp32 kernel otherwise.
bool dsa_sparse_attention_uses_mma(DType dtype, DType out_dtype, std::int64_t dim_ckv, std::int64_t dim_kpe);
// `splits_used` (optional) receives how many CTAs share one token's rows.
Status launch_dsa_sparse_attention(const DsaSparseAttentionArgs& a, void* stream, int* splits_used = nullptr);

// fp8 top-k indexer. For sequence b, token j < seq_lens[b] lives in page
// block_table[b, j / page_size], slot j % page_size; its key is the page's
// fp8 row times its float32 scale (deep_gemm's packing: per page
// page_size * D fp8 bytes, then page_size float32 scales); its score is
//   sum_h weights[b, h] * relu(q[b, h] . key)
// topk_indices[b] gets the global indices (page * page_size + slot) of the
// min(topk, seq_len) highest scores, in token order (ties at the boundary:
// the earlier tokens), then -1.
// q [B, H, D] float8_e4m3fn, cache [num_pages, page_size, 1, D + 4] bytes,
// weights [B, H] float32, seq_lens [B] int32, block_table [B, max_pages]
// int32, topk_indices [B, topk] int32 or int64.
struct DsaTopkIndexerArgs {
  const void* q = nullptr;
  const void* cache = nullptr;
  const float* weights = nullptr;
  const std::int32_t* seq_lens = nullptr;
  const std::int32_t* block_table = nullptr;
  void* topk_indices = nullptr;
  DType out_dtype = DType::int32;
  std::int64_t batch = 0, heads = 0, dim = 0, page_size = 0, num_pages = 0, max_pages = 0, topk = 0;
};
const char* dsa_topk_indexer_unsupported(std::int64_t heads, std::int64_t dim, DType out_dtype);
Status launch_dsa_topk_indexer(const DsaTopkIndexerArgs& a, void* stream);

}  // namespace kb::kernels
