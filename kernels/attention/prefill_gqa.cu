// The launcher of the GQA / MHA causal prefill (kb_cuda_gqa_paged_prefill,
// kb_cuda_gqa_ragged_prefill) and of the unabsorbed MLA one
// (kb_cuda_mla_ragged_prefill, qk 192 / vo 128): argument checks, the page
// gather, and the order in which the kernels of dispatch.cuh are tried.
//
// Head dims the wgmma kernels do not run (qk = vo = 96): the mma.sync kernel
// with the tiles dispatch.cuh derives from the head dims, any page size, any
// group.
//
// Head dims of the wgmma kernels (qk = vo = 64, 128, 192, 256; qk 192 / vo
// 128; their tiles: dispatch.cuh's GqaWgmmaPrefillTiles):
//  * K / V rows in runs of 64: the persistent TMA kernel, else the TMA kernel
//    with one CTA a unit;
//  * other page sizes: the pages the table names copied into table order,
//    then read as ragged rows by the TMA kernels, where that pays
//    (prefill_gather_pays), qk = vo and the copy fits kGatherMaxBytes: by the
//    persistent kernel itself at page size 1 (prefill_fused_gather_applies,
//    head dim 128),
//    else by gather_pages_kernel before it; otherwise the cp.async kernel;
//  * the mma.sync kernel where no wgmma kernel runs (not an sm_90 device,
//    outside its case).
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "dispatch.cuh"
#include "launch.hpp"

namespace kb::kernels {
namespace {

using attention::GqaPrefillKernel;

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// Head dims of one launch.
struct HeadDims {
  std::int64_t qk, vo;
};

// Launches kernel k of dispatch.cuh for head dims d.
cudaError_t run_kernel(GqaPrefillKernel k, HeadDims d, const prefill::Params& p, prefill::Mode m, cudaStream_t s,
                       bool after_gather = false) {
  return attention::dispatch_gqa_prefill(
      k, d.qk, d.vo, [&](auto kernel) { return decltype(kernel)::launch(p, m, s, after_gather); });
}

// K / V rows in runs of 64 (ragged, gathered, page sizes multiple of 64): the
// persistent kernel, or one CTA a unit where it cannot run.
// after_gather: p reads the page gather's copy, the kernel just launched on s.
cudaError_t launch_tma_kernel(HeadDims d, const prefill::Params& p, prefill::Mode m, cudaStream_t s,
                              bool after_gather = false) {
  const cudaError_t e = run_kernel(GqaPrefillKernel::wgmma_tma_persistent, d, p, m, s, after_gather);
  if (e != cudaErrorNotSupported) return e;
  (void)cudaGetLastError();
  return run_kernel(GqaPrefillKernel::wgmma_tma, d, p, m, s, after_gather);
}

// The page gather's copy is at most this large (K and V together).
constexpr std::int64_t kGatherMaxBytes = std::int64_t{1} << 30;

// Copies K and V of page-table entries [0, entries) into dk / dv in table
// order: entry i's page_chunks 16-byte chunks land at chunk i * page_chunks.
// A page id outside [0, num_pages) gives zero rows, as the kernels' own
// gather reads it. CTA i copies entries [i * entries_per_cta, ...).
constexpr int kGatherThreads = 256;
constexpr int kGatherUnroll = 4;
__global__ void __launch_bounds__(kGatherThreads) gather_pages_kernel(
    const uint4* __restrict__ k, const uint4* __restrict__ v, const std::int32_t* __restrict__ indices,
    std::int64_t entries, int page_chunks, int entries_per_cta, int num_pages, uint4* __restrict__ dk,
    uint4* __restrict__ dv) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The attention kernel after it may start now (it waits for this grid's
  // writes before reading K / V: griddepcontrol.wait in prefill_wgmma.cuh).
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  const std::int64_t e0 = static_cast<std::int64_t>(blockIdx.x) * entries_per_cta;
  const int ne = static_cast<int>(entries - e0 < entries_per_cta ? entries - e0 : entries_per_cta);
  const int chunks = ne * page_chunks;  // < 2^31: the launcher sizes entries_per_cta
  const uint4 zero{0, 0, 0, 0};
  for (int c0 = static_cast<int>(threadIdx.x); c0 < chunks; c0 += kGatherThreads * kGatherUnroll) {
    // kGatherUnroll chunks a thread: every load issued before the first store.
    uint4 a[kGatherUnroll], b[kGatherUnroll];
    std::int64_t dst[kGatherUnroll];
#pragma unroll
    for (int u = 0; u < kGatherUnroll; ++u) {
      const int c = c0 + u * kGatherThreads;
      a[u] = zero;
      b[u] = zero;
      dst[u] = -1;
      if (c < chunks) {
        const int e = c / page_chunks, w = c - e * page_chunks;
        const int page = __ldg(indices + e0 + e);
        dst[u] = (e0 + e) * page_chunks + w;
        if (page >= 0 && page < num_pages) {
          const std::int64_t src = static_cast<std::int64_t>(page) * page_chunks + w;
          a[u] = __ldg(k + src);
          b[u] = __ldg(v + src);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kGatherUnroll; ++u)
      if (dst[u] >= 0) {
        dk[dst[u]] = a[u];
        dv[dst[u]] = b[u];
      }
  }
}

// One page gather's launch arguments (plan_gather fills them).
struct PageGather {
  const uint4 *k = nullptr, *v = nullptr;
  const std::int32_t* indices = nullptr;
  std::int64_t entries = 0;
  int page_chunks = 0, num_pages = 0;
  uint4 *dk = nullptr, *dv = nullptr;
};

// If p (paged, page size not a multiple of 64) should be gathered: reserves
// the stream's gather buffer (plan modes) or finds it (run_only), fills g and
// points p at the copy (p.gathered). Returns false (p unchanged) where the
// gather is not used; any CUDA error met on the way is cleared, since the
// cp.async kernel can still run the call.
bool plan_gather(prefill::Params& p, const GqaPrefillArgs& a, prefill::Mode mode, cudaStream_t s, PageGather& g,
                 bool fused) {
  if (attention::prefill_rows_in_runs_of_64(p.paged, p.page_size) || a.num_kv_indices == 0) return false;
  if (!attention::prefill_gather_pays(a.total_q, a.batch, p.group)) return false;
  // One copy kernel moves K and V pages of the same size.
  if (a.head_dim_qk != a.head_dim_vo) return false;
  const HeadDims d{a.head_dim_qk, a.head_dim_vo};
  const std::int64_t page_bytes = static_cast<std::int64_t>(p.page_size) * p.num_kv_heads * a.head_dim_qk * 2;
  const std::int64_t bytes = a.num_kv_indices * page_bytes;  // one of K, V
  const std::int64_t rows = a.num_kv_indices * p.page_size;
  if (2 * bytes > kGatherMaxBytes || rows > INT_MAX || page_bytes / 16 > INT_MAX) return false;
  // No Hopper kernel to read the copy: no copy.
  if (attention::dispatch_gqa_prefill(GqaPrefillKernel::wgmma_tma, d.qk, d.vo, [](auto kernel) {
        return decltype(kernel)::prepare();
      }) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  // Fused (the kernel copies the pages itself): a header and a count per 64-row chunk after the copy.
  const std::size_t sync_bytes = fused ? 16 + 4 * static_cast<std::size_t>((rows + 63) / 64) : 0;
  void* ws = nullptr;
  if (prefill::workspace_for(s, static_cast<std::size_t>(2 * bytes) + sync_bytes, &ws,
                             mode != prefill::Mode::run_only, prefill::kGatherSlot) != cudaSuccess) {
    (void)cudaGetLastError();  // e.g. out of memory, or capturing: the cp.async kernel needs no buffer
    return false;
  }
  g.k = static_cast<const uint4*>(a.k);
  g.v = static_cast<const uint4*>(a.v);
  g.indices = a.kv_indices;
  g.entries = a.num_kv_indices;
  g.page_chunks = static_cast<int>(page_bytes / 16);
  g.num_pages = p.kv_limit;
  g.dk = static_cast<uint4*>(ws);
  g.dv = reinterpret_cast<uint4*>(static_cast<unsigned char*>(ws) + bytes);
  p.k = reinterpret_cast<const std::uint16_t*>(g.dk);
  p.v = reinterpret_cast<const std::uint16_t*>(g.dv);
  p.kv_limit = static_cast<int>(rows);
  p.gathered = true;
  if (fused) {
    unsigned* sync = reinterpret_cast<unsigned*>(static_cast<unsigned char*>(ws) + 2 * bytes);
    // A plan zeroes the counts (launch 0); run_only launches go on from where the last one left them.
    if (mode != prefill::Mode::run_only && cudaMemsetAsync(sync, 0, sync_bytes, s) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    p.gather_k = static_cast<const std::uint16_t*>(a.k);
    p.gather_v = static_cast<const std::uint16_t*>(a.v);
    p.gather_sync = sync;
    p.gather_entries = static_cast<int>(a.num_kv_indices);
    p.gather_pages = g.num_pages;
  }
  return true;
}

cudaError_t run_gather(const PageGather& g, cudaStream_t s) {
  // About 1024 chunks (16 KB of K and of V) a CTA, kGatherUnroll a thread:
  // enough CTAs to hold every SM's loads in flight (4096 chunks a CTA would
  // give 4096 keys at page size 1 only 128 CTAs).
  const int per_cta = std::max(1, kGatherThreads * kGatherUnroll / g.page_chunks);
  const std::int64_t ctas = (g.entries + per_cta - 1) / per_cta;
  if (ctas > INT_MAX) return cudaErrorInvalidConfiguration;
  gather_pages_kernel<<<static_cast<unsigned>(ctas), kGatherThreads, 0, s>>>(g.k, g.v, g.indices, g.entries,
                                                                              g.page_chunks, per_cta, g.num_pages,
                                                                              g.dk, g.dv);
  return cudaGetLastError();
}

// Where prefill_fused_gather_applies: plans the copy and launches the
// persistent kernel that makes it (prefill_wgmma.cuh, "fused page gather").
// False where it does not apply or the kernel is not supported here (then the
// caller's other paths run); true once launched, *e the launch's error.
bool launch_fused_gather(const prefill::Params& p, const GqaPrefillArgs& a, prefill::Mode m, cudaStream_t s,
                         cudaError_t* e) {
  if (!attention::prefill_fused_gather_applies(p.page_size, p.num_kv_heads, a.total_q, a.batch)) return false;
  prefill::Params pg = p;
  PageGather g;
  if (!plan_gather(pg, a, m, s, g, /*fused=*/true)) return false;
  const cudaError_t le = run_kernel(GqaPrefillKernel::wgmma_fused_gather, {a.head_dim_qk, a.head_dim_vo}, pg, m, s);
  if (le == cudaErrorNotSupported) {  // e.g. not an sm_90 device, or head dims without this form
    (void)cudaGetLastError();
    return false;
  }
  *e = le;
  return true;
}

}  // namespace

Status launch_gqa_prefill(const GqaPrefillArgs& a, void* stream, PrefillMode mode) {
  const char* name = a.paged ? "kb_cuda_gqa_paged_prefill" : "kb_cuda_gqa_ragged_prefill";
  auto fail = [&](Code c, const std::string& why) { return make_error(c, std::string(name) + ": " + why); };
  if (a.batch < 0 || a.total_q < 0 || a.num_qo_heads < 0 || a.num_kv_heads < 1 || a.page_size < 1 || a.kv_rows < 0 ||
      a.num_kv_indices < 0)
    return fail(Code::invalid_argument, "negative or zero size");
  if (!gqa_prefill_supports_head_dims(a.head_dim_qk, a.head_dim_vo))
    return fail(Code::unsupported, "head dims qk " + std::to_string(a.head_dim_qk) + " / vo " +
                                       std::to_string(a.head_dim_vo) + " (this kernel handles qk = vo = " +
                                       kGqaHeadDimsText + ", and qk 192 / vo 128)");
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
  const HeadDims dims{a.head_dim_qk, a.head_dim_vo};
  if (!attention::gqa_prefill_uses_wgmma(dims.qk, dims.vo)) {
    e = run_kernel(GqaPrefillKernel::mma, dims, p, m, s);
  } else {
    const bool runs_of_64 = attention::prefill_rows_in_runs_of_64(p.paged, p.page_size);
    prefill::Params pg = p;
    PageGather g;
    if (!runs_of_64 && launch_fused_gather(p, a, m, s, &e)) {
      // the persistent kernel copied the pages itself (or e says why it failed)
    } else if (!runs_of_64 && plan_gather(pg, a, m, s, g, /*fused=*/false)) {
      // Plan, gather, then the attention as the gather's programmatic
      // dependent: it starts (barriers, its first unit's Q) while the gather ends.
      if (m != prefill::Mode::run_only) e = launch_tma_kernel(dims, pg, prefill::Mode::plan_only, s);
      if (e == cudaSuccess && m != prefill::Mode::plan_only) {
        if (cudaError_t ge = run_gather(g, s); ge != cudaSuccess)
          return fail(Code::cuda_error, std::string("page gather: ") + cudaGetErrorName(ge) + ": " + cudaGetErrorString(ge));
        e = launch_tma_kernel(dims, pg, prefill::Mode::run_only, s, /*after_gather=*/true);
      }
    } else {
      e = runs_of_64 ? launch_tma_kernel(dims, p, m, s) : run_kernel(GqaPrefillKernel::wgmma_cp_async, dims, p, m, s);
    }
    if (e == cudaErrorNotSupported) {  // not an sm_90 device, or outside the Hopper kernel's case
      (void)cudaGetLastError();
      e = run_kernel(GqaPrefillKernel::mma, dims, p, m, s);
    }
  }
  if (e != cudaSuccess)
    return fail(Code::cuda_error, std::string("launch: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
  return ok_status();
}

}  // namespace kb::kernels
