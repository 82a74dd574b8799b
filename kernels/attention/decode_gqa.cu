// kb_cuda_gqa_paged_decode's launcher: GQA decode over a paged NHD KV cache,
// bf16, head_dim one of kGqaHeadDims (launch.hpp), group 1..16, any page
// size. The kernel, the split planning and the merge are in decode.cuh; the
// instantiation per head_dim in dispatch.cuh.
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
  return make_error(Code::cuda_error, std::string("kb_cuda_gqa_paged_decode: ") + what + ": " + cudaGetErrorName(e) + ": " +
                                          cudaGetErrorString(e));
}

}  // namespace

Status launch_gqa_paged_decode(const GqaPagedDecodeArgs& a, void* stream, int* splits_used) {
  namespace pd = paged_decode;
  if (splits_used) *splits_used = 0;
  if (a.batch < 0 || a.num_qo_heads < 0 || a.num_kv_heads < 1 || a.page_size < 1 || a.num_pages < 0 ||
      a.num_kv_indices < 0)
    return make_error(Code::invalid_argument, "kb_cuda_gqa_paged_decode: negative or zero size");
  if (!gqa_decode_supports_head_dim(a.head_dim))
    return make_error(Code::unsupported, "kb_cuda_gqa_paged_decode: head_dim " + std::to_string(a.head_dim) +
                                             " (this kernel handles " + kGqaHeadDimsText + ")");
  static_assert(kGqaDecodeMaxGroup == pd::kRows, "a KV head's query heads are the rows of one mma tile");
  if (a.num_qo_heads % a.num_kv_heads != 0)
    return make_error(Code::unsupported, "kb_cuda_gqa_paged_decode: " + std::to_string(a.num_qo_heads) +
                                             " query heads are not a multiple of " + std::to_string(a.num_kv_heads) +
                                             " kv heads");
  if (a.num_qo_heads / a.num_kv_heads > kGqaDecodeMaxGroup)
    return make_error(Code::unsupported, "kb_cuda_gqa_paged_decode: " + std::to_string(a.num_qo_heads) +
                                             " query heads over " + std::to_string(a.num_kv_heads) + " kv heads: group " +
                                             std::to_string(a.num_qo_heads / a.num_kv_heads) +
                                             " (this kernel holds a kv head's query heads in the 16 rows of one "
                                             "tensor-core tile: the group must be 1..16)");
  if (a.batch == 0 || a.num_qo_heads == 0) return ok_status();
  // Token rows and page-table entries are int32 on the device.
  if (a.num_pages > INT_MAX / a.page_size || a.num_kv_indices > INT_MAX / a.page_size ||
      a.batch * a.num_qo_heads > INT_MAX)
    return make_error(Code::unsupported, "kb_cuda_gqa_paged_decode: cache or batch too large for int32 indexing");
  for (const void* ptr : {a.q, a.k_cache, a.v_cache, static_cast<const void*>(a.output)})
    if (!ptr || !aligned16(ptr))
      return make_error(Code::invalid_argument, "kb_cuda_gqa_paged_decode: tensors must be non-null and 16-byte aligned");
  if (!a.kv_indptr || (!a.kv_indices && a.num_kv_indices > 0))
    return make_error(Code::invalid_argument, "kb_cuda_gqa_paged_decode: null page table");

  pd::Params p;
  p.q = static_cast<const std::uint16_t*>(a.q);
  p.q_pe = nullptr;
  p.k = static_cast<const std::uint16_t*>(a.k_cache);
  p.v = static_cast<const std::uint16_t*>(a.v_cache);
  p.indptr = a.kv_indptr;
  p.indices = a.kv_indices;
  p.last_page_len = a.kv_last_page_len;
  p.out = static_cast<std::uint16_t*>(a.output);
  p.lse = a.lse;
  p.batch = static_cast<int>(a.batch);
  p.num_qo_heads = static_cast<int>(a.num_qo_heads);
  p.num_kv_heads = static_cast<int>(a.num_kv_heads);
  p.page_size = static_cast<int>(a.page_size);
  p.rows_per_cta = static_cast<int>(a.num_qo_heads / a.num_kv_heads);
  p.head_blocks = static_cast<int>(a.num_kv_heads);
  p.num_pages = a.num_pages;
  p.scale_log2 = static_cast<float>(static_cast<double>(static_cast<float>(a.sm_scale)) * 1.4426950408889634);
  const std::int64_t total_keys = a.num_kv_indices * a.page_size;
  auto s = static_cast<cudaStream_t>(stream);
  const cudaError_t e = attention::dispatch_gqa_decode(
      a.head_dim, [&](auto kernel) { return decltype(kernel)::launch(p, total_keys, s, splits_used); });
  return cuda_status("launch", e);
}

}  // namespace kb::kernels
