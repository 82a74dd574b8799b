// Launcher of the GQA / MHA causal prefill kernel (kernels/attention/prefill.cuh)
// for kb_cuda_gqa_paged_prefill, kb_cuda_gqa_ragged_prefill and
// kb_cuda_mla_ragged_prefill (qk 192 / vo 128: kernels/attention/prefill_qk192.cu).
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "prefill.cuh"
#include "prefill_wgmma.cuh"
#include "../common/tuning_env.hpp"
#include "launch.hpp"

namespace kb::kernels {

// qk 192 / vo 128 instantiation (kernels/attention/prefill_qk192.cu).
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
  static const char* c = env_is("KB_PREFILL_GQA_CONFIG", "a")   ? "a"
                         : env_is("KB_PREFILL_GQA_CONFIG", "b") ? "b"
                                                                 : "wgmma";
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
// The persistent form of GqaWgmmaTma (two stages: the second Q buffer takes the third stage's room).
using GqaWgmmaPersist = prefill::WgmmaConfig<128, 2, true, true,
                                             prefill::kWgSoftmax2 | prefill::kWgTma | prefill::kWgPingPong |
                                                 prefill::kWgPersistent>;

// The persistent kernel that also copies the pages it reads (page size 1, "fused page gather").
using GqaWgmmaPersistGather = prefill::WgmmaConfig<128, 2, true, true,
                                                   prefill::kWgSoftmax2 | prefill::kWgTma | prefill::kWgPingPong |
                                                       prefill::kWgPersistent | prefill::kWgFusedGather>;

// Where K / V come by TMA, the persistent kernel (kWgPersistent in
// prefill_wgmma.cuh) unless KB_PREFILL_PERSIST=0 (one CTA per unit, to
// compare). H100, 32 / 8 heads, ragged, side by side in one run
// (benchmarks/h100-2026-11-25-s7/prefill_persistent_trial.txt): batch 8 x 4096
// tokens 71 against 85 us, 8 x 8192 182 against 211, 8 x 16384 559 against
// 618; batch 1 x 4096 256 against 266, 1 x 8192 913 against 924-935; only
// 1 x 512 is slower (19.3 against 17.9: one more round trip before the first
// tile, the unit counter).
bool use_persistent() {
  static const bool on = !env_is("KB_PREFILL_PERSIST", "0");
  return on;
}

// The wgmma kernel for K / V rows in runs of 64 (ragged, gathered, page sizes multiple of 64).
// after_gather: p reads the page gather's copy, the kernel just launched on s.
cudaError_t launch_tma_kernel(const prefill::Params& p, prefill::Mode m, cudaStream_t s, bool after_gather = false) {
  if (use_persistent()) {
    const cudaError_t e = prefill::launch_wgmma_config<GqaWgmmaPersist>(p, m, s, 128, 128, after_gather);
    if (e != cudaErrorNotSupported) return e;
    (void)cudaGetLastError();
  }
  return prefill::launch_wgmma_config<GqaWgmmaTma>(p, m, s, 128, 128, after_gather);
}

// ---- Page size 1 (any page size not a multiple of 64): gather first ----
//
// At such page sizes the wgmma kernel cannot load K / V by TMA boxes (a box is
// 64 rows of one page) and gathers rows with cp.async from a producer
// warpgroup, whose instructions take the consumers' issue slots: 0.71-0.74x of
// SDPA at batch 1 x 4096-16384 tokens where TMA boxes reach 0.94-0.98x (H100,
// benchmarks/h100-2026-11-24-s6). Copying the pages the table names into
// table order first costs one pass over K and V at copy bandwidth (about 2% of
// the attention at 8192 tokens) and lets the kernel read them as ragged rows
// by TMA (and the persistent kernel). It pays on enough work: the launcher
// gathers when total_q x group >= kGatherMinTokens, or the mean query length
// x group >= kGatherMinMean, or both reach their short-sequence bounds below
// (KB_PREFILL_GATHER=0 never, =1 always), and the gathered copy fits kGatherMaxBytes. H100, 32 / 8 heads, gather against
// cp.async, both with the persistent kernel where it applies, in one run
// (benchmarks/h100-2026-11-25-s7/prefill_ps1_gather_persistent.txt):
//   gathers:  1 x 2048 93 / 108 us, 1 x 8192 953 / 1257, 8 x 4096 88 / 94,
//             8 x 8192 213 / 249, 32 x 4096 67 / 75, 32 x 8192 128 / 146;
//   does not: 1 x 1024 42 / 40, 8 x 1024 31 / 25, 8 x 2048 47 / 44,
//             32 x 1024 57 / 44, 32 x 2048 63 / 52 (a second launch and, for
//             short sequences, the TMA kernel's blocking copy of partial tiles).
// Since O leaves by TMA store (session 10, benchmarks/h100-2026-11-25-s10/
// prefill_small_ps1.md, KB_PREFILL_GATHER=1 against the rule above, one
// run): 1 x 1024 34.0 / 37.3, 8 x 1024 19.7 / 22.2, 8 x 2048 37.5 / 41.1,
// 1 x 2048 level; still slower at 32 x 1024 52.8 / 45.0 and 32 x 2048 55.7 /
// 52.4 (32 and 64 tokens a sequence): hence the short-sequence pair of bounds.
//
// At page size 1 (pages of at most 8 heads) with a mean query length of at
// least kFusedMinMeanQ, the persistent kernel copies the pages itself, its
// idle producer threads beside the attention (prefill_wgmma.cuh, "fused page
// gather"), instead of a gather kernel before it. H100, 32 / 8 heads, fused
// against the gather kernel in one run, us
// (benchmarks/h100-2026-11-25-s9/prefill_ps1_fused_gather.md):
//   8 x 4096 84.0 / 87.8 (81.2 / 81.5 in another call), 8 x 8192 204 / 210,
//   8 x 16384 607 / 622, 32 x 8192 119 / 126, 32 x 16384 277 / 298,
//   batch 1 1% faster; before the rule, 32 x 4096 (128 tokens a sequence)
//   65.9 / 62.9: one tile a unit, every unit waits for its pages, so shorter
//   sequences keep the gather kernel. The copiers beside the attention cost
//   ~6 us at 8 x 4096 even when nothing waits for them, so this does not
//   reach ragged KV's speed there (same file).
constexpr std::int64_t kFusedMinMeanQ = 256;
constexpr std::int64_t kGatherMinTokens = 16384;  // 4096 query tokens at group 4
constexpr std::int64_t kGatherMinMean = 8192;     // 2048 tokens a sequence at group 4
// ... or both of these (since the O stores went to TMA, session 10):
constexpr std::int64_t kGatherMinMeanShort = 512;     // 128 tokens a sequence at group 4
constexpr std::int64_t kGatherMinTokensShort = 4096;  // 1024 query tokens at group 4
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

// The gather inside the persistent kernel (prefill_wgmma.cuh, "fused page
// gather") where it applies, unless KB_PREFILL_FUSED_GATHER=0 (then the gather
// kernel before it).
bool fused_gather() {
  static const bool on = !env_is("KB_PREFILL_FUSED_GATHER", "0") && use_persistent();
  return on;
}

// KB_PREFILL_GATHER: unset (by the rule above), "0" never, "1" always.
int gather_setting() {
  static const int g = env_is("KB_PREFILL_GATHER", "0") ? 0 : env_is("KB_PREFILL_GATHER", "1") ? 1 : -1;
  return g;
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
  const int setting = gather_setting();
  if (setting == 0 || !p.paged || p.page_size % 64 == 0 || a.num_kv_indices == 0) return false;
  const std::int64_t mean_q = a.total_q / a.batch;
  const bool enough = a.total_q * p.group >= kGatherMinTokens || mean_q * p.group >= kGatherMinMean ||
                      (mean_q * p.group >= kGatherMinMeanShort && a.total_q * p.group >= kGatherMinTokensShort);
  if (setting < 0 && !enough) return false;
  const std::int64_t page_bytes = static_cast<std::int64_t>(p.page_size) * p.num_kv_heads * 128 * 2;
  const std::int64_t bytes = a.num_kv_indices * page_bytes;  // one of K, V
  const std::int64_t rows = a.num_kv_indices * p.page_size;
  if (2 * bytes > kGatherMaxBytes || rows > INT_MAX || page_bytes / 16 > INT_MAX) return false;
  if (prefill::prepare_wgmma_kernel<GqaWgmmaTma>() != cudaSuccess) {  // no Hopper kernel to read the copy
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
  // 4096 chunks a CTA made 128 CTAs for 4096 keys at page size 1, too few
  // to hold the 132 SMs' loads in flight.
  const int per_cta = std::max(1, kGatherThreads * kGatherUnroll / g.page_chunks);
  const std::int64_t ctas = (g.entries + per_cta - 1) / per_cta;
  if (ctas > INT_MAX) return cudaErrorInvalidConfiguration;
  gather_pages_kernel<<<static_cast<unsigned>(ctas), kGatherThreads, 0, s>>>(g.k, g.v, g.indices, g.entries,
                                                                              g.page_chunks, per_cta, g.num_pages,
                                                                              g.dk, g.dv);
  return cudaGetLastError();
}

// Page size 1 (pages of at most 8 heads), mean query length >= kFusedMinMeanQ,
// fused_gather(): plans the copy and launches the persistent kernel that makes
// it (prefill_wgmma.cuh, "fused page gather"). False where it does not apply
// or the kernel is not supported here (then the caller's other paths run);
// true once launched, *e the launch's error.
bool launch_fused_gather(const prefill::Params& p, const GqaPrefillArgs& a, prefill::Mode m, cudaStream_t s,
                         cudaError_t* e) {
  if (!fused_gather() || p.page_size != 1 || p.num_kv_heads > 8 || a.total_q / a.batch < kFusedMinMeanQ) return false;
  prefill::Params pg = p;
  PageGather g;
  if (!plan_gather(pg, a, m, s, g, /*fused=*/true)) return false;
  const cudaError_t le = prefill::launch_wgmma_config<GqaWgmmaPersistGather>(pg, m, s);
  if (le == cudaErrorNotSupported) {  // e.g. not an sm_90 device
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
    prefill::Params pg = p;
    PageGather g;
    const bool table_order_copy = !runs_of_64 && d128;  // rows not in runs of 64: a copy in table order may pay
    if (table_order_copy && launch_fused_gather(p, a, m, s, &e)) {
      // the persistent kernel copied the pages itself (or e says why it failed)
    } else if (table_order_copy && plan_gather(pg, a, m, s, g, /*fused=*/false)) {
      // Plan, gather, then the attention as the gather's programmatic
      // dependent: it starts (barriers, its first unit's Q) while the gather ends.
      if (m != prefill::Mode::run_only) e = launch_tma_kernel(pg, prefill::Mode::plan_only, s);
      if (e == cudaSuccess && m != prefill::Mode::plan_only) {
        if (cudaError_t ge = run_gather(g, s); ge != cudaSuccess)
          return fail(Code::cuda_error, std::string("page gather: ") + cudaGetErrorName(ge) + ": " + cudaGetErrorString(ge));
        e = launch_tma_kernel(pg, prefill::Mode::run_only, s, /*after_gather=*/true);
      }
    } else {
      e = runs_of_64 ? launch_tma_kernel(p, m, s) : prefill::launch_wgmma_config<GqaWgmmaGather>(p, m, s);
    }
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
