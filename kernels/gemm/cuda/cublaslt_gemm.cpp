// cuBLASLt through dlopen for the gemm solutions (see cublaslt_gemm.hpp).
//
// The mapping onto cuBLAS's column-major world, with no copies. Row-major
// C[M, N] = A[M, K] B[N, K]^T; the same bytes read column-major are
// C^T[N, M] = B A^T, where
//   - B's buffer, read column-major, is a K x N matrix (ld = K): op T gives B;
//   - A's buffer, read column-major, is a K x M matrix (ld = K) = A^T: op N;
//   - C's buffer, read column-major, is an N x M matrix (ld = N) = C^T.
// So cuBLASLt computes D = op(B buffer) * (A buffer) with transa = T
// (lda = K), transb = N (ldb = K), ldc = ldd = N: the "TN" layout, the one
// every Hopper kernel supports. Compute type CUBLAS_COMPUTE_32F, scale type
// CUDA_R_32F, alpha = 1 and beta = 0 on the host.
#include "cublaslt_gemm.hpp"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../../common/cublaslt_autotune.hpp"
#include "common/tuning.hpp"
#include "cublaslt_tiles.hpp"
#include "gemv.hpp"
#include "long_k.hpp"

namespace kb::kernels::gemm_cuda {
namespace {

// ---- the library ---------------------------------------------------------------

// Function pointers typed from cublasLt.h's declarations (decltype does not
// reference the symbols, so nothing is linked).
struct LtApi {
  void* lib = nullptr;
  std::string error;  // non-empty: unusable
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtGetStatusString) status_string = nullptr;  // optional
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  decltype(&cublasLtMatmulAlgoConfigGetAttribute) algo_config_get = nullptr;  // optional: describes algorithms
  decltype(&cublasLtMatmulAlgoConfigSetAttribute) algo_config_set = nullptr;  // optional: cluster variants
  decltype(&cublasLtMatmulAlgoCheck) algo_check = nullptr;                     // optional: cluster variants
  decltype(&cublasLtMatmulAlgoCapGetAttribute) algo_cap_get = nullptr;         // optional: tile variants
  decltype(&cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;  // optional: batched long-K chunks
};

template <class Fn>
bool bind(void* lib, const char* name, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", name);
  return fn != nullptr;
}

LtApi load_api() {
  LtApi api;
  std::string tried;
  for (const char* name : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}) {
    api.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (api.lib) break;
    const char* why = dlerror();
    tried += fmt::format("{}{}", tried.empty() ? "" : "; ", why ? why : name);
  }
  if (!api.lib) {
    api.error = fmt::format("cuBLASLt not found: {}", tried);
    return api;
  }
  std::string missing;
  bind(api.lib, "cublasLtCreate", api.create, missing);
  bind(api.lib, "cublasLtMatmulDescCreate", api.desc_create, missing);
  bind(api.lib, "cublasLtMatmulDescDestroy", api.desc_destroy, missing);
  bind(api.lib, "cublasLtMatmulDescSetAttribute", api.desc_set, missing);
  bind(api.lib, "cublasLtMatrixLayoutCreate", api.layout_create, missing);
  bind(api.lib, "cublasLtMatrixLayoutDestroy", api.layout_destroy, missing);
  bind(api.lib, "cublasLtMatmulPreferenceCreate", api.pref_create, missing);
  bind(api.lib, "cublasLtMatmulPreferenceDestroy", api.pref_destroy, missing);
  bind(api.lib, "cublasLtMatmulPreferenceSetAttribute", api.pref_set, missing);
  bind(api.lib, "cublasLtMatmulAlgoGetHeuristic", api.heuristic, missing);
  bind(api.lib, "cublasLtMatmul", api.matmul, missing);
  if (!missing.empty()) {
    api.error = fmt::format("cuBLASLt not found: the library lacks {}", missing);
    return api;  // the library stays open; harmless
  }
  std::string optional;
  bind(api.lib, "cublasLtGetStatusString", api.status_string, optional);
  bind(api.lib, "cublasLtMatmulAlgoConfigGetAttribute", api.algo_config_get, optional);
  bind(api.lib, "cublasLtMatmulAlgoConfigSetAttribute", api.algo_config_set, optional);
  bind(api.lib, "cublasLtMatmulAlgoCheck", api.algo_check, optional);
  bind(api.lib, "cublasLtMatmulAlgoCapGetAttribute", api.algo_cap_get, optional);
  bind(api.lib, "cublasLtMatrixLayoutSetAttribute", api.layout_set, optional);
  return api;
}

const LtApi& api() {
  static const LtApi instance = load_api();  // thread-safe static init
  return instance;
}

std::string lt_status(cublasStatus_t s) {
  const LtApi& lt = api();
  const char* text = lt.status_string ? lt.status_string(s) : nullptr;
  return text ? fmt::format("{} ({})", text, static_cast<int>(s)) : fmt::format("cublasStatus {}", static_cast<int>(s));
}

Error lt_error(const char* what, cublasStatus_t s) {
  Code code = s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_ARCH_MISMATCH ? Code::unsupported
              : s == CUBLAS_STATUS_ALLOC_FAILED                                    ? Code::out_of_memory
                                                                                   : Code::cuda_error;
  return make_error(code, fmt::format("{}: {}", what, lt_status(s)));
}

// The thread-block cluster shapes kb offers the autotuner besides the heuristic's own (add_cluster_variants).
constexpr std::uint16_t kClusterShapes[] = {CUBLASLT_CLUSTER_SHAPE_1x1x1, CUBLASLT_CLUSTER_SHAPE_2x1x1,
                                            CUBLASLT_CLUSTER_SHAPE_1x2x1};

std::string cluster_shape_name(std::uint16_t id) {
  switch (id) {
    case CUBLASLT_CLUSTER_SHAPE_1x1x1: return "1x1x1";
    case CUBLASLT_CLUSTER_SHAPE_2x1x1: return "2x1x1";
    case CUBLASLT_CLUSTER_SHAPE_1x2x1: return "1x2x1";
    case CUBLASLT_CLUSTER_SHAPE_2x2x1: return "2x2x1";
    case CUBLASLT_CLUSTER_SHAPE_4x1x1: return "4x1x1";
    case CUBLASLT_CLUSTER_SHAPE_1x4x1: return "1x4x1";
    case CUBLASLT_CLUSTER_SHAPE_4x2x1: return "4x2x1";
    case CUBLASLT_CLUSTER_SHAPE_2x4x1: return "2x4x1";
    case CUBLASLT_CLUSTER_SHAPE_4x4x1: return "4x4x1";
    case CUBLASLT_CLUSTER_SHAPE_8x1x1: return "8x1x1";
    case CUBLASLT_CLUSTER_SHAPE_1x8x1: return "1x8x1";
    default: return fmt::format("id {}", id);
  }
}

// "algo 21 tile 23 stages 12 split-K 1": cuBLASLt's configuration ids
// (cublasLt.h's enums), or "configuration unknown".
std::string describe_algo(const cublasLtMatmulAlgo_t& algo) {
  const LtApi& lt = api();
  if (!lt.algo_config_get) return "configuration unknown";
  std::int32_t id = -1, split_k = 1;
  std::uint32_t tile = 0, stages = 0;
  std::uint16_t cluster = 0;
  std::size_t written = 0;
  auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attr, void* value, std::size_t bytes) {
    return lt.algo_config_get(&algo, attr, value, bytes, &written) == CUBLAS_STATUS_SUCCESS;
  };
  if (!get(CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id)) return "configuration unknown";
  get(CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile);
  get(CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages);
  get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split_k, sizeof split_k);
  std::string text = fmt::format("algo {} tile {} stages {} split-K {}", id, tile, stages, split_k);
  if (get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster) && cluster != CUBLASLT_CLUSTER_SHAPE_AUTO)
    text += fmt::format(" cluster {}", cluster_shape_name(cluster));
  return text;
}

Error cuda_failure(const char* what, cudaError_t e) {
  return make_error(e == cudaErrorMemoryAllocation ? Code::out_of_memory : Code::cuda_error,
                    fmt::format("{}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e)));
}

// Elements between the fp32 parts of the batched long-K path: M x N rounded
// up to 64 floats, so that every part starts 256-byte aligned.
std::int64_t long_k_part_stride(std::int64_t M, std::int64_t N) { return (M * N + 63) / 64 * 64; }

// Whether kb_cublaslt_gemm runs p's long-K chunks one after the other (beta
// = 1) where they could be one batch: the static rule (long_k_one_by_one).
bool long_k_sequential(const GemmProblem& p) { return long_k_one_by_one(p.M, p.N); }

// The checks every cuBLASLt entry point makes first.
Status lt_usable(const GemmProblem& p) {
  const LtApi& lt = api();
  if (!lt.error.empty()) return make_error(Code::unsupported, lt.error);
  if (p.dtype != DType::float16 && p.dtype != DType::bfloat16)
    return make_error(Code::unsupported, fmt::format("cuBLASLt gemm handles float16/bfloat16, not {}", dtype_name(p.dtype)));
  return ok_status();
}

// ---- per-device handles, per-stream scratch, per-problem plans ----------------

struct Candidate {
  cublasLtMatmulAlgo_t algo{};
  int rank = 0;  // its place in the heuristic's answer (0: the heuristic's choice)
  std::uint16_t cluster = 0;  // non-zero: the heuristic's #rank with this cluster shape (add_cluster_variants)
  TileShape tile;             // rows non-zero: the heuristic's #rank with this tile shape (add_tile_variants)
  std::string label() const {
    std::string text = fmt::format("#{}", rank);
    if (tile.rows) text += fmt::format("/{}x{}", tile.rows, tile.cols);
    if (cluster) text += fmt::format("/{}", cluster_shape_name(cluster));
    return text;
  }
};

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr;  // describes B's buffer (cuBLAS "A")
  cublasLtMatrixLayout_t b = nullptr;  // describes A's buffer (cuBLAS "B")
  cublasLtMatrixLayout_t c = nullptr;  // C and D
  cublasLtMatmulAlgo_t algo{};
  // The heuristic's algorithms that fit kb's workspace, in its order, then
  // cluster-shape variants of its first few (add_cluster_variants) and tile
  // variants of its first (add_tile_variants); `algo` is the first until the
  // plan is tuned (tune_plan_locked), then the fastest.
  std::vector<Candidate> candidates;
  bool tuned = false;
  std::string problem;  // "bfloat16 M=.. N=.. K=.."
  std::string note;     // how `algo` was chosen, for cublaslt_plan_notes()
};

struct PlanKey {
  int device;
  std::int64_t M, N, K;
  int dtype;
  unsigned align_a, align_b, align_c;
  std::int64_t chunk = 0;  // long-K path (long_k.hpp): this chunk's K, fp32 C and D; 0: the whole product
  int batch = 1;           // long-K: this many chunks of `chunk` as one strided batch (C: kb's parts)
  bool operator==(const PlanKey&) const = default;
};

struct PlanKeyHash {
  std::size_t operator()(const PlanKey& k) const noexcept {
    std::size_t h = std::hash<std::int64_t>{}(k.M);
    auto mix = [&h](std::uint64_t v) { h ^= std::hash<std::uint64_t>{}(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    mix(static_cast<std::uint64_t>(k.N));
    mix(static_cast<std::uint64_t>(k.K));
    mix((static_cast<std::uint64_t>(k.device) << 8) | static_cast<std::uint64_t>(k.dtype));
    mix((std::uint64_t{k.align_a} << 32) ^ (std::uint64_t{k.align_b} << 16) ^ k.align_c);
    mix(static_cast<std::uint64_t>(k.chunk));
    mix(static_cast<std::uint64_t>(k.batch));
    return h;
  }
};

struct State {
  std::mutex mu;
  std::map<int, cublasLtHandle_t> handles;                         // device -> handle
  std::map<std::pair<int, void*>, std::unique_ptr<StreamScratch>> scratch;  // (device, stream)
  std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> plans;
  std::map<std::pair<int, void*>, std::pair<void*, std::size_t>> acc32;  // (device, stream) -> long-K fp32 buffer
  std::map<std::pair<int, void*>, std::pair<void*, std::size_t>> wgmma_ws;  // (device, stream) -> wgmma_gemm's
};

// Leaked on purpose: handles, descriptors and device memory live until the
// process exits (destroying them from a static destructor could run after
// the CUDA runtime or cuBLASLt has shut down).
State& state() {
  static State* s = new State;
  return *s;
}

// Largest power of two (<= 256) dividing the address: the alignment the
// heuristic may assume (its default assumption is 256).
unsigned alignment_of(const void* p) {
  auto v = reinterpret_cast<std::uintptr_t>(p);
  if (v == 0) return 256;
  std::uintptr_t low = v & (~v + 1);
  return low >= 256 ? 256u : static_cast<unsigned>(low);
}

Result<cublasLtHandle_t> handle_locked(State& st, int device) {
  if (auto it = st.handles.find(device); it != st.handles.end()) return it->second;
  // cuBLASLt binds to the current context; make sure the runtime has made the
  // device's primary context current on this thread.
  if (cudaError_t e = cudaFree(nullptr); e != cudaSuccess) return cuda_failure("cudaFree(0)", e);
  cublasLtHandle_t h = nullptr;
  if (cublasStatus_t s = api().create(&h); s != CUBLAS_STATUS_SUCCESS) return lt_error("cublasLtCreate", s);
  st.handles.emplace(device, h);
  return h;
}

void destroy_plan(const Plan& p) {
  const LtApi& lt = api();
  if (p.a) lt.layout_destroy(p.a);
  if (p.b) lt.layout_destroy(p.b);
  if (p.c) lt.layout_destroy(p.c);
  if (p.op) lt.desc_destroy(p.op);
}

// Cluster-shape variants of the heuristic's first few algorithms, for the autotuner to time beside them. On an
// H200 at M = 256 (a sweep over all 3138 configurations cuBLASLt accepts
// for N = K = 4096) the 12 fastest configurations were the heuristic's own algorithm 66 kernels with an
// explicit cluster shape (1x1x1, 2x1x1, 1x2x1), the best 3% faster than the best of the heuristic's 8 in that
// sweep's timing. Only for problems of at most about two waves of 128 x 128 output tiles (M x N <= 4M
// elements): where the tiles are few, how they are grouped into clusters decides how the SMs share the weight
// reads; larger problems keep the heuristic's list, whose autotuning already costs several milliseconds a
// candidate there.
// Measured on an H200 (M = 256, 1024, 4096, 84 shapes): the same median time with and without them, and up to
// 11% faster on the shapes where a variant wins the tuning (2048 x 4096 at M = 256: 0.894).
constexpr int kClusterVariantsOf = 3;                     // the heuristic's first three algorithms
constexpr std::int64_t kVariantsMaxOutput = 1 << 22;  // M x N elements, for cluster and tile variants alike

// Whether the autotuner adds variants for this problem: whole products (not long-K chunks) of at most
// kVariantsMaxOutput outputs.
bool variants_apply(const PlanKey& key) { return key.chunk == 0 && key.M * key.N <= kVariantsMaxOutput; }

// The same configuration as one already listed (another rank may be this variant) is timed once.
void add_unless_listed(Plan& plan, const Candidate& variant) {
  for (const Candidate& c : plan.candidates)
    if (std::memcmp(c.algo.data, variant.algo.data, sizeof variant.algo.data) == 0) return;
  plan.candidates.push_back(variant);
}

// `base` with cluster shape `shape` (CUBLASLT_CLUSTER_SHAPE_AUTO: as it is) and, when tile.rows is non-zero, that
// tile, if cuBLASLt accepts it for this problem within the workspace.
void add_variant(cublasLtHandle_t handle, Plan& plan, const Candidate& base, std::uint16_t shape, TileShape tile,
                 std::uint32_t tile_id, std::size_t workspace_bytes) {
  const LtApi& lt = api();
  Candidate variant{base.algo, base.rank, shape, tile};
  cublasLtMatmulHeuristicResult_t check{};
  if ((tile.rows && lt.algo_config_set(&variant.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile_id, sizeof tile_id) !=
                        CUBLAS_STATUS_SUCCESS) ||
      (shape != CUBLASLT_CLUSTER_SHAPE_AUTO &&
       lt.algo_config_set(&variant.algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &shape, sizeof shape) !=
           CUBLAS_STATUS_SUCCESS) ||
      lt.algo_check(handle, plan.op, plan.a, plan.b, plan.c, plan.c, &variant.algo, &check) != CUBLAS_STATUS_SUCCESS ||
      check.state != CUBLAS_STATUS_SUCCESS || check.workspaceSize > workspace_bytes)
    return;  // this kernel has no such configuration
  add_unless_listed(plan, variant);
}

void add_cluster_variants(cublasLtHandle_t handle, Plan& plan, const PlanKey& key, std::size_t workspace_bytes) {
  const LtApi& lt = api();
  if (!lt.algo_config_get || !lt.algo_config_set || !lt.algo_check) return;
  if (!variants_apply(key)) return;
  const std::size_t heuristic_count = plan.candidates.size();
  for (std::size_t i = 0; i < heuristic_count && i < kClusterVariantsOf; ++i) {
    const Candidate base = plan.candidates[i];
    std::uint16_t own = CUBLASLT_CLUSTER_SHAPE_AUTO;
    std::size_t written = 0;
    if (lt.algo_config_get(&base.algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &own, sizeof own, &written) !=
        CUBLAS_STATUS_SUCCESS)
      continue;  // a cuBLASLt without cluster shapes
    for (std::uint16_t shape : kClusterShapes)
      if (shape != own) add_variant(handle, plan, base, shape, TileShape{}, 0, workspace_bytes);
  }
}

// Tile variants: the heuristic's first algorithm with the (at most) kTileVariants tile shapes it supports that
// fill the SMs best (cublaslt_tiles.hpp: the fastest tile in three of four problems swept at M = 128 / 256 on
// an H200), each with its own cluster shape and the three of kClusterShapes. Same problem limit as the cluster
// variants: where the tiles are few, how many there are against the SMs decides how many sit idle.
// Measured on an H200 with and without them (M = 128-4096): the same median time, and 0.953-0.995 of the time
// without where a tile variant wins the tuning. They are offered on few problems (7 of 120 plans at M = 128-8192),
// so they cost little tuning time.
constexpr std::size_t kTileVariants = 2;

// The shape of a cuBLASLt tile id, or {0, 0} outside KB_LT_TILE_SHAPES.
TileShape tile_shape(std::uint32_t id) {
  switch (id) {
#define KB_LT_TILE_CASE(rows, cols) \
  case CUBLASLT_MATMUL_TILE_##rows##x##cols: return TileShape{rows, cols};
    KB_LT_TILE_SHAPES(KB_LT_TILE_CASE)
#undef KB_LT_TILE_CASE
    default: return TileShape{};
  }
}

void add_tile_variants(cublasLtHandle_t handle, Plan& plan, const PlanKey& key, std::size_t workspace_bytes) {
  const LtApi& lt = api();
  if (!lt.algo_config_get || !lt.algo_config_set || !lt.algo_check || !lt.algo_cap_get) return;
  if (!variants_apply(key) || plan.candidates.empty()) return;
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, key.device) != cudaSuccess || sms <= 0) {
    (void)cudaGetLastError();
    return;
  }
  const Candidate base = plan.candidates.front();
  std::size_t bytes = 0, written = 0;
  std::uint32_t own = 0;
  if (lt.algo_config_get(&base.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &own, sizeof own, &written) !=
          CUBLAS_STATUS_SUCCESS ||
      lt.algo_cap_get(&base.algo, CUBLASLT_ALGO_CAP_TILE_IDS, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS ||
      bytes < sizeof(std::uint32_t))
    return;
  std::vector<std::uint32_t> ids(bytes / sizeof(std::uint32_t));
  if (lt.algo_cap_get(&base.algo, CUBLASLT_ALGO_CAP_TILE_IDS, ids.data(), ids.size() * sizeof(std::uint32_t),
                      &bytes) != CUBLAS_STATUS_SUCCESS)
    return;
  std::vector<std::uint32_t> offered_ids;
  std::vector<TileShape> offered;
  for (std::uint32_t id : ids)
    if (const TileShape shape = tile_shape(id); id != own && shape.rows) {
      offered_ids.push_back(id);
      offered.push_back(shape);
    }
  // cuBLAS's m is kb's N, its n kb's M (the mapping at the top of this file).
  for (std::size_t i : wave_fit_tiles(key.N, key.M, offered, tile_shape(own), sms, kTileVariants)) {
    add_variant(handle, plan, base, CUBLASLT_CLUSTER_SHAPE_AUTO, offered[i], offered_ids[i], workspace_bytes);
    for (std::uint16_t shape : kClusterShapes)
      add_variant(handle, plan, base, shape, offered[i], offered_ids[i], workspace_bytes);
  }
}

Result<std::unique_ptr<Plan>> make_plan(cublasLtHandle_t handle, const PlanKey& key, std::size_t workspace_bytes) {
  const LtApi& lt = api();
  const cudaDataType_t type = key.dtype == static_cast<int>(DType::bfloat16) ? CUDA_R_16BF : CUDA_R_16F;
  auto plan = std::make_unique<Plan>();
  struct Guard {
    Plan* p;
    ~Guard() {
      if (p) destroy_plan(*p);
    }
  } guard{plan.get()};

  if (auto s = lt.desc_create(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F); s != CUBLAS_STATUS_SUCCESS)
    return lt_error("cublasLtMatmulDescCreate", s);
  const std::int32_t trans_a = CUBLAS_OP_T;
  const std::int32_t trans_b = CUBLAS_OP_N;
  if (auto s = lt.desc_set(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a); s != CUBLAS_STATUS_SUCCESS)
    return lt_error("cublasLtMatmulDescSetAttribute(TRANSA)", s);
  if (auto s = lt.desc_set(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b); s != CUBLAS_STATUS_SUCCESS)
    return lt_error("cublasLtMatmulDescSetAttribute(TRANSB)", s);

  const auto M = static_cast<std::uint64_t>(key.M);
  const auto N = static_cast<std::uint64_t>(key.N);
  // A chunk of the long-K path reads K columns [k0, k0 + chunk) of A and B
  // (rows still key.K apart) and writes fp32.
  const auto K = static_cast<std::uint64_t>(key.chunk > 0 ? key.chunk : key.K);
  const cudaDataType_t c_type = key.chunk > 0 ? CUDA_R_32F : type;
  if (auto s = lt.layout_create(&plan->a, type, K, N, key.K); s != CUBLAS_STATUS_SUCCESS)
    return lt_error("cublasLtMatrixLayoutCreate(B as K x N)", s);
  if (auto s = lt.layout_create(&plan->b, type, K, M, key.K); s != CUBLAS_STATUS_SUCCESS)
    return lt_error("cublasLtMatrixLayoutCreate(A as K x M)", s);
  if (auto s = lt.layout_create(&plan->c, c_type, N, M, key.N); s != CUBLAS_STATUS_SUCCESS)
    return lt_error("cublasLtMatrixLayoutCreate(C as N x M)", s);
  if (key.batch > 1) {
    // Chunk i reads K columns [i chunk, (i + 1) chunk) of A and B and writes
    // fp32 part i of kb's buffer (long_k_part_stride elements apart).
    if (!lt.layout_set) return make_error(Code::unsupported, "cuBLASLt lacks cublasLtMatrixLayoutSetAttribute");
    const std::int32_t count = key.batch;
    const std::int64_t ab_offset = key.chunk, c_offset = long_k_part_stride(key.M, key.N);
    for (auto [layout, offset] : {std::pair{plan->a, ab_offset}, {plan->b, ab_offset}, {plan->c, c_offset}}) {
      if (auto s = lt.layout_set(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
          s != CUBLAS_STATUS_SUCCESS)
        return lt_error("cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)", s);
      if (auto s = lt.layout_set(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offset, sizeof offset);
          s != CUBLAS_STATUS_SUCCESS)
        return lt_error("cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)", s);
    }
  }

  cublasLtMatmulPreference_t pref = nullptr;
  if (auto s = lt.pref_create(&pref); s != CUBLAS_STATUS_SUCCESS) return lt_error("cublasLtMatmulPreferenceCreate", s);
  struct PrefGuard {
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { api().pref_destroy(p); }
  } pref_guard{pref};
  const std::uint64_t max_ws = workspace_bytes;
  // The default maximum workspace is 0, which rules out split-K algorithms.
  if (auto s = lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws);
      s != CUBLAS_STATUS_SUCCESS)
    return lt_error("cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)", s);
  // Split-K partial sums reduced in the output type (fp16/bf16, in place or not) lose up to half an output ulp
  // of the partial sums: a near-zero element of a K=4096 product was off by 0.01 on an H100. Keep the
  // reductions in fp32 (the compute type), as a trusted reference needs.
  const std::uint32_t reduction_mask = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  if (auto s = lt.pref_set(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction_mask, sizeof reduction_mask);
      s != CUBLAS_STATUS_SUCCESS)
    return lt_error("cublasLtMatmulPreferenceSetAttribute(REDUCTION_SCHEME_MASK)", s);
  const std::uint32_t align_a = key.align_b, align_b = key.align_a, align_c = key.align_c;  // cuBLAS A = our B
  const std::pair<cublasLtMatmulPreferenceAttributes_t, std::uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c},
  };
  for (const auto& [attr, value] : aligns)
    if (auto s = lt.pref_set(pref, attr, &value, sizeof value); s != CUBLAS_STATUS_SUCCESS)
      return lt_error("cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)", s);

  cublasLtMatmulHeuristicResult_t results[kLtTuneCandidates]{};
  int count = 0;
  cublasStatus_t s =
      lt.heuristic(handle, plan->op, plan->a, plan->b, plan->c, plan->c, pref, kLtTuneCandidates, results, &count);
  std::string why = s != CUBLAS_STATUS_SUCCESS ? lt_status(s) : std::string("no algorithm returned");
  for (int i = 0; s == CUBLAS_STATUS_SUCCESS && i < count && i < kLtTuneCandidates; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS) {
      why = lt_status(results[i].state);
    } else if (results[i].workspaceSize > workspace_bytes) {  // the preference should rule these out already
      why = fmt::format("algorithm wants {} bytes of workspace, more than {}", results[i].workspaceSize, workspace_bytes);
    } else {
      plan->candidates.push_back(Candidate{results[i].algo, i, CUBLASLT_CLUSTER_SHAPE_AUTO, TileShape{}});
    }
  }
  if (plan->candidates.empty())
    return make_error(Code::unsupported,
                      fmt::format("cuBLASLt has no algorithm for {} gemm M={} N={} K={} (alignment A {} B {} C {}): {}",
                                  dtype_name(static_cast<DType>(key.dtype)), key.M, key.N, key.K, key.align_a,
                                  key.align_b, key.align_c, why));
  if (cublaslt_autotune_enabled()) {
    add_cluster_variants(handle, *plan, key, workspace_bytes);
    add_tile_variants(handle, *plan, key, workspace_bytes);
  }
  plan->algo = plan->candidates.front().algo;
  plan->problem = fmt::format("{} M={} N={} K={}", dtype_name(static_cast<DType>(key.dtype)), key.M, key.N, key.K);
  if (key.batch > 1) plan->problem += fmt::format(" (long-K: {} chunks of {} as one batch, fp32 out)", key.batch, key.chunk);
  else if (key.chunk > 0) plan->problem += fmt::format(" (long-K chunk of {}, fp32 out)", key.chunk);
  const std::string& problem = plan->problem;
  if (!cublaslt_autotune_enabled()) {
    plan->tuned = true;
    plan->note = fmt::format("{}: the heuristic's first of {} ({}; autotuning off: cublaslt_autotune=0)", problem,
                             plan->candidates.size(), describe_algo(plan->algo));
  } else if (plan->candidates.size() == 1) {
    plan->tuned = true;
    plan->note = fmt::format("{}: the heuristic's only algorithm ({})", problem, describe_algo(plan->algo));
  } else {
    plan->note =
        fmt::format("{}: the heuristic's first of {} candidates, not timed yet", problem, plan->candidates.size());
  }
  guard.p = nullptr;
  return plan;
}

// Times the plan's candidates on the caller's operands and stream and keeps
// the fastest (kernels/common/cublaslt_autotune.hpp): the first call of a
// problem on a stream that is not being captured, so in a solution's
// correctness call, never inside timed samples; a captured first call leaves
// the heuristic's choice until a later uncaptured call. Samples are cold (L2
// flushed), as kb times solutions. beta = 0: C is only written, and the
// caller's own run overwrites it. If no candidate runs, the heuristic's
// choice stays.
Status tune_plan_locked(cublasLtHandle_t handle, Plan& plan, const void* A, const void* B, void* C, void* stream_ptr,
                        const StreamScratch& scratch) {
  const LtApi& lt = api();
  auto capturing = cuda::stream_is_capturing(stream_ptr);
  if (!capturing) return capturing.error();
  if (*capturing) return ok_status();  // tune on a later, uncaptured call
  const float alpha = 1.f, beta = 0.f;
  auto run = [&](int c, void* s) -> Status {
    const cublasLtMatmulAlgo_t& algo = plan.candidates[static_cast<std::size_t>(c)].algo;
    cublasStatus_t st = lt.matmul(handle, plan.op, &alpha, B, plan.a, A, plan.b, &beta, C, plan.c, C, plan.c, &algo,
                                  scratch.lt_workspace, scratch.lt_bytes, static_cast<cudaStream_t>(s));
    return st == CUBLAS_STATUS_SUCCESS ? ok_status() : lt_error("cublasLtMatmul (autotuning)", st);
  };
  auto ms = median_ms_of_candidates(static_cast<int>(plan.candidates.size()), run, stream_ptr, /*cold_l2=*/true);
  if (!ms) return ms.error();
  std::size_t best = plan.candidates.size();
  for (std::size_t i = 0; i < ms->size(); ++i)
    if ((*ms)[i] >= 0 && (best == plan.candidates.size() || (*ms)[i] < (*ms)[best])) best = i;
  std::string times;  // "#0 0.0502, #1 0.0491, ..." by heuristic rank
  for (std::size_t i = 0; i < ms->size(); ++i)
    times += fmt::format("{}{} {}", i ? ", " : "", plan.candidates[i].label(),
                         (*ms)[i] >= 0 ? fmt::format("{:.4f}", (*ms)[i]) : std::string("failed"));
  if (best == plan.candidates.size()) {
    plan.note = fmt::format("{}: the heuristic's first; none of its {} algorithms ran when timed", plan.problem,
                            plan.candidates.size());
  } else {
    plan.algo = plan.candidates[best].algo;
    plan.note = fmt::format("{}: autotuned: the heuristic's {} ({}) at {:.4f} ms; median ms of {} cold samples "
                            "(#0: the heuristic's choice; #r/shape: #r with that cluster shape; #r/RxC: with an R x C tile): {}",
                            plan.problem, plan.candidates[best].label(), describe_algo(plan.algo), (*ms)[best],
                            kLtTuneRounds * kLtTuneSamples, times);
  }
  plan.tuned = true;
  if (log::enabled(log::LogLevel::info)) log::emit(log::LogLevel::info, "kb cuBLASLt plan: " + plan.note);
  return ok_status();
}

Result<const StreamScratch*> scratch_locked(State& st, int device, void* stream) {
  auto key = std::make_pair(device, stream);
  if (auto it = st.scratch.find(key); it != st.scratch.end()) return it->second.get();
  // First gemm on this stream: one allocation (cudaMalloc may synchronize the
  // device), outside any timed region once the stream is warmed up. Under
  // stream capture cudaMalloc is not allowed (and would invalidate the
  // capture): refuse with the reason, the capture intact.
  auto capturing = cuda::stream_is_capturing(stream);
  if (!capturing) return capturing.error();
  if (*capturing)
    return make_error(Code::unsupported,
                      "gemm: this stream's workspace is allocated by its first gemm, which must run outside stream "
                      "capture; run one gemm on the stream before capturing it");
  const std::size_t total = kLtWorkspaceBytes + kGemvScratchBytes;
  void* mem = nullptr;
  if (cudaError_t e = cudaMalloc(&mem, total); e != cudaSuccess)
    return cuda_failure("allocating gemm workspace (cudaMalloc)", e);
  auto* base = static_cast<unsigned char*>(mem);
  // The gemv arrival counters must start at zero; zero on the stream itself
  // so that the first kernel on it (any stream flavour) sees it.
  if (cudaError_t e = cudaMemsetAsync(base + kLtWorkspaceBytes, 0, kGemvScratchBytes, static_cast<cudaStream_t>(stream));
      e != cudaSuccess) {
    cudaFree(mem);
    return cuda_failure("zeroing gemm workspace (cudaMemsetAsync)", e);
  }
  auto s = std::make_unique<StreamScratch>();
  s->device = device;
  s->lt_workspace = base;
  s->lt_bytes = kLtWorkspaceBytes;
  s->gemv_scratch = base + kLtWorkspaceBytes;
  s->gemv_bytes = kGemvScratchBytes;
  const StreamScratch* out = s.get();
  st.scratch.emplace(key, std::move(s));
  return out;
}

// The device's handle and the stream's scratch (created on first use).
Status context_locked(State& st, int device, void* stream, cublasLtHandle_t* handle, const StreamScratch** scratch) {
  auto h = handle_locked(st, device);
  if (!h) return h.error();
  auto s = scratch_locked(st, device, stream);
  if (!s) return s.error();
  *handle = *h;
  *scratch = *s;
  return ok_status();
}

// The plan of `key`, made on first use and tuned on the operands it will run
// with (A, B, C as cuBLAS sees this problem's buffers) when not tuned yet.
Result<Plan*> plan_locked(State& st, cublasLtHandle_t handle, const PlanKey& key, const StreamScratch& scratch,
                          const void* A, const void* B, void* C, void* stream) {
  Plan* plan = nullptr;
  if (auto it = st.plans.find(key); it != st.plans.end()) {
    plan = it->second.get();
  } else {
    auto made = make_plan(handle, key, scratch.lt_bytes);
    if (!made) return made.error();
    plan = st.plans.emplace(key, std::move(*made)).first->second.get();
  }
  if (!plan->tuned) KB_TRY(tune_plan_locked(handle, *plan, A, B, C, stream, scratch));
  return plan;
}

// A per-(device, stream) buffer of at least `bytes` (`what` names it in
// errors), grown only outside stream capture: the previous one freed after the
// stream's work (cudaFree synchronizes too), the new one zeroed if `zeroed`.
Result<void*> grow_buffer_locked(std::pair<void*, std::size_t>& slot, void* stream, std::size_t bytes,
                                 const char* what, bool zeroed) {
  if (slot.second >= bytes) return slot.first;
  auto capturing = cuda::stream_is_capturing(stream);
  if (!capturing) return capturing.error();
  if (*capturing)
    return make_error(Code::unsupported,
                      fmt::format("long-K gemm: its {} ({} bytes) is allocated on the first call of this size outside "
                                  "stream capture; run the product once before capturing it",
                                  what, bytes));
  if (slot.first) {
    if (cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream)); e != cudaSuccess)
      return cuda_failure(fmt::format("cudaStreamSynchronize (before replacing the long-K gemm's {})", what).c_str(), e);
    cudaFree(slot.first);
  }
  slot = {nullptr, 0};
  void* mem = nullptr;
  if (cudaError_t e = cudaMalloc(&mem, bytes); e != cudaSuccess)
    return cuda_failure(fmt::format("allocating the long-K gemm's {} (cudaMalloc)", what).c_str(), e);
  if (zeroed) {
    // cudaMemset runs on the legacy stream, which a non-blocking `stream` does not wait for: wait here.
    cudaError_t e = cudaMemset(mem, 0, bytes);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      cudaFree(mem);
      return cuda_failure(fmt::format("zeroing the long-K gemm's {}", what).c_str(), e);
    }
  }
  slot = {mem, bytes};
  return mem;
}

// The fp32 buffer of the long-K path for (device, stream), at least `bytes`.
Result<float*> acc32_locked(State& st, int device, void* stream, std::size_t bytes) {
  auto buf = grow_buffer_locked(st.acc32[{device, stream}], stream, bytes, "fp32 buffer", false);
  if (!buf) return buf.error();
  return static_cast<float*>(*buf);
}

// K > kLongK, K a multiple of 8 x chunks: the chunks as one strided-batched
// product into `chunks` fp32 parts of kb's buffer, then one kernel that adds
// the parts in chunk order (the same fp32 sums as the sequential path's
// beta = 1) and rounds. One launch fills the GPU with every chunk's tiles,
// where the sequential chunks each fill it alone (5376 x 21504 at M = 512:
// 84 tiles of 128 x 256 per chunk on 132 SMs).
Status long_k_batched_gemm(const GemmProblem& p, int device, std::int64_t chunks) {
  const LtApi& lt = api();
  const std::int64_t chunk = p.K / chunks;
  const std::int64_t part_stride = long_k_part_stride(p.M, p.N);
  cublasLtHandle_t handle = nullptr;
  const StreamScratch* scratch = nullptr;
  float* acc = nullptr;
  Plan* plan = nullptr;
  cublasLtMatmulAlgo_t algo{};
  {
    State& st = state();
    std::lock_guard<std::mutex> lock(st.mu);
    KB_TRY(context_locked(st, device, p.stream, &handle, &scratch));
    auto buf = acc32_locked(st, device, p.stream, static_cast<std::size_t>(chunks * part_stride) * sizeof(float));
    if (!buf) return buf.error();
    acc = *buf;
    // Every chunk's start must meet the alignment the plan assumes.
    const auto* a1 = static_cast<const unsigned char*>(p.A) + chunk * 2;
    const auto* b1 = static_cast<const unsigned char*>(p.B) + chunk * 2;
    const PlanKey key{device,
                      p.M,
                      p.N,
                      p.K,
                      static_cast<int>(p.dtype),
                      std::min(alignment_of(p.A), alignment_of(a1)),
                      std::min(alignment_of(p.B), alignment_of(b1)),
                      256,
                      chunk,
                      static_cast<int>(chunks)};
    auto made = plan_locked(st, handle, key, *scratch, p.A, p.B, acc, p.stream);
    if (!made) return made.error();
    plan = *made;
    algo = plan->algo;
  }
  const float alpha = 1.f, zero = 0.f;
  auto stream = static_cast<cudaStream_t>(p.stream);
  cublasStatus_t s = lt.matmul(handle, plan->op, &alpha, p.B, plan->a, p.A, plan->b, &zero, acc, plan->c, acc,
                               plan->c, &algo, scratch->lt_workspace, scratch->lt_bytes, stream);
  if (s != CUBLAS_STATUS_SUCCESS) return lt_error("cublasLtMatmul (long-K chunks as one batch)", s);
  if (int e = cast_f32(acc, static_cast<int>(chunks), part_stride, p.C, p.M * p.N, p.dtype == DType::bfloat16,
                       p.stream);
      e != 0)
    return cuda_failure("long-K gemm: adding the chunks and rounding to the output dtype", static_cast<cudaError_t>(e));
  return ok_status();
}

// K > kLongK: the sum in chunks of at most kChunkK through an fp32 buffer
// (long_k.hpp says why), then one rounding to the output dtype; as one batch
// where the chunks can be equal (long_k_batched_gemm), else one after the
// other, accumulated with beta = 1.
// `sequential`: one after the other even where they could be one batch.
Status long_k_gemm(const GemmProblem& p, int device, bool sequential) {
  const LtApi& lt = api();
  const std::int64_t chunks = (p.K + kChunkK - 1) / kChunkK;
  if (long_k_batches(p) && !sequential) return long_k_batched_gemm(p, device, chunks);
  const std::int64_t chunk = ((p.K + chunks - 1) / chunks + 7) / 8 * 8;  // 16-byte steps along K
  struct Step {
    const unsigned char* a;
    const unsigned char* b;
    Plan* plan;
    cublasLtMatmulAlgo_t algo;
  };
  // The steps in place up to kInlineSteps chunks (K up to 8 x kChunkK): the
  // race may make this form a shape's hot path, which allocates nothing on
  // the host (tests/gpu/test_hot_path.cpp).
  constexpr std::int64_t kInlineSteps = 8;
  Step inline_steps[kInlineSteps];
  std::vector<Step> more_steps;
  const std::int64_t step_count = (p.K + chunk - 1) / chunk;
  if (step_count > kInlineSteps) more_steps.resize(static_cast<std::size_t>(step_count));
  Step* const steps = step_count > kInlineSteps ? more_steps.data() : inline_steps;
  std::int64_t filled = 0;
  cublasLtHandle_t handle = nullptr;
  const StreamScratch* scratch = nullptr;
  float* acc = nullptr;
  {
    State& st = state();
    std::lock_guard<std::mutex> lock(st.mu);
    KB_TRY(context_locked(st, device, p.stream, &handle, &scratch));
    auto buf = acc32_locked(st, device, p.stream, static_cast<std::size_t>(p.M * p.N) * sizeof(float));
    if (!buf) return buf.error();
    acc = *buf;
    for (std::int64_t k0 = 0; k0 < p.K; k0 += chunk) {
      const auto* a = static_cast<const unsigned char*>(p.A) + k0 * 2;
      const auto* b = static_cast<const unsigned char*>(p.B) + k0 * 2;
      const PlanKey key{device, p.M, p.N, p.K, static_cast<int>(p.dtype), alignment_of(a), alignment_of(b), 256,
                        std::min(chunk, p.K - k0)};
      // Tuned on kb's fp32 buffer with beta = 0; the real run below starts over with beta = 0.
      auto plan = plan_locked(st, handle, key, *scratch, a, b, acc, p.stream);
      if (!plan) return plan.error();
      steps[filled++] = Step{a, b, *plan, (*plan)->algo};
    }
  }
  const float alpha = 1.f, zero = 0.f, one = 1.f;
  auto stream = static_cast<cudaStream_t>(p.stream);
  for (std::int64_t i = 0; i < filled; ++i) {
    const Step& st = steps[i];
    cublasStatus_t s = lt.matmul(handle, st.plan->op, &alpha, st.b, st.plan->a, st.a, st.plan->b, i ? &one : &zero,
                                 acc, st.plan->c, acc, st.plan->c, &st.algo, scratch->lt_workspace, scratch->lt_bytes,
                                 stream);
    if (s != CUBLAS_STATUS_SUCCESS) return lt_error("cublasLtMatmul (long-K chunk)", s);
  }
  if (int e = cast_f32(acc, 1, p.M * p.N, p.C, p.M * p.N, p.dtype == DType::bfloat16, p.stream); e != 0)
    return cuda_failure("long-K gemm: rounding to the output dtype", static_cast<cudaError_t>(e));
  return ok_status();
}

}  // namespace

Result<void*> wgmma_workspace(void* stream, std::size_t bytes) {
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return cuda_failure("cudaGetDevice", e);
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return grow_buffer_locked(st.wgmma_ws[{device, stream}], stream, bytes, "workspace", true);
}

const std::string& cublaslt_unavailable() { return api().error; }

Result<const StreamScratch*> stream_scratch(void* stream) {
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return cuda_failure("cudaGetDevice", e);
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return scratch_locked(st, device, stream);
}

bool long_k_batches(const GemmProblem& p) {
  const std::int64_t chunks = (p.K + kChunkK - 1) / kChunkK;
  return api().layout_set && chunks > 1 && p.K % (chunks * 8) == 0;
}

Status cublaslt_long_k_gemm(const GemmProblem& p, bool sequential) {
  if (p.K <= kLongK || p.M == 0 || p.N == 0) return cublaslt_gemm(p);
  KB_TRY(lt_usable(p));
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return cuda_failure("cudaGetDevice", e);
  return long_k_gemm(p, device, sequential);
}

Status cublaslt_gemm(const GemmProblem& p) {
  const LtApi& lt = api();
  KB_TRY(lt_usable(p));
  if (p.M == 0 || p.N == 0) return ok_status();
  if (p.K == 0) {
    // C = 0 (+0.0 is all-zero bits in float16 and bfloat16).
    if (cudaError_t e = cudaMemsetAsync(p.C, 0, static_cast<std::size_t>(p.M * p.N) * 2, static_cast<cudaStream_t>(p.stream));
        e != cudaSuccess)
      return cuda_failure("cudaMemsetAsync", e);
    return ok_status();
  }
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return cuda_failure("cudaGetDevice", e);
  if (p.K > kLongK) return long_k_gemm(p, device, long_k_sequential(p));
  const PlanKey key{device,          p.M, p.N, p.K, static_cast<int>(p.dtype), alignment_of(p.A), alignment_of(p.B),
                    alignment_of(p.C)};

  cublasLtHandle_t handle = nullptr;
  const StreamScratch* scratch = nullptr;
  Plan* plan = nullptr;
  cublasLtMatmulAlgo_t algo{};
  {
    State& st = state();
    std::lock_guard<std::mutex> lock(st.mu);
    KB_TRY(context_locked(st, device, p.stream, &handle, &scratch));
    auto made = plan_locked(st, handle, key, *scratch, p.A, p.B, p.C, p.stream);
    if (!made) return made.error();
    plan = *made;
    algo = plan->algo;  // copied under the lock: a later tuning may change it
  }
  // Plans and scratch are never freed; descriptors never change: use them unlocked.
  const float alpha = 1.f, beta = 0.f;
  cublasStatus_t s = lt.matmul(handle, plan->op, &alpha, p.B, plan->a, p.A, plan->b, &beta, p.C, plan->c, p.C,
                               plan->c, &algo, scratch->lt_workspace, scratch->lt_bytes,
                               static_cast<cudaStream_t>(p.stream));
  if (s != CUBLAS_STATUS_SUCCESS) return lt_error("cublasLtMatmul", s);
  return ok_status();
}

std::size_t cublaslt_plan_count() {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.plans.size();
}

std::vector<std::string> cublaslt_plan_notes() {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  std::vector<std::string> notes;
  for (const auto& [key, plan] : st.plans)
    notes.push_back(fmt::format("device {}: {}", key.device, plan->note));
  std::sort(notes.begin(), notes.end());
  return notes;
}

}  // namespace kb::kernels::gemm_cuda
