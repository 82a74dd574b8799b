// kb_cuda_mla_paged_decode's launcher: MLA (absorbed) decode over paged
// ckv / kpe caches, bf16, ckv 512 + kpe 64, any number of query heads (16 per
// CTA). The kernel, the split planning and the merge are in decode.cuh; the
// choice between its two instantiations in dispatch.cuh.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>

#include "dispatch.cuh"
#include "launch.hpp"

namespace kb::kernels {
namespace {

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

Status cuda_status(const char* what, cudaError_t e) {
  if (e == cudaSuccess) return ok_status();
  return make_error(Code::cuda_error, std::string("kb_cuda_mla_paged_decode: ") + what + ": " + cudaGetErrorName(e) + ": " +
                                          cudaGetErrorString(e));
}

}  // namespace

Status launch_mla_paged_decode(const MlaPagedDecodeArgs& a, void* stream, int* splits_used) {
  namespace pd = paged_decode;
  if (splits_used) *splits_used = 0;
  if (a.batch < 0 || a.num_qo_heads < 0 || a.page_size < 1 || a.num_pages < 0 || a.num_kv_indices < 0)
    return make_error(Code::invalid_argument, "kb_cuda_mla_paged_decode: negative or zero size");
  if (!attention::mla_supports_head_dims(a.head_dim_ckv, a.head_dim_kpe))
    return make_error(Code::unsupported, "kb_cuda_mla_paged_decode: ckv " + std::to_string(a.head_dim_ckv) +
                                             " + kpe " + std::to_string(a.head_dim_kpe) +
                                             " (this kernel handles 512 + 64)");
  if (a.batch == 0 || a.num_qo_heads == 0) return ok_status();
  if (a.num_pages > INT_MAX / a.page_size || a.num_kv_indices > INT_MAX / a.page_size ||
      a.batch * a.num_qo_heads > INT_MAX)
    return make_error(Code::unsupported, "kb_cuda_mla_paged_decode: cache or batch too large for int32 indexing");
  for (const void* ptr : {a.q_nope, a.q_pe, a.ckv_cache, a.kpe_cache, static_cast<const void*>(a.output)})
    if (!ptr || !aligned16(ptr))
      return make_error(Code::invalid_argument, "kb_cuda_mla_paged_decode: tensors must be non-null and 16-byte aligned");
  if (!a.kv_indptr || (!a.kv_indices && a.num_kv_indices > 0))
    return make_error(Code::invalid_argument, "kb_cuda_mla_paged_decode: null page table");

  pd::Params p;
  p.q = static_cast<const std::uint16_t*>(a.q_nope);
  p.q_pe = static_cast<const std::uint16_t*>(a.q_pe);
  p.k = static_cast<const std::uint16_t*>(a.ckv_cache);
  p.v = static_cast<const std::uint16_t*>(a.kpe_cache);
  p.indptr = a.kv_indptr;
  p.indices = a.kv_indices;
  p.last_page_len = a.kv_last_page_len;
  p.out = static_cast<std::uint16_t*>(a.output);
  p.lse = a.lse;
  p.batch = static_cast<int>(a.batch);
  p.num_qo_heads = static_cast<int>(a.num_qo_heads);
  p.num_kv_heads = 1;
  p.page_size = static_cast<int>(a.page_size);
  p.rows_per_cta = pd::kRows;
  p.head_blocks = static_cast<int>((a.num_qo_heads + pd::kRows - 1) / pd::kRows);
  p.num_pages = a.num_pages;
  p.scale_log2 = static_cast<float>(static_cast<double>(static_cast<float>(a.sm_scale)) * 1.4426950408889634);
  const std::int64_t total_keys = a.num_kv_indices * a.page_size;
  auto s = static_cast<cudaStream_t>(stream);
  const cudaError_t e =
      attention::dispatch_mla_decode(a.page_size, total_keys, a.batch * p.head_blocks, [&](auto kernel) {
        return decltype(kernel)::launch(p, total_keys, s, splits_used);
      });
  return cuda_status("launch", e);
}

}  // namespace kb::kernels
