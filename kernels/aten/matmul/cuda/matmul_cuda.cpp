// CUDA plans for mm, bmm and addmm through cuBLASLt, opened at run time
// (dlopen, like kernels/gemm/cuda/cublaslt_gemm.cpp: libkb never links it).
//
// Row-major out[M, N] = a[M, K] @ m[K, N] is, read column-major, out^T = m^T a^T,
// so cuBLASLt's "A" is m's buffer and its "B" is a's. A row-major operand
// (unit column stride) read column-major is its transpose (op N); a
// column-major one (unit row stride, e.g. a .t() view) is itself (op T); each
// with its own leading dimension, so transposed views need no copy. Other
// layouts are copied to contiguous scratch first. bmm uses strided batches;
// addmm broadcasts its bias into the output and runs with beta. fp32
// accumulation and scale (CUBLAS_COMPUTE_32F), as PyTorch's default; split-K
// partial sums of f16/bf16 products reduced in fp32 too.
//
// The algorithm: one per problem key (device, dtypes, transposes, sizes,
// leading dimensions, batch strides, alignments), cached for the process. On
// a key's first plan, the heuristic's best kLtTuneCandidates algorithms are
// timed on the plan's operands (kernels/common/cublaslt_autotune.hpp; warm
// L2, as BackendBench lines are timed) and the fastest kept: plan time, never
// inside a timed launch. Not tuned: the fp64 GPU reference
// (cuda::reference_mode), products under kMinTunedFlops (all candidates take
// about a launch's time), and KB_CUBLASLT_AUTOTUNE=0.
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <map>
#include <mutex>

#include "../../../common/cublaslt_autotune.hpp"
#include "../../common/args.hpp"
#include "../../common/cuda_engine.hpp"
#include "../../cuda_families.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

struct Lt {
  std::string error;
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = std::size_t{32} << 20;
};

// Below this many flops (2 * batch * M * N * K) a product takes about a
// kernel launch's time on Hopper, so timing candidates would rank noise.
constexpr double kMinTunedFlops = double(1 << 27);

// Everything the heuristic's answer depends on (the workspace size is fixed).
struct AlgoKey {
  int device = 0;
  Dtype dtype = Dtype::f32;
  std::int32_t trans_a = 0, trans_b = 0;
  std::int64_t B = 0, M = 0, N = 0, K = 0, ld_a = 0, ld_b = 0, stride_a = 0, stride_b = 0;
  std::uint32_t align_a = 0, align_b = 0, align_c = 0;
  auto operator<=>(const AlgoKey&) const = default;
};

struct AlgoCache {
  std::mutex mu;
  std::map<AlgoKey, cublasLtMatmulAlgo_t> algos;
  void* tune_workspace = nullptr;  // candidates are timed here, never in a workspace a launch may be using
};

// Leaked on purpose, like the handle and workspace.
AlgoCache& algo_cache() {
  static AlgoCache* c = new AlgoCache;
  return *c;
}

template <class Fn>
void bind(void* lib, const char* name, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
}

// Opened once; the handle and workspace live for the process (never freed:
// destroying them at exit could run after the CUDA runtime shut down).
const Lt& lt() {
  static Lt api = [] {
    Lt a;
    void* lib = nullptr;
    for (const char* name : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) {
      a.error = "cuBLASLt not found (libcublasLt.so.13/.12)";
      return a;
    }
    std::string missing;
    bind(lib, "cublasLtCreate", a.create, missing);
    bind(lib, "cublasLtMatmulDescCreate", a.desc_create, missing);
    bind(lib, "cublasLtMatmulDescDestroy", a.desc_destroy, missing);
    bind(lib, "cublasLtMatmulDescSetAttribute", a.desc_set, missing);
    bind(lib, "cublasLtMatrixLayoutCreate", a.layout_create, missing);
    bind(lib, "cublasLtMatrixLayoutDestroy", a.layout_destroy, missing);
    bind(lib, "cublasLtMatrixLayoutSetAttribute", a.layout_set, missing);
    bind(lib, "cublasLtMatmulPreferenceCreate", a.pref_create, missing);
    bind(lib, "cublasLtMatmulPreferenceDestroy", a.pref_destroy, missing);
    bind(lib, "cublasLtMatmulPreferenceSetAttribute", a.pref_set, missing);
    bind(lib, "cublasLtMatmulAlgoGetHeuristic", a.heuristic, missing);
    bind(lib, "cublasLtMatmul", a.matmul, missing);
    if (!missing.empty()) {
      a.error = "cuBLASLt lacks " + missing;
      return a;
    }
    if (a.create(&a.handle) != CUBLAS_STATUS_SUCCESS) a.error = "cublasLtCreate failed";
    else if (cudaMalloc(&a.workspace, a.workspace_bytes) != cudaSuccess) a.error = "cannot allocate cuBLASLt workspace";
    return a;
  }();
  return api;
}

unsigned alignment_of(const void* p) {
  auto v = reinterpret_cast<std::uintptr_t>(p);
  if (v == 0) return 256;
  std::uintptr_t low = v & (~v + 1);
  return low >= 256 ? 256u : static_cast<unsigned>(low);
}

// A 2-D operand (last two dims of the view) as cuBLASLt sees it.
struct Operand2 {
  bool row_major = true;  // unit column stride
  std::int64_t ld = 0;
};
bool as_operand(std::int64_t r, std::int64_t c, std::int64_t sr, std::int64_t sc, Operand2& o) {
  if (c == 1 || sc == 1) {
    o.row_major = true;
    o.ld = r == 1 ? std::max<std::int64_t>(c, 1) : sr;
    if (o.ld >= std::max<std::int64_t>(c, 1)) return true;
  }
  if (r == 1 || sr == 1) {
    o.row_major = false;
    o.ld = c == 1 ? std::max<std::int64_t>(r, 1) : sc;
    if (o.ld >= std::max<std::int64_t>(r, 1)) return true;
  }
  return false;
}

cudaDataType_t lt_type(Dtype d) {
  switch (d) {
    case Dtype::f16: return CUDA_R_16F;
    case Dtype::bf16: return CUDA_R_16BF;
    case Dtype::f32: return CUDA_R_32F;
    case Dtype::f64: return CUDA_R_64F;
    default: fail(fmt::format("matmul on CUDA handles f16, bf16 and f32, not {}", dtype_abbrev(d)));
  }
}

struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~LtPlan() {
    const Lt& a = lt();
    if (la) a.layout_destroy(la);
    if (lb) a.layout_destroy(lb);
    if (lc) a.layout_destroy(lc);
    if (op) a.desc_destroy(op);
  }
};

void check_lt(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) fail(fmt::format("{}: cublasStatus {}", what, static_cast<int>(s)));
}

char* ptr_of(const DView& v) {
  return static_cast<char*>(v.base) + v.offset * static_cast<std::int64_t>(dtype_size(v.dtype));
}

// Index of the fastest of `candidates` (the heuristic's order; 0 when none
// could be timed), each run on the plan's operands with its real alpha and
// beta: whatever they leave in pc, the launch rewrites (beta == 0), or its
// addmm bias copy does first. Timed on a stream of its own, synchronized
// before returning, in a workspace of its own (a launch on another stream may
// be using the shared one). Called with cache.mu held.
std::size_t fastest_locked(AlgoCache& cache, const std::vector<cublasLtMatmulAlgo_t>& candidates, const LtPlan& plan,
                           const void* pa, const void* pb, void* pc, float alpha, float beta) {
  const Lt& api = lt();
  if (!cache.tune_workspace && cudaMalloc(&cache.tune_workspace, api.workspace_bytes) != cudaSuccess) {
    cache.tune_workspace = nullptr;
    (void)cudaGetLastError();
    return 0;  // no memory to time in: the heuristic's choice
  }
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  auto run = [&](int c, void* s) -> Status {
    cublasStatus_t st = api.matmul(api.handle, plan.op, &alpha, pa, plan.la, pb, plan.lb, &beta, pc, plan.lc, pc,
                                   plan.lc, &candidates[static_cast<std::size_t>(c)], cache.tune_workspace,
                                   api.workspace_bytes, static_cast<cudaStream_t>(s));
    return st == CUBLAS_STATUS_SUCCESS
               ? ok_status()
               : make_error(Code::cuda_error, fmt::format("cublasLtMatmul: status {}", static_cast<int>(st)));
  };
  auto ms = kb::kernels::median_ms_of_candidates(static_cast<int>(candidates.size()), run, stream, /*cold_l2=*/false);
  cudaStreamDestroy(stream);
  if (!ms) fail("timing cuBLASLt candidates: " + ms.error().message);  // the CUDA context broke
  std::size_t best = 0;
  for (std::size_t i = 0; i < ms->size(); ++i)
    if ((*ms)[i] >= 0 && ((*ms)[best] < 0 || (*ms)[i] < (*ms)[best])) best = i;
  return best;
}

Launch lt_matmul_in(const DView& out3, DView a3, DView m3, double alpha, double beta);

// Rank-3 views (batch first) of a, m and out; out contiguous. The GPU
// reference (cuda::reference_mode) multiplies fp64 copies in fp64 and rounds once.
Launch lt_matmul(const DView& out3, DView a3, DView m3, double alpha, double beta) {
  if (!cuda::reference_mode() || out3.dtype == Dtype::f64) return lt_matmul_in(out3, a3, m3, alpha, beta);
  DView a64 = cuda::device_empty(Dtype::f64, a3.shape), m64 = cuda::device_empty(Dtype::f64, m3.shape);
  DView o64 = cuda::device_empty(Dtype::f64, out3.shape);
  std::vector<Launch> steps{cuda::copy(a64, a3), cuda::copy(m64, m3)};
  if (beta != 0) steps.push_back(cuda::copy(o64, out3));
  steps.push_back(lt_matmul_in(o64, a64, m64, alpha, beta));
  steps.push_back(cuda::copy(out3, o64));
  return sequence(std::move(steps));
}

Launch lt_matmul_in(const DView& out3, DView a3, DView m3, double alpha, double beta) {
  const Lt& api = lt();
  if (!api.error.empty()) fail(api.error);
  if (a3.dtype != m3.dtype || out3.dtype != a3.dtype) fail("matmul operands differ in dtype");
  const std::int64_t B = a3.shape[0], M = a3.shape[1], K = a3.shape[2], N = m3.shape[2];
  if (B == 0 || M == 0 || N == 0) return [](void*) { return ok_status(); };
  if (K == 0) return beta == 0 ? cuda::fill(out3, 0.0) : cuda::elementwise(cuda::EOp::mul, out3, {cuda::input(out3), cuda::constant(beta)});
  std::vector<Launch> steps;
  Operand2 oa, om;
  auto fix = [&](DView& v, Operand2& o) {
    if (!as_operand(v.shape[1], v.shape[2], v.strides[1], v.strides[2], o)) {
      DView c = cuda::device_empty(v.dtype, v.shape);
      steps.push_back(cuda::copy(c, v));
      v = c;
      as_operand(v.shape[1], v.shape[2], v.strides[1], v.strides[2], o);
    }
  };
  fix(a3, oa);
  fix(m3, om);
  const cudaDataType_t type = lt_type(a3.dtype);
  auto plan = std::make_shared<LtPlan>();
  const bool f64 = a3.dtype == Dtype::f64;
  check_lt(api.desc_create(&plan->op, f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F, f64 ? CUDA_R_64F : CUDA_R_32F),
           "cublasLtMatmulDescCreate");
  // cuBLAS A = m: op N when m is row-major ([N, K] column-major view is m^T), else T.
  const std::int32_t ta = om.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const std::int32_t tb = oa.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  check_lt(api.desc_set(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
  check_lt(api.desc_set(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
  auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  check_lt(om.row_major ? api.layout_create(&plan->la, type, u(N), u(K), om.ld)
                        : api.layout_create(&plan->la, type, u(K), u(N), om.ld), "layout of mat2");
  check_lt(oa.row_major ? api.layout_create(&plan->lb, type, u(K), u(M), oa.ld)
                        : api.layout_create(&plan->lb, type, u(M), u(K), oa.ld), "layout of self");
  check_lt(api.layout_create(&plan->lc, type, u(N), u(M), N), "layout of out");
  if (B > 1) {
    const std::int32_t count = static_cast<std::int32_t>(B);
    const std::int64_t sa = m3.strides[0], sb = a3.strides[0], sc = M * N;
    for (auto [layout, stride] : {std::pair{plan->la, sa}, std::pair{plan->lb, sb}, std::pair{plan->lc, sc}}) {
      check_lt(api.layout_set(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count), "batch count");
      check_lt(api.layout_set(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride), "batch stride");
    }
  }
  char* pa = ptr_of(m3);
  char* pb = ptr_of(a3);
  char* pc = ptr_of(out3);
  // Copied operands are not allocated yet when the plan is made: assume their 256-byte alignment.
  const std::uint32_t al_a = steps.empty() ? alignment_of(pa) : 16, al_b = steps.empty() ? alignment_of(pb) : 16;
  const std::uint32_t al_c = alignment_of(pc);
  // Scale factors in the scale type: fp32, or fp64 for the reference.
  const float fa = static_cast<float>(alpha), fb = static_cast<float>(beta);
  const double da = alpha, db = beta;

  AlgoKey key;
  if (cudaGetDevice(&key.device) != cudaSuccess) fail("cudaGetDevice failed");
  key.dtype = a3.dtype;
  key.trans_a = ta;
  key.trans_b = tb;
  key.B = B, key.M = M, key.N = N, key.K = K;
  key.ld_a = om.ld, key.ld_b = oa.ld;
  key.stride_a = B > 1 ? m3.strides[0] : 0, key.stride_b = B > 1 ? a3.strides[0] : 0;
  key.align_a = al_a, key.align_b = al_b, key.align_c = al_c;
  // Planned under the cache's lock: a key is asked of the heuristic (and tuned) once.
  AlgoCache& cache = algo_cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  if (auto it = cache.algos.find(key); it != cache.algos.end()) {
    plan->algo = it->second;
  } else {
    cublasLtMatmulPreference_t pref = nullptr;
    check_lt(api.pref_create(&pref), "cublasLtMatmulPreferenceCreate");
    std::uint64_t ws = api.workspace_bytes;
    api.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    if (a3.dtype == Dtype::f16 || a3.dtype == Dtype::bf16) {
      // Split-K partial sums reduced in the 16-bit output type lose up to half an output ulp each; keep them in
      // fp32, as kernels/gemm/cuda/cublaslt_gemm.cpp does (tuning picks split-K algorithms more often than the
      // heuristic's first choice).
      const std::uint32_t mask = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      api.pref_set(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof mask);
    }
    api.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
    api.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
    api.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
    api.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c);
    constexpr int kAsk = kb::kernels::kLtTuneCandidates;
    cublasLtMatmulHeuristicResult_t results[kAsk]{};
    int found = 0;
    cublasStatus_t s =
        api.heuristic(api.handle, plan->op, plan->la, plan->lb, plan->lc, plan->lc, pref, kAsk, results, &found);
    api.pref_destroy(pref);
    std::vector<cublasLtMatmulAlgo_t> candidates;
    for (int i = 0; s == CUBLAS_STATUS_SUCCESS && i < found && i < kAsk; ++i)
      if (results[i].state == CUBLAS_STATUS_SUCCESS && results[i].workspaceSize <= api.workspace_bytes)
        candidates.push_back(results[i].algo);
    if (candidates.empty())
      fail(fmt::format("cuBLASLt has no algorithm for M={} N={} K={} batch={} ({})", M, N, K, B, static_cast<int>(s)));
    plan->algo = candidates.front();
    const double flops = 2.0 * static_cast<double>(B) * static_cast<double>(M) * static_cast<double>(N) *
                         static_cast<double>(K);
    if (candidates.size() > 1 && !f64 && !cuda::reference_mode() && flops >= kMinTunedFlops &&
        kb::kernels::cublaslt_autotune_enabled())
      plan->algo = candidates[fastest_locked(cache, candidates, *plan, pa, pb, pc, fa, fb)];
    cache.algos.emplace(key, plan->algo);
  }
  std::vector<std::shared_ptr<void>> keep{out3.keep, a3.keep, m3.keep};
  steps.push_back([plan, pa, pb, pc, fa, fb, da, db, f64, keep](void* stream) -> Status {
    const Lt& api = lt();
    const void* al = f64 ? static_cast<const void*>(&da) : static_cast<const void*>(&fa);
    const void* be = f64 ? static_cast<const void*>(&db) : static_cast<const void*>(&fb);
    cublasStatus_t st = api.matmul(api.handle, plan->op, al, pa, plan->la, pb, plan->lb, be, pc, plan->lc, pc, plan->lc,
                                   &plan->algo, api.workspace, api.workspace_bytes, static_cast<cudaStream_t>(stream));
    if (st != CUBLAS_STATUS_SUCCESS) return make_error(Code::cuda_error, fmt::format("cublasLtMatmul: status {}", static_cast<int>(st)));
    return ok_status();
  });
  return sequence(std::move(steps));
}

DView batch1(DView v) {
  v.shape.insert(v.shape.begin(), 1);
  v.strides.insert(v.strides.begin(), 0);
  return v;
}

Launch mm(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& a = tensor_arg(c, 0, "self");
  const HostTensor& m = tensor_arg(c, 1, "mat2");
  if (a.rank() != 2 || m.rank() != 2) fail("mm needs 2-D tensors");
  return lt_matmul(batch1(o[0]), batch1(d.view(a)), batch1(d.view(m)), 1.0, 0.0);
}

Launch bmm(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& a = tensor_arg(c, 0, "self");
  const HostTensor& m = tensor_arg(c, 1, "mat2");
  if (a.rank() != 3 || m.rank() != 3) fail("bmm needs 3-D tensors");
  return lt_matmul(o[0], d.view(a), d.view(m), 1.0, 0.0);
}

Launch addmm(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& bias = tensor_arg(c, 0, "self");
  const HostTensor& a = tensor_arg(c, 1, "mat1");
  const HostTensor& m = tensor_arg(c, 2, "mat2");
  double beta = number_arg(c, 3, "beta", 1.0), alpha = number_arg(c, 4, "alpha", 1.0);
  if (a.rank() != 2 || m.rank() != 2) fail("addmm needs 2-D matrices");
  std::vector<Launch> steps;
  if (beta != 0) steps.push_back(cuda::copy(o[0], d.view(bias)));  // beta == 0 ignores self, as PyTorch does
  steps.push_back(lt_matmul(batch1(o[0]), batch1(d.view(a)), batch1(d.view(m)), alpha, beta));
  return sequence(std::move(steps));
}

const CudaOpInfo kOps[] = {
    {"aten.mm.default", mm},
    {"aten.bmm.default", bmm},
    {"aten.addmm.default", addmm},
};

}  // namespace

std::span<const CudaOpInfo> matmul_cuda_ops() { return kOps; }

Launch cuda::matmul(const DView& out, const DView& a, const DView& m, double alpha, double beta) {
  const std::size_t r = out.shape.size();
  if ((r != 2 && r != 3) || a.shape.size() != r || m.shape.size() != r) fail("matmul: views must all be 2-D or 3-D");
  // lt_matmul writes rows of N at a stride of N and batches M x N apart
  const std::int64_t M = out.shape[r - 2], N = out.shape[r - 1];
  const bool rows_ok = (N <= 1 || out.strides[r - 1] == 1) && (M <= 1 || out.strides[r - 2] == N);
  if (!rows_ok || (r == 3 && out.shape[0] > 1 && out.strides[0] != M * N))
    fail("matmul: the output must be contiguous");
  return r == 2 ? lt_matmul(batch1(out), batch1(a), batch1(m), alpha, beta) : lt_matmul(out, a, m, alpha, beta);
}

}  // namespace kb::backendbench::aten
