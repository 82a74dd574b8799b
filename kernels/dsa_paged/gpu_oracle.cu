// GPU oracle for dsa_paged.
//  - Sparse attention: one block per (token, head); the logits of the token's
//    top-k entries go to shared memory (double dot products), a block
//    reduction gives their max and sum, then the threads split the output
//    dimensions and sum probability * ckv row over the entries. -1 entries
//    (and entries outside the cache, which the CPU oracle reports) weigh 0;
//    a token without entries writes 0 and lse -inf.
//  - Top-k indexer: one thread per (sequence, token position) computes the
//    score (double) into a stream-ordered scratch buffer, CUB's segmented
//    radix sort orders each sequence's scores descending (stable, so ties
//    keep the earlier token first, as the CPU oracle does), and the first
//    min(topk, seq_len) positions become global indices through the block
//    table; the rest -1.
// tests/kernels/test_linear_gpu_oracles.cpp checks both against the CPU
// oracle on a device.
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cub/device/device_segmented_radix_sort.cuh>
#include <string>
#include <variant>

#include "../common/cuda_types.cuh"
#include "oracle/gpu_oracle.hpp"

namespace kb::kernels {
namespace {

struct In {
  const void* p;
  int dt;
};

// ---- sparse attention -----------------------------------------------------------

struct AttnParams {
  In qn, qp, ckv, kpe, idx;
  void* out;
  int out_dt;
  float* lse;  // may be null
  long long H, Dc, Dp, K, rows;
  double scale;
};

__global__ void sparse_attention(AttnParams p) {
  extern __shared__ double logit[];  // [K], then reduction scratch [blockDim]
  double* red = logit + p.K;
  const long long t = blockIdx.x, h = blockIdx.y;
  const long long qn0 = (t * p.H + h) * p.Dc, qp0 = (t * p.H + h) * p.Dp;
  double mx = -INFINITY;
  for (long long j = threadIdx.x; j < p.K; j += blockDim.x) {
    const long long r = load_index(p.idx.p, p.idx.dt, t * p.K + j);
    double s = -INFINITY;
    if (r >= 0 && r < p.rows) {
      s = 0;
      for (long long e = 0; e < p.Dc; ++e) s += static_cast<double>(load_f32(p.qn.p, p.qn.dt, qn0 + e)) * load_f32(p.ckv.p, p.ckv.dt, r * p.Dc + e);
      for (long long e = 0; e < p.Dp; ++e) s += static_cast<double>(load_f32(p.qp.p, p.qp.dt, qp0 + e)) * load_f32(p.kpe.p, p.kpe.dt, r * p.Dp + e);
      s *= p.scale;
    }
    logit[j] = s;
    mx = fmax(mx, s);
  }
  red[threadIdx.x] = mx;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) red[threadIdx.x] = fmax(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  mx = red[0];
  __syncthreads();
  const long long o0 = (t * p.H + h) * p.Dc;
  if (mx == -INFINITY) {  // no entries
    for (long long e = threadIdx.x; e < p.Dc; e += blockDim.x) store_f32(p.out, p.out_dt, o0 + e, 0.0f);
    if (threadIdx.x == 0 && p.lse) p.lse[t * p.H + h] = -INFINITY;
    return;
  }
  double sum = 0;
  for (long long j = threadIdx.x; j < p.K; j += blockDim.x) {
    logit[j] = logit[j] == -INFINITY ? 0.0 : exp(logit[j] - mx);
    sum += logit[j];
  }
  red[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  sum = red[0];
  for (long long e = threadIdx.x; e < p.Dc; e += blockDim.x) {
    double acc = 0;
    for (long long j = 0; j < p.K; ++j) {
      if (logit[j] == 0.0) continue;
      const long long r = load_index(p.idx.p, p.idx.dt, t * p.K + j);
      acc += logit[j] * load_f32(p.ckv.p, p.ckv.dt, r * p.Dc + e);
    }
    store_f32(p.out, p.out_dt, o0 + e, static_cast<float>(acc / sum));
  }
  if (threadIdx.x == 0 && p.lse) p.lse[t * p.H + h] = static_cast<float>((mx + log(sum)) / log(2.0));
}

// ---- top-k indexer -------------------------------------------------------------------

struct IndexParams {
  In q, w, lens, table;
  const unsigned char* cache;
  long long B, H, D, ps, pages, max_pages, span;  // span: positions per sequence in the scratch
  float* scores;
  int* pos;
};

__global__ void indexer_scores(IndexParams p) {
  const long long b = blockIdx.y;
  const long long j = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (j >= p.span) return;
  const long long len = load_index(p.lens.p, p.lens.dt, b);
  float score = -INFINITY;
  if (j < len) {
    const long long page = load_index(p.table.p, p.table.dt, b * p.max_pages + j / p.ps), slot = j % p.ps;
    if (page >= 0 && page < p.pages) {
      const unsigned char* base = p.cache + page * p.ps * (p.D + 4);
      float kscale;
      memcpy(&kscale, base + p.ps * p.D + slot * 4, 4);
      double s = 0;
      for (long long h = 0; h < p.H; ++h) {
        double dot = 0;
        for (long long e = 0; e < p.D; ++e) {
          __nv_fp8_e4m3 kv;
          kv.__x = base[slot * p.D + e];
          const float key = static_cast<float>(kv) * kscale;
          dot += static_cast<double>(load_f32(p.q.p, p.q.dt, (b * p.H + h) * p.D + e)) * key;
        }
        if (dot > 0) s += dot * load_f32(p.w.p, p.w.dt, b * p.H + h);
      }
      score = static_cast<float>(s);
    }
  }
  p.scores[b * p.span + j] = score;
  p.pos[b * p.span + j] = static_cast<int>(j);
}

__global__ void segment_offsets(int* off, long long B, long long span) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i <= B) off[i] = static_cast<int>(i * span);
}

__global__ void indexer_write(IndexParams p, const int* sorted_pos, void* out, int out_dt, long long topk) {
  const long long b = blockIdx.y;
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= topk) return;
  const long long len = load_index(p.lens.p, p.lens.dt, b);
  long long v = -1;
  if (i < len && i < p.span) {
    const long long j = sorted_pos[b * p.span + i];
    v = load_index(p.table.p, p.table.dt, b * p.max_pages + j / p.ps) * p.ps + j % p.ps;
  }
  if (static_cast<DType>(out_dt) == DType::int64) static_cast<long long*>(out)[b * topk + i] = v;
  else static_cast<int*>(out)[b * topk + i] = static_cast<int>(v);
}

Status cuda_fail(const Definition& d, const char* what, cudaError_t e) {
  return make_error(Code::cuda_error, d.name + ": dsa_paged GPU oracle: " + what + ": " + cudaGetErrorString(e));
}

}  // namespace

Status dsa_paged_gpu_oracle(const GpuOracleCall& c) {
  const Definition& d = c.definition;
  auto tensor = [&](const char* n) -> const cuda::DeviceTensor* {
    auto i = input_index(d, n);
    return i && *i < c.inputs.size() ? c.inputs[*i].tensor : nullptr;
  };
  auto in = [&](const char* n) {
    const cuda::DeviceTensor* t = tensor(n);
    return In{t ? t->data : nullptr, t ? static_cast<int>(t->dtype) : 0};
  };
  auto stream = static_cast<cudaStream_t>(c.stream);
  if (input_index(d, "sparse_indices")) {
    const cuda::DeviceTensor *qn = tensor("q_nope"), *qp = tensor("q_pe"), *ckv = tensor("ckv_cache"),
                             *idx = tensor("sparse_indices");
    auto si = input_index(d, "sm_scale");
    if (!qn || !qp || !ckv || !idx || !si || !c.inputs[*si].scalar)
      return make_error(Code::invalid_argument, d.name + ": dsa_paged GPU oracle: missing inputs");
    AttnParams p{in("q_nope"), in("q_pe"), in("ckv_cache"), in("kpe_cache"), in("sparse_indices"),
                 c.outputs[*output_index(d, "output")].data,
                 static_cast<int>(c.outputs[*output_index(d, "output")].dtype),
                 output_index(d, "lse") ? static_cast<float*>(c.outputs[*output_index(d, "lse")].data) : nullptr,
                 qn->dim(1), qn->dim(2), qp->dim(2), idx->dim(1), ckv->dim(0) * ckv->dim(1),
                 static_cast<double>(static_cast<float>(
                     std::visit([](auto x) { return static_cast<double>(x); }, *c.inputs[*si].scalar)))};
    const long long T = qn->dim(0);
    if (T == 0 || p.H == 0) return ok_status();
    const unsigned threads = 256;
    const std::size_t smem = static_cast<std::size_t>(p.K + threads) * sizeof(double);
    int max_smem = 0, dev = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (smem > static_cast<std::size_t>(max_smem))
      return make_error(Code::unsupported, d.name + ": dsa_paged GPU oracle: top-k too large for shared memory");
    cudaFuncSetAttribute(sparse_attention, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    sparse_attention<<<dim3(static_cast<unsigned>(T), static_cast<unsigned>(p.H)), threads, smem, stream>>>(p);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return cuda_fail(d, "sparse attention", e);
    return ok_status();
  }

  const cuda::DeviceTensor *q = tensor("q_index_fp8"), *cache = tensor("k_index_cache_fp8"), *table = tensor("block_table");
  if (!q || !cache || !table || !tensor("weights") || !tensor("seq_lens"))
    return make_error(Code::invalid_argument, d.name + ": dsa_paged GPU oracle: missing inputs");
  const cuda::DeviceTensor& out = c.outputs[0];
  IndexParams p{in("q_index_fp8"), in("weights"), in("seq_lens"), in("block_table"),
                static_cast<const unsigned char*>(cache->data), q->dim(0), q->dim(1), q->dim(2), cache->dim(1),
                cache->dim(0), table->dim(1), table->dim(1) * cache->dim(1), nullptr, nullptr};
  const long long topk = out.dim(1);
  if (p.B == 0) return ok_status();
  const long long n = p.B * p.span;
  if (n > 0x7fffffffLL) return make_error(Code::unsupported, d.name + ": dsa_paged GPU oracle: too many positions");
  // Scratch: scores and positions, their sorted copies, segment offsets, CUB's temporary storage.
  float *scores = nullptr, *scores_sorted = nullptr;
  int *pos = nullptr, *pos_sorted = nullptr, *offsets = nullptr;
  void* temp = nullptr;
  std::size_t temp_bytes = 0;
  auto release = [&] {
    for (void* ptr : {static_cast<void*>(scores), static_cast<void*>(scores_sorted), static_cast<void*>(pos),
                      static_cast<void*>(pos_sorted), static_cast<void*>(offsets), temp})
      if (ptr) cudaFreeAsync(ptr, stream);
  };
  cudaError_t e = cudaMallocAsync(&scores, n * sizeof(float), stream);
  if (e == cudaSuccess) e = cudaMallocAsync(&scores_sorted, n * sizeof(float), stream);
  if (e == cudaSuccess) e = cudaMallocAsync(&pos, n * sizeof(int), stream);
  if (e == cudaSuccess) e = cudaMallocAsync(&pos_sorted, n * sizeof(int), stream);
  if (e == cudaSuccess) e = cudaMallocAsync(&offsets, (p.B + 1) * sizeof(int), stream);
  if (e == cudaSuccess)
    e = cub::DeviceSegmentedRadixSort::SortPairsDescending(nullptr, temp_bytes, scores, scores_sorted, pos, pos_sorted,
                                                           static_cast<int>(n), static_cast<int>(p.B), offsets,
                                                           offsets + 1, 0, 32, stream);
  if (e == cudaSuccess) e = cudaMallocAsync(&temp, temp_bytes, stream);
  if (e != cudaSuccess) {
    release();
    return cuda_fail(d, "scratch", e);
  }
  p.scores = scores;
  p.pos = pos;
  segment_offsets<<<static_cast<unsigned>((p.B + 256) / 256), 256, 0, stream>>>(offsets, p.B, p.span);
  if (p.span > 0)
    indexer_scores<<<dim3(static_cast<unsigned>((p.span + 127) / 128), static_cast<unsigned>(p.B)), 128, 0, stream>>>(p);
  e = cudaGetLastError();
  if (e == cudaSuccess && p.span > 0)
    e = cub::DeviceSegmentedRadixSort::SortPairsDescending(temp, temp_bytes, scores, scores_sorted, pos, pos_sorted,
                                                           static_cast<int>(n), static_cast<int>(p.B), offsets,
                                                           offsets + 1, 0, 32, stream);
  if (e == cudaSuccess && topk > 0) {
    indexer_write<<<dim3(static_cast<unsigned>((topk + 127) / 128), static_cast<unsigned>(p.B)), 128, 0, stream>>>(
        p, pos_sorted, out.data, static_cast<int>(out.dtype), topk);
    e = cudaGetLastError();
  }
  release();
  if (e != cudaSuccess) return cuda_fail(d, "indexer", e);
  return ok_status();
}

}  // namespace kb::kernels
