// Shared CPU attention for the four attention op_types (gqa_paged,
// gqa_ragged, mla_paged, mla_ragged): reading and checking the index
// tensors, gathering each sequence's keys, and the softmax itself.
//
// Semantics (those of the definitions' PyTorch references):
//   - every query token t of a sequence and query head h reads kv head
//     h / (H_q / H_kv) (repeat_interleave);
//   - logits = (q . k) * sm_scale, with q . k summed over every key part
//     (MLA: q_nope . ckv + q_pe . kpe), sm_scale used as a float32;
//   - causal masks are aligned bottom-right: query i of a sequence with q_len
//     queries and kv_len keys sees keys 0 .. kv_len - q_len + i;
//   - lse = natural logsumexp / ln 2 (base 2); output = softmax . values;
//   - a sequence with no keys, or no queries, leaves its rows at output 0 and
//     lse -inf. A query row whose causal window holds no key (only possible
//     when q_len > kv_len) gets the same: the references disagree there (the
//     per-row loops give 0 / -inf, the vectorised ones NaN from softmax over
//     -inf), and 0 / -inf is the defined one.
// Math is fp32 inputs, fp64 accumulation, one rounding to the output dtype
// (round-to-nearest-even through store_float).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "oracle/oracle.hpp"

namespace kb::kernels::attention {

// Which paged definition family: GQA (q, k_cache, v_cache) or MLA (q_nope,
// q_pe, ckv_cache, kpe_cache; the values are ckv). Both take kv_indptr,
// kv_indices, sm_scale, and optionally qo_indptr (causal prefill; without it
// one query per sequence: decode) and kv_last_page_len (without it every
// page is full).
enum class PagedKind { gqa, mla };

std::string supports_paged(const Definition& d, PagedKind kind);
Status run_paged(const OracleCall& call, PagedKind kind);

// Ragged causal prefill: q [total_q, H_q, D_qk], k [total_kv, H_kv, D_qk],
// v [total_kv, H_kv, D_v], qo_indptr, kv_indptr, sm_scale (gqa_ragged has
// D_v == D_qk; mla_ragged has D_qk 192, D_v 128).
std::string supports_ragged(const Definition& d);
Status run_ragged(const OracleCall& call);

// ---- What the CPU and GPU oracles share: shapes and index checks ----------
// (kernels/attention/gpu_oracle.cu runs the same math on the GPU.)

// The sizes of a call, from the shapes of its tensors. Paged GQA: q [tokens,
// H_q, D], k_cache / v_cache [pages, page_size, H_kv, D / D_v]; paged MLA:
// q_nope [tokens, H_q, D], q_pe [tokens, H_q, D_pe], ckv_cache [pages,
// page_size, D], kpe_cache [pages, page_size, D_pe] (one kv head, D_v = D);
// ragged: q [tokens, H_q, D], k [kv_rows, H_kv, D], v [kv_rows, H_kv, D_v].
struct AttentionShapes {
  std::int64_t tokens = 0, q_heads = 0, kv_heads = 1, d_qk = 0, d_pe = 0, d_v = 0;
  std::int64_t num_pages = 0, page_size = 0;  // paged
  std::int64_t kv_rows = 0;                   // ragged
};
using Shape = std::vector<std::int64_t>;
Result<AttentionShapes> paged_shapes(const Definition& d, PagedKind kind, const Shape& q, const Shape* q_pe,
                                     const Shape& k_cache, const Shape& v_cache);
Result<AttentionShapes> ragged_shapes(const Definition& d, const Shape& q, const Shape& k, const Shape& v);

// The values of a rank-1 integer tensor (any integer dtype).
Result<std::vector<std::int64_t>> index_values(const Definition& d, std::string_view name, const Tensor& t);

// One sequence that is read: queries [q_begin, q_begin + q_len), and its keys
// (paged: pages kv_indices[first .. first + pages), the last holding
// last_len rows; ragged: rows [first, first + last_len) of k and v, pages 1).
// Sequences with no query or no key are left out (their rows are output 0,
// lse -inf).
struct Sequence {
  std::int64_t q_begin = 0, q_len = 0, first = 0, pages = 0, last_len = 0;
  std::int64_t keys(std::int64_t page_size) const { return (pages - 1) * page_size + last_len; }
};
// Checks qo_indptr (null: decode, one query per sequence), kv_indptr,
// kv_indices and kv_last_page_len (null: full pages) against the shapes.
Result<std::vector<Sequence>> paged_sequences(const Definition& d, const AttentionShapes& s,
                                              const std::vector<std::int64_t>* qo,
                                              const std::vector<std::int64_t>& kv_indptr,
                                              const std::vector<std::int64_t>& kv_indices,
                                              const std::vector<std::int64_t>* last_page_len);
Result<std::vector<Sequence>> ragged_sequences(const Definition& d, const AttentionShapes& s,
                                               const std::vector<std::int64_t>& qo,
                                               const std::vector<std::int64_t>& kv_indptr);

}  // namespace kb::kernels::attention
