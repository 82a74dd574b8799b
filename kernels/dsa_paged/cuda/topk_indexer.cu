// kb_cuda_dsa_topk_indexer's kernels: the fp8 indexer's scores, then an
// on-chip radix select of each sequence's top-k (no sort).
//
// scores_kernel: a CTA (256 threads) takes one sequence and 256 token
// positions, in tiles of 64. The sequence's queries (fp8 -> fp32) and weights
// sit in shared memory for the whole CTA; each tile's keys are gathered
// through the block table and dequantized as the reference does (fp8 value x
// the token's float32 scale) into shared memory. Thread (hg, tg) computes the
// 4 x 4 dot products of heads hg + 16u and tokens 4 tg + v (float4 reads:
// the row stride is 4 mod 8 floats, so the 8 heads of a quarter warp hit
// distinct banks; the tokens are broadcasts), applies relu and the weight,
// sums its heads, and the 16 lanes sharing a token add theirs by shuffles.
// Heads past 64 take further passes. Scores go to the stream's workspace,
// [batch][max_pages * page_size].
//
// select_kernel: a CTA (1024 threads) per sequence. With seq_len <= topk every
// token is taken. Otherwise four 8-bit radix passes over the scores as
// order-preserving 32-bit keys find the k-th largest key T exactly and how
// many keys equal to T belong to the top k; a last pass writes, in token
// order, every token above T and the first of those equal to T (block scans
// keep the order, so the output is deterministic). The rest of the row is -1.
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <cub/block/block_scan.cuh>
#include <string>

#include "dsa_cuda.hpp"
#include "device_state.cuh"

namespace kb::kernels {
namespace {

constexpr int kScoreThreads = 256;
constexpr int kTileTokens = 64;
constexpr int kTilesPerCta = 4;
constexpr int kHeadsPerPass = 64;  // 16 head lanes x 4 heads
constexpr int kSelectThreads = 1024;

struct IndexerParams {
  const unsigned char* q;      // [B, H, D] fp8
  const unsigned char* cache;  // [pages, ps, 1, D + 4]
  const float* weights;        // [B, H]
  const std::int32_t* seq_lens;
  const std::int32_t* table;   // [B, max_pages]
  float* scores;               // [B, span]
  void* out;                   // [B, topk]
  int out64;
  long long B, H, D, ps, pages, max_pages, span, topk;
  int stride;  // shared-memory floats per query / key row (stride_for)
  int hpad;    // H rounded up to 64
};

// Floats per shared-memory row of D values: D rounded up to 4, then to 4 mod 8
// (conflict-free float4 reads of 8 consecutive rows).
constexpr long long stride_for(long long dim) {
  const long long r4 = (dim + 3) / 4 * 4;
  return r4 % 8 == 0 ? r4 + 4 : r4;
}

__device__ __forceinline__ float fp8_to_f32(unsigned char b) {
  __nv_fp8_e4m3 v;
  v.__x = b;
  return static_cast<float>(v);
}

__device__ __forceinline__ long long seq_len_of(const IndexerParams& p, long long b) {
  const long long len = p.seq_lens[b];
  return len < 0 ? 0 : (len > p.span ? p.span : len);
}

// Page of position j of sequence b; -1 where the table names no page of the cache.
__device__ __forceinline__ long long page_of(const IndexerParams& p, long long b, long long j) {
  const long long page = p.table[b * p.max_pages + j / p.ps];
  return page >= 0 && page < p.pages ? page : -1;
}

__global__ void __launch_bounds__(kScoreThreads) scores_kernel(IndexerParams p) {
  extern __shared__ float smem[];
  float* qs = smem;                         // [hpad][stride]
  float* ks = qs + p.hpad * p.stride;       // [64][stride]
  float* ws = ks + kTileTokens * p.stride;  // [hpad]
  const long long b = blockIdx.y;
  const long long len = seq_len_of(p, b);
  const long long first = static_cast<long long>(blockIdx.x) * kTileTokens * kTilesPerCta;
  if (first >= len) return;
  const int tid = threadIdx.x, hg = tid % 16, tg = tid / 16;

  for (long long i = tid; i < static_cast<long long>(p.hpad) * p.stride; i += kScoreThreads) {
    const long long h = i / p.stride, e = i % p.stride;
    qs[i] = h < p.H && e < p.D ? fp8_to_f32(p.q[(b * p.H + h) * p.D + e]) : 0.0f;
  }
  for (int h = tid; h < p.hpad; h += kScoreThreads) ws[h] = h < p.H ? p.weights[b * p.H + h] : 0.0f;

  const long long row_bytes = p.D + 4;
  for (int tile = 0; tile < kTilesPerCta; ++tile) {
    const long long j0 = first + static_cast<long long>(tile) * kTileTokens;
    if (j0 >= len) break;
    __syncthreads();  // queries written; the previous tile's keys no longer read
    for (long long i = tid; i < static_cast<long long>(kTileTokens) * p.stride; i += kScoreThreads) {
      const long long r = i / p.stride, e = i % p.stride;
      float v = 0.0f;
      const long long j = j0 + r;
      if (j < len && e < p.D) {
        const long long page = page_of(p, b, j);
        if (page >= 0) {
          const unsigned char* base = p.cache + page * p.ps * row_bytes;
          const long long slot = j % p.ps;
          float scale;
          memcpy(&scale, base + p.ps * p.D + slot * 4, 4);
          v = fp8_to_f32(base[slot * p.D + e]) * scale;
        }
      }
      ks[i] = v;
    }
    __syncthreads();

    float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int h_base = 0; h_base < p.hpad; h_base += kHeadsPerPass) {
      float dot[4][4];
#pragma unroll
      for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int v = 0; v < 4; ++v) dot[u][v] = 0.0f;
      const float* qrow = qs + (h_base + hg) * p.stride;
      const float* krow = ks + (tg * 4) * p.stride;
      for (int e = 0; e < p.D; e += 4) {
        float4 qv[4], kv[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) qv[u] = *reinterpret_cast<const float4*>(qrow + u * 16 * p.stride + e);
#pragma unroll
        for (int v = 0; v < 4; ++v) kv[v] = *reinterpret_cast<const float4*>(krow + v * p.stride + e);
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
          for (int v = 0; v < 4; ++v) {
            dot[u][v] = fmaf(qv[u].x, kv[v].x, dot[u][v]);
            dot[u][v] = fmaf(qv[u].y, kv[v].y, dot[u][v]);
            dot[u][v] = fmaf(qv[u].z, kv[v].z, dot[u][v]);
            dot[u][v] = fmaf(qv[u].w, kv[v].w, dot[u][v]);
          }
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const float w = ws[h_base + hg + 16 * u];
#pragma unroll
        for (int v = 0; v < 4; ++v) part[v] = fmaf(fmaxf(dot[u][v], 0.0f), w, part[v]);
      }
    }
#pragma unroll
    for (int v = 0; v < 4; ++v)
#pragma unroll
      for (int o = 8; o > 0; o >>= 1) part[v] += __shfl_xor_sync(0xffffffffu, part[v], o);
    if (hg == 0) {
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        const long long j = j0 + tg * 4 + v;
        if (j < len) p.scores[b * p.span + j] = part[v];
      }
    }
  }
}

// Order-preserving map of a float to an unsigned key (larger float, larger key).
__device__ __forceinline__ unsigned order_key(float f) {
  const unsigned u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ void store_index(const IndexerParams& p, long long i, long long v) {
  if (p.out64) static_cast<long long*>(p.out)[i] = v;
  else static_cast<std::int32_t*>(p.out)[i] = static_cast<std::int32_t>(v);
}

__device__ __forceinline__ long long global_index(const IndexerParams& p, long long b, long long j) {
  const long long page = p.table[b * p.max_pages + j / p.ps];
  return page * p.ps + j % p.ps;
}

__global__ void __launch_bounds__(kSelectThreads) select_kernel(IndexerParams p) {
  using Scan = cub::BlockScan<int, kSelectThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ int hist[256];
  __shared__ int found_bin, found_above;
  const long long b = blockIdx.x;
  const int tid = threadIdx.x;
  const long long len = seq_len_of(p, b);
  const long long k = len < p.topk ? len : p.topk;
  const float* sc = p.scores + b * p.span;

  if (len <= p.topk) {
    for (long long j = tid; j < len; j += kSelectThreads) store_index(p, b * p.topk + j, global_index(p, b, j));
  } else {
    unsigned prefix = 0, mask = 0;
    long long need = k;  // how many of the keys matching prefix (from the top) are still to be taken
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int i = tid; i < 256; i += kSelectThreads) hist[i] = 0;
      __syncthreads();
      // Every lane runs every round (j0 is uniform), so the warp-wide match below is well formed. Lanes with the
      // same bin add once (their count): the top bytes of a sequence's scores often share a few bins.
      for (long long j0 = 0; j0 < len; j0 += kSelectThreads) {
        const long long j = j0 + tid;
        unsigned key = 0;
        bool in = false;
        if (j < len) {
          key = order_key(sc[j]);
          in = (key & mask) == prefix;
        }
        const unsigned bin = (key >> shift) & 255u;
        const unsigned voters = __ballot_sync(0xffffffffu, in);
        if (in) {
          const unsigned peers = __match_any_sync(voters, bin);
          if ((tid & 31) == __ffs(peers) - 1) atomicAdd(&hist[bin], __popc(peers));
        }
      }
      __syncthreads();
      if (tid < 32) {
        // Lane l holds bins 255 - 8l down to 248 - 8l; an inclusive scan over lanes counts from the top.
        int local = 0;
#pragma unroll
        for (int i = 0; i < 8; ++i) local += hist[255 - 8 * tid - i];
        int incl = local;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const int n = __shfl_up_sync(0xffffffffu, incl, o);
          if (tid >= o) incl += n;
        }
        const unsigned hit = __ballot_sync(0xffffffffu, static_cast<long long>(incl) >= need);
        if (hit == 0 && tid == 0) {  // unreachable: the prefix's keys number at least `need`
          found_bin = 0;
          found_above = 0;
        }
        if (hit != 0 && tid == __ffs(hit) - 1) {
          long long cum = incl - local;
          for (int i = 0; i < 8; ++i) {
            const int bin = 255 - 8 * tid - i;
            if (cum + hist[bin] >= need) {
              found_bin = bin;
              found_above = static_cast<int>(cum);
              break;
            }
            cum += hist[bin];
          }
        }
      }
      __syncthreads();
      need -= found_above;
      prefix |= static_cast<unsigned>(found_bin) << shift;
      mask |= 255u << shift;
      __syncthreads();  // found_* read by every thread before the next pass writes them
    }
    // Keys above `prefix` all belong; of those equal to it, the first `need` in token order.
    long long written = 0, equal_seen = 0;
    for (long long j0 = 0; j0 < len && written < k; j0 += kSelectThreads) {
      const long long j = j0 + tid;
      unsigned key = 0;
      if (j < len) key = order_key(sc[j]);
      const int gt = j < len && key > prefix, eq = j < len && key == prefix;
      int eq_rank, eq_total;
      Scan(scan_storage).ExclusiveSum(eq, eq_rank, eq_total);
      __syncthreads();
      const int take = gt || (eq && equal_seen + eq_rank < need);
      int pos, taken;
      Scan(scan_storage).ExclusiveSum(take, pos, taken);
      __syncthreads();
      if (take) store_index(p, b * p.topk + written + pos, global_index(p, b, j));
      written += taken;
      equal_seen += eq_total;
    }
  }
  for (long long i = k + tid; i < p.topk; i += kSelectThreads) store_index(p, b * p.topk + i, -1);
}

Status cuda_error(const char* what, cudaError_t e) {
  return make_error(Code::cuda_error, std::string("kb_cuda_dsa_topk_indexer: ") + what + ": " + cudaGetErrorName(e) +
                                          ": " + cudaGetErrorString(e));
}

}  // namespace

const char* dsa_topk_indexer_unsupported(std::int64_t heads, std::int64_t dim, DType out_dtype) {
  if (out_dtype != DType::int32 && out_dtype != DType::int64) return "topk_indices must be int32 or int64";
  if (heads <= 0 || dim <= 0) return "num_index_heads and index_head_dim must be positive";
  // Queries and one key tile in shared memory: (H rounded to 64 + 64) rows of D rounded up.
  const std::int64_t stride = stride_for(dim);
  const std::int64_t hpad = (heads + kHeadsPerPass - 1) / kHeadsPerPass * kHeadsPerPass;
  if ((hpad + kTileTokens) * stride * 4 + hpad * 4 > 200 * 1024)
    return "num_index_heads x index_head_dim too large for the queries to stay in shared memory (200 KiB)";
  return nullptr;
}

Status launch_dsa_topk_indexer(const DsaTopkIndexerArgs& a, void* stream) {
  if (const char* why = dsa_topk_indexer_unsupported(a.heads, a.dim, a.out_dtype))
    return make_error(Code::unsupported, std::string("kb_cuda_dsa_topk_indexer: ") + why);
  if (a.batch < 0 || a.page_size <= 0 || a.num_pages < 0 || a.max_pages < 0 || a.topk < 0)
    return make_error(Code::invalid_argument, "kb_cuda_dsa_topk_indexer: negative size or page_size 0");
  if (a.batch == 0 || a.topk == 0) return ok_status();
  if (!a.q || !a.cache || !a.weights || !a.seq_lens || !a.block_table || !a.topk_indices)
    return make_error(Code::invalid_argument, "kb_cuda_dsa_topk_indexer: null tensor pointer");
  if (a.batch > 65535) return make_error(Code::unsupported, "kb_cuda_dsa_topk_indexer: batch above 65535");
  IndexerParams p{};
  p.q = static_cast<const unsigned char*>(a.q);
  p.cache = static_cast<const unsigned char*>(a.cache);
  p.weights = a.weights;
  p.seq_lens = a.seq_lens;
  p.table = a.block_table;
  p.out = a.topk_indices;
  p.out64 = a.out_dtype == DType::int64;
  p.B = a.batch;
  p.H = a.heads;
  p.D = a.dim;
  p.ps = a.page_size;
  p.pages = a.num_pages;
  p.max_pages = a.max_pages;
  p.span = a.max_pages * a.page_size;
  p.topk = a.topk;
  p.stride = static_cast<int>(stride_for(a.dim));
  p.hpad = static_cast<int>((a.heads + kHeadsPerPass - 1) / kHeadsPerPass * kHeadsPerPass);
  auto s = static_cast<cudaStream_t>(stream);
  if (p.span > 0) {
    void* ws = nullptr;
    if (cudaError_t e = dsa_cuda::workspace_for(s, static_cast<std::size_t>(p.B * p.span) * sizeof(float), &ws);
        e != cudaSuccess)
      return cuda_error("workspace for the scores", e);
    p.scores = static_cast<float*>(ws);
    const std::size_t smem = static_cast<std::size_t>((p.hpad + kTileTokens) * p.stride + p.hpad) * sizeof(float);
    int device = 0, max_smem = 0;
    if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return cuda_error("cudaGetDevice", e);
    if (cudaError_t e = cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device); e != cudaSuccess)
      return cuda_error("cudaDeviceGetAttribute", e);
    if (smem > static_cast<std::size_t>(max_smem))
      return make_error(Code::unsupported, "kb_cuda_dsa_topk_indexer: the queries and a key tile need " + std::to_string(smem) +
                                               " bytes of shared memory a CTA; the device has " + std::to_string(max_smem));
    if (cudaError_t e = dsa_cuda::allow_max_smem(reinterpret_cast<const void*>(scores_kernel)); e != cudaSuccess)
      return cuda_error("cudaFuncSetAttribute", e);
    const long long chunks = (p.span + kTileTokens * kTilesPerCta - 1) / (kTileTokens * kTilesPerCta);
    if (chunks > 0x7fffffffLL) return make_error(Code::unsupported, "kb_cuda_dsa_topk_indexer: too many positions");
    scores_kernel<<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(p.B)), kScoreThreads, smem, s>>>(p);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return cuda_error("scores kernel launch", e);
  }
  select_kernel<<<static_cast<unsigned>(p.B), kSelectThreads, 0, s>>>(p);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return cuda_error("select kernel launch", e);
  return ok_status();
}

}  // namespace kb::kernels
