// Can a long-K bf16 gemm (K > 20480) keep FlashInfer-Bench precision more
// cheaply than kb's batched chunks? kb's cuBLASLt gemm (kernels/gemm/cuda/
// long_k.hpp) splits K into equal chunks <= 14336, runs them as one strided
// batch into fp32 parts and adds and rounds the parts in a small kernel; at
// M = 512 that costs 5-8% over torch.matmul, mostly the parts' traffic. This
// times, side by side in one process, C[M,N] = A[M,K] B[N,K]^T (bf16, fp32
// accumulate, kb's TN mapping of cublaslt_gemm.cpp) computed as:
//   single           one cuBLASLt matmul over all of K, bf16 out (torch's way)
//   batched+cast     kb's method: the chunks as one strided batch into fp32
//                    parts, then add the parts in order and round
//   batched+cast xC  the same in C = 3 or 4 equal chunks (where K allows and
//                    C is more than kb's count): more tiles, more parts
//   seq-fp32C-bf16D  chunks into an fp32 buffer P, the last chunk with
//                    beta = 1, C = P (fp32), D = the bf16 output (may be
//                    refused by cuBLASLt: printed as unsupported)
//   batched+cast, S N slices overlapped
//                    kb's method per slice of N (S = 2, 3): each slice's
//                    batch, then its cast on a side stream (event fork/join)
//                    while the next slice's batch runs, so the cast uses SMs
//                    the matmul's last wave leaves idle
//   splitk-lt S      one matmul over all of K, bf16 out, with an algorithm
//                    configured for split-K = S (2, 3, 4) and fp32
//                    (compute-type) reduction in a 256 MiB workspace; the
//                    best of the heuristic's split-K-capable algorithms (or,
//                    where it has none, of algorithm ids x tiles x stages)
//   seq-fp32         chunks into P (beta 0, then 1), then round (kb's
//                    sequential fallback)
//   wgmma pP gG      kb's handwritten long-K gemm (kernels/gemm/cuda/
//                    wgmma_gemm.cu) over all of K, the tensor-core sum
//                    promoted every P K blocks of 64 (p0: never), G CTAs
//                    sharing each weight block; "stagger": the two consumer
//                    warpgroups promote half a period apart; NO-FIXUP: split
//                    tiles left without the other CTAs' sums (wrong results,
//                    only to time that hand-over); pfN: partial sums fetched
//                    into L2 N K blocks ahead; n-first: column tiles first;
//                    c2: clusters of 2 CTAs sharing the weight block by TMA
//                    multicast
//                    (lwP: the last partial wave as whole tiles where it
//                    fills P% of the groups; lw0: always)
//                    (sk-only: stream-K over all the work, no whole waves
//                    first, the kernel before session 19)
//                    (c2 to-self: each CTA multicasts both halves to itself
//                    only: the instruction's cost without the sharing)
//                    (early: each warpgroup waits for its own block's MMAs
//                    and frees the stage at once; release_early)
//                    (desc: stream-K pieces run their K blocks last to
//                    first, descending_stream_k, kb's default since session
//                    30; the names without it run them forwards, as before)
//                    (sk+N: the stream-K part takes in N whole waves besides
//                    the last partial one, stream_k_extra_waves)
//                    (st4: the epilogue's 4-byte stores, kb's before session
//                    33; NO-STORE: no stores, C left wrong, to time them:
//                    experiment_store)
//                    (bandB: row groups first in bands of B, raster_band;
//                    band0: one band over M)
// LKV_VARIANTS=name,name,... (prefixes of the names above; name$: exactly
// that name) runs only those.
// Each other cuBLASLt call takes the fastest of the heuristic's first 16
// algorithms (cold median of 7), as kb autotunes, with a 32 MiB workspace;
// the chosen algorithms are printed. Precision: against an fp64 product of the same bf16 values (a
// tiled fp64 kernel, rows < min(M, 512)): elements failing FlashInfer-Bench's
// rule (abs err > 0.01 and rel err > 0.01), the largest abs error, and the
// largest among elements with |ref| < 4. Timing as kb times (lib/cuda/
// timing.cpp): cold samples (memset of 2 x L2 before the start event), 5
// warm-ups, median of 30 samples on one plain stream, the variants in
// alternating rounds so clock drift touches all alike.
// build: nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -o long_k_variants tools/gpu/long_k_variants.cu
//        kernels/gemm/cuda/wgmma_gemm.cu -lcublasLt
// usage: long_k_variants [M ...]   (default M = 128 512 2048; shapes (N, K) = (8192, 28672), (5376, 21504),
//        or LKV_SHAPES=NxK[,NxK...])
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "../../kernels/gemm/cuda/wgmma_gemm.hpp"

// Prints the failing call with its place and status, and exits non-zero.
[[noreturn]] void die(const char* file, int line, const char* call, const char* status) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s:%d: %s: %s\n", file, line, call, status);
  std::exit(1);
}
#define CU(x)                                                                                            \
  do {                                                                                                   \
    const cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) die(__FILE__, __LINE__, #x, cudaGetErrorString(e_));                          \
  } while (0)
#define LT(x)                                                                                            \
  do {                                                                                                   \
    const cublasStatus_t s_ = (x);                                                                       \
    if (s_ != CUBLAS_STATUS_SUCCESS) die(__FILE__, __LINE__, #x, cublasLtGetStatusString(s_));           \
  } while (0)

namespace {

using bf16 = __nv_bfloat16;
constexpr std::int64_t kChunkK = 14336;                // kb's longest chunk
constexpr std::size_t kWs = 32ull << 20, kWsSplit = 256ull << 20;
constexpr int kRefRows = 512, kSamples = 30, kWarmups = 5, kTuneCandidates = 16, kTuneSamples = 7;

// ---- kernels ---------------------------------------------------------------------------------

__device__ __forceinline__ std::uint64_t mix64(std::uint64_t z) {  // splitmix64's finalizer
  z ^= z >> 30, z *= 0xbf58476d1ce4e5b9ull;
  z ^= z >> 27, z *= 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// N(0,1) values rounded to bf16, by Box-Muller from a hash of (seed, index).
__global__ void fill_normal(bf16* p, std::size_t n, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x) {
    const std::uint64_t h = mix64(seed * 0x9e3779b97f4a7c15ull + i);
    const float u1 = static_cast<float>((h >> 40) + 1) * 0x1p-24f;  // (0, 1]
    const float u2 = static_cast<float>(h & 0xffffff) * 0x1p-24f;
    p[i] = __float2bfloat16_rn(sqrtf(-2.f * logf(u1)) * cospif(2.f * u2));
  }
}

// ref[m][n] = sum_k A[m][k] B[n][k] in fp64 (bf16 products are exact in fp64),
// k in order. 64 x 64 tiles of 256 threads, 4 x 4 outputs each; M, N % 64 == 0, K % 32 == 0.
constexpr int kRT = 64, kKT = 32;
__global__ void __launch_bounds__(256) ref_gemm(const bf16* __restrict__ A, const bf16* __restrict__ B,
                                                double* __restrict__ ref, int N, int K) {
  __shared__ double As[kKT][kRT + 1], Bs[kKT][kRT + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const std::size_t m0 = blockIdx.y * std::size_t{kRT}, n0 = blockIdx.x * std::size_t{kRT};
  double acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += kKT) {
    for (int e = threadIdx.x; e < kRT * kKT; e += 256) {
      const int r = e / kKT, c = e % kKT;
      As[c][r] = static_cast<double>(__bfloat162float(A[(m0 + r) * K + k0 + c]));
      Bs[c][r] = static_cast<double>(__bfloat162float(B[(n0 + r) * K + k0 + c]));
    }
    __syncthreads();
#pragma unroll 4
    for (int kk = 0; kk < kKT; ++kk) {
      double a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i], b[i] = Bs[kk][tx + 16 * i];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) ref[(m0 + ty + 16 * i) * N + n0 + tx + 16 * j] = acc[i][j];
}

// out[0] += failing elements, out[1] = max abs err, out[2] = max abs err where |ref| < 4 (the
// doubles' bits: non-negative doubles order as their bits do). NaN counts as failing, error inf.
__global__ void check(const bf16* __restrict__ C, const double* __restrict__ ref, std::size_t n,
                      unsigned long long* out) {
  unsigned long long fails = 0;
  double worst = 0, worst4 = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x) {
    const double r = ref[i], c = static_cast<double>(__bfloat162float(C[i]));
    double err = fabs(c - r);
    if (!(err <= 0.01 || err <= 0.01 * fabs(r))) ++fails;
    if (isnan(err)) err = INFINITY;
    worst = fmax(worst, err);
    if (fabs(r) < 4) worst4 = fmax(worst4, err);
  }
  atomicAdd(&out[0], fails);
  atomicMax(&out[1], static_cast<unsigned long long>(__double_as_longlong(worst)));
  atomicMax(&out[2], static_cast<unsigned long long>(__double_as_longlong(worst4)));
}

// dst[i] = src[i] + src[S + i] + ... (parts of them, S = stride apart, added in order in fp32),
// rounded once to bf16: kb's cast_f32 (long_k.cu) for bf16. n % 4 == 0, stride % 4 == 0.
__global__ void add_parts_round(const float* __restrict__ src, int parts, std::int64_t stride,
                                bf16* __restrict__ dst, std::int64_t n) {
  const std::int64_t step = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t v = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; v < n / 4; v += step) {
    float4 x = reinterpret_cast<const float4*>(src)[v];
    for (int p = 1; p < parts; ++p) {
      const float4 y = reinterpret_cast<const float4*>(src + p * stride)[v];
      x.x += y.x, x.y += y.y, x.z += y.z, x.w += y.w;
    }
    reinterpret_cast<__nv_bfloat162*>(dst + 4 * v)[0] = __floats2bfloat162_rn(x.x, x.y);
    reinterpret_cast<__nv_bfloat162*>(dst + 4 * v)[1] = __floats2bfloat162_rn(x.z, x.w);
  }
}

// The same over columns [n0, n0 + cols) of every row of an [rows, ld] matrix (one N slice of
// the output). cols % 4 == 0, n0 % 4 == 0, ld % 4 == 0.
__global__ void add_parts_round_cols(const float* __restrict__ src, int parts, std::int64_t stride,
                                     bf16* __restrict__ dst, std::int64_t rows, std::int64_t ld, std::int64_t n0,
                                     std::int64_t cols) {
  const std::int64_t step = std::int64_t{gridDim.x} * blockDim.x, per_row = cols / 4;
  for (std::int64_t v = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; v < rows * per_row; v += step) {
    const std::int64_t i = (v / per_row) * ld + n0 + 4 * (v % per_row);
    float4 x = *reinterpret_cast<const float4*>(src + i);
    for (int p = 1; p < parts; ++p) {
      const float4 y = *reinterpret_cast<const float4*>(src + p * stride + i);
      x.x += y.x, x.y += y.y, x.z += y.z, x.w += y.w;
    }
    reinterpret_cast<__nv_bfloat162*>(dst + i)[0] = __floats2bfloat162_rn(x.x, x.y);
    reinterpret_cast<__nv_bfloat162*>(dst + i)[1] = __floats2bfloat162_rn(x.z, x.w);
  }
}

// ---- cuBLASLt ----------------------------------------------------------------------------------

cublasLtHandle_t g_lt;
cublasLtMatmulDesc_t g_op;  // TN, fp32 compute and scale: kb's mapping
cudaStream_t g_stream, g_side;  // g_side: the casts overlapped with the next slice's matmul
cudaEvent_t g_fork, g_join;
void *g_flush, *g_ws, *g_ws_split, *g_wg_ws;
std::size_t g_wg_ws_bytes;

// LKV_VARIANTS: a comma-separated list of name prefixes (a name ending in $: that name only); unset: every variant.
bool wanted(const std::string& name) {
  const char* env = std::getenv("LKV_VARIANTS");
  if (!env || !*env || name == "single") return true;  // single: every ratio's denominator
  std::string list = env;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, comma - at);
    if (!item.empty() && item.back() == '$' && name == item.substr(0, item.size() - 1)) return true;
    if (!item.empty() && item.back() != '$' && name.compare(0, item.size(), item) == 0) return true;
    at = comma + 1;
  }
  return false;
}
std::size_t g_flush_bytes;
cudaEvent_t g_ev[2];
std::vector<cublasLtMatrixLayout_t> g_layouts;  // destroyed at exit

cublasLtMatrixLayout_t layout(cudaDataType_t t, std::uint64_t rows, std::uint64_t cols, std::int64_t ld,
                              std::int32_t batch = 1, std::int64_t stride = 0) {
  cublasLtMatrixLayout_t l = nullptr;
  LT(cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld));
  if (batch > 1) {
    LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
    LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  }
  g_layouts.push_back(l);
  return l;
}

// One cublasLtMatmul call: D = (a: B's buffer)^T (b: A's buffer) + beta C, column-major.
struct Step {
  cublasLtMatrixLayout_t la, lb, lc, ld;
  const void *a, *b, *c;
  void* d;
  float beta;
  void* ws;
  std::size_t ws_bytes;
  cublasLtMatmulAlgo_t algo{};
};

cublasStatus_t launch(const Step& s) {
  const float alpha = 1.f;
  return cublasLtMatmul(g_lt, g_op, &alpha, s.a, s.la, s.b, s.lb, &s.beta, s.c, s.lc, s.d, s.ld, &s.algo, s.ws,
                        s.ws_bytes, g_stream);
}

// cuBLASLt's algorithm and result types are unnamed structs, and nvcc 13's front end crashes on a
// std::vector of those (internal error in find_allocated_name_reference): keep them in a named one.
struct Algo {
  cublasLtMatmulAlgo_t a;
};

std::string describe(const cublasLtMatmulAlgo_t& a) {
  std::int32_t id = -1, splits = 1;
  std::uint32_t tile = 0, stages = 0, red = 0;
  std::size_t w = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof splits, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red, &w);
  char buf[96];
  std::snprintf(buf, sizeof buf, "algo %d tile %u stages %u split-K %d reduction %u", id, tile, stages, splits, red);
  return buf;
}

// The heuristic's first `want` algorithms for s (kb's preferences: fp32 split-K reductions only);
// empty with *why set when it has none.
std::vector<Algo> heuristic(const Step& s, int want, std::string* why) {
  cublasLtMatmulPreference_t pref = nullptr;
  LT(cublasLtMatmulPreferenceCreate(&pref));
  const std::uint64_t ws = s.ws_bytes;
  const std::uint32_t mask = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof mask));
  cublasLtMatmulHeuristicResult_t res[16] = {};
  int count = 0;
  want = std::min(want, 16);
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(g_lt, g_op, s.la, s.lb, s.lc, s.ld, pref, want, res, &count);
  LT(cublasLtMatmulPreferenceDestroy(pref));
  std::vector<Algo> out;
  for (int i = 0; st == CUBLAS_STATUS_SUCCESS && i < count && i < want; ++i)
    if (res[i].state == CUBLAS_STATUS_SUCCESS && res[i].workspaceSize <= s.ws_bytes) out.push_back({res[i].algo});
  if (out.empty())
    *why = st != CUBLAS_STATUS_SUCCESS ? std::string("heuristic: ") + cublasLtGetStatusString(st)
                                       : "the heuristic returned no algorithm";
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void flush_l2(int i) { CU(cudaMemsetAsync(g_flush, i & 0xff, g_flush_bytes, g_stream)); }

// Median us of `samples` cold runs after 2 warm-ups; -1 when a run fails.
double cold_us(const std::function<bool()>& run, int samples) {
  for (int w = 0; w < 2; ++w)
    if (!run()) return -1;
  std::vector<double> us;
  for (int i = 0; i < samples; ++i) {
    flush_l2(i);
    CU(cudaEventRecord(g_ev[0], g_stream));
    if (!run()) return -1;
    CU(cudaEventRecord(g_ev[1], g_stream));
    CU(cudaEventSynchronize(g_ev[1]));
    float ms = 0;
    CU(cudaEventElapsedTime(&ms, g_ev[0], g_ev[1]));
    us.push_back(1e3 * ms);
  }
  return median(us);
}

// Sets s.algo to the fastest of `algos` that runs (returns its index), or -1 when none runs.
int tune(Step& s, const std::vector<Algo>& algos, double* best_us = nullptr) {
  int best = -1;
  double best_t = 0;
  for (std::size_t i = 0; i < algos.size(); ++i) {
    s.algo = algos[i].a;
    const double t = cold_us([&] { return launch(s) == CUBLAS_STATUS_SUCCESS; }, kTuneSamples);
    if (t >= 0 && (best < 0 || t < best_t)) best = static_cast<int>(i), best_t = t;
  }
  CU(cudaStreamSynchronize(g_stream));
  if (best >= 0) s.algo = algos[best].a;
  if (best_us) *best_us = best_t;
  return best;
}

// Algorithms over all of K, configured for `splits` K splits reduced in fp32 (compute type), that
// cublasLtMatmulAlgoCheck accepts with s's workspace: from the heuristic's first 16, or, where none of
// those gives one, from every algorithm id's tiles x stages (cublasLtMatmulAlgoGetIds/Init; at most 48).
std::vector<Algo> splitk_configs(const Step& s, int splits, std::string* how) {
  const std::uint32_t red = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  auto configure = [&](cublasLtMatmulAlgo_t a, std::vector<Algo>& out) {
    std::int32_t can = 0;
    std::uint32_t mask = 0;
    std::size_t w = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(&a, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &can, sizeof can, &w) ||
        cublasLtMatmulAlgoCapGetAttribute(&a, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &mask, sizeof mask, &w) ||
        !can || !(mask & red))
      return false;
    cublasLtMatmulHeuristicResult_t r{};
    if (cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof splits) ||
        cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red) ||
        cublasLtMatmulAlgoCheck(g_lt, g_op, s.la, s.lb, s.lc, s.ld, &a, &r) || r.workspaceSize > s.ws_bytes)
      return true;  // split-capable, but not with this configuration
    out.push_back({a});
    return true;
  };
  std::string why;
  std::vector<Algo> out;
  int capable = 0;
  const auto from_heuristic = heuristic(s, 16, &why);
  for (const Algo& a : from_heuristic) capable += configure(a.a, out);
  *how = std::to_string(out.size()) + " valid of " + std::to_string(capable) + " split-K-capable among the heuristic's " +
         std::to_string(from_heuristic.size()) + (why.empty() ? "" : " (" + why + ")");
  if (!out.empty()) return out;
  int ids[256], n_ids = 0, tried = 0;
  LT(cublasLtMatmulAlgoGetIds(g_lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF,
                              256, ids, &n_ids));
  for (int i = 0; i < n_ids && out.size() < 48; ++i) {
    cublasLtMatmulAlgo_t base{};
    if (cublasLtMatmulAlgoInit(g_lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF,
                               CUDA_R_16BF, ids[i], &base))
      continue;
    auto ids_of = [&](cublasLtMatmulAlgoCapAttributes_t cap) {  // tile or stages ids; {0} (undefined) if none
      std::size_t bytes = 0;
      std::vector<std::uint32_t> v;
      if (!cublasLtMatmulAlgoCapGetAttribute(&base, cap, nullptr, 0, &bytes) && bytes >= sizeof(std::uint32_t)) {
        v.resize(bytes / sizeof(std::uint32_t));
        if (cublasLtMatmulAlgoCapGetAttribute(&base, cap, v.data(), bytes, &bytes)) v.clear();
      }
      if (v.empty()) v.push_back(0);
      return v;
    };
    const std::vector<std::uint32_t> tiles = ids_of(CUBLASLT_ALGO_CAP_TILE_IDS),
                                     stage_ids = ids_of(CUBLASLT_ALGO_CAP_STAGES_IDS);
    for (std::uint32_t tile : tiles)
      for (std::uint32_t stages : stage_ids) {
        if (out.size() >= 48) break;
        cublasLtMatmulAlgo_t a = base;
        cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile);
        cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages);
        tried += configure(a, out);
      }
  }
  *how += "; so by algorithm id: " + std::to_string(out.size()) + " valid of " +
          std::to_string(tried) + " split-capable tile x stages configurations of " + std::to_string(n_ids) + " ids";
  return out;
}

// ---- the experiment ----------------------------------------------------------------------------

struct Variant {
  std::string name, note;       // note: the algorithms, or why it is unsupported
  std::function<void()> run;    // empty: unsupported
  std::vector<double> us;
  unsigned long long fails = 0;
  double max_err = 0, max_err4 = 0;
};

void add_parts(const float* src, int parts, std::int64_t stride, bf16* dst, std::int64_t n) {
  const std::int64_t want = (n / 4 + 255) / 256;
  add_parts_round<<<static_cast<unsigned>(std::clamp<std::int64_t>(want, 1, 4096)), 256, 0, g_stream>>>(
      src, parts, stride, dst, n);
  CU(cudaGetLastError());
}

void add_parts_cols(const float* src, int parts, std::int64_t stride, bf16* dst, std::int64_t rows, std::int64_t ld,
                    std::int64_t n0, std::int64_t cols, cudaStream_t stream) {
  const std::int64_t want = (rows * cols / 4 + 255) / 256;
  add_parts_round_cols<<<static_cast<unsigned>(std::clamp<std::int64_t>(want, 1, 4096)), 256, 0, stream>>>(
      src, parts, stride, dst, rows, ld, n0, cols);
  CU(cudaGetLastError());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> Ms;
  for (int i = 1; i < argc; ++i) Ms.push_back(std::atoi(argv[i]));
  if (Ms.empty()) Ms = {128, 512, 2048};
  // LKV_SHAPES=NxK[,NxK...]: other shapes (Nsight Compute runs of one shape); unset: the two shipped long-K shapes.
  std::vector<std::pair<int, int>> shapes = {{8192, 28672}, {5376, 21504}};  // (N, K)
  if (const char* env = std::getenv("LKV_SHAPES"); env && *env) {
    shapes.clear();
    for (const char* at = env; *at;) {
      int n = 0, k = 0, used = 0;
      if (std::sscanf(at, "%dx%d%n", &n, &k, &used) != 2 || n <= 0 || k <= 0 || n % 8 || k % 8)
        return std::fprintf(stderr, "LKV_SHAPES: expected NxK[,NxK...] with N and K multiples of 8: %s\n", env), 1;
      shapes.emplace_back(n, k);
      at += used;
      if (*at == ',') ++at;
    }
  }
  const int maxM = *std::max_element(Ms.begin(), Ms.end());
  for (int M : Ms)
    if (M <= 0 || M % 64) return std::fprintf(stderr, "M must be a positive multiple of 64, not %d\n", M), 1;

  int dev = 0, l2 = 0;
  cudaDeviceProp prop{};
  CU(cudaGetDevice(&dev));
  CU(cudaGetDeviceProperties(&prop, dev));
  CU(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  const std::size_t ver = cublasLtGetVersion();
  std::printf("device: %s\ncuBLASLt version: %zu (%zu.%zu.%zu)\nL2: %d bytes (flush: memset of %d bytes)\n",
              prop.name, ver, ver / 10000, ver / 100 % 100, ver % 100, l2, 2 * l2);
  std::printf("workspace: 32 MiB for every variant but splitk-lt, which gets 256 MiB\n"
              "errors over rows < min(M, %d); fail = abs err > 0.01 and rel err > 0.01 vs fp64\n\n", kRefRows);

  LT(cublasLtCreate(&g_lt));
  LT(cublasLtMatmulDescCreate(&g_op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const std::int32_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  LT(cublasLtMatmulDescSetAttribute(g_op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  LT(cublasLtMatmulDescSetAttribute(g_op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  CU(cudaStreamCreate(&g_stream));
  CU(cudaStreamCreateWithFlags(&g_side, cudaStreamNonBlocking));
  CU(cudaEventCreateWithFlags(&g_fork, cudaEventDisableTiming));
  CU(cudaEventCreateWithFlags(&g_join, cudaEventDisableTiming));
  CU(cudaEventCreate(&g_ev[0]));
  CU(cudaEventCreate(&g_ev[1]));
  g_flush_bytes = 2 * static_cast<std::size_t>(l2);
  CU(cudaMalloc(&g_flush, g_flush_bytes));
  CU(cudaMalloc(&g_ws, kWs));
  CU(cudaMalloc(&g_ws_split, kWsSplit));
  g_wg_ws_bytes = kb::kernels::gemm_cuda::wgmma_gemm_workspace_bytes(prop.multiProcessorCount);
  CU(cudaMalloc(&g_wg_ws, g_wg_ws_bytes));
  CU(cudaMemset(g_wg_ws, 0, g_wg_ws_bytes));

  std::size_t maxN = 0, maxK = 0, maxNK = 0, max_chunks = 1;
  for (const auto& shape : shapes) {
    maxN = std::max<std::size_t>(maxN, shape.first), maxK = std::max<std::size_t>(maxK, shape.second);
    max_chunks = std::max<std::size_t>(max_chunks, std::max<std::size_t>(4, (shape.second + kChunkK - 1) / kChunkK));
    maxNK = std::max(maxNK, std::size_t(shape.first) * shape.second);
  }
  const std::size_t maxMN = std::size_t(maxM) * maxN;
  const std::size_t max_stride = (maxMN + 63) / 64 * 64;
  bf16 *A, *B, *C;
  float *parts, *P;
  double* ref;
  unsigned long long* err;
  CU(cudaMalloc(&A, std::size_t(maxM) * maxK * sizeof(bf16)));
  CU(cudaMalloc(&B, maxNK * sizeof(bf16)));
  CU(cudaMalloc(&C, maxMN * sizeof(bf16)));
  CU(cudaMalloc(&parts, max_chunks * max_stride * sizeof(float)));
  CU(cudaMalloc(&P, maxMN * sizeof(float)));
  CU(cudaMalloc(&ref, std::size_t(kRefRows) * maxN * sizeof(double)));
  CU(cudaMalloc(&err, 3 * sizeof(unsigned long long)));

  std::vector<std::string> rows;
  for (const auto& shape : shapes) {
    const int N = shape.first, K = shape.second;
    const std::int64_t chunks = (K + kChunkK - 1) / kChunkK, chunk = K / chunks;
    if (K % (8 * chunks) || N % 64 || K % kKT) return std::fprintf(stderr, "shape %d x %d unsupported\n", N, K), 1;
    fill_normal<<<4096, 256, 0, g_stream>>>(A, std::size_t(maxM) * K, 1);
    CU(cudaGetLastError());
    fill_normal<<<4096, 256, 0, g_stream>>>(B, std::size_t(N) * K, 2);
    CU(cudaGetLastError());
    const int ref_rows = std::min(maxM, kRefRows);  // every M checks its first min(M, 512) of these
    CU(cudaEventRecord(g_ev[0], g_stream));
    ref_gemm<<<dim3(N / kRT, ref_rows / kRT), 256, 0, g_stream>>>(A, B, ref, N, K);
    CU(cudaGetLastError());
    CU(cudaEventRecord(g_ev[1], g_stream));
    CU(cudaEventSynchronize(g_ev[1]));
    float ref_ms = 0;
    CU(cudaEventElapsedTime(&ref_ms, g_ev[0], g_ev[1]));
    std::printf("%d x %d: %lld chunks of %lld; fp64 reference of %d rows took %.1f ms\n", N, K,
                static_cast<long long>(chunks), static_cast<long long>(chunk), ref_rows, ref_ms);

    for (int M : Ms) {
      const std::int64_t MN = std::int64_t(M) * N, stride = (MN + 63) / 64 * 64;
      const auto lay_full_b = layout(CUDA_R_16BF, K, N, K), lay_full_a = layout(CUDA_R_16BF, K, M, K);
      const auto lay_out = layout(CUDA_R_16BF, N, M, N), lay_f32 = layout(CUDA_R_32F, N, M, N);
      const auto lay_chunk_b = layout(CUDA_R_16BF, chunk, N, K), lay_chunk_a = layout(CUDA_R_16BF, chunk, M, K);
      std::vector<Variant> vs;
      auto add = [&](const std::string& name, const std::string& note, std::function<void()> run) {  // run {}: unsupported
        if (!wanted(name)) return;
        vs.emplace_back();
        vs.back().name = name, vs.back().note = note, vs.back().run = std::move(run);
      };
      auto tuned = [&](Step& s, const char* what, std::string& note) {  // false: no algorithm runs
        std::string why;
        const auto algos = heuristic(s, kTuneCandidates, &why);
        const int best = algos.empty() ? -1 : tune(s, algos);
        if (best < 0) {
          note = std::string(what) + ": " + (algos.empty() ? why : "no algorithm ran");
          return false;
        }
        note += (note.empty() ? "" : "; ") + std::string(what) + ": #" + std::to_string(best) + " of " +
                std::to_string(algos.size()) + " (" + describe(s.algo) + ")";
        return true;
      };
      {  // single
        Step s{lay_full_b, lay_full_a, lay_out, lay_out, B, A, C, C, 0.f, g_ws, kWs};
        std::string note;
        const bool ok = tuned(s, "matmul", note);
        add("single", note, ok ? std::function<void()>([s] { LT(launch(s)); }) : nullptr);
      }
      if (wanted("batched+cast")) {  // batched+cast
        const auto lb = layout(CUDA_R_16BF, chunk, N, K, chunks, chunk), la = layout(CUDA_R_16BF, chunk, M, K, chunks, chunk);
        const auto lp = layout(CUDA_R_32F, N, M, N, chunks, stride);
        Step s{lb, la, lp, lp, B, A, parts, parts, 0.f, g_ws, kWs};
        std::string note;
        const bool ok = tuned(s, "batch", note);
        add("batched+cast", note, ok ? std::function<void()>([s, chunks, stride, MN, C, parts] {
          LT(launch(s));
          add_parts(parts, int(chunks), stride, C, MN);
        }) : nullptr);
      }
      for (int slices : {2, 3}) {  // batched+cast per N slice, each slice's cast beside the next slice's matmul
        const std::int64_t cols = N / slices;
        if (N % (4 * slices) || !wanted("batched+cast, " + std::to_string(slices) + " N slices overlapped")) continue;
        std::vector<Step> steps;
        std::string note;
        bool ok = true;
        for (int h = 0; h < slices && ok; ++h) {
          const auto lb = layout(CUDA_R_16BF, chunk, cols, K, chunks, chunk);
          const auto la = layout(CUDA_R_16BF, chunk, M, K, chunks, chunk);
          const auto lp = layout(CUDA_R_32F, cols, M, N, chunks, stride);
          steps.push_back({lb, la, lp, lp, B + h * cols * K, A, parts + h * cols, parts + h * cols, 0.f, g_ws, kWs});
          ok = tuned(steps.back(), ("slice " + std::to_string(h)).c_str(), note);
        }
        add("batched+cast, " + std::to_string(slices) + " N slices overlapped", note,
            ok ? std::function<void()>([steps, chunks, stride, C, parts, M, N, cols, slices] {
              for (int h = 0; h < slices; ++h) {
                LT(launch(steps[h]));
                if (h + 1 < slices) {  // this slice's cast on the side stream, beside the next matmul
                  CU(cudaEventRecord(g_fork, g_stream));
                  CU(cudaStreamWaitEvent(g_side, g_fork));
                  add_parts_cols(parts, int(chunks), stride, C, M, N, h * cols, cols, g_side);
                } else {
                  add_parts_cols(parts, int(chunks), stride, C, M, N, h * cols, cols, g_stream);
                }
              }
              CU(cudaEventRecord(g_join, g_side));
              CU(cudaStreamWaitEvent(g_stream, g_join));
            }) : nullptr);
      }
      for (std::int64_t more : {std::int64_t{3}, std::int64_t{4}}) {  // batched+cast in more, shorter chunks
        const std::int64_t c = more, len = K / more;
        if (c <= chunks || K % (8 * c) || !wanted("batched+cast x" + std::to_string(c))) continue;
        const auto lb = layout(CUDA_R_16BF, len, N, K, c, len), la = layout(CUDA_R_16BF, len, M, K, c, len);
        const auto lp = layout(CUDA_R_32F, N, M, N, c, stride);
        Step s{lb, la, lp, lp, B, A, parts, parts, 0.f, g_ws, kWs};
        std::string note;
        const bool ok = tuned(s, "batch", note);
        add("batched+cast x" + std::to_string(c), note, ok ? std::function<void()>([s, c, stride, MN, C, parts] {
          LT(launch(s));
          add_parts(parts, int(c), stride, C, MN);
        }) : nullptr);
      }
      std::vector<Step> seq;  // the chunks into P, beta 0 then 1 (shared by seq-fp32C-bf16D and seq-fp32)
      std::string seq_note;
      bool seq_ok = true;
      const bool want_seq = wanted("seq-fp32");
      for (std::int64_t i = 0; i < chunks && seq_ok && want_seq; ++i) {
        seq.push_back({lay_chunk_b, lay_chunk_a, lay_f32, lay_f32, B + i * chunk, A + i * chunk, P, P, i ? 1.f : 0.f,
                       g_ws, kWs});
        seq_ok = tuned(seq.back(), i ? "chunk beta 1" : "chunk beta 0", seq_note);
      }
      if (want_seq) {  // seq-fp32C-bf16D: all chunks but the last as above, the last with C = P (fp32), D = C (bf16)
        Step last{lay_chunk_b, lay_chunk_a, lay_f32, lay_out, B + (chunks - 1) * chunk, A + (chunks - 1) * chunk,
                  P, C, 1.f, g_ws, kWs};
        std::string note = seq_note;
        if (!seq_ok) add("seq-fp32C-bf16D", seq_note, nullptr);
        else if (!tuned(last, "last chunk, C fp32 D bf16", note)) add("seq-fp32C-bf16D", "unsupported: " + note, nullptr);
        else {
          std::vector<Step> steps(seq.begin(), seq.end() - 1);
          steps.push_back(last);
          add("seq-fp32C-bf16D", note, [steps] {
            for (const Step& s : steps) LT(launch(s));
          });
        }
      }
      for (int splits : {2, 3, 4}) {  // splitk-lt S
        if (!wanted("splitk-lt " + std::to_string(splits))) continue;
        Step s{lay_full_b, lay_full_a, lay_out, lay_out, B, A, C, C, 0.f, g_ws_split, kWsSplit};
        const std::string name = "splitk-lt " + std::to_string(splits);
        std::string how;
        const auto configs = splitk_configs(s, splits, &how);
        double best_us = 0;
        const int best = configs.empty() ? -1 : tune(s, configs, &best_us);
        if (best < 0) add(name, "none found: " + how + (configs.empty() ? "" : "; none ran"), nullptr);
        else
          add(name, how + "; best " + describe(s.algo) + " at " + std::to_string(best_us) + " us (256 MiB workspace)",
              [s] { LT(launch(s)); });
      }
      if (!want_seq) {
      } else if (!seq_ok) add("seq-fp32", seq_note, nullptr);
      else
        add("seq-fp32", seq_note, [seq, P, C, MN] {
          for (const Step& s : seq) LT(launch(s));
          add_parts(P, 1, 0, C, MN);
        });
      // (promote every, group, stagger, skip the fixup: wrong results, timing only)
      struct WgVariant {
        int promote, group;
        bool stagger, skip_fixup;
        int prefetch;
        bool n_fastest;
        int cluster = 1;
        bool no_multicast = false;
        bool to_self = false;
        bool sk_only = false;
        int last_wave = 101;
        bool early = false;  // release_early
        bool desc = false;   // descending_stream_k
        int extra = 0;       // stream_k_extra_waves
        int tile_n = 256;
        int store = 0;       // experiment_store (1: 4-byte stores; 2: none, wrong results)
        int band = -1;       // raster_band (-1: the default)
      };
      for (const WgVariant& wv : {WgVariant{0, 4, false, false, 0, false}, WgVariant{128, 4, true, false, 0, false},
                                  WgVariant{128, 4, false, false, 0, false}, WgVariant{0, 4, false, true, 0, false},
                                  WgVariant{0, 4, false, false, 0, false, 2}, WgVariant{128, 4, true, false, 0, false, 2},
                                  WgVariant{128, 4, true, false, 0, false, 2, true},
                                  WgVariant{0, 4, false, false, 0, false, 2, false, true},
                                  WgVariant{0, 2, false, false, 0, false, 2}, WgVariant{0, 6, false, false, 0, false, 2},
                                  WgVariant{0, 4, false, false, 0, true, 2},
                                  WgVariant{0, 4, false, false, 0, false, 1, false, false, true},
                                  WgVariant{128, 4, true, false, 0, false, 1, false, false, true},
                                  WgVariant{128, 4, true, false, 0, false, 2, false, false, true},
                                  WgVariant{128, 4, true, false, 0, false, 1, false, false, false, 0},
                                  WgVariant{128, 4, true, false, 0, false, 1, false, false, false, 80},
                                  WgVariant{128, 4, true, false, 0, false, 2, false, false, false, 0},
                                  WgVariant{0, 4, false, false, 0, false, 1, false, false, false, 101, true},
                                  WgVariant{128, 4, true, false, 0, false, 1, false, false, false, 101, true},
                                  WgVariant{128, 4, false, false, 0, false, 1, false, false, false, 101, true},
                                  WgVariant{128, 4, true, false, 0, false, 2, false, false, false, 101, true},
                                  WgVariant{128, 4, true, false, 0, false, 1, false, false, false, 95, false, true},
                                  WgVariant{128, 4, true, false, 0, false, 1, false, false, false, 101, false, true},
                                  WgVariant{0, 4, false, false, 0, false, 1, false, false, false, 101, false, true},
                                  WgVariant{128, 4, true, false, 0, false, 2, false, false, false, 101, false, true},
                                  WgVariant{128, 4, true, false, 0, false, 1, false, false, false, 95, false, true, 1},
                                  WgVariant{128, 4, true, false, 0, false, 2, false, false, false, 95, false, true},
                                  WgVariant{128, 4, true, false, 0, false, 1, false, false, true, 101, false, true},
                                  WgVariant{128, 4, true, false, 0, false, 2, false, false, false, 95, false, true, 1},
                                  WgVariant{0, 4, false, false, 0, false, 1, false, false, false, 95, false, true, 1},
                                  WgVariant{0, 4, false, false, 0, false, 1, false, false, false, 95, false, true},
                                  WgVariant{128, 4, true, false, 0, false, 1, false, false, false, 95, false, true, 0, 168},
                                  WgVariant{128, 4, true, false, 0, false, 1, false, false, false, 90, false, true, 0, 168},
                                  WgVariant{128, 4, true, false, 0, false, 1, false, false, false, 101, false, true, 0, 168},
                                  WgVariant{0, 4, false, false, 0, false, 1, false, false, false, 90, false, true, 0, 168},
                                  WgVariant{128, 4, true, false, 0, false, 1, false, false, false, 95, false, true, 0, 168, 1},
                                  WgVariant{128, 4, true, false, 0, false, 1, false, false, false, 95, false, true, 0, 168, 2},
                                  WgVariant{128, 4, true, false, 0, false, 1, false, false, false, 95, false, true, 0, 256, 1},
                                  WgVariant{168, 4, true, false, 0, false, 1, false, false, false, 95, false, true, 0, 168},
                                  WgVariant{224, 4, true, false, 0, false, 1, false, false, false, 95, false, true, 0, 168},
                                  WgVariant{168, 4, true, false, 0, false, 1, false, false, false, 95, false, true},
                                  WgVariant{224, 4, true, false, 0, false, 1, false, false, false, 95, false, true},
                                  WgVariant{224, 4, true, false, 0, false, 2, false, false, false, 95, false, true},
                                  WgVariant{224, 4, true, false, 0, false, 1, false, false, false, 95, false, true, 0, 256, 0, 0},
                                  WgVariant{224, 4, true, false, 0, false, 1, false, false, false, 95, false, true, 0, 256, 0, 2},
                                  WgVariant{224, 4, true, false, 0, false, 1, false, false, false, 95, false, true, 0, 256, 0, 4},
                                  WgVariant{224, 4, true, false, 0, false, 1, false, false, false, 95, false, true, 0, 256, 0, 8},
                                  WgVariant{224, 4, true, false, 0, false, 2, false, false, false, 95, false, true, 0, 256, 0, 0},
                                  WgVariant{224, 4, true, false, 0, false, 2, false, false, false, 95, false, true, 0, 256, 0, 4},
                                  WgVariant{224, 4, true, false, 0, false, 1, false, false, false, 95, false, true, 0, 168, 0, 0},
                                  WgVariant{224, 4, true, false, 0, false, 1, false, false, false, 95, false, true, 0, 168, 0, 4}}) {
        // Variants of kernel forms kb no longer has (they lost): not run.
        if (wv.skip_fixup || wv.no_multicast || wv.to_self || wv.sk_only || wv.early || wv.extra || wv.store) continue;
        kb::kernels::gemm_cuda::WgmmaGemmArgs w;
        w.A = A, w.B = B, w.C = C, w.M = M, w.N = N, w.K = K, w.bf16 = true;
        w.promote_every = wv.promote, w.group = wv.group, w.ctas = prop.multiProcessorCount;
        w.stagger = wv.stagger;
        w.prefetch_ahead = wv.prefetch, w.n_fastest = wv.n_fastest, w.cluster = wv.cluster;
        w.min_last_wave_percent = wv.last_wave;
        w.descending_stream_k = wv.desc;
        w.tile_n = wv.tile_n;
        if (wv.band >= 0) w.raster_band = wv.band;
        w.workspace = g_wg_ws, w.workspace_bytes = g_wg_ws_bytes, w.stream = g_stream;
        add("wgmma p" + std::to_string(wv.promote) + " g" + std::to_string(wv.group) + (wv.stagger ? " stagger" : "") +
                (wv.prefetch ? " pf" + std::to_string(wv.prefetch) : "") + (wv.n_fastest ? " n-first" : "") +
                (wv.cluster > 1 ? " c" + std::to_string(wv.cluster) : "") +
                (wv.no_multicast ? " no-multicast" : "") + (wv.to_self ? " to-self" : "") +
                (wv.sk_only ? " sk-only" : "") +
                (wv.last_wave <= 100 ? " lw" + std::to_string(wv.last_wave) : "") + (wv.early ? " early" : "") +
                (wv.desc ? " desc" : "") + (wv.extra ? " sk+" + std::to_string(wv.extra) : "") +
                (wv.tile_n != 256 ? " n" + std::to_string(wv.tile_n) : "") +
                (wv.store == 1 ? " st4" : wv.store == 2 ? " NO-STORE (timing only)" : "") +
                (wv.band >= 0 ? " band" + std::to_string(wv.band) : "") +
                (wv.skip_fixup ? " NO-FIXUP (timing only)" : ""),
            std::to_string(w.ctas) + " CTAs asked; " +
                std::to_string(kb::kernels::gemm_cuda::wgmma_gemm_resident_ctas(w.cluster, true)) +
                " resident at once in clusters of " + std::to_string(w.cluster),
            [w] {
              const int e = kb::kernels::gemm_cuda::wgmma_gemm(w);
              if (e != cudaSuccess) CU(static_cast<cudaError_t>(e));
            });
      }

      // Precision: each variant once on a poisoned output (0xffff: NaN), against the fp64 product.
      const int chk_rows = std::min(M, kRefRows);
      for (Variant& v : vs) {
        if (!v.run) continue;
        CU(cudaMemsetAsync(C, 0xff, MN * sizeof(bf16), g_stream));
        v.run();
        CU(cudaMemsetAsync(err, 0, 3 * sizeof(unsigned long long), g_stream));
        check<<<1024, 256, 0, g_stream>>>(C, ref, std::size_t(chk_rows) * N, err);
        CU(cudaGetLastError());
        unsigned long long h[3];
        CU(cudaMemcpyAsync(h, err, sizeof h, cudaMemcpyDeviceToHost, g_stream));
        CU(cudaStreamSynchronize(g_stream));
        v.fails = h[0];
        std::memcpy(&v.max_err, &h[1], sizeof(double));
        std::memcpy(&v.max_err4, &h[2], sizeof(double));
      }
      // Timing: warm-ups, then rounds of one cold sample per variant (start rotating).
      std::vector<Variant*> live;
      for (Variant& v : vs)
        if (v.run) live.push_back(&v);
      for (int w = 0; w < kWarmups; ++w)
        for (Variant* v : live) v->run();
      CU(cudaStreamSynchronize(g_stream));
      std::vector<cudaEvent_t> ev(2 * live.size());
      for (auto& e : ev) CU(cudaEventCreate(&e));
      for (int r = 0; r < kSamples; ++r) {
        for (std::size_t j = 0; j < live.size(); ++j) {
          const std::size_t v = (j + r) % live.size();
          flush_l2(r);
          CU(cudaEventRecord(ev[2 * v], g_stream));
          live[v]->run();
          CU(cudaEventRecord(ev[2 * v + 1], g_stream));
        }
        CU(cudaStreamSynchronize(g_stream));
        for (std::size_t v = 0; v < live.size(); ++v) {
          float ms = 0;
          CU(cudaEventElapsedTime(&ms, ev[2 * v], ev[2 * v + 1]));
          live[v]->us.push_back(1e3 * ms);
        }
      }
      for (auto& e : ev) CU(cudaEventDestroy(e));

      const double single_us = vs[0].run ? median(vs[0].us) : 0;
      char line[320];
      for (const Variant& v : vs) {
        std::printf("  %d x %d M=%d %s: %s\n", N, K, M, v.name.c_str(), v.note.c_str());
        if (!v.run) {
          std::snprintf(line, sizeof line, "| %dx%d | %d | %s | unsupported | - | - | - | - |", N, K, M, v.name.c_str());
        } else {
          const double us = median(v.us);
          std::snprintf(line, sizeof line, "| %dx%d | %d | %s | %.1f | %.3f | %llu | %.4g | %.4g |", N, K, M,
                        v.name.c_str(), us, single_us > 0 ? us / single_us : 0.0, v.fails, v.max_err, v.max_err4);
        }
        rows.push_back(line);
      }
      std::fflush(stdout);
    }
  }
  std::printf("\n| shape NxK | M | variant | median us | / single | fails | max abs err | max err, abs(ref) < 4 |\n"
              "|---|---|---|---|---|---|---|---|\n");
  for (const auto& r : rows) std::printf("%s\n", r.c_str());

  for (auto l : g_layouts) LT(cublasLtMatrixLayoutDestroy(l));
  LT(cublasLtMatmulDescDestroy(g_op));
  LT(cublasLtDestroy(g_lt));
  for (void* p : {static_cast<void*>(A), static_cast<void*>(B), static_cast<void*>(C), static_cast<void*>(parts),
                  static_cast<void*>(P), static_cast<void*>(ref), static_cast<void*>(err), g_flush, g_ws, g_ws_split, g_wg_ws})
    CU(cudaFree(p));
  return 0;
}
