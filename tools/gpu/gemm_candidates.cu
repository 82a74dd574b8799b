// Which cuBLAS kernels can kb reach for one fp16 GEMM, and how fast are they?
// A diagnostic for issue 4's M >= 128 bar (kb trailed torch.matmul by up to
// 14% on some shapes although it autotunes cuBLASLt's top 16): times, cold
// (L2 flushed) and side by side in one process,
//   - every algorithm cuBLASLt's heuristic returns (up to 64) under kb's
//     preferences (fp32 compute, fp32 split-K reductions only, 32 MiB workspace),
//   - cublasGemmEx with CUBLAS_GEMM_DEFAULT_TENSOR_OP, what torch.matmul calls.
// Row-major C[M,N] = A[M,K] B[N,K]^T mapped as kernels/gemm/cuda/cublaslt_gemm.cpp maps it.
// With --precision first, instead: for each shape, the errors of cuBLASLt's
// first algorithm with CUBLAS_COMPUTE_32F and with CUBLAS_COMPUTE_32F_PEDANTIC
// against an fp64 product (cublasDgemm on the same fp16 values), counted with
// FlashInfer-Bench's rule (an element fails when abs > 1e-2 and rel > 1e-2),
// and their times.
// With --sweep first, instead: every configuration cuBLASLt accepts for the
// problem, not only the heuristic's list (session 34: at M = 256 on 4096 x 4096
// torch.matmul ran 18.1 us, the best of the heuristic's 8 candidates 18.6):
// each algorithm id, each tile and stages id its capabilities list, split-K 1
// (kb's fp32-reductions rule allows split-K only with fp32 reductions: 2, 3, 4
// with CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE where the algorithm supports it),
// CTA swizzling off and on, cluster shape auto, 1x1, 2x1, 1x2; every configuration cublasLtMatmulAlgoCheck accepts
// within kb's 32 MiB workspace is timed with 5 cold samples, then the 12 fastest
// again with 20, beside cublasGemmEx and the heuristic's first. Prints the
// fastest configurations with their ids. Session 35, H200, M = 256: 3138 valid
// configurations a shape, about 7 s; on N = K = 4096 the 12 fastest were all
// algorithm 66 with an explicit cluster shape, the best 21.5 us against the
// best of the heuristic's 8 at 22.2 (benchmarks/h200-2026-12-03-s35/).
// build: nvcc -std=c++20 -O2 -o gemm_candidates tools/gpu/gemm_candidates.cu -lcublasLt -lcublas
// usage: gemm_candidates [--precision | --sweep] M N K [M N K ...]
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#define CK(x)                                                                        \
  do {                                                                               \
    auto e_ = (x);                                                                   \
    if (e_ != 0) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x, (int)e_); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

__global__ void fill(__half* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned x = (unsigned)i * 2654435761u ^ seed;
    x ^= x >> 13; x *= 0x5bd1e995u; x ^= x >> 15;
    p[i] = __float2half(((x & 0xFFFF) / 65536.f - 0.5f) * 3.4641f);  // uniform, stdev 1
  }
}

static void* g_flush;
static size_t g_flush_bytes;

// median ms of `run` over `samples` cold samples, after 3 warm-ups; -1 if it failed
static double time_cold(const std::function<int()>& run, int samples = 20) {
  for (int w = 0; w < 3; ++w)
    if (run() != 0) return -1;
  if (cudaDeviceSynchronize() != cudaSuccess) return -1;
  std::vector<double> ms;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int s = 0; s < samples; ++s) {
    CK(cudaMemsetAsync(g_flush, s & 0xFF, g_flush_bytes));
    CK(cudaEventRecord(a));
    run();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float t;
    CK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// One fp16 TN problem in cuBLASLt's terms (row-major C = A B^T as kb maps it):
// the matmul descriptor for compute type `ct` and the three layouts.
struct LtTn {
  cublasLtMatmulDesc_t op{};
  cublasLtMatrixLayout_t la{}, lb{}, lc{};
  LtTn(long M, long N, long K, cublasComputeType_t ct) {
    CK(cublasLtMatmulDescCreate(&op, ct, CUDA_R_32F));
    int ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, K, N, K));
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, K, M, K));
    CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, N, M, N));
  }
  ~LtTn() {
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
  }
  // The heuristic's first `want` algorithms (kb's workspace, the given reduction mask); the status and count.
  cublasStatus_t heuristic(cublasLtHandle_t lt, size_t ws_bytes, uint32_t mask, int want,
                           cublasLtMatmulHeuristicResult_t* res, int* count) const {
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t wsb = ws_bytes;
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof mask));
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, want, res, count);
    cublasLtMatmulPreferenceDestroy(pref);
    return s;
  }
  int run(cublasLtHandle_t lt, const cublasLtMatmulAlgo_t& algo, const __half* A, const __half* B, __half* C, void* ws,
          size_t ws_bytes) const {
    const float alpha = 1, beta = 0;
    return (int)cublasLtMatmul(lt, op, &alpha, B, la, A, lb, &beta, C, lc, C, lc, &algo, ws, ws_bytes, 0);
  }
};

constexpr uint32_t kFp32Reductions = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;

__global__ void widen(const __half* x, double* y, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = (double)__half2float(x[i]);
}

// failures under FlashInfer-Bench's rule; max abs error where |ref| < 4
__global__ void judge(const __half* got, const double* ref, size_t n, unsigned long long* fails, double* max_small) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    double r = ref[i], d = fabs((double)__half2float(got[i]) - r);
    if (d > 1e-2 && d / (fabs(r) + 1e-8) > 1e-2) atomicAdd(fails, 1ull);
    if (fabs(r) < 4.0) {
      unsigned long long* bits = reinterpret_cast<unsigned long long*>(max_small);
      unsigned long long old = *bits;
      while (__longlong_as_double(old) < d) {
        unsigned long long prev = atomicCAS(bits, old, __double_as_longlong(d));
        if (prev == old) break;
        old = prev;
      }
    }
  }
}

static int precision(int argc, char** argv) {
  cublasLtHandle_t lt;
  CK(cublasLtCreate(&lt));
  cublasHandle_t blas;
  CK(cublasCreate(&blas));
  const size_t ws_bytes = 32u << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_bytes));
  unsigned long long* fails;
  double* max_small;
  CK(cudaMalloc(&fails, 8));
  CK(cudaMalloc(&max_small, 8));
  for (int arg = 2; arg + 2 < argc; arg += 3) {
    long M = std::atol(argv[arg]), N = std::atol(argv[arg + 1]), K = std::atol(argv[arg + 2]);
    __half *A, *B, *C;
    double *A64, *B64, *C64;
    CK(cudaMalloc(&A, M * K * 2));
    CK(cudaMalloc(&B, N * K * 2));
    CK(cudaMalloc(&C, M * N * 2));
    CK(cudaMalloc(&A64, M * K * 8));
    CK(cudaMalloc(&B64, N * K * 8));
    CK(cudaMalloc(&C64, M * N * 8));
    fill<<<1024, 256>>>(A, M * K, 11);
    fill<<<1024, 256>>>(B, N * K, 12);
    widen<<<1024, 256>>>(A, A64, M * K);
    widen<<<1024, 256>>>(B, B64, N * K);
    const double one = 1, zero = 0;
    CK(cublasDgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, B64, K, A64, K, &zero, C64, N));
    CK(cudaDeviceSynchronize());
    for (cublasComputeType_t ct : {CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_PEDANTIC}) {
      const LtTn g(M, N, K, ct);
      cublasLtMatmulHeuristicResult_t res[1];
      int count = 0;
      cublasStatus_t hs = g.heuristic(lt, ws_bytes, kFp32Reductions, 1, res, &count);
      if (hs != CUBLAS_STATUS_SUCCESS || count < 1) {
        std::printf("M=%ld N=%ld K=%ld %s: no algorithm (status %d)\n", M, N, K,
                    ct == CUBLAS_COMPUTE_32F ? "32F" : "32F_PEDANTIC", (int)hs);
      } else {
        double ms = time_cold([&] { return g.run(lt, res[0].algo, A, B, C, ws, ws_bytes); });
        CK(cudaMemset(fails, 0, 8));
        CK(cudaMemset(max_small, 0, 8));
        judge<<<1024, 256>>>(C, C64, M * N, fails, max_small);
        unsigned long long f = 0;
        double mx = 0;
        CK(cudaMemcpy(&f, fails, 8, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&mx, max_small, 8, cudaMemcpyDeviceToHost));
        std::printf("M=%ld N=%ld K=%ld %-13s %.4f ms, %llu of %ld elements fail FIB's rule vs fp64, max abs error where "
                    "|ref| < 4: %.5f\n",
                    M, N, K, ct == CUBLAS_COMPUTE_32F ? "32F" : "32F_PEDANTIC", ms, f, M * N, mx);
      }
      fflush(stdout);
    }
    cudaFree(A), cudaFree(B), cudaFree(C), cudaFree(A64), cudaFree(B64), cudaFree(C64);
  }
  return 0;
}

// What the timing modes share: kb's 32 MiB workspace, given to cuBLAS too, and the two handles.
struct Handles {
  const size_t ws_bytes = 32u << 20;
  void* ws = nullptr;
  cublasLtHandle_t lt{};
  cublasHandle_t blas{};
  Handles() {
    CK(cudaMalloc(&ws, ws_bytes));
    CK(cublasLtCreate(&lt));
    CK(cublasCreate(&blas));
    CK(cublasSetWorkspace(blas, ws, ws_bytes));
  }
};

// One problem's fp16 operands (A M x K, B N x K, filled once; C M x N), and what cublasGemmEx takes on them.
struct Operands {
  long M, N, K;
  __half *A = nullptr, *B = nullptr, *C = nullptr;
  Operands(long m, long n, long k) : M(m), N(n), K(k) {
    CK(cudaMalloc(&A, M * K * 2));
    CK(cudaMalloc(&B, N * K * 2));
    CK(cudaMalloc(&C, M * N * 2));
    fill<<<1024, 256>>>(A, M * K, 1);
    fill<<<1024, 256>>>(B, N * K, 2);
  }
  ~Operands() {
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
  }
  double gemmex_ms(cublasHandle_t blas) const {
    const float alpha = 1, beta = 0;
    return time_cold([&] {
      return (int)cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, B, CUDA_R_16F, K, A, CUDA_R_16F, K,
                               &beta, C, CUDA_R_16F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP);
    });
  }
};

// A capability that is a list (tile ids, stages ids); empty where the algorithm has none.
static std::vector<uint32_t> cap_list(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS || bytes == 0)
    return {};
  std::vector<uint32_t> v(bytes / sizeof(uint32_t));
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, v.data(), v.size() * sizeof(uint32_t), &bytes) !=
      CUBLAS_STATUS_SUCCESS)
    return {};
  return v;
}

template <typename T>
static T cap_value(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  T v{};
  size_t written = 0;
  return cublasLtMatmulAlgoCapGetAttribute(&algo, attr, &v, sizeof v, &written) == CUBLAS_STATUS_SUCCESS ? v : T{};
}

struct SweepConfig {
  cublasLtMatmulAlgo_t algo;
  int id;
  uint32_t tile, stages, swizzle;
  int32_t split_k;
  uint16_t cluster;  // cublasLtClusterShape_t; 0 = auto
  double ms;
  std::string text() const {
    return "algo " + std::to_string(id) + " tile " + std::to_string(tile) + " stages " + std::to_string(stages) +
           " split-K " + std::to_string(split_k) + " swizzle " + std::to_string(swizzle) + " cluster " +
           std::to_string(cluster);
  }
};

// One M N K problem ready to time: its operands, its cuBLASLt problem, cublasGemmEx's time on it.
struct Problem {
  const Handles& h;
  const Operands o;
  const LtTn g;
  const double gemmex;
  Problem(const Handles& handles, long M, long N, long K)
      : h(handles), o(M, N, K), g(M, N, K, CUBLAS_COMPUTE_32F), gemmex(o.gemmex_ms(handles.blas)) {}
  // cuBLASLt's `algo` on the operands, cold (time_cold)
  double lt_ms(const cublasLtMatmulAlgo_t& algo, int samples = 20) const {
    return time_cold([&] { return g.run(h.lt, algo, o.A, o.B, o.C, h.ws, h.ws_bytes); }, samples);
  }
};

// --sweep: every configuration of every algorithm id (see the top of the file).
static void sweep(const Problem& p) {
  const long M = p.o.M, N = p.o.N, K = p.o.K;
  const LtTn& g = p.g;
  cublasLtMatmulHeuristicResult_t first[1];
  int count = 0;
  CK(g.heuristic(p.h.lt, p.h.ws_bytes, kFp32Reductions, 1, first, &count));
  const double heuristic = count ? p.lt_ms(first[0].algo) : -1;

  int ids[512];
  int n_ids = 0;
  CK(cublasLtMatmulAlgoGetIds(p.h.lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16F, CUDA_R_16F, CUDA_R_16F, CUDA_R_16F,
                              512, ids, &n_ids));
  std::vector<SweepConfig> valid;
  for (int i = 0; i < n_ids; ++i) {
    cublasLtMatmulAlgo_t base;
    if (cublasLtMatmulAlgoInit(p.h.lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16F, CUDA_R_16F, CUDA_R_16F, CUDA_R_16F,
                               ids[i], &base) != CUBLAS_STATUS_SUCCESS)
      continue;
    std::vector<uint32_t> tiles = cap_list(base, CUBLASLT_ALGO_CAP_TILE_IDS);
    std::vector<uint32_t> stages = cap_list(base, CUBLASLT_ALGO_CAP_STAGES_IDS);
    if (tiles.empty()) tiles = {CUBLASLT_MATMUL_TILE_UNDEFINED};
    if (stages.empty()) stages = {CUBLASLT_MATMUL_STAGES_UNDEFINED};
    const bool split_ok = cap_value<int32_t>(base, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT) != 0 &&
                          (cap_value<uint32_t>(base, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK) &
                           CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE) != 0;
    const bool swizzle_ok = cap_value<uint32_t>(base, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT) != 0;
    for (uint32_t tile : tiles)
      for (uint32_t stage : stages)
        for (int32_t split : {1, 2, 3, 4})
          for (uint32_t swizzle : {0u, 1u})
            // Hopper's kernels run in thread-block clusters; no capability lists the shapes, so the
            // common ones are offered and cublasLtMatmulAlgoCheck refuses the rest.
            for (uint16_t cluster : {CUBLASLT_CLUSTER_SHAPE_AUTO, CUBLASLT_CLUSTER_SHAPE_1x1x1,
                                     CUBLASLT_CLUSTER_SHAPE_2x1x1, CUBLASLT_CLUSTER_SHAPE_1x2x1}) {
            if ((split > 1 && !split_ok) || (swizzle && !swizzle_ok)) continue;
            SweepConfig c{base, ids[i], tile, stage, swizzle, split, cluster, -1};
            const uint32_t reduction =
                split > 1 ? CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE : CUBLASLT_REDUCTION_SCHEME_NONE;
            if (cublasLtMatmulAlgoConfigSetAttribute(&c.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile) ||
                cublasLtMatmulAlgoConfigSetAttribute(&c.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stage, sizeof stage) ||
                cublasLtMatmulAlgoConfigSetAttribute(&c.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof split) ||
                cublasLtMatmulAlgoConfigSetAttribute(&c.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction,
                                                     sizeof reduction) ||
                cublasLtMatmulAlgoConfigSetAttribute(&c.algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle,
                                                     sizeof swizzle) ||
                (cluster != CUBLASLT_CLUSTER_SHAPE_AUTO &&
                 cublasLtMatmulAlgoConfigSetAttribute(&c.algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster,
                                                      sizeof cluster)))
              continue;
            cublasLtMatmulHeuristicResult_t check{};
            if (cublasLtMatmulAlgoCheck(p.h.lt, g.op, g.la, g.lb, g.lc, g.lc, &c.algo, &check) != CUBLAS_STATUS_SUCCESS ||
                check.state != CUBLAS_STATUS_SUCCESS || check.workspaceSize > p.h.ws_bytes)
              continue;
            valid.push_back(c);
          }
  }
  // Phase 1: every valid configuration, 5 cold samples. Phase 2: the 12 fastest again, 20 samples.
  std::printf("M=%ld N=%ld K=%ld sweep: timing %zu configurations\n", M, N, K, valid.size());
  fflush(stdout);
  // Phase 1 stops after 150 s so one shape cannot take a whole device call; what it timed is kept.
  const auto start = std::chrono::steady_clock::now();
  size_t timed = 0;
  for (SweepConfig& c : valid) {
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(150)) break;
    c.ms = p.lt_ms(c.algo, 5);
    ++timed;
  }
  if (timed < valid.size()) std::printf("M=%ld N=%ld K=%ld sweep: time cap, %zu of %zu timed\n", M, N, K, timed, valid.size());
  auto by_time = [](const SweepConfig& x, const SweepConfig& y) {
    return (x.ms < 0 ? 1e30 : x.ms) < (y.ms < 0 ? 1e30 : y.ms);
  };
  std::sort(valid.begin(), valid.end(), by_time);
  const size_t top = std::min<size_t>(12, valid.size());
  for (size_t i = 0; i < top; ++i)
    valid[i].ms = p.lt_ms(valid[i].algo);
  std::sort(valid.begin(), valid.begin() + top, by_time);
  std::printf("M=%ld N=%ld K=%ld sweep: %d algorithm ids, %zu valid configurations | GemmEx %.4f ms | heuristic #0 "
              "%.4f | best %.4f (%s) | best/GemmEx %.3f\n",
              M, N, K, n_ids, valid.size(), p.gemmex, heuristic, top ? valid[0].ms : -1.0,
              top ? valid[0].text().c_str() : "none", top && p.gemmex > 0 ? valid[0].ms / p.gemmex : 0.0);
  for (size_t i = 0; i < top; ++i) std::printf("   %.4f ms  %s\n", valid[i].ms, valid[i].text().c_str());
  fflush(stdout);
}

// The default: the heuristic's list under kb's preferences and under any reduction scheme.
static void heuristic_lists(const Problem& p) {
  const long M = p.o.M, N = p.o.N, K = p.o.K;
  const LtTn& g = p.g;
  for (int mask_kind = 0; mask_kind < 2; ++mask_kind) {
    const uint32_t mask = mask_kind == 0 ? kFp32Reductions : CUBLASLT_REDUCTION_SCHEME_MASK;
    cublasLtMatmulHeuristicResult_t res[64];
    int count = 0;
    CK(g.heuristic(p.h.lt, p.h.ws_bytes, mask, 64, res, &count));
    std::vector<std::pair<double, int>> t;
    for (int i = 0; i < count; ++i) {
      double ms = p.lt_ms(res[i].algo);
      t.push_back({ms, i});
    }
    auto best = *std::min_element(t.begin(), t.end(), [](auto x, auto y) {
      return (x.first < 0 ? 1e30 : x.first) < (y.first < 0 ? 1e30 : y.first);
    });
    double best16 = 1e30;
    for (auto& [ms, i] : t)
      if (i < 16 && ms >= 0) best16 = std::min(best16, ms);
    std::printf("M=%ld N=%ld K=%ld %s: GemmEx %.4f ms | Lt #0 %.4f, best of top16 %.4f, best of %d %.4f (#%d) | "
                "best/GemmEx %.3f\n",
                M, N, K, mask_kind == 0 ? "fp32-reductions" : "any-reduction", p.gemmex, t[0].first, best16, count,
                best.first, best.second, best.first / p.gemmex);
    std::printf("   all:");
    for (auto& [ms, i] : t) std::printf(" #%d %.4f", i, ms);
    std::printf("\n");
    fflush(stdout);
  }
}

int main(int argc, char** argv) {
  const bool precise = argc > 1 && std::string(argv[1]) == "--precision";
  const bool sweeping = argc > 1 && std::string(argv[1]) == "--sweep";
  const int flag = precise || sweeping;
  if (argc < 4 + flag || (argc - 1 - flag) % 3) {
    std::fprintf(stderr, "usage: %s [--precision | --sweep] M N K [M N K ...]\n", argv[0]);
    return 2;
  }
  int l2 = 0;
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  g_flush_bytes = 2 * (size_t)l2;
  CK(cudaMalloc(&g_flush, g_flush_bytes));
  if (precise) return precision(argc, argv);
  const Handles h;
  for (int arg = 1 + sweeping; arg + 2 < argc; arg += 3) {
    const Problem p(h, std::atol(argv[arg]), std::atol(argv[arg + 1]), std::atol(argv[arg + 2]));
    if (sweeping) sweep(p);
    else heuristic_lists(p);
  }
  return 0;
}
