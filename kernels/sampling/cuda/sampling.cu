// kb_cuda_sampling kernels: top-k / top-p / top-k-then-top-p sampling from
// probabilities, no sort; a row held on chip by a thread-block cluster, or
// streamed by one CTA.
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
// Top-k alone needs no search: a radix select of the k-th largest value w
// (four 8-bit digits of the float bits, warp-aggregated shared-memory
// histograms) gives A, the tokens above w and the first k - #{p_s > w} equal
// to it, and one draw from A is the sample.
//
// Top-p, and top-k then top-p: rejection sampling with a rising pivot. Keep a candidate set C, a prefix
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
// draw from exactly A. The top-k mass S_k comes from the same radix select
// and one pass for the mass above w.
//
// Two kernels run the same passes (sampling_launch.hpp picks one):
//  - the cluster kernel: the CTAs of a thread-block cluster (1..8) each load
//    one contiguous slice of the row into shared memory once (16-byte
//    cp.async copies), and every pass runs over shared memory. A block-wide
//    result is combined across the cluster through distributed shared
//    memory: each CTA publishes its partial in an exchange slot, one cluster
//    barrier, then every CTA reads every slot in rank order and computes the
//    same total, so every decision is the same in every CTA (the CTAs run
//    the same sequence of barriers). Slots alternate between two buffers, so
//    one barrier an exchange suffices: a slot is rewritten only after the
//    next barrier, which every reader of its previous value has passed.
//  - the streaming kernel: one CTA a row, every pass reading the row from
//    global memory; it takes rows too large for 8 CTAs' shared memory.
//
// Order inside a row: a slice (the whole row in the streaming kernel) is cut
// into vectors of W elements; thread i owns vectors i, i + blockDim, ... of
// its CTA's slice (coalesced loads); the inverse CDF runs over the CTAs in
// rank order (slices in index order), their threads in order and, inside a
// thread, its elements in index order. Any fixed order draws the same
// distribution. A thread sums its elements in float, in that order (the
// inverse CDF's walker repeats exactly that sum); the threads' sums are
// combined as doubles, in warp order in a block and rank order in a cluster:
// the same seed and configuration give the same samples. (Per-element
// doubles cost a float-to-double conversion and a double add per element on
// every pass: 4-5% of the call at batch 256, H100.)
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cfloat>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../../common/half_bits.cuh"
#include "sampling_cuda.hpp"

namespace kb::kernels {
namespace {

namespace cg = cooperative_groups;

constexpr int kMaxThreads = kSamplingMaxThreads;
constexpr int kMaxWarps = kMaxThreads / 32;

enum class Elem { f32, f16, bf16 };

template <Elem E>
constexpr int kElemBytes = E == Elem::f32 ? 4 : 2;
template <Elem E>
constexpr int kVec = 16 / kElemBytes<E>;  // elements in 16 bytes

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

// W elements at element index i0 of a row in global memory (all in range
// when W > 1: vocab % W == 0), converted to float and cleaned; out of range -> 0.
template <Elem E, int W>
__device__ __forceinline__ void load_global(const void* row, int i0, int vocab, float (&v)[W]) {
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

// A CTA's part of a row, as vectors of kW elements: vector g holds the
// elements first(g) .. first(g) + kW - 1, those with in(index) belong to the
// slice. load(g) gives them converted and cleaned, the others as 0.

// The whole row in global memory (the streaming kernel).
template <Elem E, int W>
struct GlobalSlice {
  static constexpr int kW = W;
  const void* row;
  int vocab;
  __device__ int groups() const { return (vocab + W - 1) / W; }
  __device__ int first(int g) const { return g * W; }
  __device__ bool in(int idx) const { return idx < vocab; }
  __device__ void load(int g, float (&v)[W]) const { load_global<E, W>(row, g * W, vocab, v); }
};

// Row elements [lo, hi) in shared memory (the cluster kernel): shared vector
// g holds the row elements base + g*kW ...; base = lo - (head padding). The
// kernel zeroes the positions outside [lo, hi), so they load as 0.
template <Elem E>
struct SharedSlice {
  static constexpr int kW = kVec<E>;
  const uint4* data;
  int base, lo, hi;
  int n_groups;
  __device__ int groups() const { return n_groups; }
  __device__ int first(int g) const { return base + g * kW; }
  __device__ bool in(int idx) const { return idx >= lo && idx < hi; }
  __device__ void load(int g, float (&v)[kW]) const {
    const uint4 q = data[g];
    float f[kW];
    if constexpr (E == Elem::f32) {
      f[0] = __uint_as_float(q.x), f[1] = __uint_as_float(q.y), f[2] = __uint_as_float(q.z), f[3] = __uint_as_float(q.w);
    } else {
      half_bits::unpack8<E == Elem::bf16>(q, f);
    }
#pragma unroll
    for (int e = 0; e < kW; ++e) v[e] = clean(f[e]);  // positions outside the slice hold zeros
  }
};

// Calls f(index, value, in_slice) for this thread's elements, vector by
// vector in index order. The loop bound is the same for the whole block, so
// every lane of a warp calls f the same number of times (warp collectives
// inside f are safe).
template <class S, class F>
__device__ __forceinline__ void for_each_element(const S& s, F&& f) {
  constexpr int W = S::kW;
  const int G = s.groups();
  for (int gb = 0; gb < G; gb += static_cast<int>(blockDim.x)) {
    const int g = gb + static_cast<int>(threadIdx.x);
    float v[W];
    if (g < G) {
      s.load(g, v);
    } else {
#pragma unroll
      for (int e = 0; e < W; ++e) v[e] = 0.0f;
    }
    const int i0 = s.first(g);
#pragma unroll
    for (int e = 0; e < W; ++e) f(i0 + e, v[e], g < G && s.in(i0 + e));
  }
}

// This thread's elements of the slice in the same order, for one thread
// alone, until f(index, value) returns true.
template <class S, class F>
__device__ __forceinline__ void walk_elements(const S& s, F&& f) {
  constexpr int W = S::kW;
  const int G = s.groups();
  for (int g = static_cast<int>(threadIdx.x); g < G; g += static_cast<int>(blockDim.x)) {
    float v[W];
    s.load(g, v);
    const int i0 = s.first(g);
#pragma unroll
    for (int e = 0; e < W; ++e)
      if (s.in(i0 + e) && f(i0 + e, v[e])) return;
  }
}

// "s above the key (lv, li)": p_s > lv, or p_s == lv and s < li.
__device__ __forceinline__ bool above(float v, int idx, float lv, int li) { return v > lv || (v == lv && idx < li); }

// ---- Block collectives (blockDim.x a multiple of 32; fixed summation order) ---

// A CTA's partial result as the other CTAs of its cluster read it.
struct Exchange {
  double d[2];
  int i[2];
  float f;
};

struct Shared {
  double d[kMaxWarps][2];
  int i[kMaxWarps][2];
  float f[kMaxWarps];
  unsigned hist[2][256];   // a CTA's radix histogram; two for the cluster's alternating exchanges
  unsigned hist_sum[256];  // the cluster's
  Exchange x[2];
  double cta_sum[kSamplingMaxCluster];  // the cluster kernel's last exclusive_scan_max: each CTA's sum, in rank order
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

// Exclusive prefix of x over threads in order, `total` and the block's
// maximum of v to every thread.
__device__ double block_exclusive_scan_max(double x, float v, double& total, float& vmax, Shared& sm) {
  double incl = x;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const double y = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane_id() >= o) incl += y;
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  }
  if (lane_id() == 31) sm.d[warp_id()][0] = incl, sm.f[warp_id()] = v;
  __syncthreads();
  double before = 0;
  total = 0;
  vmax = 0;
  for (int w = 0; w < num_warps(); ++w) {
    if (w == warp_id()) before = total;
    total += sm.d[w][0];
    vmax = fmaxf(vmax, sm.f[w]);
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

// The block's largest value and its first index (ties to the lower index).
__device__ void block_argmax(float& best, int& at, Shared& sm) {
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
}

// The index of the q-th (0-based) element of the slice equal to w in index
// order, or -1. Block-wide.
template <class S>
__device__ int slice_nth_equal(const S& s, float w, int q, Shared& sm) {
  constexpr int W = S::kW;
  const int G = s.groups();
  int seen = 0;
  for (int gb = 0; gb < G; gb += static_cast<int>(blockDim.x)) {
    const int g = gb + static_cast<int>(threadIdx.x);
    float v[W];
    int mine = 0;
    if (g < G) {
      s.load(g, v);
#pragma unroll
      for (int e = 0; e < W; ++e) mine += s.in(s.first(g) + e) && v[e] == w;
    }
    int tile = 0;
    const int before = block_exclusive_scan_int(mine, tile, sm);
    if (seen + tile > q) {  // block-uniform
      const int want = q - seen - before;
      if (want >= 0 && want < mine) {
        int n = 0;
#pragma unroll
        for (int e = 0; e < W; ++e)
          if (s.in(s.first(g) + e) && v[e] == w && n++ == want) sm.pick = s.first(g) + e;
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

// ---- A row: its slice and the collectives over the whole row -----------------
//
// Both row kinds answer every collective to every thread of the row (all
// CTAs of a cluster), and every thread must call each collective.

// The streaming kernel's row: one CTA, the row in global memory.
template <class S>
struct BlockRow {
  S s;
  Shared& sm;
  __device__ int thread() const { return static_cast<int>(threadIdx.x); }
  __device__ void sum(int& c0, double& m0, int& c1, double& m1) { block_sum(c0, m0, c1, m1, sm); }
  __device__ double exclusive_scan_max(double x, float v, double& total, float& vmax) {
    return block_exclusive_scan_max(x, v, total, vmax, sm);
  }
  // The largest `candidate` (a thread number or -1; each thread's is -1
  // unless its exclusive_scan_max prefix is at or before `target`); every
  // thread calls it after exclusive_scan_max, with the same target.
  __device__ int walker(int candidate, double) {
    float unused = 0;
    block_max(candidate, unused, sm);
    return candidate;
  }
  __device__ void max(int& a, float& b) { block_max(a, b, sm); }
  __device__ void argmax(float& best, int& at) { block_argmax(best, at, sm); }
  // (i, f) of thread `owner`, to every thread.
  __device__ void broadcast(int owner, int& i, float& f) {
    if (thread() == owner) sm.pick = i, sm.pick_value = f;
    __syncthreads();
    i = sm.pick;
    f = sm.pick_value;
    __syncthreads();
  }
  // The radix histogram: this CTA's counts go into histogram(); histogram_total
  // returns the row's (after the counting and a __syncthreads).
  __device__ unsigned* histogram() { return sm.hist[0]; }
  __device__ const unsigned* histogram_total(const unsigned* h) { return h; }
  __device__ int nth_equal(float w, int q) { return slice_nth_equal(s, w, q, sm); }
};

// The cluster kernel's row: `size` CTAs, CTA `rank` holding one slice in
// shared memory. thread() numbers the threads of the cluster in rank order.
template <class S>
struct ClusterRow {
  S s;
  Shared& sm;
  int rank, size;
  int parity;  // the exchange buffer of the next exchange; the same in every CTA

  __device__ int thread() const { return rank * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x); }
  __device__ Exchange& slot() { return sm.x[parity]; }
  // After this CTA filled slot(): one cluster barrier, then f(rank, slot) for
  // every CTA's slot in rank order.
  template <class F>
  __device__ void gather(F&& f) {
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    for (int r = 0; r < size; ++r) f(r, *cluster.map_shared_rank(&sm.x[parity], r));
    parity ^= 1;
  }

  __device__ void sum(int& c0, double& m0, int& c1, double& m1) {
    block_sum(c0, m0, c1, m1, sm);
    if (threadIdx.x == 0) {
      Exchange& x = slot();
      x.i[0] = c0, x.i[1] = c1, x.d[0] = m0, x.d[1] = m1;
    }
    c0 = c1 = 0;
    m0 = m1 = 0;
    gather([&](int, const Exchange& x) { c0 += x.i[0], c1 += x.i[1], m0 += x.d[0], m1 += x.d[1]; });
  }
  // One exchange: each CTA's sum and maximum.
  __device__ double exclusive_scan_max(double x, float v, double& total, float& vmax) {
    double mine = 0;
    float vm = 0;
    const double before = block_exclusive_scan_max(x, v, mine, vm, sm);
    if (threadIdx.x == 0) slot().d[0] = mine, slot().f = vm;
    double offset = 0;
    total = 0;
    vmax = 0;
    gather([&](int r, const Exchange& e) {
      if (r == rank) offset = total;
      if (threadIdx.x == 0) sm.cta_sum[r] = e.d[0];
      total += e.d[0];
      vmax = fmaxf(vmax, e.f);
    });
    return offset + before;
  }
  // The walker is in the last CTA with a positive sum that starts at or
  // before the target (known to every CTA from the exchange): only that CTA
  // takes a block maximum; the others return the first thread of that CTA,
  // which names it to broadcast(). The sums are in shared memory, not in a
  // per-thread array (indexed by a runtime rank, that would live in local
  // memory); thread 0 wrote them before the barrier here, and the next write
  // comes after broadcast()'s cluster barrier.
  __device__ int walker(int candidate, double target) {
    __syncthreads();
    int owner = 0;
    double at = 0;
    for (int r = 0; r < size; ++r) {
      if (sm.cta_sum[r] > 0 && at <= target) owner = r;
      at += sm.cta_sum[r];
    }
    if (owner != rank) return owner * static_cast<int>(blockDim.x);
    float unused = 0;
    block_max(candidate, unused, sm);
    return candidate;
  }
  __device__ void max(int& a, float& b) {
    block_max(a, b, sm);
    if (threadIdx.x == 0) slot().i[0] = a, slot().f = b;
    gather([&](int r, const Exchange& x) {
      a = r == 0 ? x.i[0] : ::max(a, x.i[0]);
      b = r == 0 ? x.f : fmaxf(b, x.f);
    });
  }
  __device__ void argmax(float& best, int& at) {
    block_argmax(best, at, sm);
    if (threadIdx.x == 0) slot().f = best, slot().i[0] = at;
    gather([&](int r, const Exchange& x) {
      if (r == 0 || x.f > best || (x.f == best && x.i[0] < at)) best = x.f, at = x.i[0];
    });
  }
  __device__ void broadcast(int owner, int& i, float& f) {
    if (thread() == owner) slot().i[0] = i, slot().f = f;
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    const Exchange& x = *cluster.map_shared_rank(&sm.x[parity], owner / static_cast<int>(blockDim.x));
    i = x.i[0];
    f = x.f;
    parity ^= 1;
  }
  __device__ unsigned* histogram() { return sm.hist[parity]; }
  __device__ const unsigned* histogram_total(const unsigned* h) {
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    for (int b = static_cast<int>(threadIdx.x); b < 256; b += static_cast<int>(blockDim.x)) {
      unsigned total = 0;
      for (int r = 0; r < size; ++r) total += cluster.map_shared_rank(h, r)[b];
      sm.hist_sum[b] = total;
    }
    parity ^= 1;
    __syncthreads();
    return sm.hist_sum;
  }
  // The q-th element equal to w in index order: the CTA whose slice holds it
  // (slices are in index order by rank) finds it and tells the others.
  __device__ int nth_equal(float w, int q) {
    int mine = 0, unused_c = 0;
    double unused_m0 = 0, unused_m1 = 0;
    for_each_element(s, [&](int, float v, bool in) { mine += in && v == w; });
    block_sum(mine, unused_m0, unused_c, unused_m1, sm);
    if (threadIdx.x == 0) slot().i[0] = mine;
    int owner = -1, owner_before = 0, seen = 0;
    gather([&](int r, const Exchange& x) {
      if (owner < 0 && q < seen + x.i[0]) owner = r, owner_before = seen;
      seen += x.i[0];
    });
    if (owner < 0) return -1;
    int pick = -1;
    float unused_f = 0;
    if (rank == owner) pick = slice_nth_equal(s, w, q - owner_before, sm);
    broadcast(owner * static_cast<int>(blockDim.x), pick, unused_f);
    return pick;
  }
};

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
template <class Row>
__device__ Draw draw_candidate(Row& row, float lv, int li, double u, double extra) {
  float mine = 0;
  float vmax = 0;
  for_each_element(row.s, [&](int idx, float v, bool in) {
    if (in && v > 0 && above(v, idx, lv, li)) {
      mine += v;
      vmax = fmaxf(vmax, v);
    }
  });
  Draw d;
  const double before = row.exclusive_scan_max(mine, vmax, d.candidates, d.max_value);
  d.target = u * (d.candidates + extra);
  if (!(d.candidates > 0) || (extra > 0 && d.target >= d.candidates)) return d;  // no candidates, or past them
  // The walker: the last thread with candidate mass whose interval starts at or before the target.
  const int walker = row.walker(mine > 0 && before <= d.target ? row.thread() : -1, d.target);
  int pick = -1;
  float pick_v = 0;
  if (row.thread() == walker) {
    const double r = d.target - before;
    float acc = 0;  // the pass's sum, in the pass's order: it ends at exactly `mine`
    int last = -1;
    float last_v = 0;
    walk_elements(row.s, [&](int idx, float v) {
      if (!(v > 0 && above(v, idx, lv, li))) return false;
      acc += v;
      last = idx, last_v = v;
      if (acc > r) pick = idx, pick_v = v;
      return pick >= 0;
    });
    if (pick < 0) pick = last, pick_v = last_v;  // r at the rounded end of this thread's mass
  }
  row.broadcast(walker, pick, pick_v);
  d.token = pick;
  d.value = pick_v;
  return d;
}

// count and mass of {s above (v0, i0)} and of {s : p_s > v1}.
template <class Row>
__device__ void count_above(Row& row, float v0, int i0, float v1, int& c0, double& m0, int& c1, double& m1) {
  c0 = c1 = 0;
  float f0 = 0, f1 = 0;
  for_each_element(row.s, [&](int idx, float v, bool in) {
    if (!in || !(v > 0)) return;
    if (above(v, idx, v0, i0)) ++c0, f0 += v;
    if (v > v1) ++c1, f1 += v;
  });
  m0 = f0, m1 = f1;
  row.sum(c0, m0, c1, m1);
}

// The k-th largest value of the row (1 <= k <= vocab) and how many values
// exceed it: a radix select over the float bits, most significant digit
// first, counting with warp-aggregated shared-memory atomics (integers: the
// result does not depend on their order).
template <class Row>
__device__ void kth_largest(Row& row, int k, float& value, int& greater) {
  Shared& sm = row.sm;
  unsigned prefix = 0, mask = 0;
  int above_prefix = 0;  // values whose bits exceed every value with this prefix
  for (int shift = 24; shift >= 0; shift -= 8) {
    unsigned* hist = row.histogram();
    for (int b = static_cast<int>(threadIdx.x); b < 256; b += static_cast<int>(blockDim.x)) hist[b] = 0;
    __syncthreads();
    for_each_element(row.s, [&](int, float v, bool in) {
      const unsigned key = __float_as_uint(v);
      const unsigned bin = in && (key & mask) == prefix ? (key >> shift) & 255u : 256u;
      const unsigned peers = __match_any_sync(0xffffffffu, bin);
      if (bin != 256u && lane_id() == __ffs(peers) - 1) atomicAdd(&hist[bin], static_cast<unsigned>(__popc(peers)));
    });
    __syncthreads();
    const unsigned* total = row.histogram_total(hist);
    if (warp_id() == 0) {
      // Lane l holds bins 255 - 8l down to 248 - 8l: lanes in decreasing bin order.
      unsigned c[8], sum = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) sum += c[j] = total[255 - 8 * lane_id() - j];
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

// The first index of the row's largest value.
template <class Row>
__device__ int argmax(Row& row) {
  float best = -1.0f;
  int at = 0x7fffffff;
  for_each_element(row.s, [&](int idx, float v, bool in) {
    if (in && v > best) best = v, at = idx;  // a thread sees its indices in increasing order
  });
  row.argmax(best, at);
  return at == 0x7fffffff ? 0 : at;
}

// ---- The kernels ----------------------------------------------------------------

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

// One draw from the tokens above w and the first `kept` (>= 1) tokens equal
// to w in index order: over {p_s > w} plus kept * w of extra mass, the
// extra resolved to the q-th token of value w. -1 when nothing has mass.
template <class Row>
__device__ int draw_kept(Row& row, float w, int kept, double u) {
  const double extra = w > 0 ? static_cast<double>(kept) * w : 0.0;
  const Draw d = draw_candidate(row, w, 0, u, extra);
  if (d.token >= 0 || !(extra > 0)) return d.token;
  const int q = static_cast<int>((d.target - d.candidates) / static_cast<double>(w));
  return row.nth_equal(w, max(0, min(q, kept - 1)));
}

// Every branch below depends only on the row's arguments and on collective
// results, so it is taken by every thread of the row (every CTA of a cluster).
template <class Row>
__device__ int sample_row(const Params& prm, Row& row, std::uint64_t r) {
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
    if (p <= 0.0) return argmax(row);  // top-k keeps the maximum: the same argmax
    rules.p_on = p < 1.0;  // NaN: no filtering, as the reference
    rules.P = p;
  }
  if (rules.k_on && !rules.p_on) {
    // Top-k alone: the k-th largest value w (a radix select, four passes)
    // gives the kept set, the tokens above w and the first k - #{p_s > w}
    // equal to it, so one draw ends the call (rejection rounds take two
    // passes and three exchanges each).
    float wk = 0;
    int greater = 0;
    kth_largest(row, rules.k, wk, greater);
    return draw_kept(row, wk, rules.k - greater, uniform(prm.seed, r, 0));
  }
  // The first candidate set: positive tokens, or those at or above the k-th largest value.
  float lv = 0.0f;
  int li = 0;
  if (rules.k_on && rules.p_on) {
    float wk = 0;
    int greater = 0;
    kth_largest(row, rules.k, wk, greater);
    int c0, c1;
    double m0, m1;
    count_above(row, wk, 0, FLT_MAX, c0, m0, c1, m1);
    const double s_k = m0 + static_cast<double>(rules.k - greater) * wk;
    rules.P = p * s_k;
    lv = wk;
    li = 0x7fffffff;  // p_s >= wk
  }
  float row_max = 0;
  for (int round = 0; round < prm.rounds; ++round) {
    const Draw d = draw_candidate(row, lv, li, uniform(prm.seed, r, static_cast<std::uint32_t>(round)), 0.0);
    if (d.token < 0) return -1;  // no positive mass (possible only in round 0: C always holds the kept set)
    if (!rules.k_on && !rules.p_on) return d.token;
    if (round == 0) row_max = d.max_value;
    // The value halfway to the maximum: when it fails the rules too, C shrinks to the tokens above it.
    const float half = 0.5f * (d.value + row_max);
    const bool use_half = half > d.value;
    int c0, c1;
    double m0, m1;
    count_above(row, d.value, d.token, use_half ? half : FLT_MAX, c0, m0, c1, m1);
    if (rules.keep(c0, m0)) return d.token;
    if (use_half && !rules.keep(c1, m1)) lv = half, li = 0;
    else lv = d.value, li = d.token;
  }
  // Exact search: the smallest w (over float bit patterns) with the rules
  // holding for "the tokens above w"; tokens above it are kept, tokens
  // equal to it in index order while the rules hold, tokens below it not.
  if (prm.rounds <= 0) {  // no round has seen the maximum yet
    int none = -1;
    for_each_element(row.s, [&](int, float v, bool in) {
      if (in) row_max = fmaxf(row_max, v);
    });
    row.max(none, row_max);
  }
  int c_lo, c_hi = 0, c1;
  double m_lo, m_hi = 0, m1;
  count_above(row, 0.0f, 0, FLT_MAX, c_lo, m_lo, c1, m1);
  const double u = uniform(prm.seed, r, static_cast<std::uint32_t>(max(prm.rounds, 0)));
  if (rules.keep(c_lo, m_lo))  // every positive token is kept
    return draw_candidate(row, 0.0f, 0, u, 0.0).token;
  unsigned lo = 0, hi = __float_as_uint(row_max);  // rules fail at lo, hold at hi
  while (hi - lo > 1) {
    const unsigned mid = lo + (hi - lo) / 2;
    int c, cx;
    double m, mx;
    count_above(row, __uint_as_float(mid), 0, FLT_MAX, c, m, cx, mx);
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
  if (kept >= ties) return draw_candidate(row, w, 0x7fffffff, u, 0.0).token;
  return draw_kept(row, w, kept, u);  // some ties stay
}

__device__ __forceinline__ void store_sample(const Params& prm, std::uint64_t r, int s) {
  if (prm.samples_int64) static_cast<long long*>(prm.samples)[r] = s;
  else static_cast<int*>(prm.samples)[r] = s;
}

// The streaming kernel: CTA r samples row r, reading it from global memory on every pass.
template <Elem E, int W>
__global__ void __launch_bounds__(kMaxThreads) sampling_kernel(Params prm) {
  __shared__ Shared sm;
  const std::uint64_t r = blockIdx.x;
  const void* p = static_cast<const char*>(prm.probs) + r * static_cast<std::uint64_t>(prm.vocab) * kElemBytes<E>;
  BlockRow<GlobalSlice<E, W>> row{GlobalSlice<E, W>{p, prm.vocab}, sm};
  const int s = sample_row(prm, row, r);
  if (threadIdx.x == 0) store_sample(prm, r, s);
}

__device__ __forceinline__ void copy16_async(void* smem, const void* gmem) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem) : "memory");
}

// The cluster kernel: the clusters of `size` CTAs (the launch's cluster
// dimension) sample one row each, CTA `rank` holding the row's elements
// [rank * slice, (rank + 1) * slice) (clipped to the row) in dynamic shared
// memory.
//
// Layout of a slice [lo, hi) in shared memory: element lo + j at position
// pad + j, where pad (0 .. W-1) puts the first element whose global address
// is 16-byte aligned on a 16-byte boundary of shared memory. The elements
// before it (head, < W) and after the last whole vector (tail, < W) are
// copied one by one, the rest by 16-byte cp.async; the positions outside
// [pad, pad + n) are zeroed (and read as out of the slice).
template <Elem E>
__global__ void __launch_bounds__(kMaxThreads) sampling_cluster_kernel(Params prm, int slice) {
  constexpr int W = kVec<E>;
  constexpr int B = kElemBytes<E>;
  using Raw = std::conditional_t<E == Elem::f32, unsigned, unsigned short>;
  __shared__ Shared sm;
  extern __shared__ uint4 held[];
  cg::cluster_group cluster = cg::this_cluster();
  const int size = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const std::uint64_t r = blockIdx.x / static_cast<unsigned>(size);
  const int V = prm.vocab;
  const Raw* g = reinterpret_cast<const Raw*>(static_cast<const char*>(prm.probs) +
                                             r * static_cast<std::uint64_t>(V) * B);
  const int lo = min(rank * slice, V);
  const int hi = min(lo + slice, V);
  const int n = hi - lo;
  const Raw* src = g + lo;
  const int misaligned = static_cast<int>(reinterpret_cast<std::uintptr_t>(src) % 16) / B;
  const int head = min((W - misaligned) % W, n);
  const int pad = (W - head) % W;
  const int body = (n - head) / W * W;
  const int groups = (pad + n + W - 1) / W;
  Raw* dst = reinterpret_cast<Raw*>(held);
  const int t = static_cast<int>(threadIdx.x), T = static_cast<int>(blockDim.x);
  for (int j = t; j < body / W; j += T) copy16_async(held + (pad + head) / W + j, src + head + j * W);
  for (int j = t; j < head; j += T) dst[pad + j] = src[j];
  for (int j = head + body + t; j < n; j += T) dst[pad + j] = src[j];
  for (int j = t; j < pad; j += T) dst[j] = 0;
  for (int j = pad + n + t; j < groups * W; j += T) dst[j] = 0;
  asm volatile("cp.async.wait_all;\n" ::: "memory");
  __syncthreads();

  ClusterRow<SharedSlice<E>> row{SharedSlice<E>{held, lo - pad, lo, hi, groups}, sm, rank, size, 0};
  const int s = sample_row(prm, row, r);
  if (rank == 0 && threadIdx.x == 0) store_sample(prm, r, s);
  cluster.sync();  // no CTA leaves while another may still read its exchange slots
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

Error fail(Code c, const std::string& what) { return make_error(c, "kb_cuda_sampling: " + what); }

// A failed runtime call's error as a value; the runtime's last error is
// cleared, so that the caller's next cudaGetLastError() does not see it again.
Error cuda_fail(const char* what, cudaError_t err) {
  (void)cudaGetLastError();
  return fail(Code::cuda_error, std::string(what) + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}

// The dynamic shared memory a CTA of the cluster kernel may take on the
// current device (its opt-in limit less the kernel's static shared memory),
// set as the kernel's limit, and the device's SM count: queried once a device.
template <Elem E>
Status cluster_limits(std::int64_t& smem_per_cta, int& sm_count) {
  constexpr int kMaxDevices = 64;
  static std::array<std::atomic<int>, kMaxDevices> smem{}, sms{};  // sms 0: not yet queried
  int dev = 0;
  if (cudaError_t err = cudaGetDevice(&dev); err != cudaSuccess) return cuda_fail("cudaGetDevice failed", err);
  if (dev < 0 || dev >= kMaxDevices) return fail(Code::unsupported, "device ordinal " + std::to_string(dev));
  if (sms[dev].load() == 0) {
    int n = 0, optin = 0;
    cudaFuncAttributes fa{};
    cudaError_t err = cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (err == cudaSuccess) err = cudaFuncGetAttributes(&fa, sampling_cluster_kernel<E>);
    if (err != cudaSuccess) return cuda_fail("device query failed", err);
    const int allow = optin > static_cast<int>(fa.sharedSizeBytes) ? optin - static_cast<int>(fa.sharedSizeBytes) : 0;
    // Always the whole allowance, so that concurrent callers set the same value.
    err = cudaFuncSetAttribute(sampling_cluster_kernel<E>, cudaFuncAttributeMaxDynamicSharedMemorySize, allow);
    if (err != cudaSuccess) return cuda_fail("cudaFuncSetAttribute failed", err);
    smem[dev].store(allow);
    sms[dev].store(n > 0 ? n : 1);
  }
  smem_per_cta = smem[dev].load();
  sm_count = sms[dev].load();
  return ok_status();
}

// Arguments checked and turned into kernel parameters.
struct Checked {
  Params prm{};
  Elem e = Elem::f32;
  int elem_bytes = 4;
};

Result<Checked> check_args(const SamplingArgs& a) {
  Checked c;
  Params& prm = c.prm;
  if (a.batch < 0 || a.vocab < 0) return fail(Code::invalid_argument, "negative size");
  if (a.batch == 0) return c;  // nothing to launch: the other arguments do not matter
  if (a.vocab == 0) return fail(Code::invalid_argument, "vocab_size is 0: there is nothing to sample");
  // Indices inside a row are int; a tile's end must not overflow either.
  if (a.vocab > 0x7fffffffLL - 8 * kMaxThreads)
    return fail(Code::unsupported, "vocab_size above 2^31 - 8192 is not handled");
  if (a.batch > 0x7fffffffLL) return fail(Code::unsupported, "more than 2^31 - 1 rows");
  switch (a.probs_dtype) {
    case DType::float32: c.e = Elem::f32; break;
    case DType::float16: c.e = Elem::f16; break;
    case DType::bfloat16: c.e = Elem::bf16; break;
    default:
      return fail(Code::unsupported,
                  std::string("probs is ") + std::string(dtype_name(a.probs_dtype)) + "; float32, float16 or bfloat16 only");
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
  c.elem_bytes = c.e == Elem::f32 ? 4 : 2;
  return c;
}

// The one dispatch place: a checked configuration to a kernel instantiation.
template <Elem E>
Status launch_elem(const SamplingConfig& c, const SamplingArgs& a, const Params& prm, std::int64_t smem_per_cta,
                   cudaStream_t s) {
  const auto rows = static_cast<unsigned>(a.batch);
  if (c.cluster == 0) {
    if (c.vector_width == kVec<E>) sampling_kernel<E, kVec<E>><<<rows, c.block_threads, 0, s>>>(prm);
    else sampling_kernel<E, 1><<<rows, c.block_threads, 0, s>>>(prm);
  } else {
    if (c.smem_bytes > smem_per_cta)
      return fail(Code::unsupported, "a slice of " + std::to_string(c.slice) + " elements needs " +
                                          std::to_string(c.smem_bytes) + " bytes of shared memory a CTA; this device allows " +
                                          std::to_string(smem_per_cta));
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(rows * static_cast<unsigned>(c.cluster));
    cfg.blockDim = dim3(static_cast<unsigned>(c.block_threads));
    cfg.dynamicSmemBytes = static_cast<std::size_t>(c.smem_bytes);
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = static_cast<unsigned>(c.cluster);
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    const cudaError_t err = cudaLaunchKernelEx(&cfg, sampling_cluster_kernel<E>, prm, static_cast<int>(c.slice));
    if (err != cudaSuccess) return cuda_fail("cluster kernel launch failed", err);
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return cuda_fail("kernel launch failed", err);
  return ok_status();
}

template <Elem E>
Status launch_checked(const SamplingArgs& a, const Checked& k, const SamplingConfig* forced, cudaStream_t s) {
  std::int64_t smem_per_cta = 0;
  int sm_count = 0;
  KB_TRY(cluster_limits<E>(smem_per_cta, sm_count));
  const SamplingConfig c = forced ? *forced
                                  : sampling_launch_config(a.vocab, k.elem_bytes, aligned16(a.probs), a.batch, sm_count,
                                                           smem_per_cta);
  return launch_elem<E>(c, a, k.prm, smem_per_cta, s);
}

Status launch(const SamplingArgs& a, const SamplingConfig* forced, void* stream) {
  auto k = check_args(a);
  if (!k) return k.error();
  if (a.batch == 0) return ok_status();
  if (forced) {
    const SamplingConfig& c = *forced;
    const bool threads_ok = c.block_threads >= 32 && c.block_threads <= kMaxThreads && c.block_threads % 32 == 0;
    const int vec = 16 / k->elem_bytes;
    bool ok = threads_ok;
    if (c.cluster == 0) {
      ok = ok && (c.vector_width == 1 || (c.vector_width == vec && a.vocab % vec == 0 && aligned16(a.probs)));
    } else {
      const SamplingConfig want = sampling_cluster_config(a.vocab, k->elem_bytes, c.cluster);
      ok = ok && c.cluster >= 1 && c.cluster <= kSamplingMaxCluster && c.vector_width == want.vector_width &&
           c.slice == want.slice && c.smem_bytes >= want.smem_bytes && a.batch <= 0x7fffffffLL / c.cluster;
    }
    if (!ok)
      return fail(Code::invalid_argument,
                  "configuration (cluster " + std::to_string(c.cluster) + ", vector width " +
                      std::to_string(c.vector_width) + ", " + std::to_string(c.block_threads) + " threads, slice " +
                      std::to_string(c.slice) + ") does not fit these arguments");
  }
  auto s = static_cast<cudaStream_t>(stream);
  switch (k->e) {
    case Elem::f32: return launch_checked<Elem::f32>(a, *k, forced, s);
    case Elem::f16: return launch_checked<Elem::f16>(a, *k, forced, s);
    case Elem::bf16: return launch_checked<Elem::bf16>(a, *k, forced, s);
  }
  return fail(Code::unsupported, "unknown probs element type");
}

}  // namespace

Status launch_sampling(const SamplingArgs& a, void* stream) { return launch(a, nullptr, stream); }

Status launch_sampling_with(const SamplingArgs& a, const SamplingConfig& config, void* stream) {
  return launch(a, &config, stream);
}

}  // namespace kb::kernels
