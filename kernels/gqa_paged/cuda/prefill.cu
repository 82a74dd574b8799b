// Launcher of the GQA / MHA causal prefill kernel (kernels/common/prefill.cuh)
// for kb_cuda_gqa_paged_prefill, kb_cuda_gqa_ragged_prefill and
// kb_cuda_mla_ragged_prefill (qk 192 / vo 128: kernels/mla_ragged/cuda/prefill.cu).
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../../common/prefill.cuh"
#include "../../common/prefill_wgmma.cuh"
#include "prefill_cuda.hpp"

namespace kb::kernels {

// qk 192 / vo 128 instantiation (kernels/mla_ragged/cuda/prefill.cu).
cudaError_t launch_prefill_qk192_vo128(const prefill::Params& p, prefill::Mode mode, cudaStream_t stream);

namespace {

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// head_dim 128: 8 warps x 16 rows (BM 128), 64-key tiles, P in registers,
// two CTAs per SM (104 KB of shared memory each, at most 128 registers).
using Gqa128 = prefill::Config<128, 128, 1, 8, 1, 64, false>;
// Alternative for tuning on the device (KB_PREFILL_GQA_CONFIG=b): 4 warps x
// 32 rows (BM 128): each K/V fragment feeds two mma rows, half the shared
// memory reads per FLOP, twice the accumulators.
using Gqa128b = prefill::Config<128, 128, 2, 4, 1, 64, false>;

// KB_PREFILL_GQA_CONFIG: unset or "wgmma" (the default: the Hopper kernel of
// prefill_wgmma.cuh for head_dim 128), "a" or "b" (the mma.sync kernel's two
// configurations, for comparison).
const char* gqa_config() {
  static const char* c = [] {
    const char* e = std::getenv("KB_PREFILL_GQA_CONFIG");
    return e && (std::strcmp(e, "a") == 0 || std::strcmp(e, "b") == 0) ? e : "wgmma";
  }();
  return c;
}

// The fastest variants of tools/gpu/prefill_wgmma_check.cu on an H100 (2026-11-24, 32/8 heads, causal,
// benchmarks/h100-2026-11-24/prefill_wgmma_check.txt), all with 128-key tiles, three stages, the softmax
// of tile j overlapping P V of tile j-1, a producer that never waits on its own copies, and the mask only
// on diagonal tiles:
//  - rows contiguous in runs of 64 (ragged, page sizes multiple of 64): K / V by TMA and the two consumer
//    warpgroups taking turns: 507-546 TFLOP/s ragged, 478 paged ps64 (mma.sync: 258-289);
//  - other page sizes (rows gathered one by one): cp.async, no turns: 419 TFLOP/s at ps1.
using GqaWgmmaTma = prefill::WgmmaConfig<128, 3, true, true, prefill::kWgSoftmax2 | prefill::kWgTma | prefill::kWgPingPong>;
using GqaWgmmaGather = prefill::WgmmaConfig<128, 3, true, true, prefill::kWgSoftmax2>;

}  // namespace

Status launch_gqa_prefill(const GqaPrefillArgs& a, void* stream, PrefillMode mode) {
  const char* name = a.paged ? "kb_cuda_gqa_paged_prefill" : "kb_cuda_gqa_ragged_prefill";
  auto fail = [&](Code c, const std::string& why) { return make_error(c, std::string(name) + ": " + why); };
  if (a.batch < 0 || a.total_q < 0 || a.num_qo_heads < 0 || a.num_kv_heads < 1 || a.page_size < 1 || a.kv_rows < 0 ||
      a.num_kv_indices < 0)
    return fail(Code::invalid_argument, "negative or zero size");
  const bool d128 = a.head_dim_qk == 128 && a.head_dim_vo == 128;
  const bool d192 = a.head_dim_qk == 192 && a.head_dim_vo == 128;
  if (!d128 && !d192)
    return fail(Code::unsupported, "head dims qk " + std::to_string(a.head_dim_qk) + " / vo " +
                                       std::to_string(a.head_dim_vo) + " (this kernel handles 128/128 and 192/128)");
  if (a.num_qo_heads % a.num_kv_heads != 0)
    return fail(Code::unsupported, std::to_string(a.num_qo_heads) + " query heads over " +
                                       std::to_string(a.num_kv_heads) + " kv heads");
  if (a.batch == 0 || a.total_q == 0 || a.num_qo_heads == 0) return ok_status();
  // Tokens, cache rows and page-table entries are int32 on the device.
  if (a.total_q > INT_MAX / 2 || a.batch > INT_MAX / 2 || a.kv_rows > INT_MAX / a.page_size || a.num_kv_indices > INT_MAX / a.page_size)
    return fail(Code::unsupported, "batch or cache too large for int32 indexing");
  for (const void* ptr : {a.q, a.k, a.v, static_cast<const void*>(a.output)})
    if (!ptr || !aligned16(ptr)) return fail(Code::invalid_argument, "tensors must be non-null and 16-byte aligned");
  if (!a.qo_indptr || !a.kv_indptr || (a.paged && !a.kv_indices && a.num_kv_indices > 0))
    return fail(Code::invalid_argument, "null indptr or page table");

  prefill::Params p{};
  p.q = static_cast<const std::uint16_t*>(a.q);
  p.q_pe = nullptr;
  p.k = static_cast<const std::uint16_t*>(a.k);
  p.v = static_cast<const std::uint16_t*>(a.v);
  p.qo_indptr = a.qo_indptr;
  p.kv_indptr = a.kv_indptr;
  p.kv_indices = a.kv_indices;
  p.last_page_len = a.paged ? a.kv_last_page_len : nullptr;
  p.paged = a.paged;
  p.out = static_cast<std::uint16_t*>(a.output);
  p.lse = a.lse;
  p.batch = static_cast<int>(a.batch);
  p.total_q = static_cast<int>(a.total_q);
  p.num_qo_heads = static_cast<int>(a.num_qo_heads);
  p.num_kv_heads = static_cast<int>(a.num_kv_heads);
  p.group = static_cast<int>(a.num_qo_heads / a.num_kv_heads);
  p.page_size = a.paged ? static_cast<int>(a.page_size) : 1;
  p.heads_per_cta = 1;
  p.kv_limit = static_cast<int>(a.kv_rows);
  p.scale_log2 = static_cast<float>(static_cast<double>(static_cast<float>(a.sm_scale)) * 1.4426950408889634);
  const auto m = static_cast<prefill::Mode>(static_cast<int>(mode));
  auto s = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaSuccess;
  if (d192) e = launch_prefill_qk192_vo128(p, m, s);
  else if (std::strcmp(gqa_config(), "b") == 0) e = prefill::launch<Gqa128b, 1>(p, m, s);
  else if (std::strcmp(gqa_config(), "a") == 0) e = prefill::launch<Gqa128, 2>(p, m, s);
  else {
    const bool runs_of_64 = !p.paged || p.page_size % 64 == 0;
    e = runs_of_64 ? prefill::launch_wgmma_config<GqaWgmmaTma>(p, m, s)
                   : prefill::launch_wgmma_config<GqaWgmmaGather>(p, m, s);
    if (e == cudaErrorNotSupported) {  // not an sm_90 device, or outside the Hopper kernel's case
      (void)cudaGetLastError();
      e = prefill::launch<Gqa128, 2>(p, m, s);
    }
  }
  if (e != cudaSuccess)
    return fail(Code::cuda_error, std::string("launch: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
  return ok_status();
}

}  // namespace kb::kernels
