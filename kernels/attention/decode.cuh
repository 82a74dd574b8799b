// Paged-KV attention decode (one query token per sequence), shared by
// kb_cuda_gqa_paged_decode (decode_gqa.cu) and kb_cuda_mla_paged_decode
// (decode_mla.cu); the instantiations they run are in dispatch.cuh.
//
// Flash-decoding on tensor cores:
//  * one CTA (WARPS warps: GQA 4, MLA 8) per (sequence, head block, split). A head
//    block is the 16 query rows that share one KV stream: for GQA the
//    `group` = H_q / H_kv query heads of one KV head (rows past `group` are
//    zero padding), for MLA 16 query heads (all heads read the one latent KV).
//    The rows are the M = 16 of mma.sync.m16n8k16 (bf16 in, fp32 accumulate).
//  * the sequence's keys are cut into tiles of TK keys, and the tiles into
//    chunks (decode_plan.hpp: the even split of the average sequence where
//    every sequence is near it, else chunks of at most `max_chunk_tiles`):
//    one CTA a chunk, so a long sequence takes as many CTAs as its length
//    needs and does not keep a few SMs busy while the rest idle. Each CTA
//    streams its tiles
//    through a STAGES-deep cp.async pipeline of 16-byte copies into shared
//    memory; rows of a tile past the sequence end are zero-filled
//    (cp.async with src-size 0). The page id of every key row is looked up
//    one tile ahead (register prefetch), so index loads never stall a tile.
//  * per tile: warp w computes S = Q K^T for keys [kw, kw + k) (k = 64 / WARPS) over the
//    whole head dim (ldmatrix from shared memory), scales by
//    sm_scale * log2(e), masks keys past the sequence end, and the CTA agrees
//    on the running row max through shared memory (every warp computes the
//    same value). P = exp2(S - m) is written to shared memory as bf16, and warp
//    w accumulates O[:, w*DV/WARPS .. (w+1)*DV/WARPS) += P V (ldmatrix.trans on V).
//    Softmax is online in fp32 base 2; the row sums use the fp32 P.
//  * a sequence of one chunk: the CTA writes the bf16 output and the base-2
//    lse itself. More chunks (splits): each writes its normalised fp32
//    partial output and its lse to a workspace; the last CTA of a (sequence,
//    head block) to finish (an arrival counter per work item, zero at rest)
//    combines the splits by their lse (merge_row), so a split decode is one
//    launch. (merge_kernel, a second launch, only where the host's rule says
//    the fused merge would be slow or the counters would not fit.)
// A sequence with no keys (one chunk of no tiles) yields output 0 and lse
// -inf, as the definitions' references do.
//
// The work plan is decided on the device, from the page table the kernel
// reads anyway, so the host never reads it and a launch stays capturable in
// a CUDA graph (no host sync, no allocation per call). The host plans from
// shapes only (decode_plan.hpp) and sizes the grid by an upper bound of the
// CTAs any page table of those shapes needs; every CTA scans the sequences'
// chunk counts (find_work: a block-wide prefix sum over indptr /
// last_page_len) to find its (sequence, head block, chunk); CTAs past the
// real count exit. CTA order is sequence-major, then head block, then chunk.
//
// Shared memory rows are padded by 16 bytes, so the 8 row addresses of every
// ldmatrix fall in distinct bank groups.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "../common/l2_stream_policy.cuh"
#include "../common/mma_sync.cuh"
#include "../common/stream_workspace.hpp"
#include "../common/stream_ctas.hpp"
#include "decode_plan.hpp"

namespace kb::kernels::paged_decode {

constexpr int kTileKeys = 64;  // keys per pipeline stage
// Warps per CTA (a template parameter, WARPS): GQA 4; MLA 8, two warps per
// SM scheduler (one CTA fills an SM's shared memory): one warp alone issues
// only every few cycles, stalled on its own shared-memory and mma latencies.
constexpr int kRows = 16;  // query rows per CTA (mma M)

struct Params {
  const std::uint16_t* q;     // GQA: q [batch, H_q, D]; MLA: q_nope [batch, H_q, DV]
  const std::uint16_t* q_pe;  // MLA: q_pe [batch, H_q, DQK - DV]; GQA: unused
  const std::uint16_t* k;     // GQA: k_cache [pages, ps, H_kv, D]; MLA: ckv_cache [pages, ps, DV]
  const std::uint16_t* v;     // GQA: v_cache [pages, ps, H_kv, D]; MLA: kpe_cache [pages, ps, DQK - DV]
  const std::int32_t* indptr;         // [batch + 1], pages
  const std::int32_t* indices;        // page ids
  const std::int32_t* last_page_len;  // [batch] or null (every page full)
  std::uint16_t* out;                 // [batch, H_q, DV] bf16
  float* lse;                         // [batch, H_q] or null
  // Partials of the sequences of two or more chunks: sequence b's block
  // starts at partial slot slot_b (the prefix of those sequences' chunk
  // counts) and holds H_q x nchunks_b entries, [query head][chunk]: entry
  // (slot_b * H_q + head * nchunks_b + chunk). Null when no sequence of these
  // shapes can have two chunks.
  float* part_o;                      // [max_slots * H_q entries][DV]
  float* part_lse;                    // [max_slots * H_q entries]
  int2* seq_info;                     // [batch] (slot_b, nchunks_b), for merge_kernel; null: not needed
  unsigned* counters;                 // [batch * head_blocks] arrivals, zero at rest; null: merge_kernel
  int batch = 0;
  int num_qo_heads = 0;
  int num_kv_heads = 1;  // GQA: H_kv; MLA: 1
  int page_size = 1;
  int splits = 1;            // chunks of the average sequence (decode_plan.hpp); the fused merge's warp-a-row bound
  int chunk_tiles = 1;       // ceil(average tiles / splits)
  int max_chunk_tiles = 1;   // the longest chunk where some sequence is past splits x chunk_tiles tiles
  std::int64_t max_slots = 0;  // partial slots the workspace holds (a bound over every page table of these shapes)
  int rows_per_cta = 16;  // GQA: group; MLA: 16
  int head_blocks = 1;    // CTAs per sequence and split: GQA: H_kv; MLA: ceil(H_q / 16)
  std::int64_t num_pages = 0;
  float scale_log2 = 0;  // sm_scale * log2(e)
  float kv_evict_first = 1.0f;  // the KV stream's L2 policy: evict_first fraction (l2_stream_policy.cuh)
};

// Keys of a paged sequence: npages pages, the last holding last_page_len[b]
// keys (clamped to [0, page_size]; null: full). Shared with the prefill plan.
__device__ __forceinline__ int paged_kv_len(int npages, int page_size, const std::int32_t* last_page_len, int b) {
  const int last = last_page_len ? max(0, min(last_page_len[b], page_size)) : page_size;
  return npages > 0 ? (npages - 1) * page_size + last : 0;
}

// ---- PTX wrappers --------------------------------------------------------------

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared; `valid` false: 16 zero bytes, nothing read.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem), "r"(bytes)
               : "memory");
}
// The same with an L2 cache policy (l2_stream_policy.cuh): the KV stream.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid, std::uint64_t policy) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(smem_addr(smem)),
               "l"(gmem), "r"(bytes), "l"(policy)
               : "memory");
}
using hopper::cp_async_commit;
using hopper::cp_async_wait;

using mma_sync::ldmatrix_x4;
using mma_sync::ldmatrix_x4_trans;
using mma_sync::mma_bf16;

// Two floats as bf16 (round to nearest even), `lo` in the low half.
__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  const std::uint32_t l = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
  const std::uint32_t h = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
  return l | (h << 16);
}

// ---- Merging the splits of one row -----------------------------------------------

// A row's output is out = sum_s 2^(lse_s - M) o_s / sum_s 2^(lse_s - M) and
// lse = M + log2(sum_s 2^(lse_s - M)), M the largest lse_s; every split
// empty: output 0, lse -inf. Partials are read through L2 (__ldcg): other SMs
// wrote them.

// M and the sum of 2^(lse_s - M) over a row's splits, in every lane of a warp.
__device__ __forceinline__ void split_stats(const float* __restrict__ pl, int splits, int lane, float& m, float& sum) {
  m = -INFINITY;
  for (int s = lane; s < splits; s += 32) m = fmaxf(m, __ldcg(pl + s));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  sum = 0.f;
  if (m != -INFINITY)
    for (int s = lane; s < splits; s += 32) sum += exp2f(__ldcg(pl + s) - m);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
}

// A row's merge is spread over a warp in float4s: lane holds columns
// 4 (lane + 32 i) .. + 3 for i < merge_vecs<DV>() where 4 (lane + 32 i) < DV
// (merge_lane_has: every lane and i where DV is a multiple of 128).
template <int DV>
constexpr int merge_vecs() {
  static_assert(DV % 4 == 0, "rows in float4s");
  return (DV / 4 + 31) / 32;
}
template <int DV>
__device__ __forceinline__ bool merge_lane_has(int lane, int i) {
  return DV % 128 == 0 || lane + 32 * i < DV / 4;
}

// acc += the weighted partial outputs of splits s0, s0 + step, ... of a row
// whose splits are the partial entries first .. first + splits - 1 (columns
// as above). No skip of empty splits (weight 0, partial output 0:
// adding 0 * 0 changes nothing), so the loads of several splits can be in
// flight together.
template <int DV>
__device__ __forceinline__ void accumulate_splits(const float* __restrict__ part_o, const float* __restrict__ pl,
                                                  std::int64_t first, int splits, int s0, int step, float m, float inv,
                                                  int lane, float4 (&acc)[merge_vecs<DV>()]) {
#pragma unroll 4
  for (int s = s0; s < splits; s += step) {
    const float w = exp2f(__ldcg(pl + s) - m) * inv;
    const float4* src = reinterpret_cast<const float4*>(part_o + (first + s) * DV);
#pragma unroll
    for (int i = 0; i < merge_vecs<DV>(); ++i) {
      if (!merge_lane_has<DV>(lane, i)) continue;
      const float4 x = __ldcg(src + lane + 32 * i);
      acc[i].x += w * x.x;
      acc[i].y += w * x.y;
      acc[i].z += w * x.z;
      acc[i].w += w * x.w;
    }
  }
}

// The bf16 output row (columns as in accumulate_splits) and its lse.
template <int DV>
__device__ __forceinline__ void store_row(std::uint16_t* __restrict__ out, float* __restrict__ lse, std::int64_t row,
                                          const float4 (&acc)[merge_vecs<DV>()], float m, float sum, int lane) {
#pragma unroll
  for (int i = 0; i < merge_vecs<DV>(); ++i)
    if (merge_lane_has<DV>(lane, i))
      *reinterpret_cast<uint2*>(out + row * DV + (lane + 32 * i) * 4) =
          make_uint2(pack_bf16(acc[i].x, acc[i].y), pack_bf16(acc[i].z, acc[i].w));
  if (lane == 0 && lse) lse[row] = m == -INFINITY ? -INFINITY : m + log2f(sum);
}

// This warp's share of a row's merge (its splits the partial entries first
// .. first + splits - 1): acc = the weighted partial outputs of splits s0,
// s0 + step, ... (zero if every split is empty), with the row's M and sum
// (split_stats) for store_row.
template <int DV>
__device__ __forceinline__ void merge_share(const float* __restrict__ part_o, const float* __restrict__ part_lse,
                                            std::int64_t first, int splits, int s0, int step, int lane,
                                            float4 (&acc)[merge_vecs<DV>()], float& m, float& sum) {
  const float* pl = part_lse + first;
  split_stats(pl, splits, lane, m, sum);
#pragma unroll
  for (int i = 0; i < merge_vecs<DV>(); ++i) acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  if (m != -INFINITY) accumulate_splits<DV>(part_o, pl, first, splits, s0, step, m, 1.f / sum, lane, acc);
}

// One warp merges one (sequence, query head) output row `row` (the fused merge).
template <int DV>
__device__ __forceinline__ void merge_row(const float* __restrict__ part_o, const float* __restrict__ part_lse,
                                          std::uint16_t* __restrict__ out, float* __restrict__ lse, std::int64_t row,
                                          std::int64_t first, int splits, int lane) {
  float4 acc[merge_vecs<DV>()];
  float m, sum;
  merge_share<DV>(part_o, part_lse, first, splits, 0, 1, lane, acc, m, sum);
  store_row<DV>(out, lse, row, acc, m, sum, lane);
}

// ---- The work plan ------------------------------------------------------------------

// What one CTA computes.
struct Work {
  int b;        // sequence
  int hb;       // head block
  int chunk;    // chunk of the sequence
  int nchunks;  // the sequence's chunks
  int chunk_tiles;  // tiles a chunk (the last: what is left)
  int slot;     // the sequence's first partial slot (sequences of two or more chunks count)
  int first;    // the sequence's first page-table entry (indptr[b])
  int kv_len;   // its keys
};

// Work item `me`: the (me - items_before_b)-th of sequence b, whose
// head_blocks x nchunks_b items are head block major, where items_before_b
// is the prefix of head_blocks x nchunks over the sequences before b. First
// a block-wide OR of "some sequence is past splits x chunk_tiles tiles"
// (which chunking applies, decode_plan.hpp), then a block-wide prefix sum
// over the sequences, kPerThread x THREADS a round (each thread's kPerThread
// loads of indptr / last_page_len in flight together; the first round's
// loads serve both passes, so a batch of up to that many costs one round
// trip), in `sh` (2 x THREADS / 32 + 9 ints of shared memory, free after the
// call). False: the item is past the plan's end (the grid is an upper bound)
// and the CTA has nothing to do. Uniform over the CTA; every thread gets the
// same Work.
template <int THREADS, int TK>
__device__ bool find_work(const Params& p, int* sh, int me, Work& w) {
  constexpr int kW = THREADS / 32, kPerThread = 4, kRound = THREADS * kPerThread;
  int* sum_ctas = sh;         // [kW]
  int* sum_slots = sh + kW;   // [kW]
  int* found = sh + 2 * kW;   // [9]: flag, b, hb, chunk, nchunks, chunk_tiles, slot, first, kv_len
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  if (tid == 0) found[0] = 0;
  auto load = [&](int i, int& first, int& kv_len) {
    first = p.indptr[i];
    kv_len = paged_kv_len(p.indptr[i + 1] - first, p.page_size, p.last_page_len, i);
  };
  const int within_tiles = p.splits * p.chunk_tiles;
  int first0[kPerThread], len0[kPerThread];  // this thread's sequences of the first round
  bool past = false;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int i = tid * kPerThread + k;
    first0[k] = len0[k] = 0;
    if (i < p.batch) {
      load(i, first0[k], len0[k]);
      past |= (len0[k] + TK - 1) / TK > within_tiles;
    }
  }
  for (int base = kRound; base < p.batch; base += kRound) {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int i = base + tid * kPerThread + k;
      if (i < p.batch) {
        int first, kv_len;
        load(i, first, kv_len);
        past |= (kv_len + TK - 1) / TK > within_tiles;
      }
    }
  }
  const bool all_within = __syncthreads_or(past) == 0;
  int carry_ctas = 0, carry_slots = 0;
  for (int base = 0; base < p.batch; base += kRound) {
    const int i0 = base + tid * kPerThread;  // this thread's sequences: i0 .. i0 + kPerThread - 1
    int nc[kPerThread], ct[kPerThread], first[kPerThread], kv_len[kPerThread];
    int a = 0, s = 0;  // this thread's CTAs and slots
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int i = i0 + k;
      nc[k] = first[k] = kv_len[k] = 0;
      ct[k] = 1;
      if (i < p.batch) {
        if (base == 0) first[k] = first0[k], kv_len[k] = len0[k];
        else load(i, first[k], kv_len[k]);
        const int tiles = (kv_len[k] + TK - 1) / TK;
        ct[k] = chunk_tiles_of(tiles, all_within, p.splits, p.max_chunk_tiles);
        nc[k] = chunks_of_tiles(tiles, ct[k]);
      }
      a += nc[k] * p.head_blocks;
      s += nc[k] >= 2 ? nc[k] : 0;
    }
    const int ta = a, ts = s;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {  // inclusive prefix within the warp
      const int x = __shfl_up_sync(0xffffffffu, a, o), y = __shfl_up_sync(0xffffffffu, s, o);
      if (lane >= o) a += x, s += y;
    }
    if (lane == 31) sum_ctas[warp] = a, sum_slots[warp] = s;
    __syncthreads();
    int pa = carry_ctas + a - ta, ps = carry_slots + s - ts;  // before this thread's sequences
    for (int v = 0; v < kW; ++v) {
      if (v < warp) pa += sum_ctas[v], ps += sum_slots[v];
      carry_ctas += sum_ctas[v];
      carry_slots += sum_slots[v];
    }
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int ctas = nc[k] * p.head_blocks;
      if (i0 + k < p.batch && me >= pa && me < pa + ctas) {
        const int local = me - pa;
        found[0] = 1;
        found[1] = i0 + k;
        found[2] = local / nc[k];
        found[3] = local % nc[k];
        found[4] = nc[k];
        found[5] = ct[k];
        found[6] = ps;
        found[7] = first[k];
        found[8] = kv_len[k];
      }
      pa += ctas;
      ps += nc[k] >= 2 ? nc[k] : 0;
    }
    __syncthreads();  // found visible; the warp sums read before the next round writes them
    if (found[0]) break;
  }
  if (!found[0]) return false;
  w = Work{found[1], found[2], found[3], found[4], found[5], found[6], found[7], found[8]};
  return true;
}

// ---- The decode kernel ---------------------------------------------------------

// Shared memory of one CTA, in bytes (layout in decode_kernel).
template <bool MLA, int DQK, int DV, int STAGES, int WARPS, int TK = kTileKeys>
constexpr std::size_t smem_bytes() {
  constexpr std::size_t ldk = DQK + 8, ldv = DV + 8, ldp = TK + 8;
  std::size_t elems = STAGES * TK * ldk + (MLA ? 0 : STAGES * TK * ldv) + kRows * ldk + kRows * ldp;
  return elems * 2 + STAGES * TK * sizeof(int) + 2 * WARPS * kRows * sizeof(float);
}

// MLA: the keys are [ckv (DV) | kpe (DQK - DV)] and the values are ckv.
// GQA: DQK == DV == head_dim, keys and values from their own caches.
template <bool MLA, int DQK, int DV, int STAGES, int WARPS, int TK = kTileKeys>
__global__ void __launch_bounds__(WARPS * 32) decode_kernel(const Params p) {
  constexpr int kWarps = WARPS, kThreads = WARPS * 32;
  static_assert(DQK % 32 == 0 && DV % (8 * kWarps) == 0, "head dims must split into mma tiles");
  static_assert(kWarps == 4 || kWarps == 8, "16 or 8 keys of a tile per warp in S = Q K^T");
  static_assert(MLA || DQK == DV, "GQA keys and values share the head dim");
  static_assert(STAGES >= 2, "at least double buffering");
  constexpr int LDK = DQK + 8;                // key row stride (elements)
  constexpr int LDVS = MLA ? LDK : DV + 8;    // value row stride
  constexpr int LDP = TK + 8;          // P row stride
  constexpr int DVW = DV / kWarps;            // output columns per warp
  constexpr int NB = DVW / 8;                 // mma n-blocks per warp
  constexpr int KPW = TK / kWarps;     // keys of a tile per warp in S = Q K^T
  constexpr int NBK = KPW / 8;                // their mma n-blocks

  extern __shared__ __align__(16) unsigned char smem_raw[];
  std::uint16_t* K_s = reinterpret_cast<std::uint16_t*>(smem_raw);  // [STAGES][64][LDK]
  std::uint16_t* V_s = MLA ? K_s : K_s + STAGES * TK * LDK;  // [STAGES][64][LDVS]
  std::uint16_t* Q_s = K_s + STAGES * TK * LDK + (MLA ? 0 : STAGES * TK * LDVS);  // [16][LDK]
  std::uint16_t* P_s = Q_s + kRows * LDK;                                                      // [16][LDP]
  int* tok_s = reinterpret_cast<int*>(P_s + kRows * LDP);                                      // [STAGES][64]
  float* red_max = reinterpret_cast<float*>(tok_s + STAGES * TK);                      // [WARPS][16]
  float* red_sum = red_max + kWarps * kRows;                                                   // [WARPS][16]

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, tq = lane % 4;  // mma fragment row group and column pair

  Work wk;
  if (!find_work<kThreads, TK>(p, reinterpret_cast<int*>(red_max), static_cast<int>(blockIdx.x), wk)) return;
  const int split = wk.chunk, nsplits = wk.nchunks;
  const int hb = wk.hb;
  const int b = wk.b;
  const int work = b * p.head_blocks + hb;  // (sequence, head block): the arrival counter's index
  const int row0 = hb * p.rows_per_cta;  // first query head of this CTA
  const int nrows = min(p.rows_per_cta, p.num_qo_heads - row0);
  const bool direct = nsplits == 1;
  // A page table inconsistent with the shapes the host planned for (more
  // chunks than they allow) must not write past the workspace: its split
  // sequences are left unwritten, and merge_kernel skips them.
  const bool fits = direct || static_cast<std::int64_t>(wk.slot) + nsplits <= p.max_slots;
  if (p.seq_info && hb == 0 && split == 0 && tid == 0) p.seq_info[b] = make_int2(wk.slot, fits ? nsplits : 1);
  if (!fits) return;
  // The sequence's first partial entry (query head 0, chunk 0).
  const std::int64_t part0 = static_cast<std::int64_t>(wk.slot) * p.num_qo_heads;

  // The sequence: kv_len keys on pages indices[first ...).
  const int first = wk.first;
  const int kv_len = wk.kv_len;
  const int n_tiles = (kv_len + TK - 1) / TK;
  const int chunk = wk.chunk_tiles;
  const int tile_begin = split * chunk;
  const int n = max(0, min(n_tiles, tile_begin + chunk) - tile_begin);  // tiles of this CTA

  // Q rows -> Q_s (rows past nrows zero-filled), by cp.async: the copies join
  // the first tile's group, so Q's memory round trip overlaps the page-id
  // lookups and the first tile's (MLA: 18 KB, 4.5 16-byte loads a thread, had
  // been a chain of dependent round trips before the first tile could start).
  {
    constexpr int CPR = DQK / 8;  // 16-byte chunks per row
    for (int c = tid; c < kRows * CPR; c += kThreads) {
      const int r = c / CPR, col = (c % CPR) * 8;
      const std::int64_t qrow = static_cast<std::int64_t>(b) * p.num_qo_heads + row0 + min(r, nrows - 1);
      const std::uint16_t* src = MLA && col >= DV ? p.q_pe + qrow * (DQK - DV) + (col - DV) : p.q + qrow * (MLA ? DV : DQK) + col;
      cp_async16(Q_s + r * LDK + col, src, r < nrows);
    }
  }

  // Cache row (page * page_size + slot) of key `row` of tile `tile`, or -1
  // past the end of the sequence.
  auto tok_of = [&](int tile, int row) -> int {
    const int t = tile * TK + row;
    if (t >= kv_len) return -1;
    const int page = __ldg(p.indices + first + t / p.page_size);
    if (page < 0 || page >= p.num_pages) return -1;  // invalid page ids are rejected by the oracle; never read them
    return page * p.page_size + t % p.page_size;
  };

  const std::uint64_t kvpol = l2_stream_policy(p.kv_evict_first);
  // cp.async of one tile (rows from tok_s[stage]) into stage `stage`.
  auto issue = [&](int stage) {
    const int* toks = tok_s + stage * TK;
    std::uint16_t* ks = K_s + stage * TK * LDK;
    if constexpr (!MLA) {
      std::uint16_t* vs = V_s + stage * TK * LDVS;
      constexpr int CPR = DQK / 8;
      static_assert(TK * CPR % kThreads == 0, "tile copies divide evenly");
#pragma unroll
      for (int i = 0; i < TK * CPR / kThreads; ++i) {
        const int c = tid + i * kThreads;
        const int r = c / CPR, col = (c % CPR) * 8;
        const int tok = toks[r];
        const std::int64_t off =
            tok < 0 ? 0 : (static_cast<std::int64_t>(tok) * p.num_kv_heads + hb) * DQK + col;
        cp_async16(ks + r * LDK + col, p.k + off, tok >= 0, kvpol);
        cp_async16(vs + r * LDVS + col, p.v + off, tok >= 0, kvpol);
      }
    } else {
      constexpr int CPR = DV / 8, CPE = (DQK - DV) / 8;
      static_assert(TK * CPR % kThreads == 0 && TK * CPE % kThreads == 0, "tile copies divide evenly");
#pragma unroll 8
      for (int i = 0; i < TK * CPR / kThreads; ++i) {
        const int c = tid + i * kThreads;
        const int r = c / CPR, col = (c % CPR) * 8;
        const int tok = toks[r];
        const std::int64_t off = tok < 0 ? 0 : static_cast<std::int64_t>(tok) * DV + col;
        cp_async16(ks + r * LDK + col, p.k + off, tok >= 0, kvpol);
      }
#pragma unroll
      for (int i = 0; i < TK * CPE / kThreads; ++i) {
        const int c = tid + i * kThreads;
        const int r = c / CPE, col = (c % CPE) * 8;
        const int tok = toks[r];
        const std::int64_t off = tok < 0 ? 0 : static_cast<std::int64_t>(tok) * (DQK - DV) + col;
        cp_async16(ks + r * LDK + DV + col, p.v + off, tok >= 0, kvpol);
      }
    }
  };

  // Prologue: page lookups of the first STAGES - 1 tiles, the next one in a
  // register, then their copies.
  int reg_tok = -1;
  if (tid < TK) {
#pragma unroll
    for (int k = 0; k < STAGES - 1; ++k) tok_s[k * TK + tid] = k < n ? tok_of(tile_begin + k, tid) : -1;
    reg_tok = STAGES - 1 < n ? tok_of(tile_begin + STAGES - 1, tid) : -1;
  }
  __syncthreads();  // tok_s
#pragma unroll
  for (int k = 0; k < STAGES - 1; ++k) {
    if (k < n) issue(k);
    cp_async_commit();
  }

  float o[NB][4];
#pragma unroll
  for (int i = 0; i < NB; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY};  // rows g and g + 8 (same in every warp)
  float l_run[2] = {0.f, 0.f};              // this thread's share of the row sums

  for (int j = 0; j < n; ++j) {
    // Page ids of tile j + STAGES - 1 (loaded one iteration ago) to shared
    // memory; start loading those of tile j + STAGES. The slot written here
    // was last read when tile j - 1 was issued, before the barriers inside
    // the previous iteration.
    if (tid < TK) {
      tok_s[((j + STAGES - 1) % STAGES) * TK + tid] = reg_tok;
      reg_tok = j + STAGES < n ? tok_of(tile_begin + j + STAGES, tid) : -1;
    }
    cp_async_wait<STAGES - 2>();  // this thread's copies of tile j are done
    __syncthreads();              // everyone's are; stage (j - 1) % STAGES is free
    if (j + STAGES - 1 < n) issue((j + STAGES - 1) % STAGES);
    cp_async_commit();  // possibly empty: keeps the group count uniform

    const int stage = j % STAGES;
    const std::uint16_t* ks = K_s + stage * TK * LDK;
    const std::uint16_t* vs = V_s + stage * TK * LDVS;

    // S = Q K^T for this warp's KPW keys (NBK n-blocks of 8 keys).
    float sc[NBK][4];
#pragma unroll
    for (int i = 0; i < NBK; ++i) sc[i][0] = sc[i][1] = sc[i][2] = sc[i][3] = 0.f;
    const std::uint16_t* qa = Q_s + (lane % 16) * LDK + (lane / 16) * 8;
    if constexpr (KPW == 16) {
      // One ldmatrix.x4 of K: both n-blocks, one k-step.
      const std::uint16_t* kb_ = ks + (warp * 16 + (lane % 8) + 8 * (lane / 16)) * LDK + 8 * ((lane / 8) % 2);
#pragma unroll 12
      for (int kk = 0; kk < DQK / 16; ++kk) {
        std::uint32_t a[4], bk[4];
        ldmatrix_x4(a, qa + kk * 16);
        ldmatrix_x4(bk, kb_ + kk * 16);
        mma_bf16(sc[0], a, bk[0], bk[1]);
        mma_bf16(sc[1], a, bk[2], bk[3]);
      }
    } else {
      // One ldmatrix.x4 of K: the n-block's two k-steps 2kk and 2kk + 1, into
      // two accumulators (two dependency chains of DQK / 32 mma, not one of
      // DQK / 16), added at the end.
      const std::uint16_t* kb_ = ks + (warp * 8 + (lane % 8)) * LDK + 8 * (lane / 8);
      float odd[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 6
      for (int kk = 0; kk < DQK / 32; ++kk) {
        std::uint32_t a0[4], a1[4], bk[4];
        ldmatrix_x4(a0, qa + kk * 32);
        ldmatrix_x4(a1, qa + kk * 32 + 16);
        ldmatrix_x4(bk, kb_ + kk * 32);
        mma_bf16(sc[0], a0, bk[0], bk[1]);
        mma_bf16(odd, a1, bk[2], bk[3]);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) sc[0][e] += odd[e];
    }

    // Scale to base 2, mask keys past the end, row max over the CTA.
    const int key0 = (tile_begin + j) * TK + warp * KPW;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nb = 0; nb < NBK; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key0 + nb * 8 + 2 * tq + (e & 1);
        const float x = key < kv_len ? sc[nb][e] * p.scale_log2 : -INFINITY;
        sc[nb][e] = x;
        mx[e >> 1] = fmaxf(mx[e >> 1], x);
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    }
    if (tq == 0) {
      red_max[warp * kRows + g] = mx[0];
      red_max[warp * kRows + g + 8] = mx[1];
    }
    __syncthreads();
    // The tile's first key is valid (tile_begin + j < n_tiles), and it is in
    // warp 0: m_new is finite, alpha is 0 on the first tile.
    float m_new[2], alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mt = red_max[g + 8 * r];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) mt = fmaxf(mt, red_max[w * kRows + g + 8 * r]);
      m_new[r] = fmaxf(m_run[r], mt);
      alpha[r] = exp2f(m_run[r] - m_new[r]);
      m_run[r] = m_new[r];
    }
    float rs[2] = {0.f, 0.f};
#pragma unroll
    for (int nb = 0; nb < NBK; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float pv = exp2f(sc[nb][e] - m_new[e >> 1]);  // masked keys: exp2(-inf) = 0
        sc[nb][e] = pv;
        rs[e >> 1] += pv;
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) l_run[r] = l_run[r] * alpha[r] + rs[r];
#pragma unroll
    for (int nb = 0; nb < NBK; ++nb) {
      const int col = warp * KPW + nb * 8 + 2 * tq;
      *reinterpret_cast<std::uint32_t*>(P_s + g * LDP + col) = pack_bf16(sc[nb][0], sc[nb][1]);
      *reinterpret_cast<std::uint32_t*>(P_s + (g + 8) * LDP + col) = pack_bf16(sc[nb][2], sc[nb][3]);
    }
#pragma unroll
    for (int i = 0; i < NB; ++i) {
      o[i][0] *= alpha[0];
      o[i][1] *= alpha[0];
      o[i][2] *= alpha[1];
      o[i][3] *= alpha[1];
    }
    __syncthreads();  // P_s complete

    // O[:, warp * DVW ...) += P V over the tile's 64 keys.
#pragma unroll
    for (int kk = 0; kk < TK / 16; ++kk) {
      std::uint32_t a[4];
      ldmatrix_x4(a, P_s + (lane % 16) * LDP + kk * 16 + (lane / 16) * 8);
      const std::uint16_t* vb = vs + (kk * 16 + (lane % 8) + 8 * ((lane / 8) % 2)) * LDVS + warp * DVW + 8 * (lane / 16);
#pragma unroll
      for (int np = 0; np < NB / 2; ++np) {
        std::uint32_t bv[4];
        ldmatrix_x4_trans(bv, vb + np * 16);
        mma_bf16(o[2 * np], a, bv[0], bv[1]);
        mma_bf16(o[2 * np + 1], a, bv[2], bv[3]);
      }
      if constexpr (NB % 2 == 1) {
        // An odd last n-block (DV / WARPS = 8 mod 16, e.g. head dim 96): the
        // same x4 load, of which only the first two matrices (its 8 columns)
        // are used; the other two read the next 8 columns of the row (the
        // next warp's, or the row's padding), never past it.
        std::uint32_t bv[4];
        ldmatrix_x4_trans(bv, vb + (NB / 2) * 16);
        mma_bf16(o[NB - 1], a, bv[0], bv[1]);
      }
    }
  }
  cp_async_wait<0>();  // only empty groups can be left; drain anyway

  // Row sums over the CTA, then normalise and store.
  float lsum[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    lsum[r] = l;
  }
  if (tq == 0) {
    red_sum[warp * kRows + g] = lsum[0];
    red_sum[warp * kRows + g + 8] = lsum[1];
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    float l = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) l += red_sum[w * kRows + row];
    if (row >= nrows) continue;
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const float lse = l > 0.f ? m_run[r] + log2f(l) : -INFINITY;
    const std::int64_t grow = static_cast<std::int64_t>(b) * p.num_qo_heads + row0 + row;
    const std::int64_t pe = part0 + static_cast<std::int64_t>(row0 + row) * nsplits + split;  // partial entry
#pragma unroll
    for (int i = 0; i < NB; ++i) {
      const int col = warp * DVW + i * 8 + 2 * tq;
      const float v0 = o[i][2 * r] * inv, v1 = o[i][2 * r + 1] * inv;
      if (direct) *reinterpret_cast<std::uint32_t*>(p.out + grow * DV + col) = pack_bf16(v0, v1);
      else *reinterpret_cast<float2*>(p.part_o + pe * DV + col) = make_float2(v0, v1);
    }
    if (warp == 0 && tq == 0) {
      if (!direct) p.part_lse[pe] = lse;
      else if (p.lse) p.lse[grow] = lse;
    }
  }
  if (direct || p.counters == nullptr) return;
  // The last split of this work item to get here merges its rows.
  __threadfence();  // this thread's partials, visible device-wide before the arrival
  __syncthreads();
  __shared__ bool last;
  if (tid == 0) last = atomicAdd(p.counters + work, 1u) == static_cast<unsigned>(nsplits - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();  // the other splits' partials, seen after their arrivals
  const std::int64_t orow0 = static_cast<std::int64_t>(b) * p.num_qo_heads + row0;
  if (nsplits <= p.splits) {
    // At most `splits` chunks (a sequence of up to splits x chunk_tiles
    // tiles, which the host's fused-merge rule covers): a warp a row.
    for (int r = warp; r < nrows; r += kWarps)
      merge_row<DV>(p.part_o, p.part_lse, p.out, p.lse, orow0 + r, part0 + static_cast<std::int64_t>(row0 + r) * nsplits,
                    nsplits, lane);
  } else {
    // A longer sequence, of more chunks: each row by every
    // warp (warp w taking splits w, w + WARPS, ...), their sums added in
    // shared memory in a fixed order, so one CTA's merge of many splits keeps
    // WARPS times the loads in flight. The K stages hold no copy any more
    // (drained above) and serve as the scratch.
    float4* scratch = reinterpret_cast<float4*>(smem_raw);  // [WARPS - 1][DV / 4]
    static_assert((kWarps - 1) * DV * sizeof(float) <= STAGES * TK * LDK * sizeof(std::uint16_t),
                  "the merge scratch fits the K stages");
    for (int r = 0; r < nrows; ++r) {
      float4 acc[merge_vecs<DV>()];
      float m, sum;
      merge_share<DV>(p.part_o, p.part_lse, part0 + static_cast<std::int64_t>(row0 + r) * nsplits, nsplits, warp,
                      kWarps, lane, acc, m, sum);
      if (warp > 0)
#pragma unroll
        for (int i = 0; i < merge_vecs<DV>(); ++i)
          if (merge_lane_has<DV>(lane, i)) scratch[(warp - 1) * (DV / 4) + lane + 32 * i] = acc[i];
      __syncthreads();
      if (warp == 0) {
        for (int w = 0; w < kWarps - 1; ++w)  // fixed order: deterministic
#pragma unroll
          for (int i = 0; i < merge_vecs<DV>(); ++i) {
            if (!merge_lane_has<DV>(lane, i)) continue;
            const float4 x = scratch[w * (DV / 4) + lane + 32 * i];
            acc[i].x += x.x;
            acc[i].y += x.y;
            acc[i].z += x.z;
            acc[i].w += x.w;
          }
        store_row<DV>(p.out, p.lse, orow0 + r, acc, m, sum, lane);
      }
      __syncthreads();  // scratch read before the next row writes it
    }
  }
  if (tid == 0) p.counters[work] = 0u;  // zero at rest, for the next launch on this stream
}

// The merge as its own launch (split sequences without counters): a CTA of
// kMergeWarps warps per output row, warp w taking splits w, w + kMergeWarps, ...
// (MLA at batch 1 has 16 rows of up to 122 splits: one warp per row would
// walk its splits as a chain of dependent round trips), the warps' sums added
// in shared memory.
constexpr int kMergeWarps = 8;
template <int DV>
__global__ void __launch_bounds__(kMergeWarps * 32)
    merge_kernel(const float* __restrict__ part_o, const float* __restrict__ part_lse, const int2* __restrict__ seq_info,
                 std::uint16_t* __restrict__ out, float* __restrict__ lse, int num_qo_heads) {
  __shared__ float4 partial[kMergeWarps - 1][DV / 4];
  const std::int64_t row = blockIdx.x;
  const int b = static_cast<int>(row / num_qo_heads), head = static_cast<int>(row % num_qo_heads);
  // (slot, chunks) of the row's sequence, written by the decode launch; one
  // chunk: the decode wrote the row itself.
  const int2 info = seq_info[b];
  if (info.y <= 1) return;
  const std::int64_t first = static_cast<std::int64_t>(info.x) * num_qo_heads + static_cast<std::int64_t>(head) * info.y;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  float4 acc[merge_vecs<DV>()];
  float m, sum;
  merge_share<DV>(part_o, part_lse, first, info.y, warp, kMergeWarps, lane, acc, m, sum);
  if (warp > 0)
#pragma unroll
    for (int i = 0; i < merge_vecs<DV>(); ++i)
      if (merge_lane_has<DV>(lane, i)) partial[warp - 1][lane + 32 * i] = acc[i];
  __syncthreads();
  if (warp > 0) return;
  for (int w = 0; w < kMergeWarps - 1; ++w)  // fixed order: deterministic
#pragma unroll
    for (int i = 0; i < merge_vecs<DV>(); ++i) {
      if (!merge_lane_has<DV>(lane, i)) continue;
      const float4 x = partial[w][lane + 32 * i];
      acc[i].x += x.x;
      acc[i].y += x.y;
      acc[i].z += x.z;
      acc[i].w += x.w;
    }
  store_row<DV>(out, lse, row, acc, m, sum, lane);
}

// ---- Host side: planning, workspace, launch ---------------------------------------

// The workspace starts with the split-merge arrival counters (zeroed when it is
// allocated, left zero by every launch), then each sequence's (slot, chunks)
// for merge_kernel, then the partial results.
constexpr int kMaxCounters = 65536;  // work items (sequence x head block) the counters serve at most
constexpr std::size_t kCounterBytes = kMaxCounters * sizeof(unsigned);
// Work items at most for the fused merge where the average sequence is split
// (past it merge_kernel spreads the rows over the SMs).
constexpr std::int64_t kFusedMaxWork = 4096;

// The split partials' buffer for `stream` on the current device, at least
// `bytes` (kernels/common/stream_workspace.hpp: allocated outside the timed
// region, grown when needed, refused while capturing), at least 4 MiB, its
// first kCounterBytes (the split counters) zeroed when allocated.
inline cudaError_t workspace_for(cudaStream_t stream, std::size_t bytes, void** out) {
  static auto* ws = new StreamWorkspaces(std::size_t{4} << 20, [](void* mem, std::size_t n, cudaStream_t s) {
    return cudaMemsetAsync(mem, 0, std::min(n, kCounterBytes), s);
  });
  return ws->get(stream, bytes, out);
}

// Per-device facts about one kernel instantiation, looked up once.
struct KernelInfo {
  int sms = 0;
  int ctas_per_sm = 0;
  int page_run_ctas = 1;  // CTAs an SM needs to stream whole pages at the device's DRAM rate (stream_ctas.hpp)
};

// CTAs an SM of `device` needs to stream whole pages at its DRAM rate
// (stream_ctas.hpp, from device_dram_bytes_per_s and the SM count),
// looked up once per device; 1 if a query fails. kernel_info and the MLA
// decode's tile choice (dispatch.cuh) both read it.
inline int device_stream_ctas_per_sm(int device) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices];
  const bool cached = device >= 0 && device < kMaxDevices;
  if (cached) {
    if (const int v = cache[device].load(std::memory_order_relaxed)) return v;
  }
  int sms = 0;
  const double dram_bytes_per_s = device_dram_bytes_per_s(device);
  if (dram_bytes_per_s <= 0 || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  const int v = stream_ctas_per_sm(dram_bytes_per_s, sms);
  if (cached) cache[device].store(v, std::memory_order_relaxed);
  return v;
}

template <bool MLA, int DQK, int DV, int STAGES, int WARPS, int TK = kTileKeys>
cudaError_t kernel_info(KernelInfo* info) {
  constexpr int kMaxDevices = 64;
  static std::array<std::atomic<int>, kMaxDevices> sms{};
  static std::array<std::atomic<int>, kMaxDevices> occ{};
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (device < 0 || device >= kMaxDevices) return cudaErrorInvalidDevice;
  if (occ[device].load() == 0) {
    constexpr std::size_t bytes = smem_bytes<MLA, DQK, DV, STAGES, WARPS, TK>();
    auto kernel = decode_kernel<MLA, DQK, DV, STAGES, WARPS, TK>;
    if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
        e != cudaSuccess)
      return e;
    // All of the unified L1/shared memory as shared memory: two GQA d128 CTAs
    // (110 KB each) per SM need it. A hint; failure to honour it is not an error.
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                             static_cast<int>(cudaSharedmemCarveoutMaxShared)) != cudaSuccess)
      (void)cudaGetLastError();  // clear it: the launch checks cudaGetLastError()
    int n_sm = 0, blocks = 0;
    if (cudaError_t e = cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess) return e;
    if (cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, WARPS * 32, bytes); e != cudaSuccess)
      return e;
    if (blocks < 1) return cudaErrorInvalidConfiguration;  // does not fit this device
    sms[device].store(n_sm);
    occ[device].store(blocks);
  }
  info->sms = sms[device].load();
  info->ctas_per_sm = occ[device].load();
  info->page_run_ctas = std::min(info->ctas_per_sm, device_stream_ctas_per_sm(device));
  return cudaSuccess;
}

// Plans and launches one decode (kernel, and the merge when split). `p` has
// every field but the plan's and the workspace's set; `total_keys` is
// num_kv_indices x page_size (shapes only). Returns the CUDA error of the
// launch; `splits_used` gets the chunks of the average sequence.
template <bool MLA, int DQK, int DV, int STAGES, int WARPS, int TK = kTileKeys>
cudaError_t launch(Params p, std::int64_t total_keys, int min_tiles, cudaStream_t stream, int* splits_used = nullptr) {
  KernelInfo info;
  if (cudaError_t e = kernel_info<MLA, DQK, DV, STAGES, WARPS, TK>(&info); e != cudaSuccess) return e;
  const std::int64_t rows = static_cast<std::int64_t>(p.batch) * p.num_qo_heads;
  const std::int64_t work = static_cast<std::int64_t>(p.batch) * p.head_blocks;
  const std::int64_t per_split_bytes = rows * (DV + 1) * static_cast<std::int64_t>(sizeof(float));
  const std::int64_t max_ws = per_split_bytes > 0 ? static_cast<std::int64_t>(kWorkspaceCap) / per_split_bytes : 1;
  // Slots: SMs x resident CTAs, except where pages hold runs of 64 keys: a CTA
  // streaming whole pages keeps much more in flight than one gathering rows,
  // so fewer CTAs an SM (info.page_run_ctas: as many as the SM needs for its
  // share of DRAM bandwidth, stream_ctas.hpp) fill it, and fewer, longer
  // splits pay less start and merge. MLA's 64-key kernel fits one CTA an SM,
  // so this only moves its 32-key kernel (dispatch.cuh says when that runs).
  const std::int64_t slots =
      static_cast<std::int64_t>(info.sms) *
      (p.page_size % TK != 0 ? info.ctas_per_sm : info.page_run_ctas);  // page_run_ctas <= ctas_per_sm
  const std::int64_t entry_bytes = static_cast<std::int64_t>(p.num_qo_heads) * (DV + 1) * sizeof(float);
  const Plan plan = plan_chunks(p.batch, p.head_blocks, entry_bytes, total_keys, TK, slots, min_tiles, max_ws);
  const int splits = plan.splits;
  p.splits = splits;
  p.chunk_tiles = plan.chunk_tiles;
  p.max_chunk_tiles = plan.max_chunk_tiles;
  p.max_slots = plan.max_slots;
  // The KV stream's L2 policy, by its size (l2_stream_policy.cuh).
  const std::int64_t bytes_per_key = MLA ? std::int64_t{DQK} * 2 : std::int64_t{p.num_kv_heads} * (DQK + DV) * 2;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  const std::int64_t kv_bytes = total_keys / p.batch * p.batch * bytes_per_key;
  p.kv_evict_first = evict_first_fraction(stream_evict_first(kv_bytes, device_l2_bytes(device)));
  p.part_o = p.part_lse = nullptr;
  p.seq_info = nullptr;
  p.counters = nullptr;
  bool merge_launch = false;
  if (plan.max_slots > 0) {
    void* ws = nullptr;
    const std::size_t info_bytes = (static_cast<std::size_t>(p.batch) * sizeof(int2) + 15) / 16 * 16;
    const std::size_t entries = static_cast<std::size_t>(plan.max_slots) * static_cast<std::size_t>(p.num_qo_heads);
    const std::size_t o_bytes = entries * DV * sizeof(float);
    const std::size_t l_bytes = entries * sizeof(float);
    if (cudaError_t e = workspace_for(stream, kCounterBytes + info_bytes + o_bytes + l_bytes, &ws); e != cudaSuccess)
      return e;
    auto* base = static_cast<unsigned char*>(ws);
    // The fused merge is done by one CTA per work item after its own split, a
    // warp per row: worth it where that is little, at most two rows per warp
    // and 64 KB of partials of the average sequence (it saves merge_kernel's
    // launch). With more, one CTA walking every split of its rows takes longer
    // than merge_kernel, which spreads the rows' splits over the SMs. Where the
    // average sequence is one chunk only the longer ones split, and their last
    // CTA merges them (every warp on each row): a second launch would cost
    // every call for what few sequences need.
    const std::size_t merge_bytes = static_cast<std::size_t>(p.rows_per_cta) * splits * DV * sizeof(float);
    const bool fused = splits == 1 || (work <= kFusedMaxWork && p.rows_per_cta <= 2 * WARPS &&
                                       merge_bytes <= (std::size_t{64} << 10));
    if (work <= kMaxCounters && fused) p.counters = reinterpret_cast<unsigned*>(base);
    else merge_launch = true;
    if (merge_launch) p.seq_info = reinterpret_cast<int2*>(base + kCounterBytes);
    p.part_o = reinterpret_cast<float*>(base + kCounterBytes + info_bytes);
    p.part_lse = reinterpret_cast<float*>(base + kCounterBytes + info_bytes + o_bytes);
  }
  if (splits_used) *splits_used = splits;
  if (plan.max_ctas > 0x7fffffff) return cudaErrorInvalidConfiguration;
  decode_kernel<MLA, DQK, DV, STAGES, WARPS, TK>
      <<<static_cast<unsigned>(plan.max_ctas), WARPS * 32, smem_bytes<MLA, DQK, DV, STAGES, WARPS, TK>(), stream>>>(p);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (merge_launch) {
    if (rows > 0x7fffffff) return cudaErrorInvalidConfiguration;
    merge_kernel<DV><<<static_cast<unsigned>(rows), kMergeWarps * 32, 0, stream>>>(p.part_o, p.part_lse, p.seq_info,
                                                                                   p.out, p.lse, p.num_qo_heads);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace kb::kernels::paged_decode
