// The tensors of a paged attention call, bound by name and checked the way kb's four paged solutions
// (kb_cuda_{gqa,mla}_paged_{decode,prefill}) all need:
//   - every input but sm_scale is a tensor (kv_last_page_len and lse only where the definition has them);
//   - the query tensors are [rows, heads, dim] with the same rows and heads, "output" has the first one's
//     shape and "lse" is [rows, heads];
//   - the cache tensors share their leading [pages, page_size] dims;
//   - the index tensors are 1-D: kv_indptr [batch + 1], where batch is rows for decode and qo_indptr's size
//     minus one for prefill; kv_last_page_len [batch], or for prefill also [batch + 1] (FlashInfer-Bench's
//     ps64 prefill definitions size it by len_indptr; their reference reads the first batch entries);
//   - bf16 values and output, int32 indices, fp32 lse.
// Each solution adds what is its own (how the query dims meet the cache's; `fits` below) and fills its
// launcher's arguments.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "solution_args.hpp"

namespace kb::kernels::attention_args {

struct PagedCall {
  std::vector<const cuda::DeviceTensor*> q;      // the query tensors, in the order named
  std::vector<const cuda::DeviceTensor*> cache;  // the cache tensors, in the order named
  const cuda::DeviceTensor* qo_indptr = nullptr;  // prefill only
  const cuda::DeviceTensor* kv_indptr = nullptr;
  const cuda::DeviceTensor* kv_indices = nullptr;
  const cuda::DeviceTensor* kv_last_page_len = nullptr;  // absent: every last page is full
  const cuda::DeviceTensor* output = nullptr;
  const cuda::DeviceTensor* lse = nullptr;  // absent: not written
  std::int64_t rows = 0;   // query rows: sequences (decode) or tokens (prefill)
  std::int64_t heads = 0;  // query heads
  std::int64_t batch = 0;  // sequences
  std::int64_t pages = 0, page_size = 0;
  double sm_scale = 0;

  static const std::int32_t* ints(const cuda::DeviceTensor* t) { return t ? t->as<const std::int32_t>() : nullptr; }
};

// Binds and checks a paged call (see above): `cache_rank` is the rank of every cache tensor, `fits` the
// solution's own shape rule (nullptr: none). Prefill is told by the definition's qo_indptr.
inline Result<PagedCall> bind_paged_call(const CudaCall& c, const char* solution, std::initializer_list<const char*> q_names,
                                         std::initializer_list<const char*> cache_names, std::size_t cache_rank,
                                         bool (*fits)(const PagedCall&) = nullptr) {
  auto invalid = [&](const std::string& what) {
    return make_error(Code::invalid_argument, fmt::format("{}: {}", solution, what));
  };
  const Definition& d = c.definition;
  const bool prefill = d.find_input("qo_indptr") != nullptr;
  PagedCall p;
  for (const char* n : q_names) p.q.push_back(input_tensor(c, n));
  for (const char* n : cache_names) p.cache.push_back(input_tensor(c, n));
  p.qo_indptr = prefill ? input_tensor(c, "qo_indptr") : nullptr;
  p.kv_indptr = input_tensor(c, "kv_indptr");
  p.kv_indices = input_tensor(c, "kv_indices");
  p.kv_last_page_len = input_tensor(c, "kv_last_page_len");
  bool all = p.kv_indptr && p.kv_indices && (!prefill || p.qo_indptr) &&
             (!input_index(d, "kv_last_page_len") || p.kv_last_page_len);
  for (const auto* t : p.q) all = all && t;
  for (const auto* t : p.cache) all = all && t;
  if (!all) return invalid("every input but sm_scale must be a tensor");
  auto scale = sm_scale(c, solution);
  if (!scale) return scale.error();
  p.sm_scale = *scale;
  p.output = output_tensor(c, "output");
  p.lse = output_tensor(c, "lse");

  bool ranks = p.kv_indptr->shape.size() == 1 && p.kv_indices->shape.size() == 1 &&
               (!p.qo_indptr || p.qo_indptr->shape.size() == 1) &&
               (!p.kv_last_page_len || p.kv_last_page_len->shape.size() == 1);
  for (const auto* t : p.q) ranks = ranks && t->shape.size() == 3;
  for (const auto* t : p.cache) ranks = ranks && t->shape.size() == cache_rank;
  if (!ranks) return invalid("tensor ranks differ from the definition's");

  const auto& q0 = p.q.front()->shape;
  p.rows = q0[0];
  p.heads = q0[1];
  p.batch = prefill ? p.qo_indptr->shape[0] - 1 : p.rows;
  p.pages = p.cache.front()->shape[0];
  p.page_size = p.cache.front()->shape[1];
  bool shapes = p.batch >= 0 && p.kv_indptr->shape[0] == p.batch + 1 && p.output->shape == q0 &&
                (!p.lse || shape_is(p.lse->shape, {p.rows, p.heads}));
  for (const auto* t : p.q) shapes = shapes && t->shape[0] == p.rows && t->shape[1] == p.heads;
  for (const auto* t : p.cache) shapes = shapes && t->shape[0] == p.pages && t->shape[1] == p.page_size;
  if (p.kv_last_page_len) {
    const std::int64_t n = p.kv_last_page_len->shape[0];
    shapes = shapes && (n == p.batch || (prefill && n == p.batch + 1));
  }
  if (!shapes || (fits && !fits(p))) {
    std::string listed;
    auto add = [&](const char* name, const cuda::DeviceTensor* t) {
      listed += fmt::format("{}{} [{}]", listed.empty() ? "" : ", ", name, fmt::join(t->shape, ", "));
    };
    std::size_t k = 0;
    for (const char* n : q_names) add(n, p.q[k++]);
    k = 0;
    for (const char* n : cache_names) add(n, p.cache[k++]);
    if (p.qo_indptr) add("qo_indptr", p.qo_indptr);
    add("kv_indptr", p.kv_indptr);
    return invalid(fmt::format("shapes disagree ({})", listed));
  }

  bool dtypes = p.output->dtype == DType::bfloat16 && p.kv_indptr->dtype == DType::int32 &&
                p.kv_indices->dtype == DType::int32 && (!p.qo_indptr || p.qo_indptr->dtype == DType::int32) &&
                (!p.kv_last_page_len || p.kv_last_page_len->dtype == DType::int32) &&
                (!p.lse || p.lse->dtype == DType::float32);
  for (const auto* t : p.q) dtypes = dtypes && t->dtype == DType::bfloat16;
  for (const auto* t : p.cache) dtypes = dtypes && t->dtype == DType::bfloat16;
  if (!dtypes) return invalid("tensor dtypes differ from the definition's");
  return p;
}

// The fields every paged launcher's arguments share, set from a bound call: the index tensors, output, lse,
// batch, query heads, page size, page count (num_pages; kv_rows where the launcher also serves ragged caches),
// kv_indices' length and sm_scale; a prefill launcher's (it has qo_indptr) also qo_indptr and total_q. Each
// solution sets its query and cache pointers and head dims itself.
template <class Args>
void set_paged_fields(const PagedCall& p, Args& a) {
  a.kv_indptr = PagedCall::ints(p.kv_indptr);
  a.kv_indices = PagedCall::ints(p.kv_indices);
  a.kv_last_page_len = PagedCall::ints(p.kv_last_page_len);
  a.output = p.output->data;
  a.lse = p.lse ? p.lse->as<float>() : nullptr;
  a.batch = p.batch;
  a.num_qo_heads = p.heads;
  a.page_size = p.page_size;
  a.num_kv_indices = p.kv_indices->shape[0];
  a.sm_scale = p.sm_scale;
  if constexpr (requires { a.qo_indptr; }) {
    a.qo_indptr = PagedCall::ints(p.qo_indptr);
    a.total_q = p.rows;
  }
  if constexpr (requires { a.num_pages; })
    a.num_pages = p.pages;
  else
    a.kv_rows = p.pages;
}

}  // namespace kb::kernels::attention_args
