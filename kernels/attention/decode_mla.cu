// kb_cuda_mla_paged_decode: MLA (absorbed) decode over paged ckv/kpe caches,
// bf16, ckv 512 + kpe 64, any number of query heads (16 per CTA). The kernel,
// the split planning and the merge are in kernels/attention/decode.cuh.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "decode.cuh"
#include "../common/tuning_env.hpp"
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
  if (a.head_dim_ckv != 512 || a.head_dim_kpe != 64)
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
  const std::int64_t avg_keys = a.num_kv_indices * a.page_size / a.batch;
  // Page sizes that are multiples of 64, and small caches: 64-key tiles, 8
  // warps, one CTA an SM (172 KB of shared memory). Other page sizes (page
  // size 1: every key row a random 1152-byte gather) on at least
  // kTile32MinKeys keys: 32-key tiles, 4 warps, 95 KB, two CTAs an SM, so one
  // CTA's wait for its scattered rows runs beside the other's work. A pure
  // gather of this layout reaches 96-97% of copy bandwidth on an H100
  // (benchmarks/h100-2026-11-25-s7/mla_gather_ceiling.txt); the 64-key kernel
  // 77-83% at page size 1, and issuing two tiles ahead did not change that
  // (mla_decode_refill_trial.md). Page size 1, H100, side by side
  // (mla_decode_tile32.txt): batch 16 x 32768 keys 244 against 261 us, 64 x
  // 8192 247 against 260, 256 x 32768 3475 against 3873; but below ~256K keys
  // 32-key tiles lose (1 x 512 28 against 23 us: 4 warps cannot use the fused
  // merge, a second launch). KB_MLA_DECODE_TILE=32 or 64 forces one.
  //
  // Pages of 64 keys on a device whose SMs need two streaming CTAs for their
  // share of bandwidth (stream_ctas.hpp: an H200, not an H100), with at least
  // kTile32MinWork rows of work: 32-key tiles too, splits counted over two CTAs
  // an SM (decode.cuh). H200, 16 heads, page size 64, against 64-key
  // tiles (benchmarks/h200-2026-11-25-s9/h200_mla_tile32_splits.md): batch
  // 16 x 32768 keys 182 against 199 us, 64 x 8192 184 / 198, 64 x 32768 662 /
  // 733, 256 x 32768 2576 / 2864; batch 4 x 32768 74 against 61 (kept on 64).
  constexpr std::int64_t kTile32MinKeys = 262144;
  constexpr std::int64_t kTile32MinWork = 16;
  static const int forced_tile = env_is("KB_MLA_DECODE_TILE", "32") ? 32 : env_is("KB_MLA_DECODE_TILE", "64") ? 64 : 0;
  const std::int64_t total_keys = a.num_kv_indices * a.page_size;
  bool wide = false;  // the device's SMs need two CTAs to stream their share
  if (a.page_size % 64 == 0 && forced_tile == 0 && a.batch * p.head_blocks >= kTile32MinWork) {
    int device = 0;
    if (cudaGetDevice(&device) == cudaSuccess) wide = pd::device_stream_ctas_per_sm(device) >= 2;
    else (void)cudaGetLastError();
  }
  const bool tile32 = forced_tile == 32 ||
                      (forced_tile != 64 && ((a.page_size % 64 != 0 && total_keys >= kTile32MinKeys) || wide));
  auto s = static_cast<cudaStream_t>(stream);
  // At least 256 keys (288 KB of cache) per split either way: a split's partial
  // output (16 x 512 fp32 = 32 KB) must stay small against what it reads.
  cudaError_t e = tile32 ? pd::launch<true, 576, 512, 2, 4, 32>(p, avg_keys, 8, s, splits_used)
                         : pd::launch<true, 576, 512, 2, 8>(p, avg_keys, 4, s, splits_used);
  return cuda_status("launch", e);
}

}  // namespace kb::kernels
