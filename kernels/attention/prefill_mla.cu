// kb_cuda_mla_paged_prefill's launcher: MLA (absorbed) causal prefill over
// paged ckv / kpe caches on the mma.sync kernel of prefill.cuh (its
// configuration: dispatch.cuh).
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>

#include "dispatch.cuh"
#include "launch.hpp"

namespace kb::kernels {
namespace {

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

Status launch_mla_paged_prefill(const MlaPagedPrefillArgs& a, void* stream, PrefillMode mode) {
  auto fail = [&](Code c, const std::string& why) {
    return make_error(c, std::string("kb_cuda_mla_paged_prefill: ") + why);
  };
  if (a.batch < 0 || a.total_q < 0 || a.num_qo_heads < 0 || a.page_size < 1 || a.num_pages < 0 ||
      a.num_kv_indices < 0)
    return fail(Code::invalid_argument, "negative or zero size");
  if (!attention::mla_supports_head_dims(a.head_dim_ckv, a.head_dim_kpe))
    return fail(Code::unsupported, "ckv " + std::to_string(a.head_dim_ckv) + " + kpe " +
                                       std::to_string(a.head_dim_kpe) + " (this kernel handles 512 + 64)");
  if (a.batch == 0 || a.total_q == 0 || a.num_qo_heads == 0) return ok_status();
  if (a.total_q > INT_MAX / 2 || a.batch > INT_MAX / 2 || a.num_pages > INT_MAX / a.page_size ||
      a.num_kv_indices > INT_MAX / a.page_size)
    return fail(Code::unsupported, "batch or cache too large for int32 indexing");
  for (const void* ptr : {a.q_nope, a.q_pe, a.ckv_cache, a.kpe_cache, static_cast<const void*>(a.output)})
    if (!ptr || !aligned16(ptr)) return fail(Code::invalid_argument, "tensors must be non-null and 16-byte aligned");
  if (!a.qo_indptr || !a.kv_indptr || (!a.kv_indices && a.num_kv_indices > 0))
    return fail(Code::invalid_argument, "null indptr or page table");

  prefill::Params p{};
  p.q = static_cast<const std::uint16_t*>(a.q_nope);
  p.q_pe = static_cast<const std::uint16_t*>(a.q_pe);
  p.k = static_cast<const std::uint16_t*>(a.ckv_cache);
  p.v = static_cast<const std::uint16_t*>(a.kpe_cache);
  p.qo_indptr = a.qo_indptr;
  p.kv_indptr = a.kv_indptr;
  p.kv_indices = a.kv_indices;
  p.paged = true;
  p.last_page_len = a.kv_last_page_len;
  p.out = static_cast<std::uint16_t*>(a.output);
  p.lse = a.lse;
  p.batch = static_cast<int>(a.batch);
  p.total_q = static_cast<int>(a.total_q);
  p.num_qo_heads = static_cast<int>(a.num_qo_heads);
  p.num_kv_heads = 1;
  p.group = static_cast<int>(a.num_qo_heads);
  p.page_size = static_cast<int>(a.page_size);
  p.heads_per_cta = static_cast<int>(a.num_qo_heads < 16 ? a.num_qo_heads : 16);
  p.kv_limit = static_cast<int>(a.num_pages);
  p.scale_log2 = static_cast<float>(static_cast<double>(static_cast<float>(a.sm_scale)) * 1.4426950408889634);
  const auto m = static_cast<prefill::Mode>(static_cast<int>(mode));
  auto s = static_cast<cudaStream_t>(stream);
  const cudaError_t e =
      attention::dispatch_mla_paged_prefill([&](auto kernel) { return decltype(kernel)::launch(p, m, s); });
  if (e != cudaSuccess)
    return fail(Code::cuda_error, std::string("launch: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
  return ok_status();
}

}  // namespace kb::kernels
