// kb_cuda_gdn's prefill in chunks of 64 tokens on tf32 tensor cores (the
// WY / UT-transform form of the gated delta rule). With H = S^T the [K, V]
// state, per chunk of tokens 0..C-1 (log gates lg, gamma_i = sum_{j<=i} lg_j,
// G_i = exp(gamma_i)):
//   A  = strictly lower (beta_i (k_i . k_j) exp(gamma_i - gamma_j))   [C, C]
//   T  = (I + A)^-1
//   W  = T diag(beta G) K          [C, K]     (independent of the state)
//   U  = T diag(beta) V            [C, V]
//   Vn = U - W H                   [C, V]     (the chunk's delta values)
//   O  = scale (diag(G) Q H + P Vn),  P = lower incl. diagonal ((q_i . k_j) exp(gamma_i - gamma_j))
//   H' = G_last H + (diag(exp(gamma_last - gamma)) K)^T Vn
// Three launches: a one-CTA plan lists each sequence's chunks; the prepare
// kernel computes W, U and gamma for every (chunk, value head) in parallel
// (they do not depend on the state) into the workspace; the state kernel
// walks each sequence's chunks in order, one CTA per (sequence, value head,
// 32 columns of V), the state slice in shared memory. Padding tokens of a
// chunk's tail have k = q = v = 0, beta = 0 and a log gate 0: they change
// nothing. Products run as mma.sync m16n8k8 tf32 (fp32 accumulation), the
// Gram products of bf16 rows (K K^T in A, Q K^T in P) as m16n8k16 bf16 (their
// products are exact either way); row-major fp32 A operands load by ldmatrix.
// The state itself is updated and carried in fp32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "../../common/cuda_types.cuh"
#include "../../common/hopper_ptx.cuh"
#include "../../common/mma_sync.cuh"
#include "gdn_chunked.hpp"

namespace kb::kernels {
namespace {

constexpr int C = kGdnChunk;   // tokens a chunk
constexpr int BV = 32;         // value columns of a state CTA
constexpr int kThreads = 128;       // the prepare kernel: warp w owns rows [16 w, 16 w + 16) of a chunk
constexpr int kStateThreads = 256;  // the state kernel: two warps a 16-row block, half the columns each

// An mma operand from shared memory: fp32 rounded to tf32; a bf16 is a tf32
// with its low bits zero.
__device__ __forceinline__ std::uint32_t tf32(float x) {
  std::uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ std::uint32_t tf32(std::uint16_t bf16_bits) { return static_cast<std::uint32_t>(bf16_bits) << 16; }

using mma_sync::ldmatrix_x2;
using mma_sync::ldmatrix_x4;
using mma_sync::mma_bf16;
using mma_sync::mma_tf32;

// The A fragment of rows [m0, m0 + 16) x cols [k0, k0 + 8) of a matrix whose
// element (r, c) is at x[r * rs + c * cs] (fp32, or bf16 bits).
template <class T>
__device__ __forceinline__ void frag_a(std::uint32_t a[4], const T* x, int rs, int cs, int m0, int k0) {
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  a[0] = tf32(x[(m0 + g) * rs + (k0 + t) * cs]);
  a[1] = tf32(x[(m0 + g + 8) * rs + (k0 + t) * cs]);
  a[2] = tf32(x[(m0 + g) * rs + (k0 + t + 4) * cs]);
  a[3] = tf32(x[(m0 + g + 8) * rs + (k0 + t + 4) * cs]);
}

// The B fragment of rows [k0, k0 + 8) x cols [n0, n0 + 8), element (r, c) at x[r * rs + c * cs].
template <class T>
__device__ __forceinline__ void frag_b(std::uint32_t b[2], const T* x, int rs, int cs, int k0, int n0) {
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  b[0] = tf32(x[(k0 + t) * rs + (n0 + g) * cs]);
  b[1] = tf32(x[(k0 + t + 4) * rs + (n0 + g) * cs]);
}

// The A fragment of fp32 rows [m0, m0 + 16) x cols [k0, k0 + 8) (row stride
// ld, a multiple of 4; x 16-byte aligned) by one ldmatrix: the four 8 x 4
// blocks of 32-bit elements are the four registers of the tf32 layout.
__device__ __forceinline__ void frag_a_ldsm(std::uint32_t a[4], const float* x, int ld, int m0, int k0) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  std::uint32_t r[4];
  ldmatrix_x4(r, x + (m0 + lane % 16) * ld + k0 + 4 * (lane / 16));
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = tf32(__uint_as_float(r[i]));
}

struct Plan {
  const void* cu;
  int cu_dt;
  long long seqs, total_tokens, max_chunks;
  int* base;   // [seqs + 1]: sequence s owns chunk slots [base[s], base[s + 1])
  int2* list;  // [max_chunks]: (sequence, first token) of each slot
};

// One CTA: each thread takes a run of sequences, a block scan of the runs'
// chunk counts gives the bases. A range outside [0, total] or reversed has no
// chunks (the oracle refuses it); counts are cut at max_chunks, so a
// cu_seqlens that is not a partition cannot send a later kernel out of the
// workspace.
__global__ void __launch_bounds__(1024) gdn_chunk_plan_kernel(Plan p) {
  __shared__ long long sums[1024];
  const long long tid = threadIdx.x, per = (p.seqs + 1023) / 1024;
  const long long s0 = min(p.seqs, tid * per), s1 = min(p.seqs, s0 + per);
  auto chunks = [&](long long s) {
    const long long lo = load_index(p.cu, p.cu_dt, s), hi = load_index(p.cu, p.cu_dt, s + 1);
    return lo < 0 || hi > p.total_tokens || hi <= lo ? 0LL : (hi - lo + C - 1) / C;
  };
  long long mine = 0;
  for (long long s = s0; s < s1; ++s) mine += chunks(s);
  sums[tid] = mine;
  __syncthreads();
  for (int off = 1; off < 1024; off *= 2) {
    const long long add = tid >= off ? sums[tid - off] : 0;
    __syncthreads();
    sums[tid] += add;
    __syncthreads();
  }
  long long at = sums[tid] - mine;
  for (long long s = s0; s < s1; ++s) {
    const long long lo = load_index(p.cu, p.cu_dt, s);
    const long long n = min(chunks(s), max(0LL, p.max_chunks - at));
    p.base[s] = static_cast<int>(min(at, p.max_chunks));
    for (long long c = 0; c < n; ++c) p.list[at + c] = make_int2(static_cast<int>(s), static_cast<int>(lo + c * C));
    at += n;
  }
  if (tid == 1023) p.base[p.seqs] = static_cast<int>(min(sums[1023], p.max_chunks));
}

struct Prep {
  const void *k, *v, *a, *b, *a_log, *dt_bias, *cu;
  int a_dt, b_dt, a_log_dt, dt_bias_dt, cu_dt;
  long long hk, hv, dk, dv, dvp;
  const int2* list;
  float *w, *u, *gam;  // [slot][hv][C][KP], [slot][hv][C][dvp], [slot][hv][C]
};

// The gates of a chunk's tokens into beta (0 past the end) and gamma, the
// running sum of the log gates (0 past the end): warp 0.
__device__ __forceinline__ void chunk_gates(const void* a, int a_dt, const void* b, int b_dt, long long first, int n,
                                            long long hv, long long h, float decay, float dt_bias, float* gam,
                                            float* beta) {
  if (threadIdx.x >= 32) return;
  const int lane = static_cast<int>(threadIdx.x);
  float lg[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = lane + 32 * half;
    lg[half] = 0.f;
    float bt = 0.f;
    if (i < n) {
      const long long tok = first + i;
      const float x = load_f32(a, a_dt, tok * hv + h) + dt_bias;  // fp32 add, as the reference
      const float sp = x > 20.0f ? x : log1pf(expf(x));
      lg[half] = -decay * sp;
      bt = 1.0f / (1.0f + expf(-load_f32(b, b_dt, tok * hv + h)));
    }
    beta[i] = bt;
  }
#pragma unroll
  for (int half = 0; half < 2; ++half)
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
      const float y = __shfl_up_sync(0xffffffffu, lg[half], off);
      if (lane >= off) lg[half] += y;
    }
  lg[1] += __shfl_sync(0xffffffffu, lg[0], 31);
  gam[lane] = lg[0];
  gam[lane + 32] = lg[1];
}

// Rows [0, C) x cols [0, cols) of a bf16 token-major tensor into shared
// memory (row stride ld elements) by 16-byte cp.async: row r is token first
// + r at `src + (first + r) * row_stride`; rows past n and columns past
// `valid_cols` are zero. cols, valid_cols, row_stride: multiples of 8.
__device__ __forceinline__ void stage_rows_bf16(std::uint16_t* dst, int ld, const void* src, long long row_stride,
                                                long long first, int n, int cols, long long valid_cols) {
  const auto* g = static_cast<const std::uint16_t*>(src);
  for (int i = static_cast<int>(threadIdx.x); i < C * cols / 8; i += static_cast<int>(blockDim.x)) {
    const int r = i / (cols / 8), c = 8 * (i % (cols / 8));
    const bool in = r < n && c < valid_cols;
    hopper::cp_async16(hopper::saddr(dst + r * ld + c), in ? g + (first + r) * row_stride + c : g, in);
  }
}

// Rows [0, rows) x cols [0, cols) of an fp32 matrix (row stride src_ld) by
// 16-byte cp.async into shared memory (row stride ld). cols: a multiple of 4.
__device__ __forceinline__ void stage_f32(float* dst, int ld, const float* src, long long src_ld, int rows, int cols) {
  for (int i = static_cast<int>(threadIdx.x); i < rows * cols / 4; i += static_cast<int>(blockDim.x)) {
    const int r = i / (cols / 4), c = 4 * (i % (cols / 4));
    hopper::cp_async16(hopper::saddr(dst + r * ld + c), src + r * src_ld + c, true);
  }
}

using hopper::cp_async_commit;
using hopper::cp_async_wait;

// Rows [16 rb, 16 rb + 16) of the [C, C] product X Y^T of two bf16 [C, KP]
// row-major tiles (X Y^T's (i, j) = x_i . y_j; row stride ld, 16-byte rows):
// the 8-column tiles nt with nt % step == first, below 16 (rb + 1) only (the
// caller keeps the lower triangle; the other tiles stay zero). bf16 mma with
// ldmatrix fragments: the products of bf16 values are exact, as in tf32.
template <int KP>
__device__ __forceinline__ void lower_gram(float acc[8][4], const std::uint16_t* x, const std::uint16_t* y, int ld,
                                           int rb, int first, int step) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::uint16_t* xa = x + (16 * rb + lane % 16) * ld + 8 * (lane / 16);
  const std::uint16_t* yb = y + (lane % 8) * ld + 8 * ((lane / 8) % 2);  // Y^T as the col-major B: Y's rows
#pragma unroll
  for (int k0 = 0; k0 < KP; k0 += 16) {
    std::uint32_t a[4];
    ldmatrix_x4(a, xa + k0);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
      if (nt < 2 * (rb + 1) && nt % step == first) {
        std::uint32_t b[2];
        ldmatrix_x2(b, yb + 8 * nt * ld + k0);
        mma_bf16(acc[nt], a, b[0], b[1]);
      }
  }
}

// Rows [16 warp, + 16) of T (lower, [C, C] fp32, ld LA) times the bf16 tile
// x [C, ld], columns [n0, n0 + 8 NT), stored as fp32 rows of `out` (row
// stride out_ld) from the accumulators.
template <int NT>
__device__ __forceinline__ void lower_times_store(const float* ts, int la, const std::uint16_t* x, int ld, int n0,
                                                  float* out, long long out_ld, int warp) {
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane / 4, t = lane % 4, m0 = 16 * warp;
  float acc[NT][4] = {};
#pragma unroll
  for (int k0 = 0; k0 < C; k0 += 8) {
    if (k0 >= 16 * (warp + 1)) break;
    std::uint32_t a[4];
    frag_a_ldsm(a, ts, la, m0, k0);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      std::uint32_t b[2];
      frag_b(b, x, ld, 1, k0, n0 + 8 * nt);
      mma_tf32(acc[nt], a, b);
    }
  }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int c = n0 + 8 * nt + 2 * t;
    *reinterpret_cast<float2*>(out + (m0 + g) * out_ld + c) = make_float2(acc[nt][0], acc[nt][1]);
    *reinterpret_cast<float2*>(out + (m0 + g + 8) * out_ld + c) = make_float2(acc[nt][2], acc[nt][3]);
  }
}

template <int KP>
struct PrepareSmem {
  static constexpr int LK = KP + 8, LA = C + 4;
  static constexpr std::size_t bytes(long long dvp) {
    return sizeof(std::uint16_t) * C * (LK + dvp + 8) + sizeof(float) * (2 * C * LA + 3 * 16 * 17 + 2 * C);
  }
};

// One CTA a (chunk, value head): W, U and gamma into the workspace.
template <int KP>
__global__ void __launch_bounds__(kThreads) gdn_chunk_prepare_kernel(Prep p, const int* n_chunks) {
  constexpr int LK = PrepareSmem<KP>::LK, LA = PrepareSmem<KP>::LA;
  extern __shared__ float4 smem4[];
  const int lv = static_cast<int>(p.dvp) + 8;
  float* as = reinterpret_cast<float*>(smem4);  // [C][LA]: A (strictly lower)
  float* ts = as + C * LA;                       // [C][LA]: T, then T diag(beta), then T diag(beta G)
  float* ys = ts + C * LA;                       // [3][16][17]: partial block products
  float* gam = ys + 3 * 16 * 17;                 // [C]
  float* beta = gam + C;                         // [C]
  auto* kb = reinterpret_cast<std::uint16_t*>(beta + C);  // [C][LK]
  std::uint16_t* vb = kb + C * LK;                         // [C][lv]

  const int slot = static_cast<int>(blockIdx.x);
  if (slot >= *n_chunks) return;
  const long long h = blockIdx.y;
  const int2 e = p.list[slot];
  const long long first = e.y, end = load_index(p.cu, p.cu_dt, e.x + 1);
  const int n = static_cast<int>(min(static_cast<long long>(C), end - first));
  const long long kh = h / (p.hv / p.hk);
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;

  stage_rows_bf16(kb, LK, static_cast<const std::uint16_t*>(p.k) + kh * p.dk, p.hk * p.dk, first, n, KP, p.dk);
  stage_rows_bf16(vb, lv, static_cast<const std::uint16_t*>(p.v) + h * p.dv, p.hv * p.dv, first, n,
                  static_cast<int>(p.dvp), p.dv);
  cp_async_commit();
  chunk_gates(p.a, p.a_dt, p.b, p.b_dt, first, n, p.hv, h, expf(load_f32(p.a_log, p.a_log_dt, h)),
              load_f32(p.dt_bias, p.dt_bias_dt, h), gam, beta);
  cp_async_wait<0>();
  __syncthreads();

  {  // A = K K^T, strictly lower, scaled
    float acc[8][4] = {};
    lower_gram<KP>(acc, kb, kb, LK, warp, 0, 1);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int i = 16 * warp + g + 8 * (c / 2), j = 8 * nt + 2 * t + c % 2;
        as[i * LA + j] = j < i ? acc[nt][c] * beta[i] * expf(gam[i] - gam[j]) : 0.f;
      }
  }
  __syncthreads();

  // T = (I + A)^-1 by 16 x 16 blocks. Diagonal blocks: column c of a block's
  // inverse depends only on column c (forward substitution), one lane each.
  if (lane < 16) {
    const int o = 16 * warp, c = lane;
    float xc[16];  // column c of the block's inverse (zero above the diagonal, as the sums give)
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      float x = r == c ? 1.f : 0.f;
#pragma unroll
      for (int m = 0; m < r; ++m) x -= as[(o + r) * LA + o + m] * xc[m];
      xc[r] = x;
    }
#pragma unroll
    for (int r = 0; r < 16; ++r) ts[(o + r) * LA + o + c] = xc[r];
  }
  __syncthreads();
  // Below it, by distance d: X_ij = -X_ii sum_{m=j}^{i-1} L_im X_mj (j = i - d),
  // with L = I + A: its blocks off the diagonal are A's.
  for (int d = 1; d < 4; ++d) {
    const int pairs = 4 - d;
    for (int i = tid; i < pairs * 256; i += kThreads) {
      const int pr = i / 256, r = (i % 256) / 16, c = i % 16;
      const int bi = pr + d, bj = pr;
      float y = 0.f;
      for (int mb = bj; mb < bi; ++mb)
#pragma unroll
        for (int m = 16 * mb; m < 16 * mb + 16; ++m) y += as[(16 * bi + r) * LA + m] * ts[m * LA + 16 * bj + c];
      ys[(pr * 16 + r) * 17 + c] = y;
    }
    __syncthreads();
    for (int i = tid; i < pairs * 256; i += kThreads) {
      const int pr = i / 256, r = (i % 256) / 16, c = i % 16;
      const int bi = pr + d, bj = pr;
      float x = 0.f;  // X_ii is lower triangular: its entries past r are zero
#pragma unroll
      for (int m = 0; m < 16; ++m) x -= ts[(16 * bi + r) * LA + 16 * bi + m] * ys[(pr * 16 + m) * 17 + c];
      ts[(16 * bi + r) * LA + 16 * bj + c] = x;
    }
    __syncthreads();
  }

  // U = (T diag(beta)) V, then W = (T diag(beta G)) K: the column scales go
  // on T (only its lower triangle is read).
  const long long row0 = (static_cast<long long>(slot) * p.hv + h) * C;
  for (int i = tid; i < C * C; i += kThreads) ts[(i / C) * LA + i % C] *= beta[i % C];
  __syncthreads();
  for (int n0 = 0; n0 < p.dvp; n0 += 64) {
    if (n0 + 64 <= p.dvp) lower_times_store<8>(ts, LA, vb, lv, n0, p.u + row0 * p.dvp, p.dvp, warp);
    else lower_times_store<4>(ts, LA, vb, lv, n0, p.u + row0 * p.dvp, p.dvp, warp);  // a last 32 columns
  }
  __syncthreads();
  for (int i = tid; i < C * C; i += kThreads) ts[(i / C) * LA + i % C] *= expf(gam[i % C]);
  __syncthreads();
#pragma unroll
  for (int n0 = 0; n0 < KP; n0 += 64) lower_times_store<8>(ts, LA, kb, LK, n0, p.w + row0 * KP, KP, warp);
  if (tid < C) p.gam[row0 + tid] = gam[tid];
}

struct Walk {
  const void *q, *k, *cu;
  int cu_dt;
  const float* state;
  float* state_out;
  void* out;
  int out_dt;
  long long hq, hk, hv, dk, dv, dvp;
  float scale;
  const int* base;
  const float *w, *u, *gam;
};

template <int KP>
struct StateSmem {
  static constexpr int LH = BV + 8, LB = KP + 8, LW = KP + 4, LU = BV + 4, LP = C + 4, LV = BV + 8;
  // A stage: q and k (bf16), W, U, gamma of one chunk.
  static constexpr std::size_t stage_bytes = sizeof(std::uint16_t) * 2 * C * LB + sizeof(float) * (C * LW + C * LU + C);
  static constexpr std::size_t bytes = 2 * stage_bytes + sizeof(float) * (KP * LH + C * LP + 2 * C * LV);
};

// One CTA a (sequence, value head, 32 value columns): the state slice H in
// shared memory, walked chunk by chunk; the next chunk's inputs are copied
// in (cp.async) while the current one is computed.
template <int KP>
__global__ void __launch_bounds__(kStateThreads) gdn_chunk_state_kernel(Walk p) {
  using L = StateSmem<KP>;
  constexpr int LH = L::LH, LB = L::LB, LW = L::LW, LU = L::LU, LP = L::LP, LV = L::LV;
  extern __shared__ float4 smem4[];
  float* hs = reinterpret_cast<float*>(smem4);  // [KP][LH]: H = S^T, this CTA's value columns
  float* ps = hs + KP * LH;                      // [C][LP]
  float* vn = ps + C * LP;                       // [C][LV]: the chunk's Vn
  float* vd = vn + C * LV;                       // [C][LV]: exp(gamma_last - gamma_i) Vn
  char* stages = reinterpret_cast<char*>(vd + C * LV);
  struct Stage {
    std::uint16_t *q, *k;
    float *w, *u, *gam;
  };
  auto stage_at = [&](int b) {
    char* x = stages + b * L::stage_bytes;
    Stage st;
    st.q = reinterpret_cast<std::uint16_t*>(x);
    st.k = st.q + C * LB;
    st.w = reinterpret_cast<float*>(st.k + C * LB);
    st.u = st.w + C * LW;
    st.gam = st.u + C * LU;
    return st;
  };

  const long long slices = p.dvp / BV;
  long long blk = blockIdx.x;
  const long long slice = blk % slices;
  blk /= slices;
  const long long h = blk % p.hv, s = blk / p.hv;
  const long long v0 = slice * BV;
  const long long qh = h / (p.hv / p.hq), kh = h / (p.hv / p.hk);
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;

  const long long lo = load_index(p.cu, p.cu_dt, s), end = load_index(p.cu, p.cu_dt, s + 1);
  const int chunk0 = p.base[s], chunks = p.base[s + 1] - chunk0;
  auto load_chunk = [&](int ci) {
    const Stage st = stage_at(ci & 1);
    const long long first = lo + static_cast<long long>(ci) * C;
    const int n = static_cast<int>(min(static_cast<long long>(C), end - first));
    const long long row0 = (static_cast<long long>(chunk0 + ci) * p.hv + h) * C;
    stage_rows_bf16(st.q, LB, static_cast<const std::uint16_t*>(p.q) + qh * p.dk, p.hq * p.dk, first, n, KP, p.dk);
    stage_rows_bf16(st.k, LB, static_cast<const std::uint16_t*>(p.k) + kh * p.dk, p.hk * p.dk, first, n, KP, p.dk);
    stage_f32(st.w, LW, p.w + row0 * KP, KP, C, KP);
    stage_f32(st.u, LU, p.u + row0 * p.dvp + v0, p.dvp, C, BV);
    stage_f32(st.gam, C, p.gam + row0, C, 1, C);
    cp_async_commit();
  };
  if (chunks > 0) load_chunk(0);

  const bool have_state = p.state && chunks > 0;
  for (int i = tid; i < BV * KP; i += kStateThreads) {  // state [V, K] -> H [K, V]: reads along K
    const int v = i / KP, c = i % KP;
    hs[c * LH + v] = have_state && c < p.dk && v0 + v < p.dv ? p.state[((s * p.hv + h) * p.dv + v0 + v) * p.dk + c] : 0.f;
  }

  // Warp w: chunk rows [16 rb, + 16) (rb = w % 4), value tiles [2 half, + 2) of
  // the slice's four 8-column tiles (half = w / 4).
  const int rb = warp % 4, half = warp / 4, m0 = 16 * rb;
  for (int ci = 0; ci < chunks; ++ci) {
    // The other stage was last read by chunk ci - 1, which every warp has left (the barrier closing it).
    if (ci + 1 < chunks) {
      load_chunk(ci + 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const Stage st = stage_at(ci & 1);
    const long long first = lo + static_cast<long long>(ci) * C;
    const int n = static_cast<int>(min(static_cast<long long>(C), end - first));
    const float* gam = st.gam;
    const float last = gam[C - 1];  // padding tokens have log gate 0: gamma of the last real token

    {  // P = Q K^T, lower including the diagonal, decayed: the two warps of a row block take alternate tiles
      float acc[8][4] = {};
      lower_gram<KP>(acc, st.q, st.k, LB, rb, half, 2);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          if (nt % 2 != half) continue;
          const int i = m0 + g + 8 * (c / 2), j = 8 * nt + 2 * t + c % 2;
          ps[i * LP + j] = j <= i ? acc[nt][c] * expf(gam[i] - gam[j]) : 0.f;
        }
    }

    // Vn = U - W H and O = diag(G) Q H, sharing H's fragments.
    float o[2][4] = {}, wh[2][4] = {};
#pragma unroll
    for (int k0 = 0; k0 < KP; k0 += 8) {
      std::uint32_t aw[4], aq[4];
      frag_a_ldsm(aw, st.w, LW, m0, k0);
      frag_a(aq, st.q, LB, 1, m0, k0);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        std::uint32_t b[2];
        frag_b(b, hs, LH, 1, k0, 8 * (2 * half + nt));
        mma_tf32(wh[nt], aw, b);
        mma_tf32(o[nt], aq, b);
      }
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int i = m0 + g + 8 * (c / 2), j = 8 * (2 * half + nt) + 2 * t + c % 2;
        const float x = st.u[i * LU + j] - wh[nt][c];
        vn[i * LV + j] = x;
        vd[i * LV + j] = x * expf(last - gam[i]);
        o[nt][c] *= expf(gam[i]);
      }
    __syncthreads();  // Vn complete; every read of H done

    // O += P Vn (P is lower: rows of block rb sum over the first 16 (rb + 1) tokens).
#pragma unroll
    for (int k0 = 0; k0 < C; k0 += 8) {
      if (k0 >= 16 * (rb + 1)) break;
      std::uint32_t a[4];
      frag_a_ldsm(a, ps, LP, m0, k0);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        std::uint32_t b[2];
        frag_b(b, vn, LV, 1, k0, 8 * (2 * half + nt));
        mma_tf32(o[nt], a, b);
      }
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int i = m0 + g + 8 * (c / 2);
        const long long j = v0 + 8 * (2 * half + nt) + 2 * t + c % 2;
        if (i < n && j < p.dv) store_f32(p.out, p.out_dt, ((first + i) * p.hv + h) * p.dv + j, p.scale * o[nt][c]);
      }

    // H = G_last H + K^T Vd: warp w updates 16 rows of H (row tile w % MT) and
    // NW of its four 8-column tiles (from (w / MT) NW): all of H over 8 warps.
    {
      constexpr int MT = KP / 16, NW = 4 * MT / 8;
      const int r0 = 16 * (warp % MT), n0 = (warp / MT) * NW;
      const float g_last = expf(last);
      float acc[NW][4];
#pragma unroll
      for (int nt = 0; nt < NW; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c)
          acc[nt][c] = g_last * hs[(r0 + g + 8 * (c / 2)) * LH + 8 * (n0 + nt) + 2 * t + c % 2];
#pragma unroll
      for (int k0 = 0; k0 < C; k0 += 8) {
        std::uint32_t a[4];
        frag_a(a, st.k, 1, LB, r0, k0);  // K^T: (k, i) at k_tile[i * LB + k]
#pragma unroll
        for (int nt = 0; nt < NW; ++nt) {
          std::uint32_t b[2];
          frag_b(b, vd, LV, 1, k0, 8 * (n0 + nt));
          mma_tf32(acc[nt], a, b);
        }
      }
#pragma unroll
      for (int nt = 0; nt < NW; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) hs[(r0 + g + 8 * (c / 2)) * LH + 8 * (n0 + nt) + 2 * t + c % 2] = acc[nt][c];
    }
    __syncthreads();
  }

  if (!p.state_out) return;
  // A sequence without tokens leaves its row zero, as the reference's new_state.
  for (int i = tid; i < BV * KP; i += kStateThreads) {
    const int v = i / KP, c = i % KP;
    if (c < p.dk && v0 + v < p.dv) p.state_out[((s * p.hv + h) * p.dv + v0 + v) * p.dk + c] = hs[c * LH + v];
  }
}

long long padded_dv(long long dv) { return (dv + BV - 1) / BV * BV; }
long long max_chunks(const GdnArgs& a) { return (a.total_tokens + C - 1) / C + a.seqs; }
std::size_t align256(std::size_t x) { return (x + 255) / 256 * 256; }

template <int KP>
cudaError_t launch(const GdnArgs& a, void* workspace, cudaStream_t st) {
  const long long nb = max_chunks(a), dvp = padded_dv(a.dv);
  char* ws = static_cast<char*>(workspace);
  auto take = [&](std::size_t bytes) {
    char* r = ws;
    ws += align256(bytes);
    return r;
  };
  int* base = reinterpret_cast<int*>(take(sizeof(int) * (a.seqs + 1)));
  int2* list = reinterpret_cast<int2*>(take(sizeof(int2) * nb));
  float* w = reinterpret_cast<float*>(take(sizeof(float) * nb * a.hv * C * KP));
  float* u = reinterpret_cast<float*>(take(sizeof(float) * nb * a.hv * C * dvp));
  float* gam = reinterpret_cast<float*>(take(sizeof(float) * nb * a.hv * C));

  gdn_chunk_plan_kernel<<<1, 1024, 0, st>>>(Plan{a.cu_seqlens, static_cast<int>(a.cu_dt), a.seqs, a.total_tokens, nb,
                                                  base, list});
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;

  Prep pr{};
  pr.k = a.k, pr.v = a.v, pr.a = a.a, pr.b = a.b, pr.a_log = a.a_log, pr.dt_bias = a.dt_bias, pr.cu = a.cu_seqlens;
  pr.a_dt = static_cast<int>(a.a_dt), pr.b_dt = static_cast<int>(a.b_dt), pr.a_log_dt = static_cast<int>(a.a_log_dt);
  pr.dt_bias_dt = static_cast<int>(a.dt_bias_dt), pr.cu_dt = static_cast<int>(a.cu_dt);
  pr.hk = a.hk, pr.hv = a.hv, pr.dk = a.dk, pr.dv = a.dv, pr.dvp = dvp;
  pr.list = list, pr.w = w, pr.u = u, pr.gam = gam;
  auto prep = gdn_chunk_prepare_kernel<KP>;
  const std::size_t prep_bytes = PrepareSmem<KP>::bytes(dvp);
  if (cudaError_t e = cudaFuncSetAttribute(prep, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(prep_bytes));
      e != cudaSuccess)
    return e;
  // The chunk count is on the device: slots past it return at once.
  prep<<<dim3(static_cast<unsigned>(nb), static_cast<unsigned>(a.hv)), kThreads, prep_bytes, st>>>(pr, base + a.seqs);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;

  Walk wk{};
  wk.q = a.q, wk.k = a.k, wk.cu = a.cu_seqlens, wk.cu_dt = static_cast<int>(a.cu_dt);
  wk.state = a.state, wk.state_out = a.state_out, wk.out = a.out, wk.out_dt = static_cast<int>(a.out_dt);
  wk.hq = a.hq, wk.hk = a.hk, wk.hv = a.hv, wk.dk = a.dk, wk.dv = a.dv, wk.dvp = dvp;
  wk.scale = a.scale, wk.base = base, wk.w = w, wk.u = u, wk.gam = gam;
  auto walk = gdn_chunk_state_kernel<KP>;
  if (cudaError_t e = cudaFuncSetAttribute(walk, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(StateSmem<KP>::bytes));
      e != cudaSuccess)
    return e;
  walk<<<static_cast<unsigned>(a.seqs * a.hv * (dvp / BV)), kStateThreads, StateSmem<KP>::bytes, st>>>(wk);
  return cudaGetLastError();
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

bool gdn_prefill_uses_chunks(const GdnArgs& a) {
  const bool bf16 = a.q_dt == DType::bfloat16 && a.k_dt == DType::bfloat16 && a.v_dt == DType::bfloat16;
  // 16-byte copies of whole rows: K and V multiples of 8, the tensors aligned.
  const bool rows = a.dk % 8 == 0 && a.dv % 8 == 0 && aligned16(a.q) && aligned16(a.k) && aligned16(a.v);
  // The token-by-token kernel gives every (sequence, value head) CTAs of its
  // own: short sequences in many such pairs keep the GPU busy there. Chunks
  // take sequences averaging 128 tokens or more, 64 with at most 1024 pairs,
  // 32 with at most 512 (docs/performance/linear.md has the measured crossover).
  const std::int64_t len = a.seqs > 0 ? a.total_tokens / a.seqs : 0, pairs = a.seqs * a.hv;
  const bool long_enough = len >= 2 * C || (len >= C && pairs <= 1024) || (len >= C / 2 && pairs <= 512);
  return a.cu_seqlens && a.seqs > 0 && bf16 && rows && a.dk <= 128 && a.dv <= 256 && long_enough;
}

std::size_t gdn_workspace_bytes(const GdnArgs& a) {
  if (a.seq_index) return sizeof(int) * static_cast<std::size_t>(std::max<std::int64_t>(a.state_rows + a.seqs, 1));
  if (!gdn_prefill_uses_chunks(a)) return 0;
  const long long nb = max_chunks(a), kp = a.dk <= 64 ? 64 : 128;
  return align256(sizeof(int) * (a.seqs + 1)) + align256(sizeof(int2) * nb) +
         align256(sizeof(float) * nb * a.hv * C * kp) + align256(sizeof(float) * nb * a.hv * C * padded_dv(a.dv)) +
         align256(sizeof(float) * nb * a.hv * C);
}

cudaError_t launch_gdn_chunked_prefill(const GdnArgs& a, void* workspace, void* stream) {
  const auto st = static_cast<cudaStream_t>(stream);
  return a.dk <= 64 ? launch<64>(a, workspace, st) : launch<128>(a, workspace, st);
}

}  // namespace kb::kernels
