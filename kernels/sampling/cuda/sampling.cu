// kb_cuda_sampling kernel: top-k / top-p / top-k-then-top-p sampling from
// probabilities, one CTA per row, no sort.
//
// The set a row samples from (the definitions' reference; kernels/sampling/
// oracle.cpp): tokens in the total order "larger probability first, equal
// probabilities by lower index" (written s > t). With
//   count(t) = #{s > t},  mass(t) = sum of p_s over s > t,
// token t is kept when
//   top-k (0 < k < vocab):   count(t) < k
//   top-p (0 < p < 1):       mass(t) <= P, P = p for top-p alone, and
//                            P = p * S_k after top-k (the reference
//                            renormalises by the top-k mass S_k first, and
//                            p * S_k is the same cut in unnormalised units)
// Both rules keep a prefix of the order, so the kept set A is one too, and a
// token's verdict needs only its two counts. p <= 0 takes the argmax (first
// maximal index); p >= 1, NaN p, k <= 0 and k >= vocab leave a row unfiltered.
// Values that are not finite and positive count as probability 0.
//
// Rejection sampling with a rising pivot: keep a candidate set C, a prefix
// of the order that contains A (at first every token of positive mass; after
// top-k-then-top-p, the tokens at or above the k-th largest value). A round:
//   1. draw u (Philox-4x32-10 keyed by the call's seed, counter = (row,
//      round)) and pick t from C by inverse CDF: per-thread candidate mass,
//      a block-wide exclusive scan, and the one thread whose interval holds
//      u * mass(C) walks its own elements again;
//   2. one pass counts count(t), mass(t), and the same for the value halfway
//      between p_t and the row's maximum;
//   3. t is kept -> the sample. Else every token after t in the order is
//      rejected too (the rules are monotone), so C shrinks to {s > t}, or to
//      the tokens above the halfway value when that value fails the rules
//      as well.
// Each round picks a token of C with probability p_t / mass(C), and C only
// loses rejected tokens, so an accepted token is drawn with probability
// proportional to p_t within A: the reference's distribution. Every round
// is two passes over the row; a rejected pick removes itself and everything
// below it, so rounds are few (about ln |C| when every token is equal).
// After SamplingArgs::rejection_rounds rounds (32) an exact search takes
// over: bisection over the bit patterns of non-negative floats (monotone in
// value) for the smallest value w with the rules holding at "the tokens
// above w", then how many tokens equal to w stay (in index order), then one
// draw from exactly A. The top-k mass S_k comes from a radix select of the k-th largest value (four
// 8-bit digits of the float bits, warp-aggregated shared-memory histograms)
// and one pass for the mass above it.
//
// Order inside a row: thread i owns elements i*W .. i*W+W-1 of every tile of
// blockDim*W elements (coalesced loads); the inverse CDF runs over the
// threads in order and, inside a thread, its elements in index order. Any
// fixed order draws the same distribution. Sums are per-thread doubles and
// block reductions in a fixed order: the same seed gives the same samples.
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>
#include <string>

#include "../../common/half_bits.cuh"
#include "sampling_cuda.hpp"

namespace kb::kernels {
namespace {

constexpr int kMaxThreads = 1024;
constexpr int kMaxWarps = kMaxThreads / 32;

enum class Elem { f32, f16, bf16 };

// ---- Random numbers: Philox-4x32-10 (Salmon et al., SC'11) -------------------

struct Word4 {
  std::uint32_t x, y, z, w;
};

__device__ __forceinline__ Word4 philox4x32_10(Word4 c, std::uint32_t k0, std::uint32_t k1) {
#pragma unroll
  for (int i = 0; i < 10; ++i) {
    const std::uint32_t lo0 = 0xD2511F53u * c.x, hi0 = __umulhi(0xD2511F53u, c.x);
    const std::uint32_t lo1 = 0xCD9E8D57u * c.z, hi1 = __umulhi(0xCD9E8D57u, c.z);
    c = Word4{hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

// Uniform in [0, 1) with 53 random bits, a pure function of (seed, row, round).
__device__ __forceinline__ double uniform(std::uint64_t seed, std::uint64_t row, std::uint32_t round) {
  const Word4 r = philox4x32_10(Word4{static_cast<std::uint32_t>(row), static_cast<std::uint32_t>(row >> 32), round,
                                      0x53414d50u},
                                static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
  const std::uint64_t bits = (static_cast<std::uint64_t>(r.x) << 21) | (r.y >> 11);
  return static_cast<double>(bits) * 0x1.0p-53;
}

// ---- A row's elements ---------------------------------------------------------

__device__ __forceinline__ float clean(float x) { return x > 0.0f && x <= FLT_MAX ? x : 0.0f; }

// W elements at element index i0 (all in range when W > 1: vocab % W == 0),
// converted to float and cleaned; out of range -> 0.
template <Elem E, int W>
__device__ __forceinline__ void load(const void* row, int i0, int vocab, float (&v)[W]) {
  if constexpr (W == 1) {
    float x = 0.0f;
    if (i0 < vocab) {
      if constexpr (E == Elem::f32) x = __ldg(static_cast<const float*>(row) + i0);
      else x = half_bits::to_f32<E == Elem::bf16>(__ldg(static_cast<const unsigned short*>(row) + i0));
    }
    v[0] = clean(x);
  } else if constexpr (E == Elem::f32) {
    static_assert(W == 4);
    float4 q = make_float4(0, 0, 0, 0);
    if (i0 < vocab) q = __ldg(reinterpret_cast<const float4*>(static_cast<const float*>(row) + i0));
    v[0] = clean(q.x), v[1] = clean(q.y), v[2] = clean(q.z), v[3] = clean(q.w);
  } else {
    static_assert(W == 8);
    uint4 q = make_uint4(0, 0, 0, 0);
    if (i0 < vocab) q = __ldg(reinterpret_cast<const uint4*>(static_cast<const unsigned short*>(row) + i0));
    float f[8];
    half_bits::unpack8<E == Elem::bf16>(q, f);
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = clean(f[e]);
  }
}

// Calls f(index, value, in_range) for this thread's elements, tile by tile
// in index order. The loop bound is the same for the whole block, so every
// lane of a warp calls f the same number of times (warp collectives inside f
// are safe).
template <Elem E, int W, class F>
__device__ __forceinline__ void for_each_element(const void* row, int vocab, F&& f) {
  const int step = static_cast<int>(blockDim.x) * W;
  for (int tb = 0; tb < vocab; tb += step) {
    const int i0 = tb + static_cast<int>(threadIdx.x) * W;
    float v[W];
    load<E, W>(row, i0, vocab, v);
#pragma unroll
    for (int e = 0; e < W; ++e) f(i0 + e, v[e], i0 + e < vocab);
  }
}

// "s above the key (lv, li)": p_s > lv, or p_s == lv and s < li.
__device__ __forceinline__ bool above(float v, int idx, float lv, int li) { return v > lv || (v == lv && idx < li); }

// ---- Block collectives (blockDim.x a multiple of 32; fixed summation order) ---

struct Shared {
  double d[kMaxWarps][2];
  int i[kMaxWarps][2];
  float f[kMaxWarps];
  unsigned hist[256];
  int pick;
  float pick_value;
  int bin;
  int bin_above;
};

__device__ __forceinline__ int lane_id() { return static_cast<int>(threadIdx.x) & 31; }
__device__ __forceinline__ int warp_id() { return static_cast<int>(threadIdx.x) >> 5; }
__device__ __forceinline__ int num_warps() { return static_cast<int>(blockDim.x) >> 5; }

// Sums of two counts and two masses over the block, returned to every thread.
__device__ void block_sum(int& c0, double& m0, int& c1, double& m1, Shared& sm) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    c0 += __shfl_down_sync(0xffffffffu, c0, o);
    c1 += __shfl_down_sync(0xffffffffu, c1, o);
    m0 += __shfl_down_sync(0xffffffffu, m0, o);
    m1 += __shfl_down_sync(0xffffffffu, m1, o);
  }
  if (lane_id() == 0) {
    sm.i[warp_id()][0] = c0, sm.i[warp_id()][1] = c1;
    sm.d[warp_id()][0] = m0, sm.d[warp_id()][1] = m1;
  }
  __syncthreads();
  c0 = c1 = 0;
  m0 = m1 = 0;
  for (int w = 0; w < num_warps(); ++w) c0 += sm.i[w][0], c1 += sm.i[w][1], m0 += sm.d[w][0], m1 += sm.d[w][1];
  __syncthreads();
}

// Exclusive prefix of x over threads in order; `total` to every thread.
__device__ double block_exclusive_scan(double x, double& total, Shared& sm) {
  double incl = x;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const double y = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane_id() >= o) incl += y;
  }
  if (lane_id() == 31) sm.d[warp_id()][0] = incl;
  __syncthreads();
  double before = 0;
  total = 0;
  for (int w = 0; w < num_warps(); ++w) {
    if (w == warp_id()) before = total;
    total += sm.d[w][0];
  }
  __syncthreads();
  return before + incl - x;
}

__device__ int block_exclusive_scan_int(int x, int& total, Shared& sm) {
  int incl = x;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane_id() >= o) incl += y;
  }
  if (lane_id() == 31) sm.i[warp_id()][0] = incl;
  __syncthreads();
  int before = 0;
  total = 0;
  for (int w = 0; w < num_warps(); ++w) {
    if (w == warp_id()) before = total;
    total += sm.i[w][0];
  }
  __syncthreads();
  return before + incl - x;
}

// Block maxima of an int and a float.
__device__ void block_max(int& a, float& b, Shared& sm) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    a = max(a, __shfl_down_sync(0xffffffffu, a, o));
    b = fmaxf(b, __shfl_down_sync(0xffffffffu, b, o));
  }
  if (lane_id() == 0) sm.i[warp_id()][0] = a, sm.f[warp_id()] = b;
  __syncthreads();
  a = sm.i[0][0];
  b = sm.f[0];
  for (int w = 1; w < num_warps(); ++w) a = max(a, sm.i[w][0]), b = fmaxf(b, sm.f[w]);
  __syncthreads();
}

// ---- Passes over a row ----------------------------------------------------------

struct Draw {
  int token = -1;         // the pick; -1 when the target fell past the candidates (into `extra`)
  float value = 0;        // its probability
  double candidates = 0;  // mass of the candidates
  double target = 0;      // u * (candidates + extra)
  float max_value = 0;    // the largest candidate value
};

// Inverse CDF over the candidates {s above (lv, li), p_s > 0}, at
// u * (their mass + extra). `extra` is mass the caller holds outside them
// (ties at the boundary, drawn by the caller); with extra = 0 a draw always
// lands on a candidate when there is one.
template <Elem E, int W>
__device__ Draw draw_candidate(const void* row, int vocab, float lv, int li, double u, double extra, Shared& sm) {
  double mine = 0;
  float vmax = 0;
  for_each_element<E, W>(row, vocab, [&](int idx, float v, bool in) {
    if (in && v > 0 && above(v, idx, lv, li)) {
      mine += v;
      vmax = fmaxf(vmax, v);
    }
  });
  Draw d;
  const double before = block_exclusive_scan(mine, d.candidates, sm);
  d.target = u * (d.candidates + extra);
  d.max_value = vmax;
  // The walker: the last thread with candidate mass whose interval starts at or before the target.
  int walker = mine > 0 && before <= d.target ? static_cast<int>(threadIdx.x) : -1;
  block_max(walker, d.max_value, sm);
  if (walker < 0 || (extra > 0 && d.target >= d.candidates)) return d;  // no candidates, or past them
  if (static_cast<int>(threadIdx.x) == walker) {
    const double r = d.target - before;
    double acc = 0;
    int pick = -1, last = -1;
    float pick_v = 0, last_v = 0;
    const int step = static_cast<int>(blockDim.x) * W;
    for (int tb = 0; tb < vocab && pick < 0; tb += step) {
      const int i0 = tb + walker * W;
      float v[W];
      load<E, W>(row, i0, vocab, v);
#pragma unroll
      for (int e = 0; e < W; ++e) {
        const int idx = i0 + e;
        if (pick < 0 && idx < vocab && v[e] > 0 && above(v[e], idx, lv, li)) {
          acc += v[e];
          last = idx, last_v = v[e];
          if (acc > r) pick = idx, pick_v = v[e];
        }
      }
    }
    if (pick < 0) pick = last, pick_v = last_v;  // r at the rounded end of this thread's mass
    sm.pick = pick;
    sm.pick_value = pick_v;
  }
  __syncthreads();
  d.token = sm.pick;
  d.value = sm.pick_value;
  __syncthreads();
  return d;
}

// count and mass of {s above (v0, i0)} and of {s : p_s > v1}.
template <Elem E, int W>
__device__ void count_above(const void* row, int vocab, float v0, int i0, float v1, int& c0, double& m0, int& c1,
                            double& m1, Shared& sm) {
  c0 = c1 = 0;
  m0 = m1 = 0;
  for_each_element<E, W>(row, vocab, [&](int idx, float v, bool in) {
    if (!in || !(v > 0)) return;
    if (above(v, idx, v0, i0)) ++c0, m0 += v;
    if (v > v1) ++c1, m1 += v;
  });
  block_sum(c0, m0, c1, m1, sm);
}

// The k-th largest value of the row (1 <= k <= vocab) and how many values
// exceed it: a radix select over the float bits, most significant digit
// first, counting with warp-aggregated shared-memory atomics (integers: the
// result does not depend on their order).
template <Elem E, int W>
__device__ void kth_largest(const void* row, int vocab, int k, float& value, int& greater, Shared& sm) {
  unsigned prefix = 0, mask = 0;
  int above_prefix = 0;  // values whose bits exceed every value with this prefix
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = static_cast<int>(threadIdx.x); b < 256; b += static_cast<int>(blockDim.x)) sm.hist[b] = 0;
    __syncthreads();
    for_each_element<E, W>(row, vocab, [&](int, float v, bool in) {
      const unsigned key = __float_as_uint(v);
      const unsigned bin = in && (key & mask) == prefix ? (key >> shift) & 255u : 256u;
      const unsigned peers = __match_any_sync(0xffffffffu, bin);
      if (bin != 256u && lane_id() == __ffs(peers) - 1) atomicAdd(&sm.hist[bin], static_cast<unsigned>(__popc(peers)));
    });
    __syncthreads();
    if (warp_id() == 0) {
      // Lane l holds bins 255 - 8l down to 248 - 8l: lanes in decreasing bin order.
      unsigned c[8], sum = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) sum += c[j] = sm.hist[255 - 8 * lane_id() - j];
      unsigned incl = sum;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const unsigned y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane_id() >= o) incl += y;
      }
      long long cum = above_prefix + static_cast<long long>(incl - sum);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if (cum < k && cum + static_cast<long long>(c[j]) >= k) {  // the k-th largest is in this bin
          sm.bin = 255 - 8 * lane_id() - j;
          sm.bin_above = static_cast<int>(cum);
        }
        cum += c[j];
      }
    }
    __syncthreads();
    prefix |= static_cast<unsigned>(sm.bin) << shift;
    mask |= 255u << shift;
    above_prefix = sm.bin_above;
    __syncthreads();
  }
  value = __uint_as_float(prefix);
  greater = above_prefix;
}

// The index of the q-th (0-based) element equal to w in index order, or -1.
template <Elem E, int W>
__device__ int nth_equal(const void* row, int vocab, float w, int q, Shared& sm) {
  const int step = static_cast<int>(blockDim.x) * W;
  int seen = 0;
  for (int tb = 0; tb < vocab; tb += step) {
    const int i0 = tb + static_cast<int>(threadIdx.x) * W;
    float v[W];
    load<E, W>(row, i0, vocab, v);
    int mine = 0;
#pragma unroll
    for (int e = 0; e < W; ++e) mine += i0 + e < vocab && v[e] == w;
    int tile = 0;
    const int before = block_exclusive_scan_int(mine, tile, sm);
    if (seen + tile > q) {  // block-uniform
      const int want = q - seen - before;
      if (want >= 0 && want < mine) {
        int n = 0;
#pragma unroll
        for (int e = 0; e < W; ++e)
          if (i0 + e < vocab && v[e] == w && n++ == want) sm.pick = i0 + e;
      }
      __syncthreads();
      const int r = sm.pick;
      __syncthreads();
      return r;
    }
    seen += tile;
  }
  return -1;
}

// The first index of the row's largest value.
template <Elem E, int W>
__device__ int argmax(const void* row, int vocab, Shared& sm) {
  float best = -1.0f;
  int at = 0x7fffffff;
  for_each_element<E, W>(row, vocab, [&](int idx, float v, bool in) {
    if (in && v > best) best = v, at = idx;  // a thread sees its indices in increasing order
  });
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ob = __shfl_down_sync(0xffffffffu, best, o);
    const int oa = __shfl_down_sync(0xffffffffu, at, o);
    if (ob > best || (ob == best && oa < at)) best = ob, at = oa;
  }
  if (lane_id() == 0) sm.f[warp_id()] = best, sm.i[warp_id()][0] = at;
  __syncthreads();
  best = sm.f[0];
  at = sm.i[0][0];
  for (int w = 1; w < num_warps(); ++w)
    if (sm.f[w] > best || (sm.f[w] == best && sm.i[w][0] < at)) best = sm.f[w], at = sm.i[w][0];
  __syncthreads();
  return at == 0x7fffffff ? 0 : at;
}

// ---- The kernel -----------------------------------------------------------------

struct Params {
  const void* probs;
  int vocab;
  const void* top_k;
  bool top_k_int64;
  const void* top_p;
  Elem top_p_elem;
  void* samples;
  bool samples_int64;
  std::uint64_t seed;
  int rounds;
};

template <Elem E>
__device__ __forceinline__ double element(const void* p, std::int64_t i) {
  if constexpr (E == Elem::f32) return static_cast<const float*>(p)[i];
  else return half_bits::to_f32<E == Elem::bf16>(static_cast<const unsigned short*>(p)[i]);
}

struct Rules {
  bool k_on = false, p_on = false;
  int k = 0;
  double P = 0;  // the top-p limit on mass(t), in the row's units
  __device__ bool keep(int count, double mass) const { return (!k_on || count < k) && (!p_on || mass <= P); }
};

template <Elem E, int W>
__device__ int sample_row(const Params& prm, const void* row, std::uint64_t r, Shared& sm) {
  const int V = prm.vocab;
  Rules rules;
  double p = 1.0;
  if (prm.top_k) {
    const long long k = prm.top_k_int64 ? static_cast<const long long*>(prm.top_k)[r]
                                        : static_cast<const int*>(prm.top_k)[r];
    rules.k_on = k > 0 && k < V;
    rules.k = rules.k_on ? static_cast<int>(k) : 0;
  }
  if (prm.top_p) {
    p = prm.top_p_elem == Elem::f32    ? element<Elem::f32>(prm.top_p, static_cast<std::int64_t>(r))
        : prm.top_p_elem == Elem::f16  ? element<Elem::f16>(prm.top_p, static_cast<std::int64_t>(r))
                                       : element<Elem::bf16>(prm.top_p, static_cast<std::int64_t>(r));
    if (p <= 0.0) return argmax<E, W>(row, V, sm);  // top-k keeps the maximum: the same argmax
    rules.p_on = p < 1.0;  // NaN: no filtering, as the reference
    rules.P = p;
  }
  // The first candidate set: positive tokens, or those at or above the k-th largest value.
  float lv = 0.0f;
  int li = 0;
  if (rules.k_on && rules.p_on) {
    float wk = 0;
    int greater = 0;
    kth_largest<E, W>(row, V, rules.k, wk, greater, sm);
    int c0, c1;
    double m0, m1;
    count_above<E, W>(row, V, wk, 0, FLT_MAX, c0, m0, c1, m1, sm);
    const double s_k = m0 + static_cast<double>(rules.k - greater) * wk;
    rules.P = p * s_k;
    lv = wk;
    li = 0x7fffffff;  // p_s >= wk
  }
  float row_max = 0;
  for (int round = 0; round < prm.rounds; ++round) {
    const Draw d = draw_candidate<E, W>(row, V, lv, li, uniform(prm.seed, r, static_cast<std::uint32_t>(round)), 0.0, sm);
    if (d.token < 0) return -1;  // no positive mass (possible only in round 0: C always holds the kept set)
    if (!rules.k_on && !rules.p_on) return d.token;
    if (round == 0) row_max = d.max_value;
    // The value halfway to the maximum: when it fails the rules too, C shrinks to the tokens above it.
    const float half = 0.5f * (d.value + row_max);
    const bool use_half = half > d.value;
    int c0, c1;
    double m0, m1;
    count_above<E, W>(row, V, d.value, d.token, use_half ? half : FLT_MAX, c0, m0, c1, m1, sm);
    if (rules.keep(c0, m0)) return d.token;
    if (use_half && !rules.keep(c1, m1)) lv = half, li = 0;
    else lv = d.value, li = d.token;
  }
  // Exact search: the smallest w (over float bit patterns) with the rules
  // holding for "the tokens above w"; tokens above it are kept, tokens
  // equal to it in index order while the rules hold, tokens below it not.
  if (prm.rounds <= 0) {  // no round has seen the maximum yet
    int none = -1;
    for_each_element<E, W>(row, V, [&](int, float v, bool in) {
      if (in) row_max = fmaxf(row_max, v);
    });
    block_max(none, row_max, sm);
  }
  int c_lo, c_hi = 0, c1;
  double m_lo, m_hi = 0, m1;
  count_above<E, W>(row, V, 0.0f, 0, FLT_MAX, c_lo, m_lo, c1, m1, sm);
  const double u = uniform(prm.seed, r, static_cast<std::uint32_t>(max(prm.rounds, 0)));
  if (rules.keep(c_lo, m_lo))  // every positive token is kept
    return draw_candidate<E, W>(row, V, 0.0f, 0, u, 0.0, sm).token;
  unsigned lo = 0, hi = __float_as_uint(row_max);  // rules fail at lo, hold at hi
  while (hi - lo > 1) {
    const unsigned mid = lo + (hi - lo) / 2;
    int c, cx;
    double m, mx;
    count_above<E, W>(row, V, __uint_as_float(mid), 0, FLT_MAX, c, m, cx, mx, sm);
    if (rules.keep(c, m)) hi = mid, c_hi = c, m_hi = m;
    else lo = mid, c_lo = c, m_lo = m;
  }
  const float w = __uint_as_float(hi);
  const int ties = c_lo - c_hi;  // tokens equal to w
  int kept = ties;
  if (rules.k_on) kept = min(kept, rules.k - c_hi);
  if (rules.p_on) {
    const double fit = floor((rules.P - m_hi) / static_cast<double>(w)) + 1.0;  // m_hi + i*w <= P for i < fit
    if (fit < kept) kept = static_cast<int>(fit);
  }
  if (kept < 1) kept = 1;  // w itself satisfies the rules
  if (kept >= ties) return draw_candidate<E, W>(row, V, w, 0x7fffffff, u, 0.0, sm).token;
  // Some ties stay: draw over {p_s > w} plus `kept` tokens of value w.
  const Draw d = draw_candidate<E, W>(row, V, w, 0, u, static_cast<double>(kept) * w, sm);
  if (d.token >= 0) return d.token;
  int q = static_cast<int>((d.target - d.candidates) / static_cast<double>(w));
  q = max(0, min(q, kept - 1));
  return nth_equal<E, W>(row, V, w, q, sm);
}

template <Elem E, int W>
__global__ void __launch_bounds__(kMaxThreads) sampling_kernel(Params prm) {
  __shared__ Shared sm;
  const std::uint64_t r = blockIdx.x;
  const std::size_t elem_bytes = E == Elem::f32 ? 4 : 2;
  const void* row = static_cast<const char*>(prm.probs) + r * static_cast<std::uint64_t>(prm.vocab) * elem_bytes;
  const int s = sample_row<E, W>(prm, row, r, sm);
  if (threadIdx.x == 0) {
    if (prm.samples_int64) static_cast<long long*>(prm.samples)[r] = s;
    else static_cast<int*>(prm.samples)[r] = s;
  }
}

template <Elem E>
void launch_elem(const SamplingConfig& c, unsigned rows, const Params& prm, cudaStream_t s) {
  constexpr int kVec = E == Elem::f32 ? 4 : 8;
  if (c.vector_width == kVec) sampling_kernel<E, kVec><<<rows, c.block_threads, 0, s>>>(prm);
  else sampling_kernel<E, 1><<<rows, c.block_threads, 0, s>>>(prm);
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

Status fail(Code c, const std::string& what) { return make_error(c, "kb_cuda_sampling: " + what); }

}  // namespace

SamplingConfig sampling_launch_config(std::int64_t vocab, int element_bytes, bool rows_aligned16) {
  SamplingConfig c;
  const int vec = 16 / element_bytes;
  c.vector_width = rows_aligned16 && vocab % vec == 0 ? vec : 1;
  const std::int64_t loads = (vocab + c.vector_width - 1) / c.vector_width;
  std::int64_t threads = (loads + 3) / 4;  // four loads a thread before the block grows
  threads = (threads + 31) / 32 * 32;
  c.block_threads = static_cast<int>(threads < 32 ? 32 : threads > kMaxThreads ? kMaxThreads : threads);
  return c;
}

Status launch_sampling(const SamplingArgs& a, void* stream) {
  if (a.batch < 0 || a.vocab < 0) return fail(Code::invalid_argument, "negative size");
  if (a.batch == 0) return ok_status();
  if (a.vocab == 0) return fail(Code::invalid_argument, "vocab_size is 0: there is nothing to sample");
  // Indices inside a row are int; a tile's end must not overflow either.
  if (a.vocab > 0x7fffffffLL - 8 * kMaxThreads)
    return fail(Code::unsupported, "vocab_size above 2^31 - 8192 is not handled");
  if (a.batch > 0x7fffffffLL) return fail(Code::unsupported, "more than 2^31 - 1 rows");
  Params prm{};
  Elem e;
  switch (a.probs_dtype) {
    case DType::float32: e = Elem::f32; break;
    case DType::float16: e = Elem::f16; break;
    case DType::bfloat16: e = Elem::bf16; break;
    default: return fail(Code::unsupported, std::string("probs is ") + std::string(dtype_name(a.probs_dtype)) + "; float32, float16 or bfloat16 only");
  }
  if (a.top_k && a.top_k_dtype != DType::int32 && a.top_k_dtype != DType::int64)
    return fail(Code::unsupported, "top_k must be int32 or int64");
  if (a.top_p) {
    switch (a.top_p_dtype) {
      case DType::float32: prm.top_p_elem = Elem::f32; break;
      case DType::float16: prm.top_p_elem = Elem::f16; break;
      case DType::bfloat16: prm.top_p_elem = Elem::bf16; break;
      default: return fail(Code::unsupported, "top_p must be float32, float16 or bfloat16");
    }
  }
  if (a.samples_dtype != DType::int64 && a.samples_dtype != DType::int32)
    return fail(Code::unsupported, "samples must be int64 or int32");
  if (!a.probs || !a.samples) return fail(Code::invalid_argument, "null tensor pointer");
  prm.probs = a.probs;
  prm.vocab = static_cast<int>(a.vocab);
  prm.top_k = a.top_k;
  prm.top_k_int64 = a.top_k_dtype == DType::int64;
  prm.top_p = a.top_p;
  prm.samples = a.samples;
  prm.samples_int64 = a.samples_dtype == DType::int64;
  prm.seed = a.seed;
  prm.rounds = a.rejection_rounds;
  const int elem_bytes = e == Elem::f32 ? 4 : 2;
  const SamplingConfig c = sampling_launch_config(a.vocab, elem_bytes, aligned16(a.probs));
  const auto rows = static_cast<unsigned>(a.batch);
  auto s = static_cast<cudaStream_t>(stream);
  if (e == Elem::f32) launch_elem<Elem::f32>(c, rows, prm, s);
  else if (e == Elem::f16) launch_elem<Elem::f16>(c, rows, prm, s);
  else launch_elem<Elem::bf16>(c, rows, prm, s);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    return fail(Code::cuda_error, std::string("kernel launch failed: ") + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
  return ok_status();
}

}  // namespace kb::kernels
