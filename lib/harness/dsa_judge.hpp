// Judging DSA's top-k indexer by what it selects, not by index order
// (FlashInfer-Bench's rule for dsa_topk_indexer definitions): a top-k kernel
// may return its picks in any order, and may pick either of two tokens whose
// scores tie at the boundary.
//
// For each row b of topk_indices [batch, topk] (negative values are padding):
//  1. validity: every index must be a token of sequence b (its page,
//     index / page_size, appears in block_table[b] at a slot s with
//     s * page_size + index % page_size < seq_lens[b]; the first such slot
//     counts) and no index may appear twice. Otherwise the output is wrong.
//  2. scores: the indexer score of each index (sum over heads of
//     relu(q[b, h] . key) * weights[b, h], the key dequantized from the packed
//     fp8 cache; -inf for padding) is computed for the reference's picks and
//     for the solution's, each row sorted descending, and the two sorted
//     lists compared with the element rule of compare() (-inf against -inf
//     matches, against a finite score it does not), over atol / rtol /
//     required_matched_ratio.
// So the solution passes when it selected as many tokens as the reference
// and their scores are the top scores, whatever the order and whichever tied
// token it chose.
#pragma once

#include <cstddef>
#include <span>

#include "harness/judge.hpp"
#include "oracle/oracle.hpp"
#include "schema/model.hpp"

namespace kb {

// op_type dsa_paged with the output topk_indices and the inputs
// q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table.
bool judged_by_topk_scores(const Definition& d);

// The rule above; inputs in definition order (tensors).
Comparison compare_topk_indices(const Definition& d, std::span<const Arg> inputs, const Tensor& got,
                                const Tensor& expected, const Tolerance& tol);

// The judge of output `output`: compare_topk_indices() for the indexer's
// topk_indices, compare() for everything else.
Comparison judge_output(const Definition& d, std::span<const Arg> inputs, std::size_t output, const Tensor& got,
                        const Tensor& expected, const Tolerance& tol);

}  // namespace kb
