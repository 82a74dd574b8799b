// Causal attention prefill (many query tokens per sequence) over a paged or
// ragged KV, shared by kb_cuda_gqa_paged_prefill, kb_cuda_gqa_ragged_prefill,
// kb_cuda_mla_ragged_prefill (prefill_gqa.cu) and kb_cuda_mla_paged_prefill
// (prefill_mla.cu); the instantiations they run are in dispatch.cuh.
//
// FlashAttention-2 style, on tensor cores (mma.sync m16n8k16, bf16 in, fp32
// accumulate), no attention matrix in memory:
//  * plan: plan_kernel (one CTA) turns the batch layout (qo_indptr,
//    kv_indptr, kv_last_page_len) into a work list of (query tile, sequence
//    extents) items in a per-stream device workspace, the tiles of each
//    sequence last-first (the longest causal rows start first). The
//    attention grid is sized from shapes (an upper bound on the item count),
//    so the host never reads the page table; CTAs past the real count exit.
//    The plan depends on the layout only (not on page ids or data), as
//    FlashInfer's plan does, so a caller that replays one batch layout can
//    skip it (Mode::run_only) and time it apart.
//  * one CTA per (item, head block): BM = 16 * MR * WM query rows. A row is a
//    (token, head) pair: GQA takes one query head per CTA (heads_per_cta 1,
//    BM tokens); MLA packs its query heads, which share the one latent KV
//    stream, into the rows (heads_per_cta 16: BM / 16 tokens).
//  * warps: WM along the rows (16 * MR rows each) times WN along the value
//    columns. S = Q K^T: warp (wm, wn) takes keys [wn * BN / WN, ...) of its
//    rows over the whole qk dim; WN > 1 agrees on the row max through shared
//    memory and passes P = exp2(S - m) through shared memory, WN == 1 keeps
//    P in registers (the accumulator layout is the A-operand layout).
//  * KV tiles of BN keys stream through a two-stage cp.async pipeline; the
//    cache row of every key (page lookup) is read one tile ahead into a
//    register, rows past the visible keys are zero-filled and masked.
//  * causal, bottom-right aligned: query token t of a sequence with q_len
//    queries and kv_len keys sees keys 0 .. kv_len - q_len + t. A CTA loads
//    only the tiles its last token sees and masks only tiles past the keys
//    its first token sees. Online softmax in fp32 base 2.
//  * rows with no visible key (q_len > kv_len, empty sequences) get output 0
//    and lse -inf, as kb's oracle defines.
// Shared memory rows are padded by 16 bytes so every ldmatrix is free of bank
// conflicts.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "decode.cuh"  // the PTX wrappers (cp.async, ldmatrix, mma.sync)

namespace kb::kernels::prefill {

using paged_decode::cp_async16;
using paged_decode::cp_async_commit;
using paged_decode::cp_async_wait;
using paged_decode::ldmatrix_x4;
using paged_decode::ldmatrix_x4_trans;
using paged_decode::mma_bf16;
using paged_decode::pack_bf16;

// One work item of the plan: a query tile of a sequence and the sequence's
// extents, read by a CTA in one round of loads (32 bytes).
struct alignas(16) PlanItem {
  int tile;      // query tile: tokens tile * tokens_per_cta ... of the sequence
  int q_start;   // qo_indptr[b]
  int q_len;     // qo_indptr[b + 1] - qo_indptr[b]
  int kv_first;  // kv_indptr[b]
  int kv_len;    // keys of the sequence (paged: from the page count and kv_last_page_len)
  int unused[3];
};

struct Params {
  const std::uint16_t* q;     // GQA: q [total_q, H_q, DQK]; MLA: q_nope [total_q, H_q, DV]
  const std::uint16_t* q_pe;  // MLA: q_pe [total_q, H_q, DQK - DV]
  const std::uint16_t* k;     // GQA: k [rows, H_kv, DQK]; MLA: ckv [rows, DV]
  const std::uint16_t* v;     // GQA: v [rows, H_kv, DV];  MLA: kpe [rows, DQK - DV]
  const std::int32_t* qo_indptr;      // [batch + 1]
  const std::int32_t* kv_indptr;      // [batch + 1]: pages (paged) or rows (ragged)
  const std::int32_t* kv_indices;     // page ids (paged)
  const std::int32_t* last_page_len;  // [batch] or null (every page full)
  std::uint16_t* out;                 // [total_q, H_q, DV] bf16
  float* lse;                         // [total_q, H_q] or null
  const PlanItem* items;              // plan: (query tile, sequence extents)
  const int* item_count;              // plan: number of items (then 3 ints of the persistent kernel's scheduler)
  bool paged = false;                 // else ragged: kv rows kv_indptr[b] .. kv_indptr[b + 1]
  int batch = 0;
  int total_q = 0;
  int num_qo_heads = 0;
  int num_kv_heads = 1;
  int group = 1;           // H_q / H_kv
  int page_size = 1;       // paged only
  int heads_per_cta = 1;   // query heads packed into the rows of one CTA
  int tokens_per_cta = 0;  // tokens of one work item
  int head_blocks = 1;     // ceil(H_q / heads_per_cta)
  int kv_limit = 0;        // paged: number of pages; ragged (or gathered): number of kv rows (bounds every read)
  // Paged K / V copied into page-table order (entry i's rows at i * page_size ...;
  // the wgmma kernel only): the plan is the paged one (kv_len from the page count
  // and kv_last_page_len), the kernel reads rows kv_indptr[b] * page_size ... as
  // ragged, and kv_limit counts rows.
  bool gathered = false;
  // Fused page gather (gathered, page size 1; the persistent wgmma kernel only):
  // the kernel's idle producer threads copy the pages themselves, kv_indices[i]
  // of gather_k / gather_v to row i of k / v, and publish per 64-row chunk
  // counts in gather_sync (prefill_wgmma.cuh, "fused page gather"). Null: the
  // copy is complete before the kernel starts (or nothing is gathered).
  const std::uint16_t* gather_k = nullptr;
  const std::uint16_t* gather_v = nullptr;
  unsigned* gather_sync = nullptr;  // [4] header, then a count per 64-row chunk; zeroed with each plan
  int gather_entries = 0;           // page-table entries (rows of the copy)
  int gather_pages = 0;             // pages of gather_k / gather_v (bounds the page ids)
  float scale_log2 = 0;    // sm_scale * log2(e)
};

// 2^x on the SFU (ex2.approx: ~2 ulp; -inf -> 0).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// A CTA's work item and its sequence's extents (false past the plan): one
// round of loads (the item and the item count together). After the timer's
// L2 flush every dependent round trip is a DRAM access, and at batch 8 a CTA
// computes only a few KV tiles: reading qo_indptr, kv_indptr and
// kv_last_page_len behind the item (each behind the check that first needed
// it) made five rounds before the first KV page id could be read.
__device__ __forceinline__ bool load_item(const Params& p, int item, PlanItem& it) {
  const int count = *p.item_count;
  it = p.items[item];  // inside the workspace: the grid has at most its max_items items
  return item < count;
}

// Tile shapes of one instantiation.
template <int DQK_, int DV_, int MR_, int WM_, int WN_, int BN_, bool MLA_>
struct Config {
  static constexpr int DQK = DQK_, DV = DV_, MR = MR_, WM = WM_, WN = WN_, BN = BN_;
  static constexpr bool MLA = MLA_;
  static constexpr int kWarps = WM * WN;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int BM = 16 * MR * WM;  // query rows per CTA
  static constexpr int KW = BN / WN;       // keys per warp in S
  static constexpr int NKB = KW / 8;       // S n-blocks per warp
  static constexpr int DVW = DV / WN;      // output columns per warp
  static constexpr int NB = DVW / 8;       // O n-blocks per warp
  static constexpr int STAGES = 2;
  static constexpr int LDQ = DQK + 8, LDK = DQK + 8, LDV = MLA ? LDK : DV + 8, LDP = BN + 8;
  static_assert(DQK % 16 == 0 && KW % 16 == 0 && DVW % 16 == 0, "mma tiles");
  static_assert(!MLA || DV % 8 == 0, "ckv in 16-byte chunks");
  static constexpr std::size_t q_elems = static_cast<std::size_t>(BM) * LDQ;
  static constexpr std::size_t k_elems = static_cast<std::size_t>(STAGES) * BN * LDK;
  static constexpr std::size_t v_elems = MLA ? 0 : static_cast<std::size_t>(STAGES) * BN * LDV;
  static constexpr std::size_t p_elems = WN > 1 ? static_cast<std::size_t>(BM) * LDP : 0;
  static constexpr std::size_t smem_bytes =
      (q_elems + k_elems + v_elems + p_elems) * 2 + STAGES * BN * sizeof(int) + 2 * WN * BM * sizeof(float);
};

template <class C, int MINB>
__global__ void __launch_bounds__(C::kThreads, MINB) prefill_kernel(const Params p) {
  constexpr int DQK = C::DQK, DV = C::DV, MR = C::MR, WN = C::WN, BN = C::BN, BM = C::BM, KW = C::KW,
                NKB = C::NKB, DVW = C::DVW, NB = C::NB, STAGES = C::STAGES, LDQ = C::LDQ, LDK = C::LDK,
                LDV = C::LDV, LDP = C::LDP, T = C::kThreads;
  constexpr bool MLA = C::MLA;

  const int item = static_cast<int>(blockIdx.x / static_cast<unsigned>(p.head_blocks));
  const int hb = static_cast<int>(blockIdx.x % static_cast<unsigned>(p.head_blocks));
  PlanItem w;
  if (!load_item(p, item, w)) return;

  extern __shared__ __align__(16) unsigned char smem_raw[];
  std::uint16_t* Q_s = reinterpret_cast<std::uint16_t*>(smem_raw);  // [BM][LDQ]
  std::uint16_t* K_s = Q_s + C::q_elems;                              // [STAGES][BN][LDK]
  std::uint16_t* V_s = MLA ? K_s : K_s + C::k_elems;                  // [STAGES][BN][LDV] (MLA: ckv part of K_s)
  std::uint16_t* P_s = K_s + C::k_elems + C::v_elems;                 // [BM][LDP] (WN > 1)
  int* tok_s = reinterpret_cast<int*>(P_s + C::p_elems);             // [STAGES][BN]
  float* red_max = reinterpret_cast<float*>(tok_s + STAGES * BN);     // [WN][BM]
  float* red_sum = red_max + WN * BM;                                 // [WN][BM]

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, tq = lane % 4;
  const int wm = warp / WN, wn = warp % WN;
  const int rowbase = wm * 16 * MR;

  const int q_start = w.q_start;
  const int q_len = w.q_len;
  const int tok0 = w.tile * p.tokens_per_cta;
  // Tokens of this item; never past total_q (malformed indptr is the oracle's to reject).
  const int ntok = min(min(p.tokens_per_cta, q_len - tok0), p.total_q - q_start - tok0);
  if (q_start < 0 || ntok <= 0) return;
  const int kv_first = w.kv_first;
  const int kv_len = w.kv_len;
  const int delta = kv_len - q_len;
  const int hp = p.heads_per_cta;
  const int h0 = hb * hp;
  const int kvh = MLA ? 0 : h0 / p.group;
  // Keys [0, kv_end) are seen by some row of this CTA, [0, full_end) by all of them.
  const int kv_end = max(0, min(kv_len, tok0 + ntok + delta));
  const int full_end = max(0, min(kv_len, tok0 + 1 + delta));
  const int n = (kv_end + BN - 1) / BN;

  // Per-thread rows: rowbase + mr * 16 + g + 8 * half; last key each one sees.
  int lim[MR][2];
#pragma unroll
  for (int mr = 0; mr < MR; ++mr)
#pragma unroll
    for (int h = 0; h < 2; ++h) lim[mr][h] = tok0 + (rowbase + mr * 16 + g + 8 * h) / hp + delta;

  // Q rows -> Q_s (zero-filled padding), in the first cp.async group.
  {
    constexpr int CPR = DQK / 8;
    const int rows_used = hp * p.tokens_per_cta;
#pragma unroll 4
    for (int c = tid; c < BM * CPR; c += T) {
      const int r = c / CPR, col = (c % CPR) * 8;
      const int t = r / hp, h = h0 + r % hp;
      const bool valid = r < rows_used && t < ntok && h < p.num_qo_heads;
      const std::int64_t qrow = static_cast<std::int64_t>(q_start + tok0 + t) * p.num_qo_heads + h;
      const std::uint16_t* src = p.q;
      if (valid) {
        if constexpr (!MLA) src = p.q + qrow * DQK + col;
        else src = col < DV ? p.q + qrow * DV + col : p.q_pe + qrow * (DQK - DV) + (col - DV);
      }
      cp_async16(Q_s + r * LDQ + col, src, valid);
    }
  }

  // Cache row of key `row` of tile `tile`, or -1 (zero-filled, masked).
  auto tok_of = [&](int tile, int row) -> int {
    const int t = tile * BN + row;
    if (t >= kv_end) return -1;
    if (p.paged) {
      const int page = __ldg(p.kv_indices + kv_first + t / p.page_size);
      if (page < 0 || page >= p.kv_limit) return -1;
      return page * p.page_size + t % p.page_size;
    }
    const int r = kv_first + t;
    return r < p.kv_limit ? r : -1;
  };

  // Row `tok` of the K / V streams this CTA reads starts at base + tok * stride.
  const std::uint16_t* k_base = MLA ? p.k : p.k + static_cast<std::int64_t>(kvh) * DQK;
  const std::uint16_t* v_base = MLA ? p.v : p.v + static_cast<std::int64_t>(kvh) * DV;
  const int k_stride = MLA ? DV : p.num_kv_heads * DQK;
  const int v_stride = MLA ? DQK - DV : p.num_kv_heads * DV;

  // cp.async of one tile: chunk c of the CH 16-byte chunks per row of a
  // stream, rows from tok_s, into columns [col0, ...) of rows with stride LD.
  auto copy_rows = [&](const int* toks, std::uint16_t* dst, int ld, int col0, const std::uint16_t* base, int stride,
                       auto ch_tag) {
    constexpr int CH = decltype(ch_tag)::value;
    if constexpr (T % CH == 0) {
      // Each thread keeps one column and walks rows T / CH apart: the smem
      // addresses are one base plus constants (few live registers).
      constexpr int RPP = T / CH;
      const int col = (tid % CH) * 8, r0 = tid / CH;
#pragma unroll
      for (int i = 0; i < (BN + RPP - 1) / RPP; ++i) {
        const int r = r0 + i * RPP;
        if (BN % RPP == 0 || r < BN) {
          const int tok = toks[r];
          const std::uint16_t* src = base + (static_cast<std::int64_t>(tok < 0 ? 0 : tok) * stride + col);
          cp_async16(dst + r * ld + col0 + col, src, tok >= 0);
        }
      }
    } else if constexpr (CH % 8 == 0) {
      // Rows in 128-byte column groups: thread keeps chunk tid % 8 of a group.
      static_assert(T % 8 == 0, "128-byte column groups");
      constexpr int RPP = T / 8;
      const int col = (tid % 8) * 8, r0 = tid / 8;
#pragma unroll
      for (int i = 0; i < (BN + RPP - 1) / RPP; ++i) {
        const int r = r0 + i * RPP;
        if (BN % RPP == 0 || r < BN) {
          const int tok = toks[r];
          const std::uint16_t* src = base + (static_cast<std::int64_t>(tok < 0 ? 0 : tok) * stride + col);
#pragma unroll
          for (int cg = 0; cg < CH / 8; ++cg) cp_async16(dst + r * ld + col0 + cg * 64 + col, src + cg * 64, tok >= 0);
        }
      }
    } else {
      // Other row widths (head dim 96: 12 chunks): chunk c of the tile is
      // row c / CH, column c % CH. Not unrolled: the unrolled copies' live
      // addresses pushed the kernel past its 128 registers (spills at d 96).
#pragma unroll 1
      for (int c = tid; c < BN * CH; c += T) {
        const int r = c / CH, col = (c % CH) * 8;
        const int tok = toks[r];
        const std::uint16_t* src = base + (static_cast<std::int64_t>(tok < 0 ? 0 : tok) * stride + col);
        cp_async16(dst + r * ld + col0 + col, src, tok >= 0);
      }
    }
  };
  auto issue = [&](int stage) {
    const int* toks = tok_s + stage * BN;
    std::uint16_t* ks = K_s + stage * BN * LDK;
    if constexpr (!MLA) {
      copy_rows(toks, ks, LDK, 0, k_base, k_stride, std::integral_constant<int, DQK / 8>{});
      copy_rows(toks, V_s + stage * BN * LDV, LDV, 0, v_base, v_stride, std::integral_constant<int, DV / 8>{});
    } else {
      copy_rows(toks, ks, LDK, 0, k_base, k_stride, std::integral_constant<int, DV / 8>{});
      copy_rows(toks, ks, LDK, DV, v_base, v_stride, std::integral_constant<int, (DQK - DV) / 8>{});
    }
  };

  // Prologue: cache rows of the first STAGES - 1 tiles, the next in a register.
  int reg_tok = -1;
  if (tid < BN) {
#pragma unroll
    for (int k = 0; k < STAGES - 1; ++k) tok_s[k * BN + tid] = k < n ? tok_of(k, tid) : -1;
    reg_tok = STAGES - 1 < n ? tok_of(STAGES - 1, tid) : -1;
  }
  __syncthreads();  // tok_s
#pragma unroll
  for (int k = 0; k < STAGES - 1; ++k) {
    if (k < n) issue(k);
    cp_async_commit();  // the first group also holds Q
  }

  float o[MR][NB][4];
#pragma unroll
  for (int mr = 0; mr < MR; ++mr)
#pragma unroll
    for (int i = 0; i < NB; ++i) o[mr][i][0] = o[mr][i][1] = o[mr][i][2] = o[mr][i][3] = 0.f;
  float m_run[MR][2], l_run[MR][2];
#pragma unroll
  for (int mr = 0; mr < MR; ++mr) m_run[mr][0] = m_run[mr][1] = -INFINITY, l_run[mr][0] = l_run[mr][1] = 0.f;

  for (int j = 0; j < n; ++j) {
    if (tid < BN) {
      tok_s[((j + STAGES - 1) % STAGES) * BN + tid] = reg_tok;
      reg_tok = j + STAGES < n ? tok_of(j + STAGES, tid) : -1;
    }
    cp_async_wait<STAGES - 2>();  // this thread's copies of tile j (and Q) are done
    __syncthreads();              // everyone's; stage (j - 1) % STAGES is free
    if (j + STAGES - 1 < n) issue((j + STAGES - 1) % STAGES);
    cp_async_commit();

    const int stage = j % STAGES;
    const std::uint16_t* ks = K_s + stage * BN * LDK;
    const std::uint16_t* vs = V_s + stage * BN * LDV;

    // S = Q K^T: rows of this warp, keys [wn * KW, (wn + 1) * KW) of the tile.
    float s[MR][NKB][4];
#pragma unroll
    for (int mr = 0; mr < MR; ++mr)
#pragma unroll
      for (int i = 0; i < NKB; ++i) s[mr][i][0] = s[mr][i][1] = s[mr][i][2] = s[mr][i][3] = 0.f;
    {
      const std::uint16_t* qa = Q_s + (rowbase + lane % 16) * LDQ + (lane / 16) * 8;
      const std::uint16_t* kb_ = ks + (wn * KW + (lane % 8) + 8 * (lane / 16)) * LDK + 8 * ((lane / 8) % 2);
#pragma unroll
      for (int kk = 0; kk < DQK / 16; ++kk) {
        std::uint32_t a[MR][4];
#pragma unroll
        for (int mr = 0; mr < MR; ++mr) ldmatrix_x4(a[mr], qa + mr * 16 * LDQ + kk * 16);
#pragma unroll
        for (int np = 0; np < NKB / 2; ++np) {
          std::uint32_t bk[4];
          ldmatrix_x4(bk, kb_ + np * 16 * LDK + kk * 16);
#pragma unroll
          for (int mr = 0; mr < MR; ++mr) {
            mma_bf16(s[mr][2 * np], a[mr], bk[0], bk[1]);
            mma_bf16(s[mr][2 * np + 1], a[mr], bk[2], bk[3]);
          }
        }
      }
    }

    // Scale to base 2, causal / end mask (only on tiles that need it), row max.
    const bool need_mask = (j + 1) * BN > full_end;
    const int key0 = j * BN + wn * KW;
    float mx[MR][2];
#pragma unroll
    for (int mr = 0; mr < MR; ++mr) {
      mx[mr][0] = mx[mr][1] = -INFINITY;
#pragma unroll
      for (int nb = 0; nb < NKB; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = s[mr][nb][e] * p.scale_log2;
          if (need_mask) {
            const int key = key0 + nb * 8 + 2 * tq + (e & 1);
            if (key > lim[mr][e >> 1] || key >= kv_len) x = -INFINITY;
          }
          s[mr][nb][e] = x;
          mx[mr][e >> 1] = fmaxf(mx[mr][e >> 1], x);
        }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        mx[mr][h] = fmaxf(mx[mr][h], __shfl_xor_sync(0xffffffffu, mx[mr][h], 1));
        mx[mr][h] = fmaxf(mx[mr][h], __shfl_xor_sync(0xffffffffu, mx[mr][h], 2));
      }
    }
    if constexpr (WN > 1) {
      if (tq == 0)
#pragma unroll
        for (int mr = 0; mr < MR; ++mr)
#pragma unroll
          for (int h = 0; h < 2; ++h) red_max[wn * BM + rowbase + mr * 16 + g + 8 * h] = mx[mr][h];
      __syncthreads();
#pragma unroll
      for (int mr = 0; mr < MR; ++mr)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float m = red_max[rowbase + mr * 16 + g + 8 * h];
#pragma unroll
          for (int w = 1; w < WN; ++w) m = fmaxf(m, red_max[w * BM + rowbase + mr * 16 + g + 8 * h]);
          mx[mr][h] = m;
        }
    }
#pragma unroll
    for (int mr = 0; mr < MR; ++mr) {
      float m_use[2], alpha[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float m_new = fmaxf(m_run[mr][h], mx[mr][h]);
        m_use[h] = m_new == -INFINITY ? 0.f : m_new;  // a row with no key yet: exp2(-inf - 0) = 0, never NaN
        alpha[h] = fast_exp2(m_run[mr][h] - m_use[h]);
        m_run[mr][h] = m_new;
      }
      float rs[2] = {0.f, 0.f};
#pragma unroll
      for (int nb = 0; nb < NKB; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float pv = fast_exp2(s[mr][nb][e] - m_use[e >> 1]);
          s[mr][nb][e] = pv;
          rs[e >> 1] += pv;
        }
#pragma unroll
      for (int h = 0; h < 2; ++h) l_run[mr][h] = l_run[mr][h] * alpha[h] + rs[h];
#pragma unroll
      for (int i = 0; i < NB; ++i) {
        o[mr][i][0] *= alpha[0];
        o[mr][i][1] *= alpha[0];
        o[mr][i][2] *= alpha[1];
        o[mr][i][3] *= alpha[1];
      }
    }

    // O[rows, wn * DVW ...) += P V over the tile's BN keys.
    const std::uint16_t* vb = vs + ((lane % 8) + 8 * ((lane / 8) % 2)) * LDV + wn * DVW + 8 * (lane / 16);
    if constexpr (WN == 1) {
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        std::uint32_t a[MR][4];
#pragma unroll
        for (int mr = 0; mr < MR; ++mr) {
          a[mr][0] = pack_bf16(s[mr][2 * kk][0], s[mr][2 * kk][1]);
          a[mr][1] = pack_bf16(s[mr][2 * kk][2], s[mr][2 * kk][3]);
          a[mr][2] = pack_bf16(s[mr][2 * kk + 1][0], s[mr][2 * kk + 1][1]);
          a[mr][3] = pack_bf16(s[mr][2 * kk + 1][2], s[mr][2 * kk + 1][3]);
        }
#pragma unroll
        for (int np = 0; np < NB / 2; ++np) {
          std::uint32_t bv[4];
          ldmatrix_x4_trans(bv, vb + kk * 16 * LDV + np * 16);
#pragma unroll
          for (int mr = 0; mr < MR; ++mr) {
            mma_bf16(o[mr][2 * np], a[mr], bv[0], bv[1]);
            mma_bf16(o[mr][2 * np + 1], a[mr], bv[2], bv[3]);
          }
        }
      }
    } else {
#pragma unroll
      for (int mr = 0; mr < MR; ++mr)
#pragma unroll
        for (int nb = 0; nb < NKB; ++nb) {
          const int col = wn * KW + nb * 8 + 2 * tq;
          const int r = rowbase + mr * 16 + g;
          *reinterpret_cast<std::uint32_t*>(P_s + r * LDP + col) = pack_bf16(s[mr][nb][0], s[mr][nb][1]);
          *reinterpret_cast<std::uint32_t*>(P_s + (r + 8) * LDP + col) = pack_bf16(s[mr][nb][2], s[mr][nb][3]);
        }
      __syncthreads();  // P_s complete
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        std::uint32_t a[MR][4];
#pragma unroll
        for (int mr = 0; mr < MR; ++mr)
          ldmatrix_x4(a[mr], P_s + (rowbase + mr * 16 + lane % 16) * LDP + kk * 16 + (lane / 16) * 8);
#pragma unroll
        for (int np = 0; np < NB / 2; ++np) {
          std::uint32_t bv[4];
          ldmatrix_x4_trans(bv, vb + kk * 16 * LDV + np * 16);
#pragma unroll
          for (int mr = 0; mr < MR; ++mr) {
            mma_bf16(o[mr][2 * np], a[mr], bv[0], bv[1]);
            mma_bf16(o[mr][2 * np + 1], a[mr], bv[2], bv[3]);
          }
        }
      }
    }
  }
  cp_async_wait<0>();  // Q's group when there was no tile; empty groups otherwise

  // Row sums (quad, then across the WN warps of a row), normalise, store.
  float lsum[MR][2];
#pragma unroll
  for (int mr = 0; mr < MR; ++mr)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = l_run[mr][h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      lsum[mr][h] = l;
    }
  if constexpr (WN > 1) {
    if (tq == 0)
#pragma unroll
      for (int mr = 0; mr < MR; ++mr)
#pragma unroll
        for (int h = 0; h < 2; ++h) red_sum[wn * BM + rowbase + mr * 16 + g + 8 * h] = lsum[mr][h];
    __syncthreads();
#pragma unroll
    for (int mr = 0; mr < MR; ++mr)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float l = 0.f;
#pragma unroll
        for (int w = 0; w < WN; ++w) l += red_sum[w * BM + rowbase + mr * 16 + g + 8 * h];
        lsum[mr][h] = l;
      }
  }
  const int rows_used = hp * p.tokens_per_cta;
#pragma unroll
  for (int mr = 0; mr < MR; ++mr)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = rowbase + mr * 16 + g + 8 * h;
      const int t = r / hp, head = h0 + r % hp;
      if (r >= rows_used || t >= ntok || head >= p.num_qo_heads) continue;
      const float l = lsum[mr][h];
      const float inv = l > 0.f ? 1.f / l : 0.f;
      const std::int64_t grow = static_cast<std::int64_t>(q_start + tok0 + t) * p.num_qo_heads + head;
#pragma unroll
      for (int i = 0; i < NB; ++i) {
        const int col = wn * DVW + i * 8 + 2 * tq;
        *reinterpret_cast<std::uint32_t*>(p.out + grow * DV + col) =
            pack_bf16(o[mr][i][2 * h] * inv, o[mr][i][2 * h + 1] * inv);
      }
      if (wn == 0 && tq == 0 && p.lse) p.lse[grow] = l > 0.f ? m_run[mr][h] + log2f(l) : -INFINITY;
    }
}

// ---- Planning ----------------------------------------------------------------------

constexpr int kPlanThreads = 1024;

// static: this header is included by several .cu files (one copy each, internal linkage).
// One CTA: seq_off[b] = first item of sequence b (exclusive scan of its
// query tiles), then items[w] = (query tile, the sequence's extents) with
// each sequence's tiles last-first. At most max_items items (more only for
// malformed indptr).
static __global__ void __launch_bounds__(kPlanThreads)
    plan_kernel(const std::int32_t* __restrict__ qo_indptr, const std::int32_t* __restrict__ kv_indptr,
                const std::int32_t* __restrict__ last_page_len, bool paged, int page_size, int batch, int tokens_per_cta,
                int max_items, int* seq_off, PlanItem* items, int* item_count) {
  __shared__ int part[kPlanThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const int per = (batch + kPlanThreads - 1) / kPlanThreads;
  const int lo = min(batch, tid * per), hi = min(batch, lo + per);
  auto tiles = [&](int b) {
    const int ql = qo_indptr[b + 1] - qo_indptr[b];
    return ql > 0 ? (ql + tokens_per_cta - 1) / tokens_per_cta : 0;
  };
  int sum = 0;
  for (int b = lo; b < hi; ++b) sum = min(sum + tiles(b), max_items);  // saturate: no int overflow
  part[tid] = sum;
  __syncthreads();
  for (int off = 1; off < kPlanThreads; off *= 2) {  // inclusive scan (Hillis-Steele)
    const int v = tid >= off ? part[tid - off] : 0;
    __syncthreads();
    part[tid] = min(part[tid] + v, max_items);
    __syncthreads();
  }
  int run = part[tid] - sum;
  for (int b = lo; b < hi; ++b) {
    seq_off[b] = run;
    run = min(run + tiles(b), max_items);
  }
  if (tid == kPlanThreads - 1) seq_off[batch] = part[kPlanThreads - 1];
  __syncthreads();  // seq_off (global) visible to the whole CTA
  const int total = seq_off[batch];
  for (int w = tid; w < total; w += kPlanThreads) {
    int l = 0, h = batch - 1;  // the last sequence whose first item is <= w
    while (l < h) {
      const int mid = (l + h + 1) / 2;
      if (seq_off[mid] <= w) l = mid;
      else h = mid - 1;
    }
    const int nt = seq_off[l + 1] - seq_off[l];
    PlanItem it{};
    it.tile = nt - 1 - (w - seq_off[l]);
    it.q_start = qo_indptr[l];
    it.q_len = qo_indptr[l + 1] - it.q_start;
    it.kv_first = kv_indptr[l];
    const int n = kv_indptr[l + 1] - it.kv_first;
    it.kv_len = paged ? paged_decode::paged_kv_len(n, page_size, last_page_len, l) : max(0, n);
    items[w] = it;
  }
  if (tid == 0) {
    *item_count = total;
    // The persistent wgmma kernel's two counters (units handed out, CTAs done):
    // zero here, and zeroed again by the last CTA of each of its launches.
    item_count[1] = 0;
    item_count[2] = 0;
  }
}

// ---- Host side -----------------------------------------------------------------------

enum class Mode { plan_and_run, plan_only, run_only };

// The plan's device buffer for `stream` on the current device, at least
// `bytes` and 1 MiB (kernels/common/stream_workspace.hpp: allocated outside
// the timed region, grown when needed, refused while capturing). Separate
// from the decode workspace so a decode call between a plan and its runs
// cannot take the plan away. may_grow false (run_only): a buffer too small
// for the call is cudaErrorInvalidValue, there being no plan of its size.
// `slot` keeps apart buffers of one stream that live side by side
// (kPlanSlot: the work list; kGatherSlot: the GQA launcher's gathered K / V,
// prefill_gqa.cu).
enum : int { kPlanSlot = 0, kGatherSlot = 1 };
inline cudaError_t workspace_for(cudaStream_t stream, std::size_t bytes, void** out, bool may_grow,
                                 int slot = kPlanSlot) {
  static auto* plans = new StreamWorkspaces(std::size_t{1} << 20);
  static auto* gathers = new StreamWorkspaces(std::size_t{1} << 20);
  return (slot == kGatherSlot ? gathers : plans)->get(stream, bytes, out, may_grow);
}

// Sets the kernel's shared memory limit once per device.
template <class C, int MINB>
cudaError_t prepare_kernel() {
  constexpr int kMaxDevices = 64;
  static std::array<std::atomic<bool>, kMaxDevices> done{};
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (device < 0 || device >= kMaxDevices) return cudaErrorInvalidDevice;
  if (!done[device].load()) {
    auto kernel = prefill_kernel<C, MINB>;
    if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(C::smem_bytes));
        e != cudaSuccess)
      return e;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                             static_cast<int>(cudaSharedmemCarveoutMaxShared)) != cudaSuccess)
      (void)cudaGetLastError();  // a hint only; clear it for the launch check
    done[device].store(true);
  }
  return cudaSuccess;
}

// The work list every prefill launcher shares (this file's launch and
// prefill_wgmma.cuh's): bounds the (sequence, query tile) items of p's
// layout, reserves the stream's workspace for them and, unless mode is
// run_only, runs plan_kernel into it; sets p.items / p.item_count. Needs
// p.tokens_per_cta and p.head_blocks. *max_items is the grid's item bound;
// 0 means there is nothing to launch (also after plan_only).
inline cudaError_t plan_work(Params& p, Mode mode, cudaStream_t stream, std::int64_t* max_items_out) {
  *max_items_out = 0;
  // Items: sum_b ceil(q_len_b / tpc) <= total_q / tpc + batch.
  const std::int64_t max_items = static_cast<std::int64_t>(p.total_q) / p.tokens_per_cta + p.batch;
  if (max_items <= 0 || p.head_blocks <= 0) return cudaSuccess;
  if (max_items * p.head_blocks > INT_MAX) return cudaErrorInvalidConfiguration;
  const std::size_t items_bytes = static_cast<std::size_t>(max_items) * sizeof(PlanItem);
  const std::size_t off_bytes = (static_cast<std::size_t>(p.batch) + 1) * sizeof(int);
  void* ws = nullptr;
  if (cudaError_t e = workspace_for(stream, items_bytes + 16 + off_bytes, &ws, mode != Mode::run_only);
      e != cudaSuccess)
    return e;
  auto* items = static_cast<PlanItem*>(ws);
  auto* count = reinterpret_cast<int*>(static_cast<unsigned char*>(ws) + items_bytes);
  auto* seq_off = reinterpret_cast<int*>(static_cast<unsigned char*>(ws) + items_bytes + 16);
  if (mode != Mode::run_only) {
    plan_kernel<<<1, kPlanThreads, 0, stream>>>(p.qo_indptr, p.kv_indptr, p.last_page_len, p.paged, p.page_size,
                                                p.batch, p.tokens_per_cta, static_cast<int>(max_items), seq_off, items,
                                                count);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  if (mode == Mode::plan_only) return cudaSuccess;
  p.items = items;
  p.item_count = count;
  *max_items_out = max_items;
  return cudaSuccess;
}

// Plans and/or launches one prefill. `p` has every field but items /
// item_count / tokens_per_cta / head_blocks set (heads_per_cta included).
template <class C, int MINB>
cudaError_t launch(Params p, Mode mode, cudaStream_t stream) {
  if (p.heads_per_cta < 1 || p.heads_per_cta > C::BM) return cudaErrorInvalidValue;
  p.tokens_per_cta = C::BM / p.heads_per_cta;
  p.head_blocks = (p.num_qo_heads + p.heads_per_cta - 1) / p.heads_per_cta;
  std::int64_t max_items = 0;
  if (cudaError_t e = plan_work(p, mode, stream, &max_items); e != cudaSuccess || max_items == 0) return e;
  if (cudaError_t e = prepare_kernel<C, MINB>(); e != cudaSuccess) return e;
  prefill_kernel<C, MINB><<<static_cast<unsigned>(max_items * p.head_blocks), C::kThreads, C::smem_bytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace kb::kernels::prefill
