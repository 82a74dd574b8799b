// kb_cuda_dsa_sparse_attention's kernels: gather-based MLA decode over each
// token's selected cache rows. Two of them: the tensor-core kernel
// (sparse_attention_mma_kernel, described at its definition) where the shapes
// fit mma tiles (bf16, head_dim_ckv 128/256/512/1024, head_dim_kpe a multiple
// of 32, 16-byte aligned inputs), and for every other shape this fp32 one:
//
// One CTA (8 warps) takes one token, a group of HG = 8 * HPW heads and one
// contiguous share (split) of the token's top-k index list. The heads of the
// group share every gathered row, so a row is read from global memory once
// per head group (once per token when H <= 16). The share is walked in tiles
// of R = 32 indices:
//  1. the tile's indices are read; -1 and any index outside the cache give an
//     invalid row (zeros in shared memory, logit -inf);
//  2. the rows' ckv and kpe halves are gathered into one shared-memory row
//     each (16-byte loads where dims and pointers allow), rows padded to an
//     odd number of 32-bit words so that step 3 is free of bank conflicts;
//  3. warp w computes the logits of heads w (and w + 8) against the 32 rows,
//     lane = row: fp32 dot products over bf16/fp16 pairs, the query (fp32 in
//     shared memory) read as a broadcast;
//  4. the online softmax per head in base 2 (logits times sm_scale * log2 e,
//     running max m and sum l kept by the head's warp), the tile's
//     probabilities and each head's rescale factor written to shared memory;
//  5. every thread owns CP column pairs of ckv for all HG heads (fp32
//     accumulators in registers), rescales them and adds probability x row
//     over the tile's 32 rows; the probabilities are read as float4 over
//     heads, the row pair once for all heads.
// At the end: output = acc / l, lse = m + log2 l (base 2, as the definitions'
// lse: logsumexp / ln 2). A token's rows are split over several CTAs when
// tokens x head groups alone would leave SMs idle; each split writes its
// normalized partial and lse to the stream's workspace and merge_kernel
// combines them (weights 2^(lse_s - max)).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "../../attention/decode.cuh"  // cp_async16, ldmatrix_x4(_trans), mma_bf16, pack_bf16
#include "../../common/half_bits.cuh"
#include "dsa_cuda.hpp"
#include "device_state.cuh"

namespace kb::kernels {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = 32;       // indices per tile (one per lane in step 3)
constexpr int kMaxSplits = 64;  // CTAs per (token, head group) at most
constexpr int kMergeThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;

struct AttnParams {
  const void* q_nope;
  const void* q_pe;
  const std::uint32_t* ckv;  // 16-bit pairs
  const std::uint32_t* kpe;
  const std::int32_t* idx;
  void* out;
  float* lse;
  float* part_o;    // [T * H][splits][Dc] (splits > 1)
  float* part_lse;  // [T * H][splits]
  int out_kind;     // 0: same 16-bit dtype as the inputs, 1: float32
  int vec16;        // ckv / kpe rows can be read in 16-byte vectors
  long long T, H, Dc, Dp, K, rows;
  int words;        // shared-memory words per gathered row (odd)
  int splits, tiles_per_split;
  float scale_log2;  // sm_scale * log2 e
};

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <bool BF16>
__device__ __forceinline__ float lo_f32(std::uint32_t w) {
  return half_bits::to_f32<BF16>(w & 0xffffu);
}
template <bool BF16>
__device__ __forceinline__ float hi_f32(std::uint32_t w) {
  return half_bits::to_f32<BF16>(w >> 16);
}

template <bool BF16>
__device__ __forceinline__ void store_out(const AttnParams& p, long long i, float v) {
  if (p.out_kind == 1) static_cast<float*>(p.out)[i] = v;
  else static_cast<std::uint16_t*>(p.out)[i] = static_cast<std::uint16_t>(half_bits::from_f32<BF16>(v));
}

// Shared memory: qs [HG][Dc + Dp] fp32 | ks [R][words] u32 | pt [R][HG] fp32 |
// alpha [HG] | fin_m [HG] | fin_l [HG] | rowid [R] int.
template <int HG>
__host__ __device__ constexpr std::size_t smem_bytes(long long Dq, int words) {
  return static_cast<std::size_t>(HG * Dq + kRows * words + kRows * HG + 3 * HG + kRows) * 4;
}

template <bool BF16, int HPW, int CP>
__global__ void __launch_bounds__(kThreads) sparse_attention_kernel(AttnParams p) {
  constexpr int HG = kWarps * HPW;
  extern __shared__ float smem[];
  const long long Dq = p.Dc + p.Dp;
  float* qs = smem;
  std::uint32_t* ks = reinterpret_cast<std::uint32_t*>(qs + HG * Dq);
  float* pt = reinterpret_cast<float*>(ks + kRows * p.words);
  float* alpha = pt + kRows * HG;
  float* fin_m = alpha + HG;
  float* fin_l = fin_m + HG;
  int* rowid = reinterpret_cast<int*>(fin_l + HG);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int split = blockIdx.x;
  const long long h0 = static_cast<long long>(blockIdx.y) * HG;
  const long long t = blockIdx.z;
  const int half_c = static_cast<int>(p.Dc / 2), half_q = static_cast<int>(Dq / 2);

  // The group's queries, q_nope then q_pe per head; heads past H are zero.
  {
    const auto* qn = static_cast<const std::uint16_t*>(p.q_nope);
    const auto* qp = static_cast<const std::uint16_t*>(p.q_pe);
    for (long long i = tid; i < HG * Dq; i += kThreads) {
      const long long h = i / Dq, e = i % Dq;
      float v = 0.0f;
      if (h0 + h < p.H)
        v = half_bits::to_f32<BF16>(e < p.Dc ? qn[(t * p.H + h0 + h) * p.Dc + e] : qp[(t * p.H + h0 + h) * p.Dp + e - p.Dc]);
      qs[i] = v;
    }
  }

  float m[HPW], l[HPW];
#pragma unroll
  for (int i = 0; i < HPW; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
  }
  float acc[HG][2 * CP];
#pragma unroll
  for (int h = 0; h < HG; ++h)
#pragma unroll
    for (int i = 0; i < 2 * CP; ++i) acc[h][i] = 0.0f;

  const long long j_begin = static_cast<long long>(split) * p.tiles_per_split * kRows;
  const long long j_end = min(p.K, j_begin + static_cast<long long>(p.tiles_per_split) * kRows);
  const std::int32_t* idx_row = p.idx + t * p.K;

  for (long long j0 = j_begin; j0 < j_end; j0 += kRows) {
    __syncthreads();  // the previous tile's rows and probabilities are no longer read
    if (tid < kRows) {
      int r = -1;
      if (j0 + tid < j_end) {
        const long long v = idx_row[j0 + tid];
        if (v >= 0 && v < p.rows) r = static_cast<int>(v);
      }
      rowid[tid] = r;
    }
    __syncthreads();

    // Gather the tile's rows: word w < Dc/2 from ckv, the rest from kpe.
    if (p.vec16) {
      const int vpr = half_q / 4, vpc = half_c / 4;  // 16-byte vectors per row, of them from ckv
      const int total = kRows * vpr;
      constexpr int U = 4;
      for (int i0 = tid; i0 < total; i0 += kThreads * U) {
        uint4 buf[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int i = i0 + u * kThreads;
          buf[u] = make_uint4(0, 0, 0, 0);
          if (i < total) {
            const int r = i / vpr, v = i % vpr;
            const long long row = rowid[r];
            if (row >= 0)
              buf[u] = v < vpc ? __ldg(reinterpret_cast<const uint4*>(p.ckv + row * half_c) + v)
                               : __ldg(reinterpret_cast<const uint4*>(p.kpe + row * (half_q - half_c)) + (v - vpc));
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int i = i0 + u * kThreads;
          if (i < total) {
            std::uint32_t* dst = ks + (i / vpr) * p.words + (i % vpr) * 4;
            dst[0] = buf[u].x;
            dst[1] = buf[u].y;
            dst[2] = buf[u].z;
            dst[3] = buf[u].w;
          }
        }
      }
    } else {
      const int total = kRows * half_q;
      for (int i = tid; i < total; i += kThreads) {
        const int r = i / half_q, w = i % half_q;
        const long long row = rowid[r];
        std::uint32_t v = 0;
        if (row >= 0) v = w < half_c ? __ldg(p.ckv + row * half_c + w) : __ldg(p.kpe + row * (half_q - half_c) + (w - half_c));
        ks[r * p.words + w] = v;
      }
    }
    __syncthreads();

    // Logits and the online softmax: warp `warp` owns heads warp + 8 * i, lane = row.
    {
      float s[HPW];
#pragma unroll
      for (int i = 0; i < HPW; ++i) s[i] = 0.0f;
      const std::uint32_t* krow = ks + lane * p.words;
      for (int w = 0; w < half_q; ++w) {
        const std::uint32_t kw = krow[w];
        const float k0 = lo_f32<BF16>(kw), k1 = hi_f32<BF16>(kw);
#pragma unroll
        for (int i = 0; i < HPW; ++i) {
          const float2 q = reinterpret_cast<const float2*>(qs + (warp + kWarps * i) * Dq)[w];
          s[i] = fmaf(q.x, k0, s[i]);
          s[i] = fmaf(q.y, k1, s[i]);
        }
      }
      const bool valid = rowid[lane] >= 0;
#pragma unroll
      for (int i = 0; i < HPW; ++i) {
        const int h = warp + kWarps * i;
        const float logit = valid ? s[i] * p.scale_log2 : -INFINITY;
        const float m_new = fmaxf(m[i], warp_max(logit));
        float prob = 0.0f, a = 1.0f;
        if (m_new != -INFINITY) {
          prob = exp2f(logit - m_new);  // 0 for invalid rows
          a = exp2f(m[i] - m_new);      // 0 while m was -inf
        }
        l[i] = l[i] * a + warp_sum(prob);
        m[i] = m_new;
        pt[lane * HG + h] = prob;
        if (lane == 0) alpha[h] = a;
      }
    }
    __syncthreads();

    // acc[h][pair] = acc * alpha[h] + sum_r p[r][h] * ckv[r][pair].
#pragma unroll
    for (int c = 0; c < CP; ++c) {
      const int col = tid + c * kThreads;
      if (col < half_c) {
#pragma unroll
        for (int h = 0; h < HG; ++h) {
          acc[h][2 * c] *= alpha[h];
          acc[h][2 * c + 1] *= alpha[h];
        }
        for (int r = 0; r < kRows; ++r) {
          const std::uint32_t kw = ks[r * p.words + col];
          const float k0 = lo_f32<BF16>(kw), k1 = hi_f32<BF16>(kw);
          const float4* pr = reinterpret_cast<const float4*>(pt + r * HG);
#pragma unroll
          for (int h4 = 0; h4 < HG / 4; ++h4) {
            const float4 pv = pr[h4];
            const float pa[4] = {pv.x, pv.y, pv.z, pv.w};
#pragma unroll
            for (int u = 0; u < 4; ++u) {
              acc[4 * h4 + u][2 * c] = fmaf(pa[u], k0, acc[4 * h4 + u][2 * c]);
              acc[4 * h4 + u][2 * c + 1] = fmaf(pa[u], k1, acc[4 * h4 + u][2 * c + 1]);
            }
          }
        }
      }
    }
  }

  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < HPW; ++i) {
      fin_m[warp + kWarps * i] = m[i];
      fin_l[warp + kWarps * i] = l[i];
    }
  }
  __syncthreads();

  if (p.splits == 1) {
#pragma unroll
    for (int h = 0; h < HG; ++h) {
      if (h0 + h >= p.H) break;
      const float lh = fin_l[h];
      const float inv = lh > 0.0f ? 1.0f / lh : 0.0f;
      const long long o0 = (t * p.H + h0 + h) * p.Dc;
#pragma unroll
      for (int c = 0; c < CP; ++c) {
        const int col = tid + c * kThreads;
        if (col < half_c) {
          store_out<BF16>(p, o0 + 2 * col, acc[h][2 * c] * inv);
          store_out<BF16>(p, o0 + 2 * col + 1, acc[h][2 * c + 1] * inv);
        }
      }
      if (tid == 0 && p.lse) p.lse[t * p.H + h0 + h] = lh > 0.0f ? fin_m[h] + log2f(lh) : -INFINITY;
    }
  } else {
#pragma unroll
    for (int h = 0; h < HG; ++h) {
      if (h0 + h >= p.H) break;
      const float lh = fin_l[h];
      const float inv = lh > 0.0f ? 1.0f / lh : 0.0f;
      const long long row = (t * p.H + h0 + h) * p.splits + split;
      float* o = p.part_o + row * p.Dc;
#pragma unroll
      for (int c = 0; c < CP; ++c) {
        const int col = tid + c * kThreads;
        if (col < half_c) {
          o[2 * col] = acc[h][2 * c] * inv;
          o[2 * col + 1] = acc[h][2 * c + 1] * inv;
        }
      }
      if (tid == 0) p.part_lse[row] = lh > 0.0f ? fin_m[h] + log2f(lh) : -INFINITY;
    }
  }
}

// One CTA per (token, head): output = sum_s 2^(lse_s - M) o_s / sum_s 2^(lse_s - M).
template <bool BF16>
__global__ void __launch_bounds__(kMergeThreads) merge_kernel(AttnParams p) {
  __shared__ float w[kMaxSplits];
  __shared__ float total;
  __shared__ float mx;
  const long long row = blockIdx.x;
  const float* lse = p.part_lse + row * p.splits;
  if (threadIdx.x == 0) {
    float M = -INFINITY;
    for (int s = 0; s < p.splits; ++s) M = fmaxf(M, lse[s]);
    float sum = 0.0f;
    for (int s = 0; s < p.splits; ++s) {
      w[s] = M == -INFINITY ? 0.0f : exp2f(lse[s] - M);
      sum += w[s];
    }
    total = sum;
    mx = M;
  }
  __syncthreads();
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
  const float* o = p.part_o + row * p.splits * p.Dc;
  for (long long e = threadIdx.x; e < p.Dc; e += kMergeThreads) {
    float v = 0.0f;
    for (int s = 0; s < p.splits; ++s)
      if (w[s] != 0.0f) v = fmaf(w[s], o[s * p.Dc + e], v);
    store_out<BF16>(p, row * p.Dc + e, v * inv);
  }
  if (threadIdx.x == 0 && p.lse) p.lse[row] = total > 0.0f ? mx + log2f(total) : -INFINITY;
}

// ---- Tensor-core path: bf16, head_dim_ckv = 64 * NB, head_dim_kpe % 32 == 0 ----
//
// The same walk with mma.sync.m16n8k16 (bf16 in, fp32 accumulate), shaped
// like paged_decode's MLA kernel (attention/decode.cuh) with the key rows
// taken from the index list: 16 heads a CTA (the mma M; heads past H are zero
// rows), tiles of 64 indices gathered by 16-byte cp.async (invalid rows
// zero-filled, nothing read), rows padded by 16 bytes so every ldmatrix is
// free of bank conflicts. Warp w computes S = Q K^T for the tile's rows
// 8w .. 8w + 7 over the whole of ckv + kpe, the CTA agrees on each head's
// running max through shared memory, P = 2^(S - m) goes to shared memory as
// bf16 and warp w accumulates O[:, w * Dc / 8 ...) += P V (ldmatrix.trans on
// the ckv part of the same rows). A tile with no valid row leaves the state
// as it was (max -inf is never subtracted from itself).
constexpr int kMmaRows = 64;   // indices per tile
constexpr int kMmaHeads = 16;  // mma M

template <int NB>
__global__ void __launch_bounds__(kThreads) sparse_attention_mma_kernel(AttnParams p) {
  using namespace paged_decode;
  constexpr int DC = 64 * NB;  // NB n-blocks of 8 columns per warp, 8 warps
  constexpr int DVW = DC / kWarps;
  constexpr int LDP = kMmaRows + 8;
  const int DQ = DC + static_cast<int>(p.Dp);
  const int LDK = DQ + 8;

  extern __shared__ __align__(16) unsigned char smem_raw[];
  std::uint16_t* K_s = reinterpret_cast<std::uint16_t*>(smem_raw);  // [64][LDK]
  std::uint16_t* Q_s = K_s + kMmaRows * LDK;                          // [16][LDK]
  std::uint16_t* P_s = Q_s + kMmaHeads * LDK;                         // [16][LDP]
  int* rowid = reinterpret_cast<int*>(P_s + kMmaHeads * LDP);         // [64]
  float* red_max = reinterpret_cast<float*>(rowid + kMmaRows);        // [8][16]
  float* red_sum = red_max + kWarps * kMmaHeads;                      // [8][16]

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, tq = lane % 4;
  const int split = blockIdx.x;
  const long long h0 = static_cast<long long>(blockIdx.y) * kMmaHeads;
  const long long t = blockIdx.z;
  const int nrows = static_cast<int>(min(static_cast<long long>(kMmaHeads), p.H - h0));
  const auto* ckv = reinterpret_cast<const std::uint16_t*>(p.ckv);
  const auto* kpe = reinterpret_cast<const std::uint16_t*>(p.kpe);

  {  // Q rows (q_nope then q_pe) -> Q_s; heads past H zero-filled.
    const auto* qn = static_cast<const std::uint16_t*>(p.q_nope);
    const auto* qp = static_cast<const std::uint16_t*>(p.q_pe);
    const int cpr = DQ / 8;
    for (int c = tid; c < kMmaHeads * cpr; c += kThreads) {
      const int r = c / cpr, col = (c % cpr) * 8;
      const long long qrow = t * p.H + h0 + min(r, nrows - 1);
      const std::uint16_t* src = col >= DC ? qp + qrow * p.Dp + (col - DC) : qn + qrow * DC + col;
      cp_async16(Q_s + r * LDK + col, src, r < nrows);
    }
    cp_async_commit();
  }

  float o[NB][4];
#pragma unroll
  for (int i = 0; i < NB; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY};  // heads g and g + 8 (the same in every warp)
  float l_run[2] = {0.f, 0.f};              // this thread's share of the sums

  const long long j_begin = static_cast<long long>(split) * p.tiles_per_split * kMmaRows;
  const long long j_end = min(p.K, j_begin + static_cast<long long>(p.tiles_per_split) * kMmaRows);
  const std::int32_t* idx_row = p.idx + t * p.K;
  const int cpr = DQ / 8;

  for (long long j0 = j_begin; j0 < j_end; j0 += kMmaRows) {
    __syncthreads();  // the previous tile's K_s, P_s and red_max are no longer read
    if (tid < kMmaRows) {
      int r = -1;
      if (j0 + tid < j_end) {
        const long long v = idx_row[j0 + tid];
        if (v >= 0 && v < p.rows) r = static_cast<int>(v);
      }
      rowid[tid] = r;
    }
    __syncthreads();
    for (int c = tid; c < kMmaRows * cpr; c += kThreads) {
      const int r = c / cpr, col = (c % cpr) * 8;
      const long long row = rowid[r];
      const std::uint16_t* src = row < 0 ? ckv : col < DC ? ckv + row * DC + col : kpe + row * p.Dp + (col - DC);
      cp_async16(K_s + r * LDK + col, src, row >= 0);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    // S = Q K^T for rows 8 warp .. 8 warp + 7: one ldmatrix.x4 of K gives two k-steps.
    float sc[4] = {0.f, 0.f, 0.f, 0.f}, odd[4] = {0.f, 0.f, 0.f, 0.f};
    {
      const std::uint16_t* qa = Q_s + (lane % 16) * LDK + (lane / 16) * 8;
      const std::uint16_t* kb_ = K_s + (warp * 8 + (lane % 8)) * LDK + 8 * (lane / 8);
      for (int kk = 0; kk < DQ / 32; ++kk) {
        std::uint32_t a0[4], a1[4], bk[4];
        ldmatrix_x4(a0, qa + kk * 32);
        ldmatrix_x4(a1, qa + kk * 32 + 16);
        ldmatrix_x4(bk, kb_ + kk * 32);
        mma_bf16(sc, a0, bk[0], bk[1]);
        mma_bf16(odd, a1, bk[2], bk[3]);
      }
    }
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const bool valid = rowid[warp * 8 + 2 * tq + (e & 1)] >= 0;
      const float x = valid ? (sc[e] + odd[e]) * p.scale_log2 : -INFINITY;
      sc[e] = x;
      mx[e >> 1] = fmaxf(mx[e >> 1], x);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    }
    if (tq == 0) {
      red_max[warp * kMmaHeads + g] = mx[0];
      red_max[warp * kMmaHeads + g + 8] = mx[1];
    }
    __syncthreads();
    float m_use[2], alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mt = red_max[g + 8 * r];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) mt = fmaxf(mt, red_max[w * kMmaHeads + g + 8 * r]);
      const float m_new = fmaxf(m_run[r], mt);
      // m_new is -inf only while no valid row has been seen: o and l are 0 and stay 0.
      m_use[r] = m_new == -INFINITY ? 0.f : m_new;
      alpha[r] = exp2f(m_run[r] - m_use[r]);
      m_run[r] = m_new;
    }
    float rs[2] = {0.f, 0.f};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float pv = exp2f(sc[e] - m_use[e >> 1]);  // invalid rows: 2^-inf = 0
      sc[e] = pv;
      rs[e >> 1] += pv;
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) l_run[r] = l_run[r] * alpha[r] + rs[r];
    {
      const int col = warp * 8 + 2 * tq;
      *reinterpret_cast<std::uint32_t*>(P_s + g * LDP + col) = pack_bf16(sc[0], sc[1]);
      *reinterpret_cast<std::uint32_t*>(P_s + (g + 8) * LDP + col) = pack_bf16(sc[2], sc[3]);
    }
#pragma unroll
    for (int i = 0; i < NB; ++i) {
      o[i][0] *= alpha[0];
      o[i][1] *= alpha[0];
      o[i][2] *= alpha[1];
      o[i][3] *= alpha[1];
    }
    __syncthreads();  // P_s complete

    // O[:, warp * DVW ...) += P V over the tile's 64 rows (V: the ckv part of K_s).
#pragma unroll
    for (int kk = 0; kk < kMmaRows / 16; ++kk) {
      std::uint32_t a[4];
      ldmatrix_x4(a, P_s + (lane % 16) * LDP + kk * 16 + (lane / 16) * 8);
      const std::uint16_t* vb = K_s + (kk * 16 + (lane % 8) + 8 * ((lane / 8) % 2)) * LDK + warp * DVW + 8 * (lane / 16);
#pragma unroll
      for (int np = 0; np < NB / 2; ++np) {
        std::uint32_t bv[4];
        ldmatrix_x4_trans(bv, vb + np * 16);
        mma_bf16(o[2 * np], a, bv[0], bv[1]);
        mma_bf16(o[2 * np + 1], a, bv[2], bv[3]);
      }
    }
  }
  cp_async_wait<0>();  // Q's copies, where the split had no tile

  float lsum[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    lsum[r] = l;
  }
  if (tq == 0) {
    red_sum[warp * kMmaHeads + g] = lsum[0];
    red_sum[warp * kMmaHeads + g + 8] = lsum[1];
  }
  __syncthreads();
  const bool direct = p.splits == 1;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    float l = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) l += red_sum[w * kMmaHeads + row];
    if (row >= nrows) continue;
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const float lse = l > 0.f ? m_run[r] + log2f(l) : -INFINITY;
    const long long grow = t * p.H + h0 + row;
#pragma unroll
    for (int i = 0; i < NB; ++i) {
      const int col = warp * DVW + i * 8 + 2 * tq;
      const float v0 = o[i][2 * r] * inv, v1 = o[i][2 * r + 1] * inv;
      if (direct) *reinterpret_cast<std::uint32_t*>(static_cast<std::uint16_t*>(p.out) + grow * DC + col) = pack_bf16(v0, v1);
      else *reinterpret_cast<float2*>(p.part_o + (grow * p.splits + split) * DC + col) = make_float2(v0, v1);
    }
    if (warp == 0 && tq == 0) {
      if (!direct) p.part_lse[grow * p.splits + split] = lse;
      else if (p.lse) p.lse[grow] = lse;
    }
  }
}

std::size_t mma_smem_bytes(long long Dq) {
  return static_cast<std::size_t>((kMmaRows + kMmaHeads) * (Dq + 8) + kMmaHeads * (kMmaRows + 8)) * 2 +
         static_cast<std::size_t>(kMmaRows + 2 * kWarps * kMmaHeads) * 4;
}

Status cuda_error(const char* what, cudaError_t e) {
  return make_error(Code::cuda_error, std::string("kb_cuda_dsa_sparse_attention: ") + what + ": " +
                                          cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

struct DeviceFacts {
  int max_smem = 0, sms = 0;
};

Result<DeviceFacts> device_facts() {
  DeviceFacts f;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return cuda_error("cudaGetDevice", e).error();
  if (cudaError_t e = cudaDeviceGetAttribute(&f.max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device); e != cudaSuccess)
    return cuda_error("cudaDeviceGetAttribute", e).error();
  if (cudaError_t e = cudaDeviceGetAttribute(&f.sms, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess)
    return cuda_error("cudaDeviceGetAttribute", e).error();
  return f;
}

// Splits of each (token, head group)'s index list: enough CTAs for two waves
// of the SMs, each split at least two tiles; sets p.splits and
// p.tiles_per_split and takes the partials' workspace where splits > 1.
Status plan_splits(AttnParams& p, long long groups, long long tile_rows, int sms, cudaStream_t stream) {
  if (p.T > 65535 || groups > 65535)
    return make_error(Code::unsupported, "kb_cuda_dsa_sparse_attention: more than 65535 tokens or head groups");
  const long long tiles = (p.K + tile_rows - 1) / tile_rows;
  long long splits = 1;
  const long long base = p.T * groups;
  if (base < 2LL * sms && tiles > 2) {
    splits = (2LL * sms + base - 1) / base;
    splits = std::min<long long>(splits, (tiles + 1) / 2);
    splits = std::min<long long>(splits, kMaxSplits);
    splits = std::max<long long>(splits, 1);
  }
  const long long per = (tiles + splits - 1) / splits;
  splits = tiles > 0 ? (tiles + per - 1) / per : 1;
  p.tiles_per_split = static_cast<int>(per > 0 ? per : 1);
  p.splits = static_cast<int>(splits);
  if (splits > 1) {
    const std::size_t o_bytes = static_cast<std::size_t>(p.T * p.H * splits * p.Dc) * sizeof(float);
    const std::size_t l_bytes = static_cast<std::size_t>(p.T * p.H * splits) * sizeof(float);
    void* ws = nullptr;
    if (cudaError_t e = dsa_cuda::workspace_for(stream, o_bytes + l_bytes, &ws); e != cudaSuccess)
      return cuda_error("workspace for the split partials", e);
    p.part_o = static_cast<float*>(ws);
    p.part_lse = reinterpret_cast<float*>(static_cast<unsigned char*>(ws) + o_bytes);
  }
  return ok_status();
}

template <bool BF16>
Status launch_merge(const AttnParams& p, cudaStream_t stream) {
  if (p.splits <= 1) return ok_status();
  const long long rows = p.T * p.H;
  if (rows > 0x7fffffffLL) return make_error(Code::unsupported, "kb_cuda_dsa_sparse_attention: too many (token, head) rows");
  merge_kernel<BF16><<<static_cast<unsigned>(rows), kMergeThreads, 0, stream>>>(p);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return cuda_error("merge launch", e);
  return ok_status();
}

Status smem_refused(std::size_t smem, int max_smem, long long dq) {
  return make_error(Code::unsupported, "kb_cuda_dsa_sparse_attention: head_dim_ckv + head_dim_kpe = " + std::to_string(dq) +
                                           " needs " + std::to_string(smem) + " bytes of shared memory a CTA; the device has " +
                                           std::to_string(max_smem));
}

template <bool BF16, int HPW, int CP>
Status launch_typed(AttnParams p, cudaStream_t stream, int* splits_used) {
  constexpr int HG = kWarps * HPW;
  const std::size_t smem = smem_bytes<HG>(p.Dc + p.Dp, p.words);
  auto f = device_facts();
  if (!f) return f.error();
  if (smem > static_cast<std::size_t>(f->max_smem)) return smem_refused(smem, f->max_smem, p.Dc + p.Dp);
  auto kernel = sparse_attention_kernel<BF16, HPW, CP>;
  if (cudaError_t e = dsa_cuda::allow_max_smem(reinterpret_cast<const void*>(kernel)); e != cudaSuccess)
    return cuda_error("cudaFuncSetAttribute", e);
  const long long groups = (p.H + HG - 1) / HG;
  KB_TRY(plan_splits(p, groups, kRows, f->sms, stream));
  if (splits_used) *splits_used = p.splits;
  kernel<<<dim3(static_cast<unsigned>(p.splits), static_cast<unsigned>(groups), static_cast<unsigned>(p.T)), kThreads, smem,
           stream>>>(p);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return cuda_error("kernel launch", e);
  return launch_merge<BF16>(p, stream);
}

template <int NB>
Status launch_mma(AttnParams p, cudaStream_t stream, int* splits_used) {
  const std::size_t smem = mma_smem_bytes(p.Dc + p.Dp);
  auto f = device_facts();
  if (!f) return f.error();
  if (smem > static_cast<std::size_t>(f->max_smem)) return smem_refused(smem, f->max_smem, p.Dc + p.Dp);
  auto kernel = sparse_attention_mma_kernel<NB>;
  if (cudaError_t e = dsa_cuda::allow_max_smem(reinterpret_cast<const void*>(kernel)); e != cudaSuccess)
    return cuda_error("cudaFuncSetAttribute", e);
  const long long groups = (p.H + kMmaHeads - 1) / kMmaHeads;
  KB_TRY(plan_splits(p, groups, kMmaRows, f->sms, stream));
  if (splits_used) *splits_used = p.splits;
  kernel<<<dim3(static_cast<unsigned>(p.splits), static_cast<unsigned>(groups), static_cast<unsigned>(p.T)), kThreads, smem,
           stream>>>(p);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return cuda_error("kernel launch", e);
  return launch_merge<true>(p, stream);
}

template <bool BF16>
Status launch_dtype(const AttnParams& p, cudaStream_t s, int* splits_used) {
  const long long pairs = p.Dc / 2;
  if (pairs <= kThreads) return p.H <= kWarps ? launch_typed<BF16, 1, 1>(p, s, splits_used) : launch_typed<BF16, 2, 1>(p, s, splits_used);
  if (pairs <= 2 * kThreads)
    return p.H <= kWarps ? launch_typed<BF16, 1, 2>(p, s, splits_used) : launch_typed<BF16, 2, 2>(p, s, splits_used);
  return launch_typed<BF16, 1, 4>(p, s, splits_used);
}

bool aligned(const void* ptr, std::uintptr_t n) { return reinterpret_cast<std::uintptr_t>(ptr) % n == 0; }

}  // namespace

const char* dsa_sparse_attention_unsupported(DType dtype, DType out_dtype, std::int64_t dim_ckv, std::int64_t dim_kpe) {
  if (dtype != DType::bfloat16 && dtype != DType::float16)
    return "q_nope, q_pe, ckv_cache and kpe_cache must be bfloat16 or float16 (one dtype)";
  if (out_dtype != dtype && out_dtype != DType::float32) return "output must be the inputs' dtype or float32";
  if (dim_ckv <= 0 || dim_kpe < 0 || dim_ckv % 2 != 0 || dim_kpe % 2 != 0)
    return "head_dim_ckv and head_dim_kpe must be even (rows are read in 16-bit pairs), head_dim_ckv > 0";
  if (dim_ckv > 4 * 2 * kThreads) return "head_dim_ckv above 2048 is not handled (register accumulators)";
  return nullptr;
}

bool dsa_sparse_attention_uses_mma(DType dtype, DType out_dtype, std::int64_t dim_ckv, std::int64_t dim_kpe) {
  const bool ckv_tiles = dim_ckv == 128 || dim_ckv == 256 || dim_ckv == 512 || dim_ckv == 1024;
  return dtype == DType::bfloat16 && out_dtype == DType::bfloat16 && ckv_tiles && dim_kpe >= 0 && dim_kpe % 32 == 0;
}

Status launch_dsa_sparse_attention(const DsaSparseAttentionArgs& a, void* stream, int* splits_used) {
  if (const char* why = dsa_sparse_attention_unsupported(a.dtype, a.out_dtype, a.dim_ckv, a.dim_kpe))
    return make_error(Code::unsupported, std::string("kb_cuda_dsa_sparse_attention: ") + why);
  if (a.tokens < 0 || a.heads < 0 || a.rows < 0 || a.topk < 0)
    return make_error(Code::invalid_argument, "kb_cuda_dsa_sparse_attention: negative size");
  if (splits_used) *splits_used = 0;
  if (a.tokens == 0 || a.heads == 0) return ok_status();
  if (a.rows > 0x7fffffffLL) return make_error(Code::unsupported, "kb_cuda_dsa_sparse_attention: more than 2^31 cache rows");
  for (const void* ptr : {a.q_nope, a.ckv, static_cast<const void*>(a.output), static_cast<const void*>(a.sparse_indices)})
    if (!ptr) return make_error(Code::invalid_argument, "kb_cuda_dsa_sparse_attention: null tensor pointer");
  if ((a.dim_kpe > 0 && (!a.q_pe || !a.kpe)) || !aligned(a.ckv, 4) || !aligned(a.kpe, 4) || !aligned(a.output, 2) ||
      (a.out_dtype == DType::float32 && !aligned(a.output, 4)))
    return make_error(Code::invalid_argument, "kb_cuda_dsa_sparse_attention: ckv_cache and kpe_cache must be 4-byte aligned");
  AttnParams p{};
  p.q_nope = a.q_nope;
  p.q_pe = a.q_pe;
  p.ckv = static_cast<const std::uint32_t*>(a.ckv);
  p.kpe = static_cast<const std::uint32_t*>(a.kpe);
  p.idx = a.sparse_indices;
  p.out = a.output;
  p.lse = a.lse;
  p.out_kind = a.out_dtype == DType::float32 ? 1 : 0;
  p.vec16 = a.dim_ckv % 8 == 0 && a.dim_kpe % 8 == 0 && aligned(a.ckv, 16) && (a.dim_kpe == 0 || aligned(a.kpe, 16));
  p.T = a.tokens;
  p.H = a.heads;
  p.Dc = a.dim_ckv;
  p.Dp = a.dim_kpe;
  p.K = a.topk;
  p.rows = a.rows;
  const int half = static_cast<int>((a.dim_ckv + a.dim_kpe) / 2);
  p.words = half % 2 == 0 ? half + 1 : half;
  p.scale_log2 = a.sm_scale * kLog2e;
  auto s = static_cast<cudaStream_t>(stream);
  // Tensor cores where the shapes fit their tiles (bf16 in and out, ckv a multiple of 128 up to 1024, kpe of 32,
  // 16-byte aligned inputs for cp.async); the fp32 FMA kernel otherwise.
  const bool mma = dsa_sparse_attention_uses_mma(a.dtype, a.out_dtype, a.dim_ckv, a.dim_kpe) && aligned(a.q_nope, 16) && aligned(a.ckv, 16) && (a.dim_kpe == 0 || (aligned(a.q_pe, 16) && aligned(a.kpe, 16))) &&
                   aligned(a.output, 4);
  if (mma) {
    switch (a.dim_ckv) {
      case 128: return launch_mma<2>(p, s, splits_used);
      case 256: return launch_mma<4>(p, s, splits_used);
      case 512: return launch_mma<8>(p, s, splits_used);
      case 1024: return launch_mma<16>(p, s, splits_used);
      default: break;
    }
  }
  return a.dtype == DType::bfloat16 ? launch_dtype<true>(p, s, splits_used) : launch_dtype<false>(p, s, splits_used);
}

}  // namespace kb::kernels
