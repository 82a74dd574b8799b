// Causal attention prefill for GQA / MHA with head dims qk / vo that are whole
// 64-column halves (64 to 256, vo <= qk: WgmmaConfig's DQK / DV) on
// Hopper's warpgroup MMA (wgmma, sm_90a). Same Params, Mode, plan and
// semantics as the mma.sync kernel in prefill.cuh (read its header first):
// paged (any page size; int32 CSR page table, kv_last_page_len) or ragged KV,
// bottom-right aligned causal mask, rows with no visible key -> output 0 and
// lse -inf, base-2 lse in fp32, bf16 in / fp32 accumulate / bf16 out.
//
// launch_wgmma_config<C>(p, mode, stream) returns cudaErrorNotSupported where
// this kernel does not apply (head dims other than the config's, MLA, several heads
// per CTA, sm_scale <= 0, a device that is not compute capability 9.0), so the
// caller can fall back to prefill::launch.
//
// CTA = 3 warpgroups (384 threads), one (work item, query head) per CTA, the
// plan's work list (prefill.cuh's plan_kernel, 128 tokens per item):
//  * warpgroup 0 is the producer (setmaxnreg down to 40 registers): it gathers
//    the K and V rows of each tile of BN keys (page lookup per row, so page
//    size 1 and 64 and ragged are one code path) with cp.async, 16 bytes per
//    thread, into a STAGES-deep ring in shared memory. Per tile: wait on the
//    stage's empty_k mbarrier, copy K, wait on empty_v, copy V. Then either
//    (default) wait for the previous tile's copies (cp.async.wait_group 1),
//    run fence.proxy.async.shared::cta (the copies are generic-proxy writes
//    that wgmma reads through the async proxy) and arrive on that tile's
//    full_k / full_v (128 arrivals each), or (ASYNC) let
//    cp.async.mbarrier.arrive.noinc arrive on this tile's full_k / full_v when
//    the copies land, the consumers fencing after their wait.
//  * warpgroups 1 and 2 are consumers (setmaxnreg up to 232 registers), 64
//    query rows each: per tile S = Q K^T (wgmma m64nBNk16, Q and K from shared
//    memory, DQK / 16 k-steps), one arrival per warp on empty_k (8
//    arrivals: K is free), mask / online softmax in registers (fp32, exp2),
//    then O += P V (wgmma m64nPNk16, one chain per PN value columns: PN =
//    128, or 64 where DV is not a multiple of 128; P from registers as bf16,
//    V from shared memory with the transpose bit), one arrival per warp on
//    empty_v.
//    OVERLAP issues S(j) and P(j-1) V(j-1) together and runs the softmax of
//    tile j while the tensor cores do P(j-1) V(j-1) (two wgmma groups in
//    flight). A warpgroup whose rows see fewer tiles than the CTA loads (the
//    first 64 rows, one tile fewer on the diagonal) only waits and releases
//    the rest.
//  * the configurations kb runs (dispatch.cuh) add, by
//    OPT bits (WgmmaConfig below): K / V by TMA boxes from one producer thread
//    (kWgTma), and a persistent grid (kWgPersistent: one CTA an SM takes
//    units from an atomic counter; its producer loads each unit's Q by TMA
//    into one of two Q buffers and hands the unit to the consumers through
//    shared memory; each consumer writes its 64 rows of O, normalised, into
//    its part of the unit's Q buffer and one thread stores them by TMA; the
//    ping-pong turns run on from one unit to the next). Page sizes that are
//    not a multiple of 64 run either the cp.async producer above or, with
//    enough work, the TMA kernel on a copy of the pages in table order
//    (Params::gathered), made by a kernel before it or, at page size 1, by
//    the persistent kernel's idle producer threads while it computes
//    (Params::gather_sync: "fused page gather" below).
//
// Shared memory layout (the base rounded up to 1024 bytes): every operand is
// stored in 64-column halves, [half][row][64 bf16] with rows of 128 bytes and
// the 128-byte swizzle (16-byte chunk c of row r stored at chunk c ^ (r % 8);
// each half starts on a 1024-byte boundary, so the swizzle phase is the row
// index, descriptor base offset 0):
//   Q   [2 consumers][DQK / 64 halves][64 rows][128 B]   DQK * 256 B
//   K   [STAGES][DQK / 64 halves][BN keys][128 B]        STAGES * BN * DQK * 2 B
//   V   [STAGES][DV / 64 halves][BN keys][128 B]         STAGES * BN * DV * 2 B
//   (kWgPersistent: Q twice, one buffer a unit in turn)
//   tok [2][BN] int (cache row of every key of a tile, -1: zero-fill)
//   UnitInfo [2] (kWgPersistent: the units whose Q the two buffers hold)
//   full_k, full_v, empty_k, empty_v [STAGES] mbarriers; q_full, q_empty [2]
// wgmma descriptors (PTX ISA "Matrix Descriptor Format"; bits 0-13 start
// address >> 4, 16-29 leading byte offset >> 4, 32-45 stride byte offset
// >> 4, 49-51 base offset 0, 62-63 swizzle mode 1 = 128B):
//   Q (A) and K (B), K-major: start = half base + (k-step % 4) * 32 bytes
//     (half = k-step / 4), LBO unused for swizzled K-major (encoded 1),
//     SBO = 1024 (next 8 rows).
//   V (B, N-major, imm-trans-b 1): start = V stage + k-step * 16 rows * 128 B,
//     LBO = BN * 128 (the next 64 value columns = the next half),
//     SBO = 1024 (the next 8 keys).
// Accumulator layout (m64nN, fp32): warp w of the warpgroup owns rows
// 16w .. 16w + 15; lane l holds rows l/4 and l/4 + 8, columns 8j + 2(l%4) +
// {0, 1}, as d[4j + {0, 1}] and d[4j + {2, 3}] -- per 8 columns exactly the
// mma.sync m16n8 layout, so P converts to the register A operand as in
// prefill.cuh (a[i] = bf16x2 of d[8k + 2i], d[8k + 2i + 1] for k-step k).
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (the encoder is fetched at run time: no -lcuda)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../common/hopper_ptx.cuh"
#include "prefill.cuh"

namespace kb::kernels::prefill {

namespace wg {
// The PTX wrappers (hopper_ptx.cuh), as wg::.
using namespace ::kb::kernels::hopper;
}  // namespace wg

// Tile shapes of one instantiation.
//  BN: keys per tile (64 or 128); STAGES: K / V stages in shared memory.
//  OVERLAP: a consumer issues S(j) = Q K(j)^T and O += P(j-1) V(j-1)
//    together and runs the softmax of tile j while P(j-1) V(j-1) runs.
//  ASYNC: the producer signals `full` with cp.async.mbarrier.arrive.noinc
//    (the arrival lands when the thread's copies have) and never blocks on
//    its own copies; consumers run fence.proxy.async after the wait. Without
//    it the producer waits for tile t - 1's copies (cp.async.wait_group 1)
//    after issuing tile t, fences, and arrives: `full` of tile j then needs
//    stage (j + 1) % STAGES free, which an OVERLAP consumer (holding V(j - 1)
//    while it waits for K(j)) only guarantees with 3 stages or more.
//  OPT (bits; 0: one softmax form that computes the mask predicates of every
//  tile and selects, consumers without turns, K / V by cp.async, one CTA a unit):
//   kWgSoftmax2: the softmax in two compiled forms (the causal mask only on
//    tiles that need it), P and the row sums pinned before the wait for
//    P(j-1) V(j-1) (the compiler otherwise sinks the exp2 / sums below that
//    wait, losing the overlap), and O rescaled only when the running max of
//    some row of the warp changed (alpha == 1 exactly otherwise: bitwise the
//    same result).
//   kWgPingPong (OVERLAP only): the two consumer warpgroups take turns issuing
//    their wgmma groups (named barriers 4 and 5), so one warpgroup's softmax
//    runs while the other's GEMMs hold the tensor cores.
//   kWgTma (ASYNC only): K / V tiles by the tensor copy engine
//    (cp.async.bulk.tensor, one thread, 64-row boxes with the 128-byte swizzle)
//    for ragged KV and page sizes that are multiples of 64, where every row
//    of the tile is a key of the sequence (rows of a box contiguous); other
//    tiles (the last, partial one; a bad page id) by cp.async from all 128
//    producer threads (blocking), other page sizes by the ASYNC producer.
//   kWgPersistent (TMA and OVERLAP only): one CTA per SM at most; its producer
//    thread takes work units (item, head) from an atomic counter in the plan's
//    workspace (in plan order: longest first), loads each unit's Q by TMA into
//    one of two Q buffers and runs on into the unit's K / V tiles; stage and
//    phase follow a tile count kept across units. The consumers read the
//    unit's geometry from shared memory. So a unit's start (the item load,
//    the page ids, Q and the first tiles: dependent DRAM round trips after
//    the timer's L2 flush) runs under the previous unit's compute, which is
//    what short sequences (batch 8 x 512 tokens: 1 to 4 tiles a unit) lose
//    most to with one CTA per unit. The producer, not the consumers, loads Q:
//    a unit's start only hides under compute if the thread that runs ahead
//    makes it.
enum : int { kWgSoftmax2 = 1, kWgPingPong = 2, kWgTma = 4, kWgPersistent = 8, kWgFusedGather = 16 };

// One work unit's geometry, as the persistent kernel's producer hands it to
// the consumers through shared memory (and every CTA computes it otherwise).
struct UnitInfo {
  int head, q_start, tok0, ntok;  // query head; the item's first token and token count
  int kv_first, kv_len, delta;    // the sequence's first kv row (or page-table entry), keys, kv_len - q_len
  int kv_end, n;                  // keys [0, kv_end) seen by some row; tiles 0 .. n - 1 loaded
  int end;                        // 1: no more units (persistent kernel)
  int pad[2];
};

template <int DQK_, int DV_, int BN_, int STAGES_, bool OVERLAP_, bool ASYNC_, int OPT_ = 0>
struct WgmmaConfig {
  static constexpr int DQK = DQK_, DV = DV_;  // head_dim of q and k; of v and the output
  static constexpr int BN = BN_, STAGES = STAGES_;
  static constexpr bool OVERLAP = OVERLAP_, ASYNC = ASYNC_;
  static constexpr bool SM2 = (OPT_ & kWgSoftmax2) != 0, PP = (OPT_ & kWgPingPong) != 0,
                        TMA = (OPT_ & kWgTma) != 0, PERSIST = (OPT_ & kWgPersistent) != 0,
                        GATHER = (OPT_ & kWgFusedGather) != 0;
  static_assert(DQK % 64 == 0 && DV % 64 == 0 && DQK <= 256 && DV <= 256, "whole 64-column (128-byte) halves");
  static_assert(DV <= DQK, "O leaves through its warpgroup's Q buffer");
  static_assert(!GATHER || (DQK == 128 && DV == 128), "the fused gather stages pages of 256-byte head rows");
  static_assert(!GATHER || PERSIST, "the fused page gather runs in the persistent kernel");
  static_assert(!PP || OVERLAP, "ping-pong is written for the OVERLAP loop");
  static_assert(!PERSIST || (TMA && OVERLAP), "the persistent kernel loads Q and K / V by TMA");
  static_assert(!TMA || ASYNC, "TMA falls back to the ASYNC producer (page sizes not a multiple of 64)");
  static_assert(!TMA || BN % 64 == 0, "64-row boxes");
  static constexpr int kConsumers = 2;
  static constexpr int BM = 64 * kConsumers;  // query rows (tokens) per CTA
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;  // 128 * 40 + 256 * 232 <= 65536
  static_assert(BN == 64 || BN == 128, "S = Q K^T is one m64nBNk16 wgmma chain");
  static_assert(STAGES >= 2, "two stages at least");
  static_assert(ASYNC || !OVERLAP || STAGES >= 3, "deadlock: see ASYNC above");
  static constexpr int kQkHalves = DQK / 64, kVoHalves = DV / 64;
  static constexpr std::uint32_t kHalf = 128;                       // bytes of one 64-column row half
  static constexpr std::uint32_t q_half_bytes = 64 * kHalf;         // 8 KB
  static constexpr std::uint32_t q_bytes = kQkHalves * q_half_bytes;  // one consumer's Q
  static constexpr std::uint32_t kv_half_bytes = BN * kHalf;        // one half of a K or V tile
  static constexpr std::uint32_t k_bytes = kQkHalves * kv_half_bytes;  // one K tile
  static constexpr std::uint32_t v_bytes = kVoHalves * kv_half_bytes;  // one V tile
  static constexpr int kQSlots = PERSIST ? 2 : 1;                    // Q buffers (persistent: this unit's, the next's)
  static constexpr std::uint32_t q_off = 0;
  static constexpr std::uint32_t q_slot_bytes = kConsumers * q_bytes;
  static constexpr std::uint32_t k_off = q_off + kQSlots * q_slot_bytes;
  static constexpr std::uint32_t v_off = k_off + STAGES * k_bytes;
  static constexpr std::uint32_t tok_off = v_off + STAGES * v_bytes;
  static constexpr std::uint32_t unit_off = tok_off + 2 * BN * sizeof(int);  // UnitInfo [kQSlots]
  static constexpr std::uint32_t bar_off = unit_off + 2 * sizeof(UnitInfo);
  // full K / V, empty K / V [STAGES] each; then (persistent) Q full, Q empty [2] each
  static constexpr std::uint32_t stage_off = bar_off + 4 * STAGES * 8 + 4 * 8;
  // kWgFusedGather: the fused page gather's staging, one piece (kGatherPiece pages of K and of V).
  static constexpr int kGatherPiece = 8;  // pages a piece
  static constexpr std::uint32_t stage_bytes = GATHER ? 2 * kGatherPiece * 8 * 256 : 0;  // pages of <= 8 heads
  static constexpr std::uint32_t used_bytes = stage_off + stage_bytes;
  static constexpr std::size_t smem_bytes = used_bytes + 1024;  // slack to align the base to 1024
  static constexpr bool fits = smem_bytes <= 227 * 1024;       // shared memory of one CTA on sm_90
  static_assert(k_off % 1024 == 0 && v_off % 1024 == 0 && kv_half_bytes % 1024 == 0, "swizzle atoms");
};

// Tensor maps of K and V for kWgTma configs: [rows][H_kv][DQK or DV] bf16, boxes of
// 64 rows x 1 head x 64 columns, 128-byte swizzle. use == 0: no maps (other
// configs, page sizes not a multiple of 64, a failed encode): cp.async only.
struct WgmmaTma {
  CUtensorMap k, v;
  CUtensorMap q;  // kWgPersistent: q [total_q][H_q][DQK], the same boxes
  CUtensorMap o;  // out [total_q][H_q][DV], the same boxes (where o_use)
  int use;
  int o_use;  // 1: whole 64-row blocks of O leave by TMA store (else, and for partial blocks, thread stores)
};

template <class C>
__global__ void __launch_bounds__(C::kThreads, 1)
    prefill_wgmma_kernel(const Params p, const __grid_constant__ WgmmaTma tma) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(C::fits, "shared memory of one CTA on sm_90");
  constexpr int DQK = C::DQK, DV = C::DV, BN = C::BN, STAGES = C::STAGES;
  constexpr int NS = BN / 2;              // S accumulators per thread
  constexpr int PN = DV % 128 == 0 ? 128 : 64;  // value columns of one O += P V chain (m64nPNk16)
  constexpr int NPV = DV / PN;            // such chains (column parts of O)
  static_assert(NPV * PN == DV, "O is whole chains");
  constexpr int KQ = DQK / 16;            // k-steps of S = Q K^T
  constexpr int KP = BN / 16;             // k-steps of O += P V

  // A unit's geometry (false: nothing to compute); unit = item * head_blocks + head.
  auto geometry = [&](int unit, UnitInfo& U) -> bool {
    PlanItem w;
    if (!load_item(p, unit / p.head_blocks, w)) return false;
    U.head = unit % p.head_blocks;
    U.q_start = w.q_start;
    const int q_len = w.q_len;
    U.tok0 = w.tile * p.tokens_per_cta;
    // Tokens of this item; never past total_q (malformed indptr is the oracle's to reject).
    U.ntok = min(min(p.tokens_per_cta, q_len - U.tok0), p.total_q - U.q_start - U.tok0);
    if (U.q_start < 0 || U.ntok <= 0 || U.head >= p.num_qo_heads) return false;
    // Gathered K / V (prefill.cuh's Params::gathered): rows in page-table order, read as ragged.
    U.kv_first = p.gathered ? w.kv_first * p.page_size : w.kv_first;
    U.kv_len = w.kv_len;
    U.delta = U.kv_len - q_len;  // query token t sees keys 0 .. t + delta
    // Keys [0, kv_end) are seen by some row of this unit: tiles 0 .. n - 1 are loaded.
    U.kv_end = max(0, min(U.kv_len, U.tok0 + U.ntok + U.delta));
    U.n = (U.kv_end + BN - 1) / BN;
    U.end = 0;
    return true;
  };
  const bool paged = p.paged && !p.gathered;
  UnitInfo U0{};  // the CTA's unit (one CTA per unit); unused by the persistent kernel
  if constexpr (!C::PERSIST) {
    if (!geometry(static_cast<int>(blockIdx.x), U0)) return;
  }

  extern __shared__ __align__(16) unsigned char smem_raw[];
  const std::uint32_t raw = wg::saddr(smem_raw);
  const std::uint32_t pad = (1024u - (raw & 1023u)) & 1023u;
  const std::uint32_t sbase = raw + pad;  // shared address, 1024-aligned
  unsigned char* gbase = smem_raw + pad;  // the same, generic pointer
  int* tok_s = reinterpret_cast<int*>(gbase + C::tok_off);
  UnitInfo* unit_s = reinterpret_cast<UnitInfo*>(gbase + C::unit_off);  // persistent: [2]
  // mbarriers, 8 bytes each, [STAGES] per kind: stage s of kind k at bars + 8 (k STAGES + s).
  const std::uint32_t bars = sbase + C::bar_off;
  const std::uint32_t full_k = bars, full_v = bars + 8 * STAGES;
  const std::uint32_t empty_k = bars + 16 * STAGES, empty_v = bars + 24 * STAGES;
  // Persistent: Q slot s loaded (producer's expect_tx) / free again (every consumer warp).
  const std::uint32_t q_full = bars + 32 * STAGES, q_empty = q_full + 16;

  const int tid = static_cast<int>(threadIdx.x);
  // kWgTma with maps: one arrival on `full` per tile (the thread that issues the
  // tensor copies, or thread 0 after the cp.async fallback); else every producer thread.
  const bool use_tma = C::TMA && tma.use != 0;
  if (tid == 0) {
    const int full_count = use_tma ? 1 : 128;
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      wg::mbar_init(full_k + 8 * s, full_count);
      wg::mbar_init(full_v + 8 * s, full_count);
      wg::mbar_init(empty_k + 8 * s, 4 * C::kConsumers);  // every consumer warp
      wg::mbar_init(empty_v + 8 * s, 4 * C::kConsumers);
    }
    if constexpr (C::PERSIST) {
      for (int s = 0; s < 2; ++s) {
        wg::mbar_init(q_full + 8 * s, 1);
        wg::mbar_init(q_empty + 8 * s, 4 * C::kConsumers);
      }
    }
    if constexpr (C::TMA) wg::fence_proxy_async();  // the initialised barriers, seen by the copy engine
  }
  __syncthreads();

  const int wgi = tid / 128;
  if (wgi == 0) {
    // ---------------- producer: K / V tiles through cp.async ----------------
    wg::setmaxnreg_dec<C::kProducerRegs>();
    const int pt = tid;  // 0 .. 127
    // Cache row of key `row` of tile `tile` of a unit (kv_first, kv_end), or -1 (zero-filled, masked).
    auto tok_of = [&](int kv_first, int kv_end, int tile, int row) -> int {
      const int t = tile * BN + row;
      if (t >= kv_end) return -1;
      if (paged) {
        const int page = __ldg(p.kv_indices + kv_first + t / p.page_size);
        if (page < 0 || page >= p.kv_limit) return -1;
        return page * p.page_size + t % p.page_size;
      }
      const int r = kv_first + t;
      return r < p.kv_limit ? r : -1;
    };
    // The cp.async producer keeps, per key row, its place in the cache in
    // units of one head's row: unit = cache row x H_kv (< 2^31: the launcher
    // checks), -1 past the keys. A copy is then one shared load, one
    // multiply-add and the cp.async. A 64-bit row x stride offset per copy (K
    // and V each) would make the producer's instructions 3/4 of the consumers'
    // at page size 1, in their issue slots.
    auto unit_of = [&](int kv_first, int kv_end, int tile, int row) -> int {
      const int tok = tok_of(kv_first, kv_end, tile, row);
      return tok < 0 ? -1 : tok * p.num_kv_heads;
    };
    // A K or V tile is copied in rows of W bf16 (DQK for K, DV for V). Up to
    // W 128, thread pt copies chunk pt % CW (16 bytes) of rows pt / CW, +
    // 128 / CW, ... (head dim 128: a warp reads two whole 256-byte rows per
    // instruction); wider rows (192, 256), chunk pt % 8 of every 64-column
    // half of rows pt / 8, + 16, ...: one row lookup serves all its halves, so
    // the producer's 40 registers hold the addresses without spilling.
    auto chunk_of = [&](auto width) {
      constexpr int CW = decltype(width)::value / 8;  // 16-byte chunks of a row
      return CW <= 16 ? pt % CW : pt % 8;
    };
    // Head kvh's row 0 in `cache`, at this thread's chunk.
    auto kv_base = [&](auto width, const std::uint16_t* cache, int kvh) {
      constexpr int W = decltype(width)::value;
      return reinterpret_cast<const unsigned char*>(cache + static_cast<std::int64_t>(kvh) * W) + chunk_of(width) * 16;
    };
    // One tile: rows from `units`, into the stage at `dst`, swizzled; base from kv_base.
    auto copy_tile = [&](auto width, const int* units, std::uint32_t dst, const unsigned char* base) {
      constexpr int W = decltype(width)::value;
      constexpr int CW = W / 8;
      const int ch = chunk_of(width);
      if constexpr (CW <= 16) {
        constexpr int RP = 128 / CW;  // rows a pass
        const int r0 = pt / CW;
#pragma unroll
        for (int i = 0; i < BN / RP; ++i) {
          // Row r0 + RP i: its swizzle phase is r0's where RP is a multiple of 8.
          const int ph = RP % 8 == 0 ? r0 % 8 : (r0 + RP * i) % 8;
          const std::uint32_t off = static_cast<std::uint32_t>(ch / 8) * C::kv_half_bytes + (r0 + RP * i) * C::kHalf +
                                    ((static_cast<std::uint32_t>(ch % 8) ^ static_cast<std::uint32_t>(ph)) << 4);
          const int u = units[r0 + RP * i];
          wg::cp_async16(dst + off, base + static_cast<std::uint32_t>(max(u, 0)) * std::uint64_t{W * 2}, u >= 0);
        }
      } else {
#pragma unroll 2
        for (int i = 0; i < BN / 16; ++i) {
          const int r = pt / 8 + 16 * i;
          const int u = units[r];
          const unsigned char* src = base + static_cast<std::uint32_t>(max(u, 0)) * std::uint64_t{W * 2};
          const std::uint32_t d = dst + r * C::kHalf +
                                  ((static_cast<std::uint32_t>(ch) ^ static_cast<std::uint32_t>(r % 8)) << 4);
#pragma unroll
          for (int h = 0; h < W / 64; ++h) wg::cp_async16(d + h * C::kv_half_bytes, src + h * 128, u >= 0);
        }
      }
    };
    constexpr std::integral_constant<int, DQK> kRowK{};
    constexpr std::integral_constant<int, DV> kRowV{};
    if (C::TMA && use_tma) {
      // Tile t: TMA when all of its keys are keys of the sequence (below
      // kv_end) and every 64-row box lies in one page / inside the cache;
      // else (the last, partial tile; a bad page id) cp.async from all 128
      // producer threads, zero rows past kv_end, then thread 0 arrives (full
      // count 1). Thread 0 walks the tiles and issues the tensor copies; the
      // other 127 sleep on named barrier 6 until thread 0 hands them a tile
      // for the cp.async path (fallback_s: tile, the CTA's tile count, the
      // unit's kv_first, kv_end and kv head), or -1 at the end. They do not
      // walk the tiles beside thread 0: their page lookups would take issue
      // slots from the consumers.
      constexpr int kBoxes = BN / 64;
      volatile int* fallback_s = tok_s + BN;  // the TMA path's cp.async tiles use tok_s[0, BN) only
      auto copy_by_threads = [&](int t, int gt, int kv_first, int kv_end, int kvh) {
        const int s = gt % STAGES;
        const std::uint32_t par = static_cast<std::uint32_t>((gt / STAGES + 1) & 1);  // use gt / STAGES - 1 done
        if (gt >= STAGES) {
          wg::mbar_wait(empty_k + 8 * s, par);
          wg::mbar_wait(empty_v + 8 * s, par);
        }
        if (pt < BN) tok_s[pt] = unit_of(kv_first, kv_end, t, pt);
        wg::named_bar_sync_unaligned(1, 128);  // toks written
        copy_tile(kRowK, tok_s, sbase + C::k_off + s * C::k_bytes, kv_base(kRowK, p.k, kvh));
        copy_tile(kRowV, tok_s, sbase + C::v_off + s * C::v_bytes, kv_base(kRowV, p.v, kvh));
        cp_async_commit();
        cp_async_wait<0>();
        wg::fence_proxy_async();               // generic-proxy writes, read by wgmma (async proxy)
        wg::named_bar_sync_unaligned(1, 128);  // every thread's copies landed (and toks read)
        if (pt == 0) {
          wg::mbar_arrive(full_k + 8 * s);
          wg::mbar_arrive(full_v + 8 * s);
        }
      };
      // ---- Fused page gather (Params::gather_sync, persistent kernel) ----
      // Threads 32 .. 127 copy the page table's pages into the gathered K / V
      // while thread 0 feeds the consumers: pieces of kGatherPiece entries
      // taken from a global counter (gather_sync[0]) in table order, one
      // taken ahead, each staged in shared memory by cp.async (32 KB in
      // flight; registers at 40 a thread hold far less), stored to the copy
      // by the thread that staged it, then counted, after a fence and the
      // copiers' barrier, on its 64-row chunk (gather_sync[4 + c]) and in
      // gather_sync[1] (pieces done). Copiers depend on no one, so a piece
      // taken is always finished: thread 0 waiting for one cannot deadlock.
      // Thread 0 issues a tile's TMA only when its chunks are complete
      // (wait_gathered). The counts are never cleared by the kernel: each
      // launch adds a chunk's piece count once, so in launch E (gather_sync[2],
      // launches since the plan zeroed it) a chunk is complete at (E + 1) x
      // its pieces. The last CTA resets [0] and [1] and advances [2].
      unsigned* const gsync = C::GATHER ? p.gather_sync : nullptr;
      const int g_pieces = (p.gather_entries + C::kGatherPiece - 1) / C::kGatherPiece;
      if constexpr (C::GATHER) {
        if (gsync != nullptr && pt >= 32) {
          constexpr int kCopiers = 96, kPiece = C::kGatherPiece;
          const int ct = pt - 32;
          const int row_chunks = p.num_kv_heads * 16;  // 16-byte chunks of one page (one row of the copy)
          volatile int* piece_s = tok_s + BN + 8;      // [2]: the piece to copy now, the next one
          const std::uint32_t stage_k = sbase + C::stage_off;
          const std::uint32_t stage_v = stage_k + C::stage_bytes / 2;
          const unsigned char* gk = reinterpret_cast<const unsigned char*>(p.gather_k);
          const unsigned char* gv = reinterpret_cast<const unsigned char*>(p.gather_v);
          uint4* dk = reinterpret_cast<uint4*>(const_cast<std::uint16_t*>(p.k));
          uint4* dv = reinterpret_cast<uint4*>(const_cast<std::uint16_t*>(p.v));
          // Pieces are taken one ahead: the next one's counter round trip runs under this one's copy.
          if (ct == 0) piece_s[1] = static_cast<int>(atomicAdd(gsync, 1u));
          for (;;) {
            if (ct == 0) {
              const int cur = piece_s[1];
              piece_s[0] = cur;
              piece_s[1] = cur < g_pieces ? static_cast<int>(atomicAdd(gsync, 1u)) : cur;
            }
            wg::named_bar_sync_unaligned(7, kCopiers);
            const int piece = piece_s[0];
            if (piece >= g_pieces) break;
            const int e0 = piece * kPiece;
            const int chunks = min(kPiece, p.gather_entries - e0) * row_chunks;
            for (int c = ct; c < chunks; c += kCopiers) {
              const int e = c / row_chunks;
              const int page = __ldg(p.kv_indices + e0 + e);
              const bool ok = page >= 0 && page < p.gather_pages;  // else zeros, as the kernels read a bad id
              const std::int64_t src = (static_cast<std::int64_t>(ok ? page : 0) * row_chunks + (c - e * row_chunks)) * 16;
              wg::cp_async16(stage_k + c * 16, gk + src, ok);
              wg::cp_async16(stage_v + c * 16, gv + src, ok);
            }
            cp_async_commit();
            cp_async_wait<0>();  // this thread's chunks have landed; it stores exactly those
            const std::int64_t d0 = static_cast<std::int64_t>(e0) * row_chunks;
            for (int c = ct; c < chunks; c += kCopiers) {
              uint4 a, b;
              asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                           : "=r"(a.x), "=r"(a.y), "=r"(a.z), "=r"(a.w) : "r"(stage_k + c * 16) : "memory");
              asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                           : "=r"(b.x), "=r"(b.y), "=r"(b.z), "=r"(b.w) : "r"(stage_v + c * 16) : "memory");
              dk[d0 + c] = a;
              dv[d0 + c] = b;
            }
            __threadfence();
            wg::named_bar_sync_unaligned(7, kCopiers);  // every copier's part is stored (and piece_s read)
            if (ct == 0) {
              __threadfence();
              atomicAdd(gsync + 4 + (e0 / 64), 1u);  // pieces never straddle a chunk: 64 % kGatherPiece == 0
              atomicAdd(gsync + 1, 1u);
            }
          }
        }
      }
      static_assert(64 % C::kGatherPiece == 0, "a gather piece inside one 64-row chunk");
      if (pt != 0) {
        for (;;) {
          wg::named_bar_sync_unaligned(6, 128);  // thread 0 has written fallback_s
          const int t = fallback_s[0];
          if (t < 0) return;
          copy_by_threads(t, fallback_s[1], fallback_s[2], fallback_s[3], fallback_s[4]);
        }
      }
      wg::tma_prefetch_desc(&tma.k);
      wg::tma_prefetch_desc(&tma.v);
      if constexpr (C::PERSIST) wg::tma_prefetch_desc(&tma.q);
      // Fused gather: returns once rows [r0, r1) of the copy are complete
      // (their chunks' counts; or every piece done: then never again), with
      // acquire and proxy fences so the TMA and cp.async reads after it see them.
      bool gather_done = gsync == nullptr;
      const unsigned epoch1 = gsync ? wg::ld_volatile(gsync + 2) + 1u : 0u;
      auto wait_gathered = [&](int r0, int r1) {
        if (!C::GATHER || gather_done || r1 <= r0) return;
        constexpr int kPer = 64 / C::kGatherPiece;  // pieces of a full chunk
        const int c0 = r0 / 64, c1 = (r1 - 1) / 64;  // at most 3 chunks (BN = 128)
        // A bound instead of a hang: counts that never arrive (two launches
        // sharing one plan's counters at once, memory overwritten by another
        // kernel) end the launch with a trap, an error the caller sees,
        // after 2^23 polls (each a round trip to L2 and a sleep: seconds).
        unsigned polls = 0;
        for (;;) {
          // All loads issued before any is used: one round trip a poll.
          const unsigned done = wg::ld_volatile(gsync + 1);
          unsigned have[3], need[3];
#pragma unroll
          for (int i = 0; i < 3; ++i) {
            const int c = min(c0 + i, c1);
            have[i] = wg::ld_volatile(gsync + 4 + c);
            need[i] = epoch1 * static_cast<unsigned>(min(kPer, g_pieces - c * kPer));
          }
          if (done == static_cast<unsigned>(g_pieces)) {
            gather_done = true;
            break;
          }
          if (have[0] == need[0] && have[1] == need[1] && have[2] == need[2]) break;
          if (++polls == (1u << 23)) __trap();
          __nanosleep(64);
        }
        __threadfence();
        wg::fence_proxy_async_global();
      };
      // The K / V tiles of one unit; g0: the CTA's tiles before it (stage and phase).
      bool kv_ready = false;
      auto produce = [&](const UnitInfo& U, int g0) {
        if (!kv_ready) {
          // Launched as a programmatic dependent of the page gather (its copy
          // of K / V): wait for it here, after the CTA's start and the first
          // unit's Q. Without such a launch this returns at once.
          asm volatile("griddepcontrol.wait;\n" ::: "memory");
          kv_ready = true;
        }
        const int kvh = U.head / p.group;
        for (int t = 0; t < U.n; ++t) {
          const int gt = g0 + t;
          const int s = gt % STAGES;
          const std::uint32_t par = static_cast<std::uint32_t>((gt / STAGES + 1) & 1);  // use gt / STAGES - 1 done
          bool ok = (t + 1) * BN <= U.kv_end;
          int rows[kBoxes];
          if (ok) {
#pragma unroll
            for (int bx = 0; bx < kBoxes; ++bx) {
              const int key0 = t * BN + 64 * bx;
              if (paged) {
                const int page = __ldg(p.kv_indices + U.kv_first + key0 / p.page_size);
                ok = ok && page >= 0 && page < p.kv_limit;
                rows[bx] = page * p.page_size + key0 % p.page_size;
              } else {
                ok = ok && U.kv_first + key0 + 64 <= p.kv_limit;
                rows[bx] = U.kv_first + key0;
              }
            }
          }
          // Fused gather: this tile's rows of the copy (up to kv_end) must be complete.
          wait_gathered(U.kv_first + t * BN, U.kv_first + min((t + 1) * BN, U.kv_end));
          if (!ok) {
            fallback_s[0] = t;
            fallback_s[1] = gt;
            fallback_s[2] = U.kv_first;
            fallback_s[3] = U.kv_end;
            fallback_s[4] = kvh;
            wg::named_bar_sync_unaligned(6, 128);  // wake the others for tile t
            copy_by_threads(t, gt, U.kv_first, U.kv_end, kvh);
            continue;
          }
          const std::uint32_t ks = sbase + C::k_off + s * C::k_bytes, vs = sbase + C::v_off + s * C::v_bytes;
          if (gt >= STAGES) wg::mbar_wait(empty_k + 8 * s, par);
          wg::mbar_arrive_expect_tx(full_k + 8 * s, C::k_bytes);
#pragma unroll
          for (int h = 0; h < C::kQkHalves; ++h)
#pragma unroll
            for (int bx = 0; bx < kBoxes; ++bx)
              wg::tma_load_3d(ks + h * C::kv_half_bytes + bx * 64 * C::kHalf, &tma.k, 64 * h, kvh, rows[bx],
                              full_k + 8 * s);
          if (gt >= STAGES) wg::mbar_wait(empty_v + 8 * s, par);
          wg::mbar_arrive_expect_tx(full_v + 8 * s, C::v_bytes);
#pragma unroll
          for (int h = 0; h < C::kVoHalves; ++h)
#pragma unroll
            for (int bx = 0; bx < kBoxes; ++bx)
              wg::tma_load_3d(vs + h * C::kv_half_bytes + bx * 64 * C::kHalf, &tma.v, 64 * h, kvh, rows[bx],
                              full_v + 8 * s);
        }
      };
      if constexpr (!C::PERSIST) {
        produce(U0, 0);
      } else {
        // Units from the plan's counter until it passes the last; the k-th
        // unit of this CTA goes to Q slot k % 2 (free once every consumer
        // warp is done with unit k - 2), then its tiles.
        int* sched = const_cast<int*>(p.item_count) + 1;  // [0] units handed out, [1] CTAs done
        const int units = *p.item_count * p.head_blocks;
        int g = 0;
        for (int k = 0;; ++k) {
          UnitInfo U{};
          bool have = false;
          while (!have) {
            const int u = atomicAdd(sched, 1);
            if (u >= units) break;
            have = geometry(u, U);
          }
          const int slot = k & 1;
          if (k >= 2) wg::mbar_wait(q_empty + 8 * slot, static_cast<std::uint32_t>(((k >> 1) + 1) & 1));
          U.end = have ? 0 : 1;
          unit_s[slot] = U;  // seen by the consumers after their wait on q_full (release / acquire)
          if (!have) {
            wg::mbar_arrive(q_full + 8 * slot);
            break;
          }
          // Q rows of the unit: 64 a consumer warpgroup, only where it has tokens.
          const int parts = U.ntok > 64 ? 2 : 1;
          wg::mbar_arrive_expect_tx(q_full + 8 * slot, parts * C::q_bytes);
          const std::uint32_t qs = sbase + C::q_off + slot * C::q_slot_bytes;
          for (int cw = 0; cw < parts; ++cw)
#pragma unroll
            for (int h = 0; h < C::kQkHalves; ++h)
              wg::tma_load_3d(qs + cw * C::q_bytes + h * C::q_half_bytes, &tma.q, 64 * h, U.head,
                              U.q_start + U.tok0 + 64 * cw, q_full + 8 * slot);
          produce(U, g);
          g += U.n;
        }
        // Fused gather: this CTA's copiers are done once the others pass this barrier.
        if constexpr (C::GATHER) {
          fallback_s[0] = -1;
          wg::named_bar_sync_unaligned(6, 128);  // the others may leave
          __threadfence();
        }
        // The last CTA to finish taking units resets the counters for the next
        // launch (and the fused gather's: every CTA's copiers are done then).
        if (atomicAdd(sched + 1, 1) == static_cast<int>(gridDim.x) - 1) {
          atomicExch(sched, 0);
          atomicExch(sched + 1, 0);
          if (gsync != nullptr) {
            __threadfence();
            atomicExch(gsync, 0u);
            atomicExch(gsync + 1, 0u);
            atomicAdd(gsync + 2, 1u);
          }
        }
        if constexpr (C::GATHER) return;
      }
      fallback_s[0] = -1;
      wg::named_bar_sync_unaligned(6, 128);  // the others may leave
      return;
    }
    const int kv_first = U0.kv_first, kv_end = U0.kv_end, n = U0.n;
    const unsigned char* k_base = kv_base(kRowK, p.k, U0.head / p.group);
    const unsigned char* v_base = kv_base(kRowV, p.v, U0.head / p.group);
    int reg_tok = (pt < BN && n > 0) ? unit_of(kv_first, kv_end, 0, pt) : -1;
    for (int t = 0; t < n; ++t) {
      const int s = t % STAGES;
      const std::uint32_t par = static_cast<std::uint32_t>((t / STAGES + 1) & 1);  // use t / STAGES - 1 done
      if (t >= STAGES) wg::mbar_wait(empty_k + 8 * s, par);
      int* toks = tok_s + (t & 1) * BN;
      if (pt < BN) toks[pt] = reg_tok;
      wg::named_bar_sync(1, 128);  // toks of tile t written (and everyone done with tile t - 2's)
      // The next tile's rows, in flight meanwhile.
      reg_tok = (pt < BN && t + 1 < n) ? unit_of(kv_first, kv_end, t + 1, pt) : -1;
      copy_tile(kRowK, toks, sbase + C::k_off + s * C::k_bytes, k_base);
      if constexpr (C::ASYNC) {
        cp_async_commit();
        wg::cp_async_mbar_arrive_noinc(full_k + 8 * s);
      }
      if (t >= STAGES) wg::mbar_wait(empty_v + 8 * s, par);
      copy_tile(kRowV, toks, sbase + C::v_off + s * C::v_bytes, v_base);
      cp_async_commit();
      if constexpr (C::ASYNC) {
        wg::cp_async_mbar_arrive_noinc(full_v + 8 * s);
      } else {
        if (t > 0) {
          cp_async_wait<1>();  // this thread's copies of tile t - 1 have landed
          wg::fence_proxy_async();
          const int sp = (t - 1) % STAGES;
          wg::mbar_arrive(full_k + 8 * sp);
          wg::mbar_arrive(full_v + 8 * sp);
        }
      }
    }
    if constexpr (!C::ASYNC) {
      if (n > 0) {
        cp_async_wait<0>();
        wg::fence_proxy_async();
        wg::mbar_arrive(full_k + 8 * ((n - 1) % STAGES));
        wg::mbar_arrive(full_v + 8 * ((n - 1) % STAGES));
      }
    } else {
      cp_async_wait<0>();  // nothing of this thread in flight at exit
    }
  } else {
    // ---------------- consumers: 64 query rows each ----------------
    wg::setmaxnreg_inc<C::kConsumerRegs>();
    const int cw = wgi - 1;  // consumer index
    const int wt = tid % 128;
    const int wq = wt / 32, lane = tid % 32, g = lane / 4, tq = lane % 4;
    const int row0 = cw * 64;  // first CTA row (token of the item) of this warpgroup
    const float scale = p.scale_log2;
    const std::uint64_t k_desc0 = wg::make_desc(sbase + C::k_off, 16, 1024);
    const std::uint64_t v_desc0 = wg::make_desc(sbase + C::v_off, C::kv_half_bytes, 1024);

    // Persistent: the Q slot whose release thread 0 of the warpgroup still owes
    // (-1: none). Its TMA store of O reads the slot; waiting for that read at
    // once would hold the whole warpgroup, so the wait and the arrival on
    // q_empty come after the next unit's first S is issued (or at its end).
    // The producer needs that slot again only two units later: no deadlock.
    int owed_slot = -1;
    bool turns_open = false;  // kWgPingPong, persistent: a unit with tiles has been taken (turns run on)
    auto pay_owed_slot = [&]() {
      if constexpr (C::PERSIST) {
        if (owed_slot >= 0 && wt == 0) {
          wg::bulk_wait_read();
          wg::mbar_arrive(q_empty + 8 * owed_slot);
        }
        owed_slot = -1;
      }
    };
    // One unit: U's geometry, its Q in the slot at q_slot, g0 the CTA's tiles before it.
    auto consume = [&](const UnitInfo& U, const std::uint32_t q_slot, const int g0) {
      const int head = U.head, q_start = U.q_start, tok0 = U.tok0, ntok = U.ntok, kv_len = U.kv_len,
                delta = U.delta, n = U.n;
      const std::uint32_t q_sm = q_slot + cw * C::q_bytes;
      if constexpr (!C::PERSIST) {
        // Q rows -> shared (swizzled), zero rows past the item's tokens.
        constexpr int CQ = DQK / 8;  // 16-byte chunks of a Q row
#pragma unroll
        for (int i = 0; i < 64 * CQ / 128; ++i) {
          const int c = wt + 128 * i;
          const int r = c / CQ, ch = c % CQ;
          const bool valid = row0 + r < ntok;
          const std::int64_t qrow = static_cast<std::int64_t>(q_start + tok0 + row0 + r) * p.num_qo_heads + head;
          const std::uint16_t* src = valid ? p.q + qrow * DQK + ch * 8 : p.q;
          const std::uint32_t dst = q_sm + static_cast<std::uint32_t>(ch / 8) * C::q_half_bytes + r * C::kHalf +
                                    ((static_cast<std::uint32_t>(ch % 8) ^ static_cast<std::uint32_t>(r % 8)) << 4);
          wg::cp_async16(dst, src, valid);
        }
        cp_async_commit();
        cp_async_wait<0>();
        wg::fence_proxy_async();           // generic-proxy writes, read by wgmma (async proxy)
        wg::named_bar_sync(2 + cw, 128);  // the whole warpgroup's Q rows
      }

      // Tiles this warpgroup computes: 0 .. nw - 1 (later ones hold no key of its
      // rows); tiles before full_end need no mask.
      int nw = 0, full_end = 0;
      if (row0 < ntok) {
        const int last = min(ntok, row0 + 64) - 1;
        const int end = max(0, min(kv_len, tok0 + last + 1 + delta));
        nw = min(n, (end + BN - 1) / BN);
        full_end = max(0, min(kv_len, tok0 + row0 + 1 + delta));
      }
      // This thread's rows (CTA rows row0 + 16 wq + g + 8 h): the last key each sees.
      int lim[2];
      lim[0] = tok0 + row0 + 16 * wq + g + delta;
      lim[1] = lim[0] + 8;
      const std::uint64_t q_desc = wg::make_desc(q_sm, 16, 1024);

      float o[NPV][PN / 2];
#pragma unroll
      for (int pp = 0; pp < NPV; ++pp)
#pragma unroll
        for (int i = 0; i < PN / 2; ++i) o[pp][i] = 0.f;
      float s[NS];
#pragma unroll
      for (int i = 0; i < NS; ++i) s[i] = 0.f;
      std::uint32_t pa[KP][4];
#pragma unroll
      for (int k = 0; k < KP; ++k) pa[k][0] = pa[k][1] = pa[k][2] = pa[k][3] = 0u;
      float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};

      // Wait until K (or V) of tile j is in its stage; reconverge the warp
      // before the .aligned wgmma instructions.
      auto wait_full = [&](std::uint32_t bar_kind, int j) {
        // j: the unit's tile; g0 + j: the CTA's (stage and phase).
        wg::mbar_wait(bar_kind + 8 * ((g0 + j) % STAGES), static_cast<std::uint32_t>(((g0 + j) / STAGES) & 1));
        if constexpr (C::ASYNC) {
          if (!use_tma) wg::fence_proxy_async();  // cp.async writes (generic proxy) -> wgmma reads
        }
        __syncwarp();
      };
      // One arrival per warp: this warp's wgmma reads of K (or V) of tile j are done.
      auto release = [&](std::uint32_t bar_kind, int j) {
        __syncwarp();
        if (lane == 0) wg::mbar_arrive(bar_kind + 8 * ((g0 + j) % STAGES));
      };
      // S = Q K(j)^T (issue only).
      auto issue_s = [&](int j) {
        const std::uint64_t kd = wg::desc_add(k_desc0, ((g0 + j) % STAGES) * C::k_bytes);
#pragma unroll
        for (int kk = 0; kk < KQ; ++kk) {
          const std::uint32_t qo = (kk / 4) * C::q_half_bytes + (kk % 4) * 32;
          const std::uint32_t ko = (kk / 4) * C::kv_half_bytes + (kk % 4) * 32;
          if constexpr (BN == 128) wg::wgmma_ss_n128(s, wg::desc_add(q_desc, qo), wg::desc_add(kd, ko), kk > 0);
          else wg::wgmma_ss_n64(s, wg::desc_add(q_desc, qo), wg::desc_add(kd, ko), kk > 0);
        }
      };
      // O += P V(j) (issue only).
      auto issue_pv = [&](int j) {
        const std::uint64_t vd = wg::desc_add(v_desc0, ((g0 + j) % STAGES) * C::v_bytes);
        // Part pp: value columns [PN pp, PN (pp + 1)), the V halves from PN pp / 64 on.
#pragma unroll
        for (int pp = 0; pp < NPV; ++pp)
#pragma unroll
          for (int kk = 0; kk < KP; ++kk) {
            const std::uint64_t b = wg::desc_add(vd, pp * (PN / 64) * C::kv_half_bytes + kk * 16 * C::kHalf);
            if constexpr (PN == 128) wg::wgmma_rs_n128_tb(o[pp], pa[kk], b, 1);
            else wg::wgmma_rs_n64_tb(o[pp], pa[kk], b, 1);
          }
      };
      // Mask tile j, online softmax: s <- P = exp2(S * scale - m) (fp32), l
      // updated; alpha: the factor O must be scaled by.
      auto softmax = [&](int j, float (&alpha)[2]) {
        float mx[2] = {-INFINITY, -INFINITY};
        const bool need_mask = (j + 1) * BN > full_end;
#pragma unroll
        for (int jb = 0; jb < BN / 8; ++jb)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float x = s[4 * jb + e];
            if (need_mask) {
              const int key = j * BN + 8 * jb + 2 * tq + (e & 1);
              if (key > lim[e >> 1] || key >= kv_len) x = -INFINITY;
            }
            s[4 * jb + e] = x;
            mx[e >> 1] = fmaxf(mx[e >> 1], x);
          }
        float neg_m[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
          mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
          const float m_new = fmaxf(m_run[h], mx[h] * scale);  // scale > 0: the max commutes
          const float m_use = m_new == -INFINITY ? 0.f : m_new;  // no key yet: exp2(-inf) = 0, never NaN
          alpha[h] = fast_exp2(m_run[h] - m_use);
          m_run[h] = m_new;
          neg_m[h] = -m_use;
        }
        float rs[2] = {0.f, 0.f};
#pragma unroll
        for (int i = 0; i < NS; ++i) {
          const float pv = fast_exp2(fmaf(s[i], scale, neg_m[(i >> 1) & 1]));
          s[i] = pv;
          rs[(i >> 1) & 1] += pv;
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) l_run[h] = l_run[h] * alpha[h] + rs[h];
      };
      // kWgSoftmax2: the same, with the mask only where kMask (a tile that needs
      // it), two partial max / sum chains per row, and P / l pinned at the end.
      auto softmax2 = [&](auto mask_tag, int j, float (&alpha)[2]) {
        constexpr bool kMask = decltype(mask_tag)::value;
        float mx[2][2] = {{-INFINITY, -INFINITY}, {-INFINITY, -INFINITY}};
#pragma unroll
        for (int jb = 0; jb < BN / 8; ++jb)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float x = s[4 * jb + e];
            if constexpr (kMask) {
              const int key = j * BN + 8 * jb + 2 * tq + (e & 1);
              if (key > lim[e >> 1] || key >= kv_len) x = -INFINITY;
              s[4 * jb + e] = x;
            }
            mx[e >> 1][jb & 1] = fmaxf(mx[e >> 1][jb & 1], x);
          }
        float neg_m[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float m = fmaxf(mx[h][0], mx[h][1]);
          m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
          m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
          const float m_new = fmaxf(m_run[h], m * scale);        // scale > 0: the max commutes
          const float m_use = m_new == -INFINITY ? 0.f : m_new;  // no key yet: exp2(-inf) = 0, never NaN
          alpha[h] = fast_exp2(m_run[h] - m_use);                // exactly 1 when the max did not change
          m_run[h] = m_new;
          neg_m[h] = -m_use;
        }
        float rs[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
#pragma unroll
        for (int i = 0; i < NS; ++i) {
          const float pv = fast_exp2(fmaf(s[i], scale, neg_m[(i >> 1) & 1]));
          s[i] = pv;
          rs[(i >> 1) & 1][(i >> 2) & 1] += pv;
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) l_run[h] = l_run[h] * alpha[h] + (rs[h][0] + rs[h][1]);
        wg::reg_fence(s);
        wg::reg_fence(l_run);
      };
      auto softmax_any = [&](int j, float (&alpha)[2]) {
        if constexpr (C::SM2) {
          if ((j + 1) * BN > full_end) softmax2(std::true_type{}, j, alpha);
          else softmax2(std::false_type{}, j, alpha);
        } else {
          softmax(j, alpha);
        }
      };
      auto rescale_o = [&](const float (&alpha)[2]) {
        if constexpr (C::SM2) {
          // alpha == 1 (the running max of both rows unchanged) is a no-op: skip it when the whole warp agrees.
          if (!__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) return;
        }
#pragma unroll
        for (int pp = 0; pp < NPV; ++pp)
#pragma unroll
          for (int i = 0; i < PN / 2; ++i) o[pp][i] *= alpha[(i >> 1) & 1];
      };
      // P (fp32 in s) -> bf16 A fragments: k-step k covers keys 16k .. 16k + 15,
      // i.e. accumulator column blocks 2k and 2k + 1.
      auto convert_p = [&]() {
#pragma unroll
        for (int k = 0; k < KP; ++k)
#pragma unroll
          for (int i = 0; i < 4; ++i) pa[k][i] = pack_bf16(s[8 * k + 2 * i], s[8 * k + 2 * i + 1]);
      };

      // kWgPingPong: both warpgroups take turns 0 .. n (tile 0's S; S(j) with
      // P(j-1) V(j-1) for j = 1 .. nw-1; the last P V; one per tile a warpgroup
      // only drains; one more when it had no tile), alternating 0, 1, 0, 1, ...:
      // warpgroup cw waits on barrier 4 + cw (bar.sync, 256 = its 128 threads +
      // the other's 128 arrivals) and hands over with bar.arrive on the other's.
      // Warpgroup 1 opens warpgroup 0's first turn and does not hand over after
      // its last, so each barrier sees as many arrivals as waits.
      // kWgPersistent: the turns run on across units. Warpgroup 1 opens once
      // (its first unit with tiles) and hands over after its last turn too, so
      // warpgroup 0 issues the next unit's S(0) as soon as warpgroup 1 issued
      // its last P V, not after warpgroup 1's epilogue; warpgroup 0 takes the
      // one hand-over left at the end (turns_open).
      int turn = 0;
      auto turn_begin = [&]() {
        if constexpr (C::PP) {
          __syncwarp();  // bar.sync is .aligned
          wg::named_bar_sync(4 + cw, 256);
        }
      };
      auto turn_end = [&]() {
        if constexpr (C::PP) {
          __syncwarp();
          if (C::PERSIST || !(cw == 1 && turn == n)) wg::named_bar_arrive(4 + (cw ^ 1), 256);
          ++turn;
        }
      };
      if constexpr (C::PP) {
        if (cw == 1 && n > 0 && !turns_open) wg::named_bar_arrive(4, 256);
        if (C::PERSIST && n > 0) turns_open = true;
      }
      (void)turn;

      if constexpr (!C::OVERLAP) {
        for (int j = 0; j < nw; ++j) {
          wait_full(full_k, j);
          wg::reg_fence(s);
          wg::wgmma_fence();
          issue_s(j);
          wg::wgmma_commit();
          wg::wgmma_wait<0>();
          wg::reg_fence(s);
          release(empty_k, j);
          float alpha[2];
          softmax_any(j, alpha);
          rescale_o(alpha);
          convert_p();
          wait_full(full_v, j);
          wg::reg_fence(o);
          wg::reg_fence(pa);
          wg::wgmma_fence();
          issue_pv(j);
          wg::wgmma_commit();
          wg::wgmma_wait<0>();
          wg::reg_fence(o);
          wg::reg_fence(pa);
          release(empty_v, j);
        }
      } else if (nw > 0) {
        // Tile 0: S, softmax (O is still zero: no rescale needed).
        wait_full(full_k, 0);
        turn_begin();
        wg::reg_fence(s);
        wg::wgmma_fence();
        issue_s(0);
        wg::wgmma_commit();
        turn_end();
        pay_owed_slot();  // under S(0)
        wg::wgmma_wait<0>();
        wg::reg_fence(s);
        release(empty_k, 0);
        {
          float alpha[2];
          softmax_any(0, alpha);
        }
        convert_p();
        for (int j = 1; j < nw; ++j) {
          wait_full(full_k, j);
          wait_full(full_v, j - 1);
          turn_begin();
          wg::reg_fence(s);
          wg::reg_fence(o);
          wg::reg_fence(pa);
          wg::wgmma_fence();
          issue_s(j);  // S(j): the older group
          wg::wgmma_commit();
          issue_pv(j - 1);  // O += P(j - 1) V(j - 1)
          wg::wgmma_commit();
          turn_end();
          wg::wgmma_wait<1>();  // S(j) done; P V may still run
          wg::reg_fence(s);
          release(empty_k, j);
          float alpha[2];
          softmax_any(j, alpha);  // s, m, l only
          wg::wgmma_wait<0>();  // P(j - 1) V(j - 1) done: O and pa are free
          wg::reg_fence(o);
          wg::reg_fence(pa);
          release(empty_v, j - 1);
          rescale_o(alpha);
          convert_p();
        }
        wait_full(full_v, nw - 1);
        turn_begin();
        wg::reg_fence(o);
        wg::reg_fence(pa);
        wg::wgmma_fence();
        issue_pv(nw - 1);
        wg::wgmma_commit();
        turn_end();
        wg::wgmma_wait<0>();
        wg::reg_fence(o);
        wg::reg_fence(pa);
        release(empty_v, nw - 1);
      }
      // Tiles the other warpgroup needs but this one does not: wait, release
      // (kWgPingPong: one turn each, taken before the wait).
      for (int j = nw; j < n; ++j) {
        turn_begin();
        turn_end();
        wait_full(full_k, j);
        release(empty_k, j);
        wait_full(full_v, j);
        release(empty_v, j);
      }
      if constexpr (C::PP) {
        if (n > 0 && nw == 0) {  // the last turn (n + 1 in all)
          turn_begin();
          turn_end();
        }
      }

      // Row sums over the quad, normalise, store. With o_use and all 64 rows of
      // this warpgroup real tokens, O goes through the warpgroup's part of the
      // Q buffer (free: every S of the unit is done), in Q's swizzled layout,
      // and leaves by two TMA stores (one per 64-column half) issued by thread
      // 0 of the warpgroup: 4-byte stores from every thread cost a prefill of
      // short sequences a large share of its time.
      pay_owed_slot();  // if no S was issued
      const bool by_tma = tma.o_use != 0 && row0 + 64 <= ntok;
      // Columns 8 jb + 2 tq + {0, 1} of row half h (rows g, g + 8), normalised, as bf16x2.
      auto o_pair = [&](int jb, int h, float inv) {
        const int pp = jb / (PN / 8), j = jb % (PN / 8);
        return pack_bf16(o[pp][4 * j + 2 * h] * inv, o[pp][4 * j + 2 * h + 1] * inv);
      };
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float l = l_run[h];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const int r = row0 + 16 * wq + g + 8 * h;
        if (r >= ntok) continue;
        const float inv = l > 0.f ? 1.f / l : 0.f;
        const std::int64_t grow = static_cast<std::int64_t>(q_start + tok0 + r) * p.num_qo_heads + head;
        if (by_tma) {
          const std::uint32_t rr = static_cast<std::uint32_t>(r - row0);  // row of the warpgroup's block
#pragma unroll
          for (int jb = 0; jb < DV / 8; ++jb) {
            const std::uint32_t a = q_sm + static_cast<std::uint32_t>(jb / 8) * C::q_half_bytes + rr * C::kHalf +
                                    ((static_cast<std::uint32_t>(jb % 8) ^ (rr % 8)) << 4) + 4 * tq;
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a), "r"(o_pair(jb, h, inv)) : "memory");
          }
        } else {
          std::uint16_t* orow = p.out + grow * DV;
#pragma unroll
          for (int jb = 0; jb < DV / 8; ++jb)
            *reinterpret_cast<std::uint32_t*>(orow + 8 * jb + 2 * tq) = o_pair(jb, h, inv);
        }
        if (tq == 0 && p.lse) p.lse[grow] = l > 0.f ? m_run[h] + log2f(l) : -INFINITY;
      }
      if (by_tma) {
        wg::fence_proxy_async();               // the shared writes above, read by the TMA (async proxy)
        wg::named_bar_sync(2 + cw, 128);       // the warpgroup's whole block is written
        if (wt == 0) {
#pragma unroll
          for (int hh = 0; hh < C::kVoHalves; ++hh)
            wg::tma_store_3d(&tma.o, q_sm + hh * C::q_half_bytes, 64 * hh, head, q_start + tok0 + row0);
          wg::bulk_commit();
        }
      }
    };  // consume

    if constexpr (!C::PERSIST) {
      consume(U0, sbase + C::q_off, 0);
    } else {
      // Units in the order the producer took them: slot k % 2, its Q loaded.
      int g0 = 0;
      for (int k = 0;; ++k) {
        const int slot = k & 1;
        wg::mbar_wait(q_full + 8 * slot, static_cast<std::uint32_t>((k >> 1) & 1));
        const UnitInfo U = unit_s[slot];  // written before the producer's arrival (mbarrier release / acquire)
        if (U.end) break;
        consume(U, sbase + C::q_off + slot * C::q_slot_bytes, g0);
        // This warp's reads of the slot (Q by wgmma, the UnitInfo) are done;
        // thread 0 of the warpgroup owes its arrival until its TMA store has read the slot.
        __syncwarp();
        if (wt == 0) owed_slot = slot;
        else if (lane == 0) wg::mbar_arrive(q_empty + 8 * slot);
        g0 += U.n;
      }
      pay_owed_slot();
      if constexpr (C::PP) {
        if (cw == 0 && turns_open) wg::named_bar_sync(4, 256);  // warpgroup 1's hand-over after its last turn
      }
    }
    if (wt == 0) wg::bulk_wait();  // O stores complete before the CTA's shared memory goes
  }
#else
  __trap();  // built without sm_90a: launch_wgmma_config must not be used
#endif
}

// ---- Host side -------------------------------------------------------------------------

// Sets the kernel's shared memory limit once per device; cudaErrorNotSupported
// if the device is not compute capability 9.0 (the kernel is sm_90a code).
// *sms (if given): the device's SM count, the persistent grid's size.
template <class C>
cudaError_t prepare_wgmma_kernel(int* sms = nullptr) {
  constexpr int kMaxDevices = 64;
  static std::array<std::atomic<int>, kMaxDevices> state{};  // 0 unknown, 1 ready, 2 unsupported
  static std::array<std::atomic<int>, kMaxDevices> sm_count{};
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (device < 0 || device >= kMaxDevices) return cudaErrorInvalidDevice;
  const int st = state[device].load();
  if (st == 1) {
    if (sms) *sms = sm_count[device].load();  // stored before state became 1
    return cudaSuccess;
  }
  if (st == 2) return cudaErrorNotSupported;
  int major = 0, minor = 0, n_sm = 0;
  if (cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device); e != cudaSuccess)
    return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device); e != cudaSuccess)
    return e;
  if (major != 9 || minor != 0) {
    state[device].store(2);
    return cudaErrorNotSupported;
  }
  if (cudaError_t e = cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess) return e;
  auto kernel = prefill_wgmma_kernel<C>;
  if (cudaError_t e =
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(C::smem_bytes));
      e != cudaSuccess)
    return e;
  sm_count[device].store(n_sm);
  if (sms) *sms = n_sm;
  state[device].store(1);
  return cudaSuccess;
}

using ::kb::kernels::hopper::TensorMapEncodeTiled;
using ::kb::kernels::hopper::tensor_map_encoder;

// A [rows][hkv][cols] bf16 tensor (K, V, Q or O) as a 3-D tensor map (dims
// innermost first: cols, hkv heads, rows), boxes of 64 columns x 1 head x 64
// rows, the 128-byte swizzle (the kernel's shared layout); false where it
// cannot be encoded.
inline bool encode_kv_tensor_map(CUtensorMap* map, const void* base, std::uint64_t rows, int hkv, int cols) {
  const TensorMapEncodeTiled enc = tensor_map_encoder();
  if (!enc || base == nullptr || reinterpret_cast<std::uintptr_t>(base) % 16 != 0) return false;
  if (rows == 0 || rows > (std::uint64_t{1} << 31) || hkv < 1) return false;  // int row coordinates in the kernel
  if (cols < 64 || cols % 64 != 0) return false;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(hkv), rows};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(cols) * 2,
                                 static_cast<cuuint64_t>(hkv) * static_cast<cuuint64_t>(cols) * 2};  // bytes
  const cuuint32_t box[3] = {64, 1, 64};
  const cuuint32_t elem[3] = {1, 1, 1};
  return enc(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(base), dims, strides, box, elem,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// Plans and/or launches one GQA prefill on the wgmma kernel. `p` as for
// prefill::launch (every field but items / item_count / tokens_per_cta /
// head_blocks); head dims are not in Params: pass them (default 128 / 128).
// The plan is prefill.cuh's (same per-stream workspace, 128 tokens per item,
// as prefill::launch with Config<128, 128, 1, 8, 1, 64, false>), so a plan
// made by either launcher serves run_only calls of the other.
// after_gather (TMA configs): launched as a programmatic dependent of the
// kernel just before it on the stream, the page gather that wrote p.k / p.v
// (the CTAs start while it ends; the producer waits for it before reading K / V).
template <class C>
cudaError_t launch_wgmma_config(Params p, Mode mode, cudaStream_t stream, int head_dim_qk = 128,
                                int head_dim_vo = 128, bool after_gather = false) {
  if (head_dim_qk != C::DQK || head_dim_vo != C::DV || p.q_pe != nullptr || p.heads_per_cta != 1)
    return cudaErrorNotSupported;
  if (!(p.scale_log2 > 0.f) || !std::isfinite(p.scale_log2)) return cudaErrorNotSupported;
  // The fused page gather runs in the persistent kernel only, on pages of at most 8 heads (its staging).
  if (p.gather_sync != nullptr && (!C::GATHER || !p.gathered || p.page_size != 1 || p.num_kv_heads > 8))
    return cudaErrorNotSupported;
  if (p.group < 1 || p.num_kv_heads < 1 || p.page_size < 1) return cudaErrorInvalidValue;
  p.tokens_per_cta = C::BM;
  p.head_blocks = p.num_qo_heads;
  std::int64_t max_items = 0;
  // The cp.async producer's row units (cache row x H_kv) are 32-bit: larger caches take the other kernel.
  const bool by_page = p.paged && !p.gathered;  // else kv_limit counts rows
  if (static_cast<std::int64_t>(p.kv_limit) * (by_page ? p.page_size : 1) * p.num_kv_heads > INT_MAX)
    return cudaErrorNotSupported;
  if (cudaError_t e = plan_work(p, mode, stream, &max_items); e != cudaSuccess || max_items == 0) return e;
  int sms = 0;
  if (cudaError_t e = prepare_wgmma_kernel<C>(&sms); e != cudaSuccess) return e;
  WgmmaTma tma{};
  if constexpr (C::TMA) {
    // Ragged, or pages of a multiple of 64 rows (a 64-row box never crosses a page); else cp.async.
    if (!by_page || p.page_size % 64 == 0) {
      const std::uint64_t rows =
          static_cast<std::uint64_t>(p.kv_limit) * static_cast<std::uint64_t>(by_page ? p.page_size : 1);
      tma.use = p.kv_limit > 0 && encode_kv_tensor_map(&tma.k, p.k, rows, p.num_kv_heads, C::DQK) &&
                        encode_kv_tensor_map(&tma.v, p.v, rows, p.num_kv_heads, C::DV)
                    ? 1
                    : 0;
    }
  }
  std::int64_t grid = max_items * p.head_blocks;  // one CTA per unit (the plan's bound; extra CTAs exit)
  if constexpr (C::PERSIST) {
    // Q by TMA too; without the maps (page size not a multiple of 64, a failed
    // encode) the caller takes another configuration.
    if (!tma.use ||
        !encode_kv_tensor_map(&tma.q, p.q, static_cast<std::uint64_t>(p.total_q), p.num_qo_heads, C::DQK))
      return cudaErrorNotSupported;
    grid = std::min<std::int64_t>(grid, std::max(1, sms));  // one CTA fits an SM
  }
  // O by TMA store where the output can be mapped.
  tma.o_use = p.total_q > 0 &&
                      encode_kv_tensor_map(&tma.o, p.out, static_cast<std::uint64_t>(p.total_q), p.num_qo_heads,
                                           C::DV)
                  ? 1
                  : 0;
  if (C::TMA && after_gather && tma.use) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(static_cast<unsigned>(grid));
    cfg.blockDim = dim3(C::kThreads);
    cfg.dynamicSmemBytes = C::smem_bytes;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, prefill_wgmma_kernel<C>, p, tma);
  }
  prefill_wgmma_kernel<C><<<static_cast<unsigned>(grid), C::kThreads, C::smem_bytes, stream>>>(p, tma);
  return cudaGetLastError();
}

}  // namespace kb::kernels::prefill
