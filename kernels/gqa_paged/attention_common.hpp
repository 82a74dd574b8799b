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

}  // namespace kb::kernels::attention
