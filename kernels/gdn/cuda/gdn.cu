// kb_cuda_gdn kernel: the gated delta rule token by token with the state in
// registers, for decode (T = 1), mtp (T tokens a sequence from a pool row)
// and prefill (the ranges of cu_seqlens), k-last state S [V, K] per head.
//
// Per token t of a sequence and value head h (q/k head h / (HV / HQ), h / (HV / HK)):
//   g     = exp(-exp(A_log[h]) * softplus(a[t, h] + dt_bias[h]))   softplus: torch's (threshold 20), fp32
//   beta  = sigmoid(b[t, h])
//   sk    = S k,  sq = S q                      (per row v: reductions over K)
//   delta = beta * (v - g sk)                   (the reference's new_v - old_v)
//   S     = g S + delta k^T
//   o     = scale * (g sq + delta (k . q))      (= scale * S_new q)
// Every row v of S evolves on its own: the reductions are over K only. So a
// CTA owns a slice of rows of one (sequence, head) state, loads it once with
// 16-byte loads along K (the contiguous dim), applies all of the sequence's
// tokens in registers and stores it once. 16 lanes share a row (each lane 4,
// 8, 16 or 32 of its K elements, in runs of 4); both dot products of a row
// and k . q go through one 4-step shuffle tree. Tokens are staged in shared
// memory a tile at a time (k and q as fp32, v for the CTA's rows, g and
// beta), and the tile's outputs leave through shared memory as coalesced rows.
// Prefill of long sequences (K <= 128; gdn_prefill_uses_chunks) runs in
// chunks on tensor cores instead (gdn_chunked.cu); short ones walk their
// tokens here (parallel over sequences x heads x row slices).
// mtp returns the pool unchanged (final_state) beside the outputs: its CTAs
// own pool rows, not sequences (gdn_pool_kernel). Each loads its slice of a
// row once, stores it as the copy, and walks the tokens of every sequence
// that reads the row (a list linked by gdn_link_pool_users) from the state
// it holds, so the pool is read once and written once, the call's floor.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "../../common/cuda_types.cuh"
#include "../../common/half_bits.cuh"
#include "gdn_chunked.hpp"
#include "gdn_cuda.hpp"

namespace kb::kernels {
namespace {

constexpr int kLanes = 16;         // lanes sharing one state row
constexpr int kMaxWarps = 4;
constexpr int kStateFloats = 32;   // state floats a thread holds: rows x elems

struct Params {
  const void *q, *k, *v, *a, *b, *a_log, *dt_bias;
  int q_dt, k_dt, v_dt, a_dt, b_dt, a_log_dt, dt_bias_dt;
  const float* state;
  long long state_rows;
  const void* seq_index;
  int seq_index_dt;
  const void* cu;
  int cu_dt;
  void* out;
  int out_dt;
  float* state_out;
  long long hq, hk, hv, dk, dv, seqs, tokens_per_seq, total_tokens, slices;
  float scale;
  int tile_tokens;
  // mtp: pool row r's first reading sequence first_user[r] and each
  // sequence's next reader next_user[s], -1 ending a list (workspace).
  int* first_user;
  int* next_user;
};

// A thread's state rows: local row r = warp * 2R + 2i + half of the CTA's
// slice; its K elements are the runs [j * 64 + 4l, + 4) for j < E / 4 (a
// half-warp covers 256 contiguous bytes of a row).
template <int R, int E, bool VEC>
__device__ __forceinline__ void load_state(float (&S)[R][E], const float* base, long long v0, long long dv, long long dk,
                                           int warp, int half, int l) {
  constexpr int NV = E / 4;
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const long long row = v0 + warp * 2 * R + 2 * i + half;
    const float* src = base ? base + row * dk : nullptr;
#pragma unroll
    for (int j = 0; j < NV; ++j) {
      const int e0 = j * 4 * kLanes + 4 * l;
      if constexpr (VEC) {
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (src && row < dv && e0 < dk) x = __ldcs(reinterpret_cast<const float4*>(src + e0));
        S[i][4 * j] = x.x, S[i][4 * j + 1] = x.y, S[i][4 * j + 2] = x.z, S[i][4 * j + 3] = x.w;
      } else {
#pragma unroll
        for (int c = 0; c < 4; ++c) S[i][4 * j + c] = src && row < dv && e0 + c < dk ? __ldcs(src + e0 + c) : 0.f;
      }
    }
  }
}

template <int R, int E, bool VEC>
__device__ __forceinline__ void store_state(const float (&S)[R][E], float* base, long long v0, long long dv,
                                            long long dk, int warp, int half, int l) {
  constexpr int NV = E / 4;
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const long long row = v0 + warp * 2 * R + 2 * i + half;
    if (row >= dv) continue;
    float* dst = base + row * dk;
#pragma unroll
    for (int j = 0; j < NV; ++j) {
      const int e0 = j * 4 * kLanes + 4 * l;
      if constexpr (VEC) {
        if (e0 < dk)
          __stcs(reinterpret_cast<float4*>(dst + e0), make_float4(S[i][4 * j], S[i][4 * j + 1], S[i][4 * j + 2], S[i][4 * j + 3]));
      } else {
#pragma unroll
        for (int c = 0; c < 4; ++c)
          if (e0 + c < dk) __stcs(dst + e0 + c, S[i][4 * j + c]);
      }
    }
  }
}

// One token on a thread's rows: kr, qr its K elements of k and q, vr its
// rows' values, g and beta the token's gates. o[i]: row i's output before
// the scale, the same in every lane of the half-warp.
template <int R, int E>
__device__ __forceinline__ void token_step(float (&S)[R][E], const float (&kr)[E], const float (&qr)[E],
                                           const float (&vr)[R], float g, float beta, float (&o)[R]) {
  float sk[R], sq[R], kq = 0.f;
#pragma unroll
  for (int e = 0; e < E; ++e) kq = fmaf(kr[e], qr[e], kq);
#pragma unroll
  for (int i = 0; i < R; ++i) {
    sk[i] = 0.f, sq[i] = 0.f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      sk[i] = fmaf(S[i][e], kr[e], sk[i]);
      sq[i] = fmaf(S[i][e], qr[e], sq[i]);
    }
  }
#pragma unroll
  for (int off = kLanes / 2; off > 0; off /= 2) {
    kq += __shfl_xor_sync(0xffffffffu, kq, off);
#pragma unroll
    for (int i = 0; i < R; ++i) {
      sk[i] += __shfl_xor_sync(0xffffffffu, sk[i], off);
      sq[i] += __shfl_xor_sync(0xffffffffu, sq[i], off);
    }
  }
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const float delta = beta * (vr[i] - g * sk[i]);
#pragma unroll
    for (int e = 0; e < E; ++e) S[i][e] = fmaf(delta, kr[e], g * S[i][e]);
    o[i] = fmaf(delta, kq, g * sq[i]);
  }
}

// The token's gates: g = exp(-exp(A_log) softplus(a + dt_bias)), beta = sigmoid(b).
__device__ __forceinline__ void token_gates(float a, float b, float decay_rate, float dt_bias, float& g, float& beta) {
  const float x = a + dt_bias;  // fp32 add, as the reference
  const float sp = x > 20.0f ? x : log1pf(expf(x));
  g = expf(-decay_rate * sp);
  beta = 1.0f / (1.0f + expf(-b));
}

// A CTA's (sequence, value head, row slice) and its q and k heads, in
// unsigned 32-bit arithmetic (the launch checks that the grid fits an int):
// 64-bit divisions are long software sequences, and at small batches a
// warp's instruction chain is the call's time.
struct CtaCoords {
  int slice, h, s, qh, kh;
};
__device__ __forceinline__ CtaCoords cta_coords(const Params& p) {
  const unsigned slices = static_cast<unsigned>(p.slices), hv = static_cast<unsigned>(p.hv);
  const unsigned blk = blockIdx.x, sh = blk / slices, h = sh % hv;
  CtaCoords c;
  c.slice = static_cast<int>(blk - sh * slices);
  c.h = static_cast<int>(h);
  c.s = static_cast<int>(sh / hv);
  c.qh = static_cast<int>(h / (hv / static_cast<unsigned>(p.hq)));
  c.kh = static_cast<int>(h / (hv / static_cast<unsigned>(p.hk)));
  return c;
}

// The tokens [first, first + len) of one sequence on a CTA's rows of value
// head h, from the state S it holds: tiles of tokens staged in shared memory,
// outputs leaving through it as coalesced rows. Every thread of the CTA calls
// it with the same arguments (it holds barriers).
template <int E>
__device__ __forceinline__ void walk_tokens(float (&S)[kStateFloats / E][E], const Params& p,
                                            long long first, long long len, long long h, long long qh, long long kh,
                                            long long v0, int warp, int half, int l) {
  constexpr int R = kStateFloats / E;  // rows a thread holds
  constexpr int KP = kLanes * E;       // K padded to what the lanes hold
  constexpr int NV = E / 4;            // runs of 4 a lane holds per row
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const int tt = p.tile_tokens;
  const int rows_cta = static_cast<int>(blockDim.x / 32) * 2 * R;
  float* ks = smem;                 // [tt][KP]
  float* qs = ks + tt * KP;         // [tt][KP]
  float* vs = qs + tt * KP;         // [tt][rows_cta]
  float* os = vs + tt * rows_cta;   // [tt][rows_cta]
  float* gs = os + tt * rows_cta;   // [tt]
  float* bs = gs + tt;              // [tt]
  const float decay_rate = expf(load_f32(p.a_log, p.a_log_dt, h));
  const float dt_bias = load_f32(p.dt_bias, p.dt_bias_dt, h);
  for (long long t0 = 0; t0 < len; t0 += tt) {
    const int n = static_cast<int>(min(static_cast<long long>(tt), len - t0));
    // Four elements a thread per pass, their loads issued before any store:
    // a one-warp CTA stages K = 128 of k and q in one global latency, not four.
    for (int i0 = threadIdx.x; i0 < n * KP; i0 += 4 * blockDim.x) {
      float kv[4], qv[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int i = i0 + u * static_cast<int>(blockDim.x);
        const int t = i / KP, e = i % KP;
        const long long tok = first + t0 + t;
        const bool in = i < n * KP && e < p.dk;
        kv[u] = in ? load_f32(p.k, p.k_dt, (tok * p.hk + kh) * p.dk + e) : 0.f;
        qv[u] = in ? load_f32(p.q, p.q_dt, (tok * p.hq + qh) * p.dk + e) : 0.f;
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int i = i0 + u * static_cast<int>(blockDim.x);
        if (i < n * KP) ks[i] = kv[u], qs[i] = qv[u];
      }
    }
    for (int i = threadIdx.x; i < n * rows_cta; i += blockDim.x) {
      const int t = i / rows_cta, r = i % rows_cta;
      const long long tok = first + t0 + t, row = v0 + r;
      vs[i] = row < p.dv ? load_f32(p.v, p.v_dt, (tok * p.hv + h) * p.dv + row) : 0.f;
    }
    if (static_cast<int>(threadIdx.x) < n) {
      const long long tok = first + t0 + threadIdx.x;
      token_gates(load_f32(p.a, p.a_dt, tok * p.hv + h), load_f32(p.b, p.b_dt, tok * p.hv + h), decay_rate, dt_bias,
                  gs[threadIdx.x], bs[threadIdx.x]);
    }
    __syncthreads();
    for (int t = 0; t < n; ++t) {
      float kr[E], qr[E];
#pragma unroll
      for (int j = 0; j < NV; ++j) {
        const float4 kv = *reinterpret_cast<const float4*>(ks + t * KP + j * 4 * kLanes + 4 * l);
        const float4 qv = *reinterpret_cast<const float4*>(qs + t * KP + j * 4 * kLanes + 4 * l);
        kr[4 * j] = kv.x, kr[4 * j + 1] = kv.y, kr[4 * j + 2] = kv.z, kr[4 * j + 3] = kv.w;
        qr[4 * j] = qv.x, qr[4 * j + 1] = qv.y, qr[4 * j + 2] = qv.z, qr[4 * j + 3] = qv.w;
      }
      float vr[R], o[R];
#pragma unroll
      for (int i = 0; i < R; ++i) vr[i] = vs[t * rows_cta + warp * 2 * R + 2 * i + half];
      token_step(S, kr, qr, vr, gs[t], bs[t], o);
      if (l == 0)
#pragma unroll
        for (int i = 0; i < R; ++i) os[t * rows_cta + warp * 2 * R + 2 * i + half] = p.scale * o[i];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n * rows_cta; i += blockDim.x) {
      const int t = i / rows_cta, r = i % rows_cta;
      const long long tok = first + t0 + t, row = v0 + r;
      if (row < p.dv) store_f32(p.out, p.out_dt, (tok * p.hv + h) * p.dv + row, os[i]);
    }
    // The next tile's staging overwrites ks / qs / vs / gs / bs only after
    // every thread has passed the barrier above, and os only after the next
    // barrier; the same holds for the next call's first tile.
  }
}

template <int E, bool VEC>
// 7 CTAs an SM (at most 72 registers a thread: no spill at K <= 128): the
// state is streamed once, so the bytes in flight are what bound a decode
// step, and at the 96 registers the compiler picks alone only 5 CTAs fit
// (64% of the DRAM bandwidth at batch 256, H100, Nsight Compute).
__global__ void __launch_bounds__(kMaxWarps * 32, 7) gdn_kernel(Params p) {
  constexpr int R = kStateFloats / E;
  const CtaCoords cc = cta_coords(p);
  const long long slice = cc.slice, h = cc.h, s = cc.s;

  long long first, len;
  if (p.cu) {
    const long long lo = load_index(p.cu, p.cu_dt, s), hi = load_index(p.cu, p.cu_dt, s + 1);
    first = lo;
    len = lo < 0 || hi > p.total_tokens ? 0 : hi - lo;  // out of range: the oracle refuses it; nothing is read
  } else {
    first = s * p.tokens_per_seq;
    len = p.tokens_per_seq;
  }
  const bool have_state = p.state && len > 0 && s < p.state_rows;

  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int half = lane / kLanes, l = lane % kLanes;
  const long long v0 = slice * static_cast<int>(blockDim.x / 32) * 2 * R;
  float S[R][E];
  load_state<R, E, VEC>(S, have_state ? p.state + (s * p.hv + h) * p.dv * p.dk : nullptr, v0, p.dv, p.dk, warp, half,
                        l);
  walk_tokens<E>(S, p, first, len, h, cc.qh, cc.kh, v0, warp, half, l);
  if (!p.state_out) return;
  // A sequence without tokens leaves its row zero (the reference's new_state
  // starts as zeros): S was never loaded then.
  store_state<R, E, VEC>(S, p.state_out + (s * p.hv + h) * p.dv * p.dk, v0, p.dv, p.dk, warp, half, l);
}

// mtp: the CTA's (pool row, value head, row slice) is copied to final_state
// (p.state_out) and every sequence reading the row walks its tokens from it.
// The first reader uses the registers as loaded; a row read by several
// sequences is reloaded for each further one (each starts from the row).
template <int E, bool VEC>
__global__ void __launch_bounds__(kMaxWarps * 32, 7) gdn_pool_kernel(Params p) {
  constexpr int R = kStateFloats / E;
  const CtaCoords cc = cta_coords(p);
  const long long slice = cc.slice, h = cc.h, row = cc.s;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int half = lane / kLanes, l = lane % kLanes;
  const long long v0 = slice * static_cast<int>(blockDim.x / 32) * 2 * R;
  const float* src = p.state ? p.state + (row * p.hv + h) * p.dv * p.dk : nullptr;
  float S[R][E];
  load_state<R, E, VEC>(S, src, v0, p.dv, p.dk, warp, half, l);
  store_state<R, E, VEC>(S, p.state_out + (row * p.hv + h) * p.dv * p.dk, v0, p.dv, p.dk, warp, half, l);
  bool loaded = true;
  for (int u = p.first_user[row]; u >= 0; u = p.next_user[u]) {
    if (!loaded) load_state<R, E, VEC>(S, src, v0, p.dv, p.dk, warp, half, l);
    walk_tokens<E>(S, p, u * p.tokens_per_seq, p.tokens_per_seq, h, cc.qh, cc.kh, v0, warp, half, l);
    loaded = false;
  }
}

// mtp's reader lists, one CTA: first_user[r] = -1 for every pool row, then
// each sequence pushed onto its row's list. A sequence whose index is outside
// the pool (the oracle refuses such input) gets zero outputs.
__global__ void gdn_link_pool_users(Params p) {
  for (long long r = threadIdx.x; r < p.state_rows; r += blockDim.x) p.first_user[r] = -1;
  __syncthreads();
  int outside = 0;
  for (long long s = threadIdx.x; s < p.seqs; s += blockDim.x) {
    const long long r = load_index(p.seq_index, p.seq_index_dt, s);
    if (r >= 0 && r < p.state_rows)
      p.next_user[s] = atomicExch(p.first_user + r, static_cast<int>(s));
    else
      outside = 1;
  }
  if (!__syncthreads_or(outside)) return;
  const long long per_seq = p.tokens_per_seq * p.hv * p.dv;
  for (long long s = 0; s < p.seqs; ++s) {
    const long long r = load_index(p.seq_index, p.seq_index_dt, s);
    if (r >= 0 && r < p.state_rows) continue;
    for (long long i = threadIdx.x; i < per_seq; i += blockDim.x) store_f32(p.out, p.out_dt, s * per_seq + i, 0.f);
  }
}

// Decode (one token a sequence) with bf16 q, k, v and a vectorizable state:
// gdn_kernel's rows a thread, but each thread reads its runs of k and q and
// its rows' v from global memory and computes the gates itself. No shared
// memory and no barrier: at small batches a CTA is one warp and the call's
// time is that warp's instruction chain, which the staging made about three
// times longer (Nsight Compute, H100, batch 1: 1,580 instructions a warp at
// 9 cycles each, half of them stalled on shared memory).
template <int E>
__global__ void __launch_bounds__(kMaxWarps * 32, 7) gdn_decode_kernel(Params p) {
  constexpr int R = kStateFloats / E;
  constexpr int NV = E / 4;
  const int rows_cta = static_cast<int>(blockDim.x / 32) * 2 * R;
  const CtaCoords cc = cta_coords(p);
  const long long slice = cc.slice, h = cc.h, s = cc.s;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int half = lane / kLanes, l = lane % kLanes;
  const long long v0 = slice * rows_cta;

  const long long qh = cc.qh, kh = cc.kh, tok = s;
  const auto* kg = static_cast<const std::uint16_t*>(p.k) + (tok * p.hk + kh) * p.dk;
  const auto* qg = static_cast<const std::uint16_t*>(p.q) + (tok * p.hq + qh) * p.dk;
  const auto* vg = static_cast<const std::uint16_t*>(p.v) + (tok * p.hv + h) * p.dv;
  float S[R][E];
  const bool have_state = p.state && s < p.state_rows;
  load_state<R, E, true>(S, have_state ? p.state + (s * p.hv + h) * p.dv * p.dk : nullptr, v0, p.dv, p.dk, warp, half,
                         l);
  float kr[E], qr[E], vr[R];
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    const int e0 = j * 4 * kLanes + 4 * l;
    uint2 kx = make_uint2(0u, 0u), qx = make_uint2(0u, 0u);
    if (e0 < p.dk) kx = *reinterpret_cast<const uint2*>(kg + e0), qx = *reinterpret_cast<const uint2*>(qg + e0);
    const std::uint32_t kw[2] = {kx.x, kx.y}, qw[2] = {qx.x, qx.y};
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      kr[4 * j + 2 * w] = half_bits::to_f32<true>(kw[w] & 0xffffu);
      kr[4 * j + 2 * w + 1] = half_bits::to_f32<true>(kw[w] >> 16);
      qr[4 * j + 2 * w] = half_bits::to_f32<true>(qw[w] & 0xffffu);
      qr[4 * j + 2 * w + 1] = half_bits::to_f32<true>(qw[w] >> 16);
    }
  }
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const long long row = v0 + warp * 2 * R + 2 * i + half;
    vr[i] = row < p.dv ? half_bits::to_f32<true>(vg[row]) : 0.f;
  }
  float g, beta;
  token_gates(load_f32(p.a, p.a_dt, tok * p.hv + h), load_f32(p.b, p.b_dt, tok * p.hv + h),
              expf(load_f32(p.a_log, p.a_log_dt, h)), load_f32(p.dt_bias, p.dt_bias_dt, h), g, beta);
  float o[R];
  token_step(S, kr, qr, vr, g, beta, o);
  if (l == 0)
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const long long row = v0 + warp * 2 * R + 2 * i + half;
      if (row < p.dv) store_f32(p.out, p.out_dt, (tok * p.hv + h) * p.dv + row, p.scale * o[i]);
    }
  if (!p.state_out) return;
  store_state<R, E, true>(S, p.state_out + (s * p.hv + h) * p.dv * p.dk, v0, p.dv, p.dk, warp, half, l);
}

template <int E, bool VEC>
cudaError_t launch_typed(const GdnConfig& c, const Params& p, bool pool, cudaStream_t s) {
  auto kernel = pool ? gdn_pool_kernel<E, VEC> : gdn_kernel<E, VEC>;
  if (c.smem_bytes > 48 * 1024)
    if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(c.smem_bytes));
        e != cudaSuccess)
      return e;
  kernel<<<static_cast<unsigned>(c.ctas), c.warps * 32, c.smem_bytes, s>>>(p);
  return cudaGetLastError();
}

template <int E>
cudaError_t launch_decode_typed(const GdnConfig& c, const Params& p, cudaStream_t s) {
  gdn_decode_kernel<E><<<static_cast<unsigned>(c.ctas), c.warps * 32, 0, s>>>(p);
  return cudaGetLastError();
}

cudaError_t launch_decode(const GdnConfig& c, const Params& p, cudaStream_t s) {
  switch (c.elems) {
    case 4: return launch_decode_typed<4>(c, p, s);
    case 8: return launch_decode_typed<8>(c, p, s);
    default: return launch_decode_typed<16>(c, p, s);
  }
}

template <bool VEC>
cudaError_t launch_vec(const GdnConfig& c, const Params& p, bool pool, cudaStream_t s) {
  switch (c.elems) {
    case 4: return launch_typed<4, VEC>(c, p, pool, s);
    case 8: return launch_typed<8, VEC>(c, p, pool, s);
    case 16: return launch_typed<16, VEC>(c, p, pool, s);
    default: return launch_typed<32, VEC>(c, p, pool, s);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }
bool aligned8(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 8 == 0; }

// gdn_decode_kernel's conditions: one token a sequence whose state is row s
// of the state tensor (no pool index), bf16 q, k, v (k and q read in runs of
// four: K % 4 == 0, 8-byte aligned), 16-byte state rows and K <= 256 (at 32
// elements a lane its registers spill).
bool direct_decode(const GdnArgs& a, const GdnConfig& c) {
  const bool bf16 = a.q_dt == DType::bfloat16 && a.k_dt == DType::bfloat16 && a.v_dt == DType::bfloat16;
  return !a.cu_seqlens && !a.seq_index && a.tokens_per_seq == 1 && bf16 && c.vectorized && c.elems <= 16 &&
         a.dk % 4 == 0 && aligned8(a.q) && aligned8(a.k);
}

Status fail(const char* what, cudaError_t e) {
  return make_error(Code::cuda_error,
                    std::string("kb_cuda_gdn: ") + what + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

}  // namespace

// Rows a warp = 2 * (32 / elems): 8 for K = 128, so a (sequence, head) of V =
// 128 is 16 warps. Warps a CTA: 4 while that still gives 4 CTAs an SM, fewer
// for small batches (more, smaller CTAs spread one sequence's state over more
// SMs; prefill of a few long sequences gets one warp a CTA). Tokens a tile:
// K x 16 fp32 of k and q each at K = 128 (16 KiB), fewer as K grows.
GdnConfig gdn_launch_config(std::int64_t dk, std::int64_t dv, std::int64_t hv, std::int64_t seqs,
                            std::int64_t max_tokens, int sms, bool vectorizable) {
  GdnConfig c;
  c.elems = dk <= 64 ? 4 : dk <= 128 ? 8 : dk <= 256 ? 16 : dk <= 512 ? 32 : 0;
  if (c.elems == 0) return c;
  c.vectorized = vectorizable && dk % 4 == 0;
  const int rows_warp = 2 * (kStateFloats / c.elems);
  const std::int64_t warps_needed = std::max<std::int64_t>(1, (dv + rows_warp - 1) / rows_warp);
  auto ctas = [&](int w) { return seqs * hv * ((dv + std::int64_t{w} * rows_warp - 1) / (std::int64_t{w} * rows_warp)); };
  int w = kMaxWarps;
  while (w > 1 && (w / 2 >= warps_needed || ctas(w) < 4 * std::int64_t{std::max(sms, 1)})) w /= 2;
  c.warps = w;
  c.rows_cta = w * rows_warp;
  c.slices = std::max<std::int64_t>(1, (dv + c.rows_cta - 1) / c.rows_cta);
  c.ctas = seqs * hv * c.slices;
  const int kp = kLanes * c.elems;
  c.tile_tokens = static_cast<int>(std::clamp<std::int64_t>(std::min<std::int64_t>(2048 / kp, max_tokens), 1, 16));
  c.smem_bytes = static_cast<std::size_t>(c.tile_tokens) * (2 * kp + 2 * c.rows_cta + 2) * sizeof(float);
  return c;
}

Status launch_gdn(const GdnArgs& a, void* stream) {
  if (a.hq <= 0 || a.hk <= 0 || a.hv <= 0 || a.hv % a.hq || a.hv % a.hk)
    return make_error(Code::invalid_argument, "kb_cuda_gdn: value heads must be a positive multiple of q and k heads");
  if (a.dk <= 0 || a.dv <= 0 || a.seqs < 0 || a.tokens_per_seq < 0 || a.total_tokens < 0)
    return make_error(Code::invalid_argument, "kb_cuda_gdn: sizes must be positive");
  auto s = static_cast<cudaStream_t>(stream);
  const bool mtp = a.seq_index != nullptr;  // the pool is copied even without sequences
  if (a.seqs == 0 && !mtp) return ok_status();
  if (mtp && (!a.workspace || a.workspace_bytes < gdn_workspace_bytes(a)))
    return make_error(Code::invalid_argument, "kb_cuda_gdn: mtp needs gdn_workspace_bytes() of workspace");
  if (mtp && (a.seqs > 0x7fffffff || a.state_rows > 0x7fffffff))
    return make_error(Code::unsupported, "kb_cuda_gdn: more sequences or pool rows than an int holds");
  // The reference's default is the Python float 1 / sqrt(K), applied in fp32.
  const float scale = a.scale == 0.0f ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(a.dk))) : a.scale;
  if (gdn_prefill_uses_chunks(a)) {
    if (!a.workspace || a.workspace_bytes < gdn_workspace_bytes(a))
      return make_error(Code::invalid_argument, "kb_cuda_gdn: the chunked prefill needs gdn_workspace_bytes() of workspace");
    GdnArgs chunked = a;
    chunked.scale = scale;
    if (cudaError_t e = launch_gdn_chunked_prefill(chunked, a.workspace, stream); e != cudaSuccess)
      return fail("chunked prefill launch failed", e);
    return ok_status();
  }
  int dev = 0, sms = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return fail("cudaGetDevice", e);
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); e != cudaSuccess)
    return fail("cudaDeviceGetAttribute", e);
  const bool vec = aligned16(a.state) && aligned16(a.state_out);
  // mtp's CTAs own pool rows, the others' sequences.
  const GdnConfig c = gdn_launch_config(a.dk, a.dv, a.hv, mtp ? a.state_rows : a.seqs,
                                        a.cu_seqlens ? a.total_tokens : a.tokens_per_seq, sms, vec);
  if (c.elems == 0) return make_error(Code::unsupported, "kb_cuda_gdn: head size K over 512");
  if (c.ctas > 0x7fffffff) return make_error(Code::unsupported, "kb_cuda_gdn: more CTAs than one grid holds");
  Params p{};
  p.q = a.q, p.k = a.k, p.v = a.v, p.a = a.a, p.b = a.b, p.a_log = a.a_log, p.dt_bias = a.dt_bias;
  p.q_dt = static_cast<int>(a.q_dt), p.k_dt = static_cast<int>(a.k_dt), p.v_dt = static_cast<int>(a.v_dt);
  p.a_dt = static_cast<int>(a.a_dt), p.b_dt = static_cast<int>(a.b_dt);
  p.a_log_dt = static_cast<int>(a.a_log_dt), p.dt_bias_dt = static_cast<int>(a.dt_bias_dt);
  p.state = a.state, p.state_rows = a.state_rows;
  p.seq_index = a.seq_index, p.seq_index_dt = static_cast<int>(a.seq_index_dt);
  p.cu = a.cu_seqlens, p.cu_dt = static_cast<int>(a.cu_dt);
  p.out = a.out, p.out_dt = static_cast<int>(a.out_dt);
  p.state_out = a.state_out;
  p.hq = a.hq, p.hk = a.hk, p.hv = a.hv, p.dk = a.dk, p.dv = a.dv;
  p.seqs = a.seqs, p.tokens_per_seq = a.tokens_per_seq, p.total_tokens = a.total_tokens, p.slices = c.slices;
  p.scale = scale;
  p.tile_tokens = c.tile_tokens;
  if (mtp) {
    p.first_user = static_cast<int*>(a.workspace);
    p.next_user = p.first_user + a.state_rows;
    gdn_link_pool_users<<<1, 1024, 0, s>>>(p);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return fail("reader list launch failed", e);
  }
  if (c.ctas == 0) return ok_status();
  const cudaError_t e = direct_decode(a, c) ? launch_decode(c, p, s)
                        : c.vectorized      ? launch_vec<true>(c, p, mtp, s)
                                            : launch_vec<false>(c, p, mtp, s);
  if (e != cudaSuccess) return fail("kernel launch failed", e);
  return ok_status();
}

}  // namespace kb::kernels
