// Where the runtime shape of an attention call becomes the template arguments
// of the kernel that runs it: every instantiation of kb's attention kernels is
// named in this file, and so is every rule that picks one from head dims,
// group size, page size and problem size. The launchers (decode_gqa.cu,
// decode_mla.cu, prefill_gqa.cu, prefill_mla.cu) check arguments, fill
// Params and call a dispatch_* function; they name no template argument.
//
// dtype is not an axis: every kernel reads bf16 and writes bf16 (fp32
// accumulation, fp32 lse), and the solutions reject other dtypes before any
// launch. The GQA group size is not one either: a decode CTA holds the group's
// query heads in its 16 mma rows (any group 1 .. 16, rows past it zero) and a
// prefill CTA one query head (any group), so every group runs on the same code.
//
// The GQA head dims are kGqaHeadDims (launch.hpp): one instantiation each,
// whose tiles and pipeline depth follow from the head dim by the shared-memory
// rules below (GqaDecodeTiles, GqaMmaPrefillTiles), not from a table of
// shapes. Head dim 128 keeps the kernels tuned for it (the rules reproduce
// them; static_asserts hold them there).
//
// A dispatch_* function calls f(K{}) with the chosen instantiation K (a tag
// whose static launch() launches it), as FlashInfer's DISPATCH_* macros do:
// the kernels are instantiated in the translation unit that calls the
// dispatcher, and only those that dispatcher can choose.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>

#include "decode.cuh"
#include "launch.hpp"
#include "prefill.cuh"
#include "prefill_wgmma.cuh"

namespace kb::kernels::attention {

// ---- Paged decode (decode.cuh) ------------------------------------------------------

// One instantiation of paged_decode::launch, and the fewest tiles a chunk
// (one CTA's share of a sequence) keeps (chunks shorter than that cost more
// in start and merge than they add in parallelism). The chunking itself is
// decode.cuh's plan_chunks, from shapes only: total_keys is num_kv_indices x
// page_size.
template <bool MLA, int DQK, int DV, int STAGES, int WARPS, int TK, int MIN_TILES>
struct DecodeKernel {
  static cudaError_t launch(const paged_decode::Params& p, std::int64_t total_keys, cudaStream_t stream,
                            int* splits_used) {
    return paged_decode::launch<MLA, DQK, DV, STAGES, WARPS, TK>(p, total_keys, MIN_TILES, stream, splits_used);
  }
};

// Shared memory of an H100 / H200 SM (228 KB, 1 KB of it reserved per
// resident CTA): the budget of a CTA that shares its SM with one other.
constexpr std::size_t kSmemPerSm = 228 * 1024;
constexpr std::size_t kSmemPerCtaReserved = 1024;
constexpr std::size_t kSmemHalfSm = kSmemPerSm / 2 - kSmemPerCtaReserved;
constexpr std::size_t kSmemMaxPerCta = 227 * 1024;

// GQA decode at head dim D: 4 warps, 64-key tiles, and as many cp.async
// stages (at most kDecodeMaxStages) as fit two CTAs an SM, so one CTA's wait
// for its scattered rows runs beside the other's work; where not even two
// stages fit half an SM (D 256), two stages and one CTA an SM. D 128: 3
// stages, two CTAs an SM; D 256: 2 stages, one CTA.
constexpr int kDecodeWarps = 4;
constexpr int kDecodeMaxStages = 4;
// The most stages, S at most, whose GQA decode CTA at head dim D fits `budget` bytes (1 if none does).
template <int D, int S = kDecodeMaxStages>
constexpr int gqa_decode_stages_within(std::size_t budget) {
  if constexpr (S <= 1) {
    return 1;
  } else {
    return paged_decode::smem_bytes<false, D, D, S, kDecodeWarps, paged_decode::kTileKeys>() <= budget
               ? S
               : gqa_decode_stages_within<D, S - 1>(budget);
  }
}
template <int D>
struct GqaDecodeTiles {
  static constexpr int kHalfSmStages = gqa_decode_stages_within<D>(kSmemHalfSm);
  static constexpr int STAGES = kHalfSmStages >= 2 ? kHalfSmStages : 2;
  static_assert(paged_decode::smem_bytes<false, D, D, STAGES, kDecodeWarps, paged_decode::kTileKeys>() <=
                    kSmemMaxPerCta,
                "two 64-key stages must fit one CTA's shared memory");
  using Kernel = DecodeKernel<false, D, D, STAGES, kDecodeWarps, paged_decode::kTileKeys, 1>;
};
static_assert(std::is_same_v<GqaDecodeTiles<128>::Kernel, DecodeKernel<false, 128, 128, 3, 4, paged_decode::kTileKeys, 1>>,
              "head dim 128 keeps its tuned decode instantiation");
static_assert(GqaDecodeTiles<256>::STAGES == 2, "head dim 256: two stages, one CTA an SM");

// GQA decode, by head_dim (one of kGqaHeadDims); cudaErrorInvalidValue for
// others (the launcher rejects them first).
template <std::size_t I = 0, class F>
cudaError_t dispatch_gqa_decode(std::int64_t head_dim, F&& f) {
  if constexpr (I == std::size(kGqaHeadDims)) {
    return cudaErrorInvalidValue;
  } else {
    constexpr int D = kGqaHeadDims[I];
    if (head_dim == D) return f(typename GqaDecodeTiles<D>::Kernel{});
    return dispatch_gqa_decode<I + 1>(head_dim, f);
  }
}

// MLA (absorbed: logits over ckv 512 + kpe 64, values ckv), decode and prefill.
inline bool mla_supports_head_dims(std::int64_t head_dim_ckv, std::int64_t head_dim_kpe) {
  return head_dim_ckv == 512 && head_dim_kpe == 64;
}

// MLA decode runs one of two kernels:
//  * 64-key tiles, 8 warps, one CTA an SM (172 KB of shared memory): page
//    sizes that are multiples of 64, and small caches;
//  * 32-key tiles, 4 warps, two CTAs an SM (95 KB), so one CTA's wait for its
//    scattered rows runs beside the other's work:
//     - other page sizes (page size 1: every key row a random 1152-byte
//       gather, which one CTA an SM cannot keep in flight) on at least
//       kMlaTile32MinKeys keys in all; below that the 32-key kernel's merge
//       (4 warps cannot use the fused merge: a second launch) costs more than
//       the gather gains;
//     - pages of 64 keys on a device whose SMs need two streaming CTAs for
//       their share of DRAM bandwidth (stream_ctas.hpp), with at least
//       kMlaTile32MinWork (sequence, head block) items; the splits are then
//       counted over two CTAs an SM (decode.cuh).
// Either way a split keeps at least 256 keys (288 KB of cache): its partial
// output (16 x 512 fp32 = 32 KB) must stay small against what it reads.
constexpr std::int64_t kMlaTile32MinKeys = 262144;
constexpr std::int64_t kMlaTile32MinWork = 16;

inline bool mla_decode_tile32(std::int64_t page_size, std::int64_t total_keys, std::int64_t work_items) {
  bool wide = false;  // the device's SMs need two CTAs to stream their share
  if (page_size % 64 == 0 && work_items >= kMlaTile32MinWork) {
    int device = 0;
    if (cudaGetDevice(&device) == cudaSuccess) wide = paged_decode::device_stream_ctas_per_sm(device) >= 2;
    else (void)cudaGetLastError();
  }
  return (page_size % 64 != 0 && total_keys >= kMlaTile32MinKeys) || wide;
}

template <class F>
cudaError_t dispatch_mla_decode(std::int64_t page_size, std::int64_t total_keys, std::int64_t work_items, F&& f) {
  if (mla_decode_tile32(page_size, total_keys, work_items)) return f(DecodeKernel<true, 576, 512, 2, 4, 32, 8>{});
  return f(DecodeKernel<true, 576, 512, 2, 8, paged_decode::kTileKeys, 4>{});
}

// ---- Causal prefill (prefill.cuh, prefill_wgmma.cuh) --------------------------------

// An instantiation of the mma.sync kernel (prefill.cuh): Config C, at least
// MINB CTAs an SM.
template <class C, int MINB>
struct MmaPrefill {
  static cudaError_t prepare() { return prefill::prepare_kernel<C, MINB>(); }
  static cudaError_t launch(const prefill::Params& p, prefill::Mode mode, cudaStream_t stream, bool = false) {
    return prefill::launch<C, MINB>(p, mode, stream);
  }
};

// An instantiation of the Hopper kernel (prefill_wgmma.cuh). after_gather:
// launched as the programmatic dependent of the page gather just before it.
template <class C>
struct WgmmaPrefill {
  static cudaError_t prepare() { return prefill::prepare_wgmma_kernel<C>(); }
  static cudaError_t launch(const prefill::Params& p, prefill::Mode mode, cudaStream_t stream,
                            bool after_gather = false) {
    return prefill::launch_wgmma_config<C>(p, mode, stream, C::DQK, C::DV, after_gather);
  }
};

// The mma.sync prefill kernel (prefill.cuh) for head dims qk / vo: 8 warps,
// one query head a CTA, two CTAs an SM (at most 128 registers a thread):
//  * WN warps along the value columns, WN = ceil(vo / 128): a warp
//    accumulates at most 128 output columns (64 fp32 registers a thread, as
//    at head dim 128); WN > 1 passes P through shared memory. 8 / WN warps
//    along the rows, 16 rows each.
//  * 64-key tiles where Q, two K / V stages (and P) fit half an SM's shared
//    memory, else 32-key tiles.
// Head dim 128: 64-key tiles, P in registers (104 KB); qk 192 / vo 128:
// 32-key tiles (94 KB): the tuned and measured configurations, which the
// static_asserts below hold the rule to.
constexpr int kMmaPrefillWarps = 8;
template <int DQK, int DV>
struct GqaMmaPrefillTiles {
  static constexpr int WN = (DV + 127) / 128;
  static constexpr int WM = kMmaPrefillWarps / WN;
  static_assert(WN * WM == kMmaPrefillWarps, "the value columns split over a divisor of the warps");
  using Tile64 = prefill::Config<DQK, DV, 1, WM, WN, 64, false>;
  using Tile32 = prefill::Config<DQK, DV, 1, WM, WN, 32, false>;
  using Config = std::conditional_t<Tile64::smem_bytes <= kSmemHalfSm, Tile64, Tile32>;
  static_assert(Config::smem_bytes <= kSmemHalfSm, "two CTAs an SM");
  using Kernel = MmaPrefill<Config, 2>;
};
static_assert(std::is_same_v<GqaMmaPrefillTiles<128, 128>::Config, prefill::Config<128, 128, 1, 8, 1, 64, false>>,
              "head dim 128 keeps its tuned mma.sync prefill");
static_assert(std::is_same_v<GqaMmaPrefillTiles<192, 128>::Config, prefill::Config<192, 128, 1, 8, 1, 32, false>>,
              "qk 192 / vo 128 keeps its tuned mma.sync prefill");

// The kernels of a GQA / MHA prefill (gqa_paged, gqa_ragged) and of the
// unabsorbed MLA one (mla_ragged: qk 192 / vo 128, GQA-shaped). Every wgmma
// form has the softmax of tile j overlapping P V of tile j - 1, a producer
// that never waits on its own copies and the mask only on diagonal tiles
// (kWgSoftmax2); its tiles follow from the head dims (GqaWgmmaPrefillTiles).
enum class GqaPrefillKernel {
  // mma.sync (GqaMmaPrefillTiles): every head dims pair the launcher
  // accepts; at 128 / 128 where no wgmma kernel runs (not an sm_90 device,
  // outside its case).
  mma,
  // wgmma, K / V rows in runs of 64 (ragged, gathered, page sizes multiple of
  // 64): K / V by TMA boxes, the two consumer warpgroups taking turns
  // (kWgPingPong), three stages, one CTA a unit.
  wgmma_tma,
  // The persistent form of wgmma_tma: one CTA an SM takes units from a
  // counter and loads each unit's Q by TMA while the previous unit computes
  // (two stages: the second Q buffer takes the third stage's room). The first
  // choice for rows in runs of 64; wgmma_tma where it cannot run (its TMA
  // maps cannot be encoded).
  wgmma_tma_persistent,
  // wgmma, other page sizes: rows gathered one by one by the cp.async
  // producer, no turns, three stages.
  wgmma_cp_async,
  // wgmma_tma_persistent whose idle producer threads copy the pages into table
  // order themselves (page size 1, kWgFusedGather).
  wgmma_fused_gather,
};

// Head dims the wgmma kernels run: whole 64-column halves (the 128-byte
// swizzle's rows), vo <= qk <= 256, i.e. of the launcher's pairs qk = vo =
// 64, 128, 192, 256 and qk 192 / vo 128. The others (96) take the mma.sync kernel.
constexpr bool gqa_prefill_uses_wgmma(std::int64_t head_dim_qk, std::int64_t head_dim_vo) {
  return gqa_prefill_supports_head_dims(head_dim_qk, head_dim_vo) && head_dim_qk % 64 == 0 &&
         head_dim_vo % 64 == 0 && head_dim_vo <= head_dim_qk && head_dim_qk <= 256;
}

// The wgmma kernel's tiles for head dims qk / vo, one rule:
//  * 128-key tiles where vo <= 128, else 64: a consumer thread holds O (vo / 2
//    fp32 registers), S (BN / 2) and P (BN / 4); at vo 256 with 64-key tiles
//    that is 176 of its 232 registers, with 128-key tiles 224;
//  * one CTA a unit: three K / V stages where they fit a CTA's shared memory
//    (227 KB), else two (qk 192 / vo 128 and 256 / 256);
//  * the persistent form (two Q buffers, two stages) only where that fits
//    (not at qk 192 / vo 128 with 128-key tiles, nor at 256 / 256).
// Head dim 128 keeps its measured configurations (the static_asserts below).
template <int DQK, int DV>
struct GqaWgmmaPrefillTiles {
  static constexpr int BN = DV <= 128 ? 128 : 64;
  static constexpr int kBase = prefill::kWgSoftmax2;
  static constexpr int kTurns = prefill::kWgSoftmax2 | prefill::kWgTma | prefill::kWgPingPong;
  template <int STAGES, int OPT>
  using Config = prefill::WgmmaConfig<DQK, DV, BN, STAGES, true, true, OPT>;
  static constexpr int kStages = Config<3, kTurns>::fits ? 3 : 2;
  using Tma = Config<kStages, kTurns>;
  using Persistent = Config<2, kTurns | prefill::kWgPersistent>;
  using CpAsync = Config<kStages, kBase>;
  using FusedGather = Config<2, kTurns | prefill::kWgPersistent | prefill::kWgFusedGather>;
  static constexpr bool kPersistent = Persistent::fits;
  static constexpr bool kFusedGather = DQK == 128 && DV == 128;  // its staging: 256-byte rows
};
static_assert(std::is_same_v<GqaWgmmaPrefillTiles<128, 128>::Tma,
                             prefill::WgmmaConfig<128, 128, 128, 3, true, true,
                                                  prefill::kWgSoftmax2 | prefill::kWgTma | prefill::kWgPingPong>>,
              "head dim 128 keeps its measured wgmma prefill");
static_assert(GqaWgmmaPrefillTiles<128, 128>::kPersistent && GqaWgmmaPrefillTiles<128, 128>::kFusedGather,
              "head dim 128 keeps its persistent and fused-gather forms");

// The mma.sync kernel for head dims qk / vo: qk 192 / vo 128, or qk == vo one
// of kGqaHeadDims; cudaErrorInvalidValue for others.
template <std::size_t I = 0, class F>
cudaError_t dispatch_gqa_mma_prefill(std::int64_t head_dim_qk, std::int64_t head_dim_vo, F&& f) {
  if constexpr (I == 0) {
    if (gqa_prefill_is_qk192(head_dim_qk, head_dim_vo)) return f(typename GqaMmaPrefillTiles<192, 128>::Kernel{});
  }
  if constexpr (I == std::size(kGqaHeadDims)) {
    return cudaErrorInvalidValue;
  } else {
    constexpr int D = kGqaHeadDims[I];
    if (head_dim_qk == D && head_dim_vo == D) return f(typename GqaMmaPrefillTiles<D, D>::Kernel{});
    return dispatch_gqa_mma_prefill<I + 1>(head_dim_qk, head_dim_vo, f);
  }
}

// forms(GqaWgmmaPrefillTiles<D, D>{}) for qk == vo == D, the D of kGqaHeadDims
// that gqa_prefill_uses_wgmma takes; cudaErrorInvalidValue for others.
template <std::size_t I = 0, class G>
cudaError_t dispatch_gqa_wgmma_dims(std::int64_t head_dim_qk, std::int64_t head_dim_vo, G&& forms) {
  if constexpr (I == std::size(kGqaHeadDims)) {
    return cudaErrorInvalidValue;
  } else {
    constexpr int D = kGqaHeadDims[I];
    if constexpr (gqa_prefill_uses_wgmma(D, D)) {
      if (head_dim_qk == D && head_dim_vo == D) return forms(GqaWgmmaPrefillTiles<D, D>{});
    }
    return dispatch_gqa_wgmma_dims<I + 1>(head_dim_qk, head_dim_vo, forms);
  }
}

template <class F>
cudaError_t dispatch_gqa_prefill(GqaPrefillKernel k, std::int64_t head_dim_qk, std::int64_t head_dim_vo, F&& f) {
  using namespace prefill;
  if (k == GqaPrefillKernel::mma) return dispatch_gqa_mma_prefill(head_dim_qk, head_dim_vo, f);
  if (!gqa_prefill_uses_wgmma(head_dim_qk, head_dim_vo)) return cudaErrorInvalidValue;
  // One instantiation set per head dims pair of gqa_prefill_uses_wgmma; a
  // form a pair has no room for is cudaErrorNotSupported (the launcher then
  // takes the next form).
  auto forms = [&](auto tiles) -> cudaError_t {
    using T = decltype(tiles);
    switch (k) {
      case GqaPrefillKernel::mma: break;
      case GqaPrefillKernel::wgmma_tma: return f(WgmmaPrefill<typename T::Tma>{});
      case GqaPrefillKernel::wgmma_tma_persistent:
        if constexpr (T::kPersistent) return f(WgmmaPrefill<typename T::Persistent>{});
        else return cudaErrorNotSupported;
      case GqaPrefillKernel::wgmma_cp_async: return f(WgmmaPrefill<typename T::CpAsync>{});
      case GqaPrefillKernel::wgmma_fused_gather:
        if constexpr (T::kFusedGather) return f(WgmmaPrefill<typename T::FusedGather>{});
        else return cudaErrorNotSupported;
    }
    return cudaErrorInvalidValue;
  };
  if (gqa_prefill_is_qk192(head_dim_qk, head_dim_vo)) return forms(GqaWgmmaPrefillTiles<192, 128>{});
  return dispatch_gqa_wgmma_dims(head_dim_qk, head_dim_vo, forms);
}

// K / V rows come in runs of 64 (a TMA box never crosses a page): ragged, or
// pages of a multiple of 64 rows.
inline bool prefill_rows_in_runs_of_64(bool paged, std::int64_t page_size) { return !paged || page_size % 64 == 0; }

// Other page sizes: the wgmma kernel cannot load K / V by TMA boxes and
// gathers rows with cp.async from its producer warpgroup, whose instructions
// take the consumers' issue slots. Copying the pages the table names into
// table order first costs one pass over K and V at copy bandwidth and lets the
// kernel read them as ragged rows by TMA (and persistently). It pays on enough
// work: total_q x group >= kGatherMinTokens, or the mean query length x group
// >= kGatherMinMean, or both reach the short-sequence bounds; on less, the
// second launch and, for short sequences, the TMA kernel's blocking copy of
// partial tiles cost more than the cp.async producer loses.
constexpr std::int64_t kGatherMinTokens = 16384;      // 4096 query tokens at group 4
constexpr std::int64_t kGatherMinMean = 8192;         // 2048 tokens a sequence at group 4
constexpr std::int64_t kGatherMinMeanShort = 512;     // 128 tokens a sequence at group 4 ...
constexpr std::int64_t kGatherMinTokensShort = 4096;  // ... with 1024 query tokens at group 4
inline bool prefill_gather_pays(std::int64_t total_q, std::int64_t batch, std::int64_t group) {
  const std::int64_t mean_q = total_q / batch;
  return total_q * group >= kGatherMinTokens || mean_q * group >= kGatherMinMean ||
         (mean_q * group >= kGatherMinMeanShort && total_q * group >= kGatherMinTokensShort);
}

// Page size 1 (pages of at most 8 heads: the kernel's staging) with a mean
// query length of at least kFusedMinMeanQ: the persistent kernel copies the
// pages itself, its idle producer threads beside the attention
// (wgmma_fused_gather), instead of a gather kernel before it. Shorter
// sequences keep the gather kernel: with one tile a unit, every unit would
// wait for its pages.
constexpr std::int64_t kFusedMinMeanQ = 256;
inline bool prefill_fused_gather_applies(std::int64_t page_size, std::int64_t num_kv_heads, std::int64_t total_q,
                                         std::int64_t batch) {
  return page_size == 1 && num_kv_heads <= 8 && total_q / batch >= kFusedMinMeanQ;
}

// MLA (absorbed) paged prefill, ckv 512 + kpe 64: the mma.sync kernel with the
// 16 query heads of a token (which share the latent KV) packed into the rows,
// 16 heads x 4 tokens in 64 rows; 8 warps, 4 along the rows x 2 along the 512
// value columns; 32-key tiles of ckv + kpe (155 KB of shared memory, one CTA
// an SM).

template <class F>
cudaError_t dispatch_mla_paged_prefill(F&& f) {
  return f(MmaPrefill<prefill::Config<576, 512, 1, 4, 2, 32, true>, 1>{});
}

}  // namespace kb::kernels::attention
