// The attention GPU oracle's kernel (the host side, the checks and the
// comment on the method: gpu_oracle.cpp): plain fp32 arithmetic on CUDA
// cores, an online softmax over tiles of keys.
//
// A block takes up to kRows query rows of one KV head g: a run of the
// flattened (token, head in g's group) pairs u = token * group + head, all of
// one sequence (the host cuts the runs: Params::chunks), and, for a value dim
// wider than the block's kCols columns, one slice of the value columns
// (blockIdx.z). It walks the keys its last token sees in tiles of kKeys,
// staged in shared memory as fp32 and shared by every row of the block (the
// query heads of the group and neighbouring tokens). Per tile:
//   1. logits: thread (ty, tx) owns rows 4ty .. 4ty+3 and keys 4tx .. 4tx+3;
//      the dot products run over the qk dim (d_qk, then MLA's d_pe) in chunks
//      of kDepth, one fp32 FMA per (row, key, element), then times sm_scale;
//      a key past a row's visible count (causal mask, bottom-right aligned,
//      or the sequence's end) is -inf;
//   2. online softmax per row: the tile's maximum over the 16 threads of the
//      row (shuffles), the running maximum m, the correction exp(m_old - m),
//      the weights exp(logit - m) and the running sum l, all fp32 with expf;
//   3. the weighted values: acc[row][col] = acc * correction + sum over the
//      tile's keys of weight * v, fp32 FMAs, the weights through shared memory.
// The result is acc / l, lse (m + log l) / ln 2; a row that sees no key
// (no sequence, no keys, or an empty causal window) gets 0 and -inf, as the
// CPU oracle defines it. No tensor cores and no reduced-precision math, so
// its rounding shares nothing with kb's solutions.
#include <cuda_runtime.h>

#include "../common/cuda_types.cuh"
#include "gpu_oracle.hpp"

namespace kb::kernels::attention_gpu_oracle {
namespace {

constexpr int kThreads = 256;  // 16 x 16: ty = tid / 16 (rows), tx = tid % 16 (keys / columns)
constexpr int kRows = 64;      // query rows a block
constexpr int kKeys = 64;      // keys a tile
constexpr int kDepth = 32;     // qk elements a staged chunk
constexpr int kPad = kRows + 4;  // row stride of the transposed tiles (float4-aligned, fewer bank conflicts)
constexpr float kLn2 = 0.693147180559945309417f;

static_assert(kRows == 4 * 16 && kKeys == 4 * 16, "a thread owns 4 rows and 4 keys");
constexpr int kStage = kRows * kDepth / kThreads;  // elements of a Q (and of a K) chunk a thread stages
constexpr int kVBatch = 4;                         // value elements a thread loads before storing them
static_assert(kRows * kDepth % kThreads == 0 && kKeys * 64 % (kVBatch * kThreads) == 0,
              "the staging loops have no tails");

__device__ __forceinline__ float load(const void* base, int type, long long i) {
  switch (type) {
    case kF16: return to_f32(static_cast<const __half*>(base)[i]);
    case kBF16: return to_f32(static_cast<const __nv_bfloat16*>(base)[i]);
    default: return static_cast<const float*>(base)[i];
  }
}

__device__ __forceinline__ void store(void* base, int type, long long i, float v) {
  switch (type) {
    case kF16: static_cast<__half*>(base)[i] = from_f32<__half>(v); break;
    case kBF16: static_cast<__nv_bfloat16*>(base)[i] = from_f32<__nv_bfloat16>(v); break;
    default: static_cast<float*>(base)[i] = v;
  }
}

// Maximum and sum over the 16 threads of a row (lanes 0-15 or 16-31 of a warp).
__device__ __forceinline__ float row_max(float v) {
  for (int o = 8; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float row_sum(float v) {
  for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Keys sequence s lets query token t see (0 when t belongs to no sequence).
__device__ __forceinline__ long long visible_keys(const Params& p, long long t) {
  const int s = p.token_seq[t];
  if (s < 0) return 0;
  const long long kv_len = p.seq_kv_len[s];
  if (!p.causal) return kv_len;
  // bottom-right aligned: query i of the sequence sees keys 0 .. kv_len - q_len + i
  const long long v = kv_len - p.seq_q_len[s] + (t - p.seq_q_begin[s]) + 1;
  return v < 0 ? 0 : (v > kv_len ? kv_len : v);
}

// Shared memory, in floats: the transposed Q and K chunks [kDepth][kPad], the
// transposed weights [kKeys][kPad], the value tile [kKeys][kCols + 4]; then
// (long long) the tile's cache rows and the block rows' rows of q.
template <int kCols>
constexpr int shared_floats() {
  return 2 * kDepth * kPad + kKeys * kPad + kKeys * (kCols + 4);
}
template <int kCols>
constexpr int shared_bytes() {
  return shared_floats<kCols>() * 4 + (kKeys + kRows) * 8;
}

// Two blocks an SM where the registers allow it (a thread's 4 x kCols / 16
// accumulators; from 256 columns on, two would spill). One block holds up to
// 512 value columns, so MLA's 512 computes each logit once.
template <int kCols>
__global__ void __launch_bounds__(kThreads, kCols <= 128 ? 2 : 1) attention_tiles(const Params p) {
  constexpr int kVStride = kCols + 4;
  constexpr int kColGroups = kCols / 64;  // a thread's columns: 4tx + 64c + j
  static_assert(kCols % 64 == 0, "columns come in groups of 64 (16 threads x 4)");
  extern __shared__ __align__(16) float smem[];
  float* qs = smem;                       // qs[e][row]
  float* ks = qs + kDepth * kPad;         // ks[e][key]
  float* ps = ks + kDepth * kPad;         // ps[key][row]
  float* vs = ps + kKeys * kPad;          // vs[key][col]
  long long* rows_of = reinterpret_cast<long long*>(smem + shared_floats<kCols>());  // [kKeys], -1 past the tile
  long long* q_row_of = rows_of + kKeys;  // [kRows]: token * H_q + head, -1 past the block's rows

  const int tid = threadIdx.x, ty = tid >> 4, tx = tid & 15;
  const int g = blockIdx.y;
  const int col0 = blockIdx.z * kCols;
  const long long u0 = p.chunks[2 * blockIdx.x];
  const int n_rows = static_cast<int>(p.chunks[2 * blockIdx.x + 1]);
  const long long first_token = u0 / p.group;
  const int s = p.token_seq[first_token];  // every row of the block is of this sequence (or none)
  const long long kv_begin = s >= 0 ? p.seq_kv_begin[s] : 0;
  // The block's last token sees the most keys (a sequence's tokens see nondecreasing counts).
  const long long block_keys = visible_keys(p, (u0 + n_rows - 1) / p.group);
  const bool rope = p.q1 && p.k1;
  const int depth = p.d_qk + (rope ? p.d_pe : 0);

  if (tid < kRows) {
    const long long u = u0 + tid;
    q_row_of[tid] = tid < n_rows ? (u / p.group) * p.q_heads + static_cast<long long>(g) * p.group + u % p.group : -1;
  }
  __syncthreads();  // q_row_of is read by every thread, also when there is no key to walk
  // This thread's rows' visible keys.
  long long vis[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = 4 * ty + i;
    vis[i] = r < n_rows ? visible_keys(p, (u0 + r) / p.group) : 0;
  }

  float m[4], l[4], acc[4][4 * kColGroups];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.f;
#pragma unroll
    for (int c = 0; c < 4 * kColGroups; ++c) acc[i][c] = 0.f;
  }

  for (long long k0 = 0; k0 < block_keys; k0 += kKeys) {
    const int tile_keys = block_keys - k0 < kKeys ? static_cast<int>(block_keys - k0) : kKeys;
    if (tid < kKeys) rows_of[tid] = tid < tile_keys ? p.kv_rows[kv_begin + k0 + tid] : -1;
    __syncthreads();

    // 1. logits
    float sc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) sc[i][j] = 0.f;
    for (int e0 = 0; e0 < depth; e0 += kDepth) {
      // Every load of the chunk is issued before the first store to shared memory (a generic load
      // may alias a shared store, so interleaved they would wait on DRAM one at a time).
      float qn[kStage], kn[kStage];
#pragma unroll
      for (int it = 0; it < kStage; ++it) {
        const int idx = tid + it * kThreads;
        const int r = idx / kDepth, e = e0 + idx % kDepth;
        float qv = 0.f, kv = 0.f;
        if (e < depth) {
          const long long qr = q_row_of[r];
          if (qr >= 0)
            qv = e < p.d_qk ? load(p.q0, p.q0_type, qr * p.d_qk + e)
                            : load(p.q1, p.q1_type, qr * p.d_pe + (e - p.d_qk));
          const long long kr = rows_of[r];  // kRows == kKeys: the same index serves both tiles
          if (kr >= 0)
            kv = e < p.d_qk ? load(p.k0, p.k0_type, (kr * p.kv_heads + g) * p.d_qk + e)
                            : load(p.k1, p.k1_type, kr * p.d_pe + (e - p.d_qk));
        }
        qn[it] = qv;
        kn[it] = kv;
      }
#pragma unroll
      for (int it = 0; it < kStage; ++it) {
        const int idx = tid + it * kThreads;
        qs[(idx % kDepth) * kPad + idx / kDepth] = qn[it];
        ks[(idx % kDepth) * kPad + idx / kDepth] = kn[it];
      }
      __syncthreads();
      // A chunk's partial sums first, then into the total: each rounding
      // error grows with at most kDepth + depth / kDepth additions, not depth.
      float part[4][4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) part[i][j] = 0.f;
#pragma unroll 8
      for (int e = 0; e < kDepth; ++e) {
        const float4 q4 = *reinterpret_cast<const float4*>(&qs[e * kPad + 4 * ty]);
        const float4 k4 = *reinterpret_cast<const float4*>(&ks[e * kPad + 4 * tx]);
        const float qa[4] = {q4.x, q4.y, q4.z, q4.w}, ka[4] = {k4.x, k4.y, k4.z, k4.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) part[i][j] = fmaf(qa[i], ka[j], part[i][j]);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) sc[i][j] += part[i][j];
      __syncthreads();
    }

    // The value tile (zeros past the tile's keys and the value dim: the weights there are 0), its
    // loads issued kVBatch at a time before their stores, as the chunks above.
    for (int base = 0; base < kKeys * kCols; base += kVBatch * kThreads) {
      float vn[kVBatch];
#pragma unroll
      for (int it = 0; it < kVBatch; ++it) {
        const int idx = base + tid + it * kThreads;
        const int key = idx / kCols, c = idx % kCols;
        const long long kr = rows_of[key];
        vn[it] = kr >= 0 && col0 + c < p.d_v ? load(p.v, p.v_type, (kr * p.kv_heads + g) * p.d_v + col0 + c) : 0.f;
      }
#pragma unroll
      for (int it = 0; it < kVBatch; ++it) {
        const int idx = base + tid + it * kThreads;
        vs[(idx / kCols) * kVStride + idx % kCols] = vn[it];
      }
    }

    // 2. online softmax per row
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const long long key = k0 + 4 * tx + j;
        sc[i][j] = key < vis[i] ? sc[i][j] * p.scale : -INFINITY;
        tile_max = fmaxf(tile_max, sc[i][j]);
      }
      tile_max = row_max(tile_max);
      const float m_new = fmaxf(m[i], tile_max);
      // A row with no visible key yet keeps m = -inf, l = 0, acc = 0 (weights 0, correction 1).
      const float correction = m_new == -INFINITY ? 1.f : expf(m[i] - m_new);
      float tile_sum = 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float w = sc[i][j] == -INFINITY ? 0.f : expf(sc[i][j] - m_new);
        ps[(4 * tx + j) * kPad + 4 * ty + i] = w;
        tile_sum += w;
      }
      l[i] = l[i] * correction + row_sum(tile_sum);
      m[i] = m_new;
#pragma unroll
      for (int c = 0; c < 4 * kColGroups; ++c) acc[i][c] *= correction;
    }
    __syncthreads();

    // 3. weighted values
#pragma unroll 4
    for (int key = 0; key < kKeys; ++key) {
      const float4 w4 = *reinterpret_cast<const float4*>(&ps[key * kPad + 4 * ty]);
      const float wa[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
      for (int cg = 0; cg < kColGroups; ++cg) {
        const float4 v4 = *reinterpret_cast<const float4*>(&vs[key * kVStride + 64 * cg + 4 * tx]);
        const float va[4] = {v4.x, v4.y, v4.z, v4.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[i][4 * cg + j] = fmaf(wa[i], va[j], acc[i][4 * cg + j]);
      }
    }
    __syncthreads();  // the next tile rewrites rows_of, ps and vs
  }

#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = 4 * ty + i;
    if (r >= n_rows) continue;
    const long long row = q_row_of[r];
#pragma unroll
    for (int cg = 0; cg < kColGroups; ++cg)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int c = col0 + 64 * cg + 4 * tx + j;
        if (c < p.d_v) store(p.out, p.out_type, row * p.d_v + c, vis[i] > 0 ? acc[i][4 * cg + j] / l[i] : 0.f);
      }
    if (p.lse && blockIdx.z == 0 && tx == 0)
      store(p.lse, p.lse_type, row, vis[i] > 0 ? (m[i] + logf(l[i])) / kLn2 : -INFINITY);
  }
}

template <int kCols>
int launch_cols(const Params& p, cudaStream_t stream) {
  constexpr int bytes = shared_bytes<kCols>();
  if (cudaError_t e = cudaFuncSetAttribute(attention_tiles<kCols>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
      e != cudaSuccess)
    return static_cast<int>(e);
  const dim3 grid(static_cast<unsigned>(p.n_chunks), static_cast<unsigned>(p.kv_heads),
                  static_cast<unsigned>((p.d_v + kCols - 1) / kCols));
  attention_tiles<kCols><<<grid, kThreads, bytes, stream>>>(p);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int rows_per_chunk() { return kRows; }

int launch(const Params& p, void* stream) {
  if (p.n_chunks <= 0 || p.kv_heads <= 0 || p.d_v <= 0) return 0;
  if (p.n_chunks > 0x7fffffffLL || p.kv_heads > 65535) return static_cast<int>(cudaErrorInvalidConfiguration);
  const auto s = static_cast<cudaStream_t>(stream);
  if (p.d_v <= 64) return launch_cols<64>(p, s);
  if (p.d_v <= 128) return launch_cols<128>(p, s);
  if (p.d_v <= 256) return launch_cols<256>(p, s);
  return launch_cols<512>(p, s);  // wider than 512: slices of 512 columns (blockIdx.z), each redoing the logits
}

}  // namespace kb::kernels::attention_gpu_oracle
