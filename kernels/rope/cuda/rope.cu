// kb_cuda_rope kernel: NeoX-style rotary embedding with a cos/sin cache.
//
// For a token at position p and one head x (head_size entries), r = rotary_dim,
// h = r / 2, c = cache[p, :h], s = cache[p, h:]:
//   out[i]     = x[i] * c[i] - x[i + h] * s[i]       i < h
//   out[i + h] = x[i + h] * c[i] + x[i] * s[i]
//   out[i]     = x[i]                                 r <= i < head_size
// As the reference: x and the cache entries are widened to fp32 (exactly),
// cos/sin cast to x's dtype (a no-op for the fp32 math of the shipped
// definition), each product and each sum rounded separately (__fmul_rn /
// __fadd_rn: the compiler may not fuse them into an FMA, which torch does
// not do), and the result rounded once to q's dtype. Pass-through entries are
// copied bit for bit.
//
// Memory-bound: each work item moves 16-byte vectors (two of x and of out for
// a rotated slot, plus 64 bytes of cos/sin that every head of a token shares
// through L1/L2; one of each for a pass-through slot).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "../../common/half_bits.cuh"
#include "rope_cuda.hpp"

namespace kb::kernels {
namespace {

using half_bits::from_f32;
using half_bits::to_f32;

// Rounds to the compute dtype: fp32 (a no-op) when the reference upcasts.
template <bool BF16, bool UPCAST>
__device__ __forceinline__ float rnd(float v) {
  if constexpr (UPCAST) return v;
  else return to_f32<BF16>(from_f32<BF16>(v));
}

// V raw 16-bit elements: one 16-byte access (V = 8) or one scalar.
template <int V>
struct Raw {
  uint4 v;
};
template <>
struct Raw<1> {
  std::uint16_t v;
};

template <int V>
__device__ __forceinline__ Raw<V> load_raw(const std::uint16_t* p) {
  if constexpr (V == 8) return Raw<8>{*reinterpret_cast<const uint4*>(p)};
  else return Raw<1>{*p};
}

template <int V>
__device__ __forceinline__ void store_raw(std::uint16_t* p, const Raw<V>& r) {
  if constexpr (V == 8) *reinterpret_cast<uint4*>(p) = r.v;
  else *p = r.v;
}

template <bool BF16, int V>
__device__ __forceinline__ void unpack(const Raw<V>& r, float (&f)[V]) {
  if constexpr (V == 8) {
    const std::uint32_t w[4] = {r.v.x, r.v.y, r.v.z, r.v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[2 * i] = to_f32<BF16>(w[i] & 0xffffu);
      f[2 * i + 1] = to_f32<BF16>(w[i] >> 16);
    }
  } else {
    f[0] = to_f32<BF16>(r.v);
  }
}

template <bool BF16, int V>
__device__ __forceinline__ void store_v(std::uint16_t* p, const float (&f)[V]) {
  if constexpr (V == 8) {
    std::uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = from_f32<BF16>(f[2 * i]) | (from_f32<BF16>(f[2 * i + 1]) << 16);
    *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
    *p = static_cast<std::uint16_t>(from_f32<BF16>(f[0]));
  }
}

template <int V>
__device__ __forceinline__ void load_f32(const float* p, float (&f)[V]) {
  if constexpr (V == 8) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(p));
    const float4 b = __ldg(reinterpret_cast<const float4*>(p) + 1);
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  } else {
    f[0] = __ldg(p);
  }
}

template <bool BF16, int V>
__device__ __forceinline__ void fill_nan(std::uint16_t* dst) {
  constexpr std::uint16_t nan = BF16 ? 0x7fc0 : 0x7e00;
  if constexpr (V == 8) {
    constexpr std::uint32_t w = nan | (static_cast<std::uint32_t>(nan) << 16);
    *reinterpret_cast<uint4*>(dst) = make_uint4(w, w, w, w);
  } else {
    *dst = nan;
  }
}

template <bool BF16, bool UPCAST, bool POS64, int V>
__global__ void __launch_bounds__(128)
    rope_neox_kernel(const std::uint16_t* __restrict__ q, const std::uint16_t* __restrict__ k,
                     const float* __restrict__ cache, const void* __restrict__ positions,
                     std::uint16_t* __restrict__ q_out, std::uint16_t* __restrict__ k_out, std::int64_t tokens,
                     int qo_heads, int kv_heads, int head_size, int rotary_dim, std::int64_t max_seq_len) {
  const int half = rotary_dim / 2;
  const int rot_slots = half / V;
  const int slots = rot_slots + (head_size - rotary_dim) / V;
  const int item = blockIdx.x * blockDim.x + threadIdx.x;
  if (item >= (qo_heads + kv_heads) * slots) return;
  const int head = item / slots;
  const int slot = item - head * slots;
  const bool is_q = head < qo_heads;
  const int h = is_q ? head : head - qo_heads;
  const int heads = is_q ? qo_heads : kv_heads;
  const std::uint16_t* src_base = is_q ? q : k;
  std::uint16_t* dst_base = is_q ? q_out : k_out;
  const bool rotated = slot < rot_slots;
  // Element offsets inside the head: a rotated slot touches i and i + half.
  const int i = rotated ? slot * V : rotary_dim + (slot - rot_slots) * V;

  // Two tokens an iteration (t and t + gridDim.y): both tokens' x and
  // positions are loaded before either is used, so a thread has twice the
  // bytes in flight and the position -> cos/sin dependency of one token
  // overlaps the other's loads.
  constexpr int U = 2;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.y);
  for (std::int64_t t0 = blockIdx.y; t0 < tokens; t0 += U * step) {
    Raw<V> r1[U], r2[U];
    std::int64_t p[U];
    bool live[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::int64_t t = t0 + u * step;
      live[u] = t < tokens;
      p[u] = 0;
      if (!live[u]) continue;
      // x before the position: its DRAM round trip overlaps the position's.
      const std::uint16_t* src = src_base + (t * heads + h) * static_cast<std::int64_t>(head_size);
      r1[u] = load_raw<V>(src + i);
      if (rotated) r2[u] = load_raw<V>(src + half + i);
      p[u] = POS64 ? static_cast<const std::int64_t*>(positions)[t]
                   : static_cast<std::int64_t>(static_cast<const std::int32_t*>(positions)[t]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (!live[u]) continue;
      const std::int64_t t = t0 + u * step;
      std::uint16_t* dst = dst_base + (t * heads + h) * static_cast<std::int64_t>(head_size);
      if (p[u] < 0 || p[u] >= max_seq_len) {  // the oracle refuses such a call; never read out of bounds
        fill_nan<BF16, V>(dst + i);
        if (rotated) fill_nan<BF16, V>(dst + half + i);
        continue;
      }
      if (!rotated) {
        store_raw<V>(dst + i, r1[u]);  // pass-through: bit for bit
        continue;
      }
      float x1[V], x2[V], c[V], s[V], o1[V], o2[V];
      unpack<BF16, V>(r1[u], x1);
      unpack<BF16, V>(r2[u], x2);
      const float* cs = cache + p[u] * rotary_dim;
      load_f32<V>(cs + i, c);
      load_f32<V>(cs + half + i, s);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const float ce = rnd<BF16, UPCAST>(c[e]), se = rnd<BF16, UPCAST>(s[e]);
        const float a = rnd<BF16, UPCAST>(__fmul_rn(x1[e], ce));
        const float b = rnd<BF16, UPCAST>(__fmul_rn(x2[e], se));
        o1[e] = __fsub_rn(a, b);
        const float f = rnd<BF16, UPCAST>(__fmul_rn(x2[e], ce));
        const float g = rnd<BF16, UPCAST>(__fmul_rn(x1[e], se));
        o2[e] = __fadd_rn(f, g);
      }
      store_v<BF16, V>(dst + i, o1);
      store_v<BF16, V>(dst + half + i, o2);
    }
  }
}

template <bool BF16, bool UPCAST, bool POS64>
void launch(const RopeConfig& c, cudaStream_t s, const void* q, const void* k, const float* cache,
            const void* positions, void* q_out, void* k_out, std::int64_t tokens, int hq, int hk, int head_size,
            int rot, std::int64_t max_seq) {
  const dim3 grid(c.grid_x, c.grid_y);
  auto qi = static_cast<const std::uint16_t*>(q);
  auto ki = static_cast<const std::uint16_t*>(k);
  auto qo = static_cast<std::uint16_t*>(q_out);
  auto ko = static_cast<std::uint16_t*>(k_out);
  if (c.vector_width == 8)
    rope_neox_kernel<BF16, UPCAST, POS64, 8><<<grid, c.block_threads, 0, s>>>(qi, ki, cache, positions, qo, ko, tokens,
                                                                              hq, hk, head_size, rot, max_seq);
  else
    rope_neox_kernel<BF16, UPCAST, POS64, 1><<<grid, c.block_threads, 0, s>>>(qi, ki, cache, positions, qo, ko, tokens,
                                                                              hq, hk, head_size, rot, max_seq);
}

template <bool BF16>
void launch_dtype(bool upcast, bool pos64, const RopeConfig& c, cudaStream_t s, const void* q, const void* k,
                  const float* cache, const void* positions, void* q_out, void* k_out, std::int64_t tokens, int hq,
                  int hk, int head_size, int rot, std::int64_t max_seq) {
  if (upcast) {
    if (pos64) launch<BF16, true, true>(c, s, q, k, cache, positions, q_out, k_out, tokens, hq, hk, head_size, rot, max_seq);
    else launch<BF16, true, false>(c, s, q, k, cache, positions, q_out, k_out, tokens, hq, hk, head_size, rot, max_seq);
  } else {
    if (pos64) launch<BF16, false, true>(c, s, q, k, cache, positions, q_out, k_out, tokens, hq, hk, head_size, rot, max_seq);
    else launch<BF16, false, false>(c, s, q, k, cache, positions, q_out, k_out, tokens, hq, hk, head_size, rot, max_seq);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

// One work item per (head, slot) of a token, 128 threads a block: with
// head_size 128 / rotary_dim 64 a head is 4 rotated slots + 8 copied ones,
// so a decode step (1 token, e.g. 48 + 8 heads = 672 items) spreads over 6
// blocks on 6 SMs and finishes in about one memory round trip; prefill gives
// tokens x that many blocks, or tokens / 2 x that many once there are 4096 or
// more (a thread then takes two tokens, to have more loads in flight; four
// tokens ran 5-12% slower on an H100).
// grid.y is capped at 65535; the kernel strides over the rest. Capping
// the grid at 1, 2, 4 or 8 waves of resident blocks that stride over the
// tokens: level with this grid (80-85% of copy bandwidth at 16384-32768
// tokens of 32 + 8 heads either way, on an H200). Each thread
// moves 16-32 bytes a token; the cos/sin row (256 bytes) is read once per
// head from L1/L2.
RopeConfig rope_launch_config(std::int64_t tokens, std::int64_t qo_heads, std::int64_t kv_heads, std::int64_t head_size,
                              std::int64_t rotary_dim, bool vectorizable) {
  RopeConfig c;
  const std::int64_t half = rotary_dim / 2;
  c.vector_width = vectorizable && half % 8 == 0 && (head_size - rotary_dim) % 8 == 0 ? 8 : 1;
  const std::int64_t slots = half / c.vector_width + (head_size - rotary_dim) / c.vector_width;
  c.items_per_token = (qo_heads + kv_heads) * slots;
  const std::int64_t threads = c.items_per_token >= 128 ? 128 : (c.items_per_token + 31) / 32 * 32;
  c.block_threads = static_cast<int>(threads < 32 ? 32 : threads);
  const std::int64_t gx = (c.items_per_token + c.block_threads - 1) / c.block_threads;
  c.grid_x = static_cast<unsigned>(gx < 1 ? 1 : gx);
  // Pair tokens (the kernel's second token is gridDim.y further on) only when
  // there are blocks to spare: measured on an H200 with 48 + 8 heads, pairing
  // is 12% faster at 16384 tokens and 8% at 1024, but 10% slower at 64 tokens
  // (6 x 64 blocks fill under one wave); below the threshold the second slot
  // of every iteration is past the end.
  const bool pair = c.grid_x * std::max<std::int64_t>(tokens, 1) >= 4096;
  const std::int64_t gy = pair ? (tokens + 1) / 2 : tokens;
  c.grid_y = static_cast<unsigned>(gy < 1 ? 1 : gy > 65535 ? 65535 : gy);
  return c;
}

Status launch_rope_neox(const void* q, const void* k, const float* cos_sin_cache, const void* positions,
                        DType positions_dtype, void* q_out, void* k_out, std::int64_t tokens, std::int64_t qo_heads,
                        std::int64_t kv_heads, std::int64_t head_size, std::int64_t rotary_dim,
                        std::int64_t max_seq_len, bool upcast, DType dtype, void* stream) {
  const std::string who = "kb_cuda_rope: ";
  if (dtype != DType::bfloat16 && dtype != DType::float16)
    return make_error(Code::unsupported, who + "q/k dtype must be bfloat16 or float16");
  if (positions_dtype != DType::int64 && positions_dtype != DType::int32)
    return make_error(Code::unsupported, who + "positions must be int64 or int32");
  if (tokens < 0 || qo_heads < 0 || kv_heads < 0 || max_seq_len < 0)
    return make_error(Code::invalid_argument, who + "negative size");
  if (rotary_dim <= 0 || rotary_dim % 2 != 0 || rotary_dim > head_size)
    return make_error(Code::invalid_argument, who + "rotary_dim must be even and in (0, head_size]");
  if (tokens == 0 || qo_heads + kv_heads == 0) return ok_status();
  if (!q || !k || !cos_sin_cache || !positions || !q_out || !k_out)
    return make_error(Code::invalid_argument, who + "null tensor pointer");
  const bool vec = aligned16(q) && aligned16(k) && aligned16(q_out) && aligned16(k_out) && aligned16(cos_sin_cache);
  const RopeConfig c = rope_launch_config(tokens, qo_heads, kv_heads, head_size, rotary_dim, vec);
  if (c.items_per_token > 0x7fffffff || head_size > 0x7fffffff)
    return make_error(Code::unsupported, who + "too many heads for one launch");
  auto s = static_cast<cudaStream_t>(stream);
  const bool pos64 = positions_dtype == DType::int64;
  const int hq = static_cast<int>(qo_heads), hk = static_cast<int>(kv_heads);
  const int hs = static_cast<int>(head_size), rd = static_cast<int>(rotary_dim);
  if (dtype == DType::bfloat16)
    launch_dtype<true>(upcast, pos64, c, s, q, k, cos_sin_cache, positions, q_out, k_out, tokens, hq, hk, hs, rd,
                       max_seq_len);
  else
    launch_dtype<false>(upcast, pos64, c, s, q, k, cos_sin_cache, positions, q_out, k_out, tokens, hq, hk, hs, rd,
                        max_seq_len);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    return make_error(Code::cuda_error,
                      who + "kernel launch failed: " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
  return ok_status();
}

}  // namespace kb::kernels
