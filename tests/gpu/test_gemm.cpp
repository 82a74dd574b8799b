// GPU test of kb's CUDA gemm solutions (kernels/gemm/cuda/): kb_cuda_gemm,
// kb_cublaslt_gemm and kb_cuda_gemv against a CPU reference with float64
// accumulation, |out - ref| <= 1e-2 + 1e-2 |ref| element by element, NaN
// never passing.
//
// Shapes: N x K of real definitions (4096 x 4096, 128 x 2048, 256 x 7168,
// 28672 x 4096, 16384 x 3072 with small M) and awkward ones (N = 1000 with
// K = 520: the gemv splits 9 K steps 4 ways, the last step short; N = 8512
// with K = 256: a short last wave at M = 16, which kb_cuda_gemm hands to
// cuBLASLt; N = 97 with
// K = 72, a multiple of 8 but not of the kernel's 64-wide step; K = 70, not a multiple of 8: the
// gemv refuses it and kb_cuda_gemm falls back to cuBLASLt), M in {1, 3, 8,
// 16, 17, 128, 257}, N = 97 with K = 20488 and 28680 (the long-K path:
// two uneven chunks one after the other, and three equal chunks as one
// batch, through kb's fp32 buffer), float16 and bfloat16, plus a call with A misaligned by 2
// bytes (gemv refuses, cuBLASLt must cope), N = 136 with K = 20544 at M =
// 1030 (kb_cuda_gemm with each wgmma form forced by ForcedLongKForm: kb's wgmma kernel on Hopper), and the wgmma kernel called
// directly on awkward schedules (check_wgmma_direct). Every case runs twice with fresh
// random A (B fresh per shape), on a non-blocking stream, with C poisoned
// (NaN) before each run: the second run also checks that the gemv's split-K
// counters were left at zero and that cached plans still work. cuBLASLt
// plans are autotuned on their first call (the candidates write C before the
// real run does); one case (M = 129, 4096 x 4096) runs with
// KB_CUBLASLT_AUTOTUNE=0, and every plan's note is printed at the end: none
// may be left untimed or have had no candidate run. kb_cuda_gemm races the
// gemv against cuBLASLt on each small-M problem's first call
// (gemv_or_cublaslt.hpp) and its long-K forms on each long-K problem's
// (long_k_race.hpp): check_race and check_long_k_race cover capture and
// gemm_race=0, and every race's note must name the side whose median won.
//
// Without a usable device it prints "skipped: no CUDA device (<reason>)" and
// exits 77 (meson's skip code).
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../../kernels/gemm/cuda/cublaslt_gemm.hpp"
#include "../../kernels/gemm/cuda/gemv.hpp"
#include "../../kernels/gemm/cuda/gemv_or_cublaslt.hpp"
#include "../../kernels/gemm/cuda/gemm_cuda.hpp"
#include "../../kernels/gemm/cuda/long_k.hpp"
#include "../../kernels/gemm/cuda/long_k_race.hpp"
#include "../../kernels/gemm/cuda/race_file.hpp"
#include "../../kernels/gemm/cuda/wgmma_gemm.hpp"
#include "common/tuning.hpp"
#include "cuda/device.hpp"
#include "harness/implementation.hpp"
#include "tensor/convert.hpp"

namespace {

using namespace kb;

constexpr double kAtol = 1e-2;
constexpr double kRtol = 1e-2;

int g_failures = 0;

void fail(const std::string& what) {
  ++g_failures;
  std::printf("FAIL %s\n", what.c_str());
}

bool cuda_ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  fail(fmt::format("{}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e)));
  return false;
}

// splitmix64: fast, and good enough for test data.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float uniform() { return static_cast<float>(static_cast<double>(next() >> 11) * 0x1.0p-53 * 2.0 - 1.0); }
};

std::uint16_t to_bits(float v, DType t) { return t == DType::bfloat16 ? float_to_bf16(v) : float_to_half(v); }

// float value of every 16-bit pattern of t.
const std::vector<float>& table(DType t) {
  static const std::vector<float> f16 = [] {
    std::vector<float> v(65536);
    for (std::uint32_t i = 0; i < 65536; ++i) v[i] = half_to_float(static_cast<std::uint16_t>(i));
    return v;
  }();
  static const std::vector<float> b16 = [] {
    std::vector<float> v(65536);
    for (std::uint32_t i = 0; i < 65536; ++i) v[i] = bf16_to_float(static_cast<std::uint16_t>(i));
    return v;
  }();
  return t == DType::bfloat16 ? b16 : f16;
}

void random_fill(std::vector<std::uint16_t>& v, DType t, std::uint64_t seed) {
  Rng rng{seed};
  for (auto& x : v) x = to_bits(rng.uniform(), t);
}

// ref[m * N + n] = sum_k A[m, k] B[n, k] in float64, over all CPU threads.
std::vector<double> reference(const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b, DType t,
                              std::int64_t M, std::int64_t N, std::int64_t K) {
  const std::vector<float>& tab = table(t);
  std::vector<double> ad(static_cast<std::size_t>(M * K));
  for (std::size_t i = 0; i < ad.size(); ++i) ad[i] = tab[a[i]];
  std::vector<double> ref(static_cast<std::size_t>(M * N));
  const unsigned workers = std::max(1u, std::min(64u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      std::vector<double> row(static_cast<std::size_t>(K));
      for (std::int64_t n = w; n < N; n += workers) {
        const std::uint16_t* bn = b.data() + n * K;
        for (std::int64_t k = 0; k < K; ++k) row[k] = tab[bn[k]];
        for (std::int64_t m = 0; m < M; ++m) {
          const double* am = ad.data() + m * K;
          double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
          std::int64_t k = 0;
          for (; k + 4 <= K; k += 4) {
            s0 += am[k] * row[k];
            s1 += am[k + 1] * row[k + 1];
            s2 += am[k + 2] * row[k + 2];
            s3 += am[k + 3] * row[k + 3];
          }
          for (; k < K; ++k) s0 += am[k] * row[k];
          ref[m * N + n] = (s0 + s1) + (s2 + s3);
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  return ref;
}

Definition make_definition(std::int64_t N, std::int64_t K, DType t) {
  Definition d;
  d.name = fmt::format("gemm_n{}_k{}_{}", N, K, dtype_name(t));
  d.op_type = "gemm";
  auto axis = [](const char* name, AxisKind kind, std::int64_t value) {
    Axis a;
    a.name = name;
    a.kind = kind;
    a.value = value;
    return a;
  };
  auto tensor = [t](const char* name, const char* d0, const char* d1) {
    TensorSpec s;
    s.name = name;
    s.shape = std::vector<std::string>{d0, d1};
    s.dtype = t;
    return s;
  };
  d.axes = {axis("M", AxisKind::var, 0), axis("N", AxisKind::const_, N), axis("K", AxisKind::const_, K)};
  d.inputs = {tensor("A", "M", "K"), tensor("B", "N", "K")};
  d.outputs = {tensor("C", "M", "N")};
  d.reference =
      "import torch\n\n\ndef run(A, B):\n    # C = A @ B^T, accumulated in fp32 and rounded once to the output dtype.\n"
      "    return torch.matmul(A.float(), B.float().t()).to(A.dtype)\n";
  return d;
}

struct Shape {
  std::int64_t N, K;
  std::vector<std::int64_t> Ms;
};

// Device buffers of one shape, big enough for its largest M.
struct Buffers {
  void* a = nullptr;  // A, with 16 spare bytes for the misaligned case
  void* b = nullptr;
  void* c = nullptr;
  ~Buffers() {
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
  }
};

std::string plan_text(const Implementation& impl, DType t, std::int64_t M, std::int64_t N, std::int64_t K,
                      const void* a, const void* b) {
  using namespace kb::kernels::gemm_cuda;
  const bool gemv = impl.name == "kb_cuda_gemv" ||
                    (impl.name == "kb_cuda_gemm" && M <= 16 && K % 8 == 0 &&
                     (reinterpret_cast<std::uintptr_t>(a) | reinterpret_cast<std::uintptr_t>(b)) % 16 == 0);
  if (impl.name == "kb_cuda_gemm") {
    const std::string problem = fmt::format("{} M={} N={} K={}:", dtype_name(t), M, N, K);
    for (const std::string& note : gemm_race_notes())
      if (note.rfind(problem, 0) == 0) return "race: " + note.substr(problem.size() + 1);
  }
  if (impl.name == "kb_cuda_gemm" && K > kLongK && N % 8 == 0)
    if (const LongKForm* forced = ForcedLongKForm::current())
      return fmt::format("{} (forced; cuBLASLt chunks where it does not apply)", long_k_form_label(*forced));
  if (!gemv || M < 1 || M > kGemvMaxM || K % 8 != 0)
    return K > kLongK ? (impl.name == "kb_cuda_gemm" ? "long-K, not raced (one form applies)" : "cuBLASLt, long-K chunks")
                      : "cuBLASLt";
  GemmProblem p{t, M, N, K, a, b, reinterpret_cast<void*>(16), nullptr};
  GemvPlan plan;
  if (gemv_plan(p, kGemvScratchBytes, &plan) != 0) return "gemv (no plan)";
  if (impl.name == "kb_cuda_gemm" && plan.cublaslt_instead) return fmt::format("cuBLASLt ({})", plan.cublaslt_instead);
  return fmt::format("gemv {}x{} blocks of {} warps, {} rows{}{}", plan.row_blocks, plan.splits, plan.warps,
                     plan.rows_per_block, plan.balanced ? " at most (balanced)" : "", plan.bulk ? ", bulk copies" : "");
}

// The operands of one gemm call C[M, N] = A[M, K] @ B[N, K]^T on device
// memory, as a solution's run_cuda takes them (call() refers to this object:
// keep it alive while the call runs).
struct GemmCall {
  cuda::DeviceTensor A, B, C;
  cuda::DeviceArg inputs[2];
  cuda::DeviceTensor outputs[1];
  AxisValues axes;
  GemmCall(DType t, std::int64_t M, std::int64_t N, std::int64_t K, void* a, void* b, void* c)
      : A{t, {M, K}, a, static_cast<std::size_t>(M * K) * 2},
        B{t, {N, K}, b, static_cast<std::size_t>(N * K) * 2},
        C{t, {M, N}, c, static_cast<std::size_t>(M * N) * 2},
        inputs{{&A, std::nullopt}, {&B, std::nullopt}},
        outputs{C} {
    axes.values = {{"M", M}, {"N", N}, {"K", K}};
  }
  GemmCall(const GemmCall&) = delete;
  GemmCall& operator=(const GemmCall&) = delete;
  CudaCall call(const Definition& def, cudaStream_t stream) const { return CudaCall{def, axes, inputs, outputs, stream}; }
};

// Runs impl on one case twice (fresh A each time); failures go to fail().
void check_case(const Implementation& impl, const Definition& def, DType t, std::int64_t M, std::int64_t N,
                std::int64_t K, bool misaligned, const std::vector<std::uint16_t>& b_host, Buffers& buf,
                cudaStream_t stream, std::uint64_t seed) {
  const std::string name =
      fmt::format("{} {} M={} N={} K={}{}", impl.name, dtype_name(t), M, N, K, misaligned ? " (A misaligned)" : "");
  void* a_dev = static_cast<unsigned char*>(buf.a) + (misaligned ? 2 : 0);
  const GemmCall operands(t, M, N, K, a_dev, buf.b, buf.c);
  const CudaCall call = operands.call(def, stream);

  const bool gemv_only = impl.name == "kb_cuda_gemv";
  const bool expect_refusal = gemv_only && (M > kb::kernels::gemm_cuda::kGemvMaxM || misaligned);
  std::vector<std::uint16_t> a_host(static_cast<std::size_t>(M * K));
  std::vector<std::uint16_t> c_host(static_cast<std::size_t>(M * N));
  std::size_t plans_after_first = 0, races_after_first = 0;
  for (int trial = 0; trial < 2; ++trial) {
    random_fill(a_host, t, seed * 2 + trial);
    if (!cuda_ok(cudaMemcpy(a_dev, a_host.data(), a_host.size() * 2, cudaMemcpyHostToDevice), "upload A")) return;
    if (!cuda_ok(cudaDeviceSynchronize(), "upload landing")) return;
    if (!cuda_ok(cudaMemset(buf.c, 0xff, c_host.size() * 2), "poison C")) return;  // 0xffff: NaN in f16 and bf16
    // The memset may still be in flight on the legacy stream, which `stream` (non-blocking) does not wait for.
    if (!cuda_ok(cudaDeviceSynchronize(), "poison landing")) return;
    Status st = impl.run_cuda(call);
    if (expect_refusal) {
      if (st.ok() || st.error().code != Code::unsupported)
        fail(fmt::format("{}: expected Code::unsupported, got {}", name,
                         st.ok() ? "ok" : std::string(code_name(st.error().code))));
      else if (trial == 0)
        std::printf("ok   %s: refused as expected (%s)\n", name.c_str(), st.error().message.c_str());
      continue;
    }
    if (!st.ok()) {
      fail(fmt::format("{}: {} ({})", name, st.error().message, code_name(st.error().code)));
      return;
    }
    if (!cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize")) return;
    if (!cuda_ok(cudaGetLastError(), "after run")) return;
    // The same problem again must reuse the cached cuBLASLt plan (one
    // heuristic query per key).
    if (trial == 0) {
      plans_after_first = kb::kernels::gemm_cuda::cublaslt_plan_count();
      races_after_first = kb::kernels::gemm_cuda::gemm_race_count();
    } else if (kb::kernels::gemm_cuda::cublaslt_plan_count() != plans_after_first) {
      fail(fmt::format("{}: a repeated call queried the cuBLASLt heuristic again", name));
    } else if (kb::kernels::gemm_cuda::gemm_race_count() != races_after_first) {
      fail(fmt::format("{}: a repeated call raced the gemv and cuBLASLt again", name));
    }
    if (!cuda_ok(cudaMemcpy(c_host.data(), buf.c, c_host.size() * 2, cudaMemcpyDeviceToHost), "download C")) return;
    const std::vector<double> ref = reference(a_host, b_host, t, M, N, K);
    const std::vector<float>& tab = table(t);
    std::int64_t bad = 0;
    double max_err = 0, num = 0, den = 0;
    std::string first;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const double out = tab[c_host[i]];
      const double err = std::fabs(out - ref[i]);
      if (!(err <= kAtol + kRtol * std::fabs(ref[i]))) {  // NaN fails too
        if (bad++ == 0)
          first = fmt::format("C[{}, {}] = {} vs {}", static_cast<std::int64_t>(i) / N, static_cast<std::int64_t>(i) % N,
                              out, ref[i]);
      }
      if (err > max_err || std::isnan(err)) max_err = err;
      num += (out - ref[i]) * (out - ref[i]);
      den += ref[i] * ref[i];
    }
    const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    if (bad) {
      fail(fmt::format("{} (trial {}): {} of {} elements off, first {}; max |err| {:.3g}, rel {:.3g}", name, trial, bad,
                       ref.size(), first, max_err, rel));
      return;
    }
    if (trial == 1)
      std::printf("ok   %-58s %-34s max|err| %.3g rel %.2e\n", name.c_str(),
                  plan_text(impl, t, M, N, K, a_dev, buf.b).c_str(), max_err, rel);
  }
}

// Elements of C[M, N] on the device outside the tolerance of the float64
// reference (NaN counts); -1 when the download failed.
std::int64_t count_bad(const void* c_dev, const std::vector<std::uint16_t>& a_host,
                       const std::vector<std::uint16_t>& b_host, DType t, std::int64_t M, std::int64_t N, std::int64_t K) {
  std::vector<std::uint16_t> c_host(static_cast<std::size_t>(M * N));
  if (!cuda_ok(cudaMemcpy(c_host.data(), c_dev, c_host.size() * 2, cudaMemcpyDeviceToHost), "download C")) return -1;
  const std::vector<double> ref = reference(a_host, b_host, t, M, N, K);
  const std::vector<float>& tab = table(t);
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < ref.size(); ++i)
    if (!(std::fabs(tab[c_host[i]] - ref[i]) <= kAtol + kRtol * std::fabs(ref[i]))) ++bad;
  return bad;
}

// One call of impl at M on buf (B already uploaded as b_host): fresh A from
// `seed`, C poisoned, run (inside a stream capture, then replayed from the
// graph, when `captured`), checked against the float64 reference. False
// (after fail()) when anything went wrong.
bool call_checked(const Implementation& impl, const Definition& def, DType t, std::int64_t M, std::int64_t N,
                  std::int64_t K, const Buffers& buf, const std::vector<std::uint16_t>& b_host, cudaStream_t stream,
                  bool captured, std::uint64_t seed) {
  std::vector<std::uint16_t> a_host(static_cast<std::size_t>(M * K));
  random_fill(a_host, t, seed);
  if (!cuda_ok(cudaMemcpy(buf.a, a_host.data(), a_host.size() * 2, cudaMemcpyHostToDevice), "upload A") ||
      !cuda_ok(cudaMemset(buf.c, 0xff, static_cast<std::size_t>(M * N) * 2), "poison C") ||
      !cuda_ok(cudaDeviceSynchronize(), "upload landing"))
    return false;
  const GemmCall operands(t, M, N, K, buf.a, buf.b, buf.c);
  const CudaCall c = operands.call(def, stream);
  const std::string name =
      fmt::format("{} {} M={} N={} K={}{}", impl.name, dtype_name(t), M, N, K, captured ? " (captured)" : "");
  Status st = ok_status();
  if (captured) {
    if (!cuda_ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture")) return false;
    st = impl.run_cuda(c);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    const bool ended = cuda_ok(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    if (st.ok() && ended && cuda_ok(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate"))
      (void)cuda_ok(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  } else {
    st = impl.run_cuda(c);
  }
  if (!st.ok()) {
    fail(fmt::format("{}: {}", name, st.error().message));
    return false;
  }
  if (!cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize")) return false;
  const std::int64_t bad = count_bad(buf.c, a_host, b_host, t, M, N, K);
  if (bad != 0) {
    fail(fmt::format("{}: {} elements off the reference", name, bad));
    return false;
  }
  return true;
}

// The tuning settings (common/tuning.hpp) of this thread's calls changed by
// "name=value,..." until the end of the scope.
struct ScopedTuning {
  kb::tuning::Settings settings;
  kb::tuning::Scope scope;
  explicit ScopedTuning(const std::string& items) : settings(with(items)), scope(&settings, nullptr, nullptr) {}
  static kb::tuning::Settings with(const std::string& items) {
    kb::tuning::Settings s = kb::tuning::current();
    if (auto st = kb::tuning::apply(s, items); !st.ok()) fail("tuning " + items + ": " + st.error().message);
    return s;
  }
};

// A gemm race file for one test case: a fresh file in its own temporary
// folder, this thread's gemm_race_file until the end of the scope, then removed.
struct ScopedRaceFile {
  std::filesystem::path dir;
  std::string path;
  std::optional<ScopedTuning> tuning;
  explicit ScopedRaceFile(const char* name) {
    dir = std::filesystem::temp_directory_path() / fmt::format("kb_test_gemm_{}_{}", name, getpid());
    std::filesystem::create_directories(dir);
    path = (dir / "races.jsonl").string();
    tuning.emplace("gemm_race_file=" + path);
  }
  ~ScopedRaceFile() {
    tuning.reset();
    std::filesystem::remove_all(dir);
  }
  // The file's lines as kb reads them; a failure (and none) where it does not read back.
  std::vector<kb::kernels::gemm_cuda::RaceFileEntry> entries() const {
    std::ifstream f(path);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto read = kb::kernels::gemm_cuda::parse_race_file(text, path);
    if (!read) fail("the race file does not read back: " + read.error().message);
    return read ? *read : std::vector<kb::kernels::gemm_cuda::RaceFileEntry>{};
  }
};

// kb_cuda_gemm's race between the gemv and cuBLASLt (gemv_or_cublaslt.hpp)
// on 4096 x 4096 float16 at M values no other case uses:
//  - M = 6, first called inside a stream capture: no race there (the static
//    rule's choice, replayed from the graph, must be right); the next,
//    uncaptured call races once; the one after reuses the answer;
//  - M = 7 with gemm_race=0: no race;
//  - M = 9 to 12: a race file (below).
// Every race note must name the candidate whose median won (race_pick).
void check_race(const Registry& registry, cudaStream_t stream) {
  using namespace kb::kernels::gemm_cuda;
  const Implementation* impl = registry.find("kb_cuda_gemm");
  if (!impl) return fail("kb_cuda_gemm not registered");
  if (!impl->supports(make_definition(4096, 4096, DType::float16)).empty()) {
    std::printf("skip the gemv-or-cuBLASLt race: %s\n", impl->supports(make_definition(4096, 4096, DType::float16)).c_str());
    return;
  }
  const std::int64_t N = 4096, K = 4096, kMaxM = 16;  // up to M = 12 below
  const DType t = DType::float16;
  const Definition def = make_definition(N, K, t);
  Buffers buf;
  if (!cuda_ok(cudaMalloc(&buf.a, static_cast<std::size_t>(kMaxM * K) * 2), "cudaMalloc A") ||
      !cuda_ok(cudaMalloc(&buf.b, static_cast<std::size_t>(N * K) * 2), "cudaMalloc B") ||
      !cuda_ok(cudaMalloc(&buf.c, static_cast<std::size_t>(kMaxM * N) * 2), "cudaMalloc C"))
    return;
  std::vector<std::uint16_t> b_host(static_cast<std::size_t>(N * K));
  random_fill(b_host, t, 0x7ace0001);
  if (!cuda_ok(cudaMemcpy(buf.b, b_host.data(), b_host.size() * 2, cudaMemcpyHostToDevice), "upload B")) return;
  auto call = [&](std::int64_t M, bool captured, std::uint64_t seed) {
    return call_checked(*impl, def, t, M, N, K, buf, b_host, stream, captured, seed);
  };

  const std::size_t before = gemm_race_count();
  if (!call(6, true, 0x7ace0002)) return;
  if (gemm_race_count() != before) fail("kb_cuda_gemm raced the gemv and cuBLASLt inside a stream capture");
  if (!call(6, false, 0x7ace0003)) return;
  if (gemm_race_count() != before + 1)
    fail(fmt::format("kb_cuda_gemm M=6: {} races on its first uncaptured call, expected 1", gemm_race_count() - before));
  if (!call(6, false, 0x7ace0004)) return;
  if (gemm_race_count() != before + 1) fail("kb_cuda_gemm M=6 raced again on a later call");
  bool ran = false;
  {
    const ScopedTuning no_race("gemm_race=0");
    ran = call(7, false, 0x7ace0005);
  }
  if (ran && gemm_race_count() != before + 1) fail("kb_cuda_gemm raced with gemm_race=0");
  if (ran) std::printf("ok   kb_cuda_gemm's race: none under capture, one on the first uncaptured call, none after, none with gemm_race=0\n");

  // KB_GEMM_RACE_FILE (race_file.hpp) for this race: M = 9's winner is appended as a small-M line with the
  // stream's scratch size; lines for M = 10 (cuBLASLt) and M = 11 (a gemv plan other than the rule's), as an
  // earlier process would have left them, are taken without racing, M = 10 first under capture; a line naming
  // no candidate (M = 12) is an error naming the file and line.
  const int file_failures_before = g_failures;
  {
    const ScopedRaceFile race_file("small_races");
    const std::string& path = race_file.path;
    const std::size_t file_before = gemm_race_count();
    auto scratch = stream_scratch(stream);
    if (!scratch) fail("stream_scratch: " + scratch.error().message);
    if (scratch && call(9, false, 0x7ace0007)) {
      const auto entries = race_file.entries();
      const std::size_t scratch_bytes = gemv_scratch_bytes(*scratch);
      if (gemm_race_count() != file_before + 1) fail("kb_cuda_gemm M=9 with KB_GEMM_RACE_FILE: no race");
      if (entries.size() != 1 || entries[0].race != "small_m" || entries[0].key.M != 9 || entries[0].key.N != N ||
          entries[0].key.scratch_bytes != scratch_bytes) {
        fail(fmt::format("the race file after M=9's race holds {} lines, expected one small-M line for M=9 with "
                         "scratch_bytes {}", entries.size(), scratch_bytes));
      } else {
        const auto problem = [&](std::int64_t M) { return GemmProblem{t, M, N, K, buf.a, buf.b, buf.c, stream}; };
        GemvPlan rule11;
        GemvPlan plans[kGemvRaceMaxPlans];
        int n = 0;
        if (gemv_plan(problem(11), scratch_bytes, &rule11) == 0) {
          plans[0] = rule11;
          n = gemv_race_plans(problem(11), scratch_bytes, rule11, plans);
        }
        const GemvPlan other = plans[n > 1 ? n - 1 : 0];
        auto entry = [&](std::int64_t M, const std::string& choice) {
          RaceFileEntry e = entries[0];
          e.key.M = M, e.choice = choice;
          return e;
        };
        const bool wrote = n > 0 && race_file_record(path, entry(10, "cuBLASLt")).ok() &&
                           race_file_record(path, entry(11, gemv_plan_label(other))).ok() &&
                           race_file_record(path, entry(12, "gemv 99r")).ok();
        if (!wrote) fail("could not plan M=11 or append to the race file");
        if (wrote && call(10, true, 0x7ace0008) && call(10, false, 0x7ace0009) && call(11, false, 0x7ace000a) &&
            gemm_race_count() != file_before + 1)
          fail("kb_cuda_gemm raced a small-M problem that KB_GEMM_RACE_FILE holds");
        GemvPlan rule10;
        auto ten = gemv_plan(problem(10), scratch_bytes, &rule10) == 0
                       ? gemm_small_m_choice(problem(10), **scratch, rule10)
                       : Result<SmallMChoice>(Error{Code::internal, "no gemv plan for M=10"});
        if (!ten || !ten->cublaslt) fail("M=10: not the race file's cuBLASLt");
        auto eleven = gemm_small_m_choice(problem(11), **scratch, rule11);
        if (!eleven || eleven->cublaslt || gemv_plan_label(eleven->plan) != gemv_plan_label(other) ||
            eleven->plan.row_blocks != other.row_blocks || eleven->plan.splits != other.splits)
          fail("M=11: not the race file's gemv plan " + gemv_plan_label(other));
        GemvPlan rule12;
        auto bad = gemv_plan(problem(12), scratch_bytes, &rule12) == 0
                       ? gemm_small_m_choice(problem(12), **scratch, rule12)
                       : Result<SmallMChoice>(Error{Code::internal, "no gemv plan for M=12"});
        if (bad || bad.error().message.find(path + ":4: ") == std::string::npos)
          fail("a race file line naming no candidate: " + (bad ? std::string("accepted") : bad.error().message));
      }
    }
  }
  if (g_failures == file_failures_before)
    std::printf("ok   KB_GEMM_RACE_FILE, small M: the race's winner appended with the scratch size; problems in "
                "the file not raced (one first called under capture), cuBLASLt and a gemv plan taken from it; a "
                "line naming no candidate refused with its place\n");
}

// kb_cuda_gemm's long-K race (long_k_race.hpp) on 256 x 28672 bfloat16
// (two equal chunks: the batched and the one-by-one forms, and kb's wgmma
// kernel on compute capability 9.0):
//  - every form, run directly, matches the reference (the race may cache any);
//  - M = 512: the first uncaptured call races once;
//  - M = 384, first called inside a stream capture: no race (the batched
//    chunks, replayed from the graph, must be right); the next, uncaptured
//    call races once; the one after reuses the answer;
//  - M = 320 with gemm_race=0, then with a form forced (ForcedLongKForm): no race;
//  - M = 100 (two 128 x 128 output tiles), first inside a capture: the static
//    rule's chunks one by one (long_k_one_by_one), replayed right; the next
//    call races with that form as its static rule.
// Each race note must list the forms that can run here (kb's kernel in
// clusters of 2 and on 168-column tiles at M = 384 and 512, not at M = 100).
// Whether a race note times `label` ("<label> <median> us"), not only names it among the forms that did not run.
bool timed_in(const std::string& note, const std::string& label) {
  for (std::size_t at = note.find(label + " "); at != std::string::npos; at = note.find(label + " ", at + 1))
    if (at + label.size() + 1 < note.size() && std::isdigit(static_cast<unsigned char>(note[at + label.size() + 1])))
      return true;
  return false;
}

void check_long_k_race(const Registry& registry, cudaStream_t stream) {
  using namespace kb::kernels::gemm_cuda;
  const Implementation* impl = registry.find("kb_cuda_gemm");
  if (!impl) return fail("kb_cuda_gemm not registered");
  const std::int64_t N = 256, K = 28672, max_m = 512;
  const DType t = DType::bfloat16;
  const Definition def = make_definition(N, K, t);
  if (std::string why = impl->supports(def); !why.empty()) {
    std::printf("skip the long-K race: %s\n", why.c_str());
    return;
  }
  if (!kb::tuning::current().gemm_race) {
    std::printf("skip the long-K race: gemm_race is 0\n");
    return;
  }
  Buffers buf;
  if (!cuda_ok(cudaMalloc(&buf.a, static_cast<std::size_t>(max_m * K) * 2), "cudaMalloc A") ||
      !cuda_ok(cudaMalloc(&buf.b, static_cast<std::size_t>(N * K) * 2), "cudaMalloc B") ||
      !cuda_ok(cudaMalloc(&buf.c, static_cast<std::size_t>(max_m * N) * 2), "cudaMalloc C"))
    return;
  std::vector<std::uint16_t> b_host(static_cast<std::size_t>(N * K));
  random_fill(b_host, t, 0x10c0001);
  if (!cuda_ok(cudaMemcpy(buf.b, b_host.data(), b_host.size() * 2, cudaMemcpyHostToDevice), "upload B")) return;

  // Every form on its own, at M = 200.
  int device = 0;
  cudaDeviceProp prop{};
  const bool hopper = cuda_ok(cudaGetDevice(&device), "cudaGetDevice") &&
                      cuda_ok(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties") && prop.major == 9 &&
                      prop.minor == 0;
  {
    const std::int64_t M = 200;
    std::vector<std::uint16_t> a_host(static_cast<std::size_t>(M * K));
    random_fill(a_host, t, 0x10c0002);
    if (!cuda_ok(cudaMemcpy(buf.a, a_host.data(), a_host.size() * 2, cudaMemcpyHostToDevice), "upload A")) return;
    for (LongKForm f : kLongKForms) {
      const std::string name = fmt::format("long-K form {}, bfloat16 M={} N={} K={}", long_k_form_label(f), M, N, K);
      if (!cuda_ok(cudaMemsetAsync(buf.c, 0xff, static_cast<std::size_t>(M * N) * 2, stream), "poison C")) return;
      bool na = false;
      const Status st = run_long_k(GemmProblem{t, M, N, K, buf.a, buf.b, buf.c, stream}, f, &na);
      if (!st.ok()) {
        fail(fmt::format("{}: {}", name, st.error().message));
        continue;
      }
      if (na) {
        if (hopper) fail(name + ": not applicable on a compute capability 9.0 device");
        else std::printf("skip %s: not applicable here\n", name.c_str());
        continue;
      }
      if (!cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize")) return;
      const std::int64_t bad = count_bad(buf.c, a_host, b_host, t, M, N, K);
      if (bad != 0) fail(fmt::format("{}: {} elements off the reference", name, bad));
      else std::printf("ok   %s\n", name.c_str());
    }
  }

  auto call = [&](std::int64_t M, bool captured, std::uint64_t seed) {
    return call_checked(*impl, def, t, M, N, K, buf, b_host, stream, captured, seed);
  };
  const int failures_before = g_failures;
  const std::size_t before = gemm_race_count();
  if (!call(512, false, 0x10c0003)) return;
  if (gemm_race_count() != before + 1)
    return fail(fmt::format("kb_cuda_gemm long-K M=512: {} races on its first call, expected 1", gemm_race_count() - before));
  if (!call(384, true, 0x10c0004)) return;
  if (gemm_race_count() != before + 1) fail("kb_cuda_gemm raced a long-K problem inside a stream capture");
  if (!call(384, false, 0x10c0005)) return;
  if (gemm_race_count() != before + 2)
    fail(fmt::format("kb_cuda_gemm long-K M=384: {} races on its first uncaptured call, expected 1",
                     gemm_race_count() - before - 1));
  if (!call(384, false, 0x10c0006)) return;
  if (gemm_race_count() != before + 2) fail("kb_cuda_gemm long-K M=384 raced again on a later call");
  bool ran0 = false, ran1 = false;
  {
    const ScopedTuning no_race("gemm_race=0");
    ran0 = call(320, false, 0x10c0007);
  }
  {
    const ForcedLongKForm forced(LongKForm::sequential_chunks);
    ran1 = call(320, false, 0x10c0008);
  }
  if (ran0 && ran1 && gemm_race_count() != before + 2)
    fail("kb_cuda_gemm raced a long-K problem with gemm_race=0 or a forced form");
  const std::size_t small_before = gemm_race_count();
  if (!call(100, true, 0x10c0009)) return;
  if (gemm_race_count() != small_before) fail("kb_cuda_gemm raced a long-K problem (M=100) inside a stream capture");
  if (!call(100, false, 0x10c000a)) return;
  if (gemm_race_count() != small_before + 1) fail("kb_cuda_gemm long-K M=100: no race on its first uncaptured call");
  const std::vector<std::string> notes = gemm_race_notes();
  for (std::size_t i = before; i < notes.size(); ++i) {
    const std::string& note = notes[i];
    long long m = 0;
    std::sscanf(note.c_str(), "%*s M=%lld", &m);
    // Clusters of 2 where there are two row tiles and the SMs pair up (long_k_race.cpp; elsewhere the form is not
    // raced, or drops out as not applicable).
    const bool c2 = hopper && m > 128 && prop.multiProcessorCount % 2 == 0;
    const bool all = note.find("cuBLASLt chunks ") != std::string::npos &&
                     note.find("cuBLASLt chunks one by one ") != std::string::npos &&
                     (!hopper || note.find("kb wgmma ") != std::string::npos) &&
                     timed_in(note, "kb wgmma (clusters of 2)") == c2 &&
                     timed_in(note, "kb wgmma (168-column tiles)") == (hopper && m > 128);
    if (!all) fail(fmt::format("a long-K race's forms are not those that run here (clusters of 2: {}): {}", c2, note));
    // The static rule's form is the first candidate and named at the end.
    const bool small = note.rfind("bfloat16 M=100 ", 0) == 0;
    const std::string rule = small ? "cuBLASLt chunks one by one" : "cuBLASLt chunks";
    const std::string first = "cold samples: " + rule + " ";  // then its median
    const std::size_t at = note.find(first);
    const bool rule_first = at != std::string::npos && at + first.size() < note.size() &&
                            std::isdigit(static_cast<unsigned char>(note[at + first.size()]));
    if (!rule_first || note.find("(static rule: " + rule + ")") == std::string::npos)
      fail(fmt::format("a long-K race's static rule is not {}: {}", rule, note));
  }
  if (g_failures == failures_before)
    std::printf("ok   kb_cuda_gemm's long-K race: one on each problem's first uncaptured call, none under capture, "
              "none after, none with gemm_race=0 or a forced form; the static rule's form first in each note\n");

  // KB_GEMM_RACE_FILE (race_file.hpp): a race's winner is appended; a problem the file holds for this machine is
  // not raced (also under capture), and runs right in the file's form; a line naming no form is an error that
  // names the file and line.
  const int file_failures_before = g_failures;
  {
    const ScopedRaceFile race_file("long_k_races");
    const std::string& path = race_file.path;
    const std::size_t file_before = gemm_race_count();
    if (call(448, false, 0x10c000b)) {
      const auto entries = race_file.entries();
      if (gemm_race_count() != file_before + 1) fail("kb_cuda_gemm long-K M=448 with KB_GEMM_RACE_FILE: no race");
      if (entries.size() != 1 || entries[0].key.M != 448 || entries[0].key.N != N || entries[0].key.K != K)
        fail(fmt::format("the race file holds {} lines after one race, expected one for M=448", entries.size()));
      if (entries.size() == 1) {
        // Lines for this machine (the race's own line's), as an earlier process would have left them.
        auto entry = [&](std::int64_t M, const char* choice) {
          RaceFileEntry e = entries[0];
          e.key.M = M, e.choice = choice;
          return e;
        };
        const bool wrote = race_file_record(path, entry(456, "cuBLASLt chunks one by one")).ok() &&
                           race_file_record(path, entry(464, "cuBLASLt chunks")).ok() &&
                           race_file_record(path, entry(472, "no such form")).ok();
        if (!wrote) fail("could not append to the race file");
        if (call(456, false, 0x10c000c) && call(464, true, 0x10c000d) && call(464, false, 0x10c000e) &&
            gemm_race_count() != file_before + 1)
          fail("kb_cuda_gemm raced a long-K problem that KB_GEMM_RACE_FILE holds");
        auto chosen = gemm_long_k_choice(GemmProblem{t, 456, N, K, buf.a, buf.b, buf.c, stream});
        if (!chosen || *chosen != LongKForm::sequential_chunks) fail("M=456: not the race file's form");
        auto bad = gemm_long_k_choice(GemmProblem{t, 472, N, K, buf.a, buf.b, buf.c, stream});
        if (bad || bad.error().message.find(path + ":4: ") == std::string::npos)
          fail("a race file line naming no form: " + (bad ? std::string("accepted") : bad.error().message));
      }
    }
  }
  if (g_failures == file_failures_before)
    std::printf("ok   KB_GEMM_RACE_FILE: the race's winner appended; problems in the file not raced (one first "
                "called under capture) and right in the file's form; a line naming no form refused with its place\n");
}

// Every race note: "<problem>: <winner>; median of n cold samples: <label>
// X us (rule), <label> Y us, ..., cuBLASLt Z us (static rule: S); the race
// took T ms, ...": the winner
// must be the candidate race_pick gives, and every candidate must have run.
void check_race_notes() {
  using namespace kb::kernels::gemm_cuda;
  for (const std::string& note : gemm_race_notes()) {
    std::printf("race %s\n", note.c_str());
    const std::size_t side = note.find(": ");
    const std::size_t semi = note.find("; median of ");
    const std::size_t m = note.find("cold samples: ");
    const std::size_t r = note.rfind(" (static rule: ");
    if (side == std::string::npos || semi == std::string::npos || m == std::string::npos || r == std::string::npos ||
        r < m) {
      fail("race note not understood: " + note);
      continue;
    }
    const std::string winner = note.substr(side + 2, semi - side - 2);
    std::string medians = note.substr(m + 14, r - m - 14);
    if (std::size_t d = medians.find(", cuBLASLt did not run"); d != std::string::npos) {
      fail("cuBLASLt did not run in a race: " + note);
      medians.resize(d);
    }
    std::vector<std::string> labels;
    std::vector<double> ms;
    bool understood = true;
    for (std::size_t at = 0; at <= medians.size();) {
      std::size_t end = medians.find(", ", at);
      if (end == std::string::npos) end = medians.size();
      std::string item = medians.substr(at, end - at);
      at = end + 2;
      if (const std::size_t rule = item.rfind(" (rule)"); rule != std::string::npos && rule + 7 == item.size())
        item.resize(rule);
      const std::size_t us = item.rfind(" us");
      const std::size_t value = item.rfind(' ', us == std::string::npos ? std::string::npos : us - 1);
      if (us == std::string::npos || us + 3 != item.size() || value == std::string::npos) {
        fail(fmt::format("a race candidate did not run or is not understood ({}): {}", item, note));
        understood = false;
        break;
      }
      labels.push_back(item.substr(0, value));
      ms.push_back(std::atof(item.c_str() + value + 1) / 1e3);
    }
    if (!understood || labels.empty()) continue;
    // "the gemv)" exactly: the static rule's reasons for cuBLASLt also start with "the gemv's". A long-K race's
    // static rule is its first candidate (the chunks as one batch or one by one), and none is named "cuBLASLt" alone.
    const bool static_lt = note.compare(r + 15, 9, "the gemv)") != 0;
    const int static_index = static_lt && labels.back() == "cuBLASLt" ? static_cast<int>(labels.size()) - 1 : 0;
    const int won = race_pick(ms.data(), static_cast<int>(ms.size()), static_index);
    if (labels[won] != winner) fail(fmt::format("race note names {}, the medians pick {}: {}", winner, labels[won], note));
  }
}

// Every gemv plan kb_cuda_gemm's race may pick (gemv_race_plans), launched
// directly on shapes that make split, unsplit, 16- and 32-row and bulk
// plans, must match the float64 reference: the race caches whichever is
// fastest, so each must be right on its own.
void check_race_plans(cudaStream_t stream) {
  using namespace kb::kernels::gemm_cuda;
  struct Shape {
    DType t;
    std::int64_t M, N, K;
  };
  const Shape shapes[] = {{DType::float16, 1, 256, 7168},  {DType::bfloat16, 1, 4096, 4096},
                          {DType::float16, 4, 7168, 5120}, {DType::bfloat16, 8, 2048, 4096},
                          {DType::float16, 9, 5120, 2048}, {DType::bfloat16, 16, 1536, 7168}};
  auto scratch = stream_scratch(stream);
  if (!scratch) return fail("stream_scratch: " + scratch.error().message);
  int plans_checked = 0;
  for (const Shape& s : shapes) {
    Buffers buf;
    if (!cuda_ok(cudaMalloc(&buf.a, static_cast<std::size_t>(s.M * s.K) * 2), "cudaMalloc A") ||
        !cuda_ok(cudaMalloc(&buf.b, static_cast<std::size_t>(s.N * s.K) * 2), "cudaMalloc B") ||
        !cuda_ok(cudaMalloc(&buf.c, static_cast<std::size_t>(s.M * s.N) * 2), "cudaMalloc C"))
      return;
    std::vector<std::uint16_t> a_host(static_cast<std::size_t>(s.M * s.K)), b_host(static_cast<std::size_t>(s.N * s.K));
    random_fill(a_host, s.t, 0x9a7e0001 + s.M);
    random_fill(b_host, s.t, 0x9a7e1001 + s.N);
    if (!cuda_ok(cudaMemcpy(buf.a, a_host.data(), a_host.size() * 2, cudaMemcpyHostToDevice), "upload A") ||
        !cuda_ok(cudaMemcpy(buf.b, b_host.data(), b_host.size() * 2, cudaMemcpyHostToDevice), "upload B"))
      return;
    const GemmProblem p{s.t, s.M, s.N, s.K, buf.a, buf.b, buf.c, stream};
    GemvPlan rule;
    if (!cuda_ok(static_cast<cudaError_t>(gemv_plan(p, gemv_scratch_bytes(*scratch), &rule)), "gemv_plan")) return;
    GemvPlan plans[kGemvRaceMaxPlans];
    const int n = gemv_race_plans(p, gemv_scratch_bytes(*scratch), rule, plans);
    const std::string name = fmt::format("race plans {} M={} N={} K={}", dtype_name(s.t), s.M, s.N, s.K);
    if (n < 3) fail(fmt::format("{}: {} candidate plans, expected 16 and 32 rows on both kernels", name, n));
    bool bulk = false, split = false;
    for (int i = 0; i < n; ++i) {
      bulk |= plans[i].bulk;
      split |= plans[i].splits > 1;
      if (!cuda_ok(cudaMemsetAsync(buf.c, 0xff, static_cast<std::size_t>(s.M * s.N) * 2, stream), "poison C") ||
          !cuda_ok(static_cast<cudaError_t>(gemv_launch(p, *scratch, plans[i])), "gemv_launch") ||
          !cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize"))
        return;
      const std::int64_t bad = count_bad(buf.c, a_host, b_host, s.t, s.M, s.N, s.K);
      if (bad != 0)
        fail(fmt::format("{}: plan {} ({} rows{}, {} x {} blocks, {} warps): {} elements off the reference", name, i,
                         plans[i].rows_per_block, plans[i].bulk ? ", bulk" : "", plans[i].row_blocks, plans[i].splits,
                         plans[i].warps, bad));
      ++plans_checked;
    }
    if (!bulk) fail(name + ": no bulk-kernel candidate");
    std::printf("ok   %s: %d candidate plans%s\n", name.c_str(), n, split ? " (split-K among them)" : "");
  }
  std::printf("ok   %d race candidate plans matched the reference\n", plans_checked);
}

// kb's long-K wgmma kernel (wgmma_gemm.hpp) called directly on schedules the
// shipped shapes never make: K not a multiple of its 64-wide block, partial
// row and column tiles, promotion every few blocks, a work list shorter than
// the grid (most CTAs idle, tiles split over many CTAs), the other super-tile
// order, the L2 prefetch of partial sums; each case twice (the kernel must
// leave its workspace's flags zero, checked after every run).
void check_wgmma_direct(cudaStream_t stream) {
  using kb::kernels::gemm_cuda::WgmmaGemmArgs;
  struct Case {
    std::int64_t M, N, K;
    int promote, group;
    bool n_fastest;
    int prefetch;
    int cluster;
    int ctas = 0;  // 0: one per SM
    int last_wave = 101;  // WgmmaGemmArgs::min_last_wave_percent
    bool descending = false;  // WgmmaGemmArgs::descending_stream_k
    int tile_n = 256;         // WgmmaGemmArgs::tile_n
    int c_offset = 0;         // bytes C starts past a 256-byte boundary (4: the epilogue's 4-byte stores)
    int band = -1;            // WgmmaGemmArgs::raster_band (-1: its default)
  };
  const Case cases[] = {
      {300, 520, 1000, 3, 4, false, 0, 1},   // 3 x 3 tiles of 16 blocks (the last 40 wide) over 44 groups of 3
      {128, 256, 512, 0, 4, false, 0, 1},    // one tile of 8 blocks over 132 groups: most ranges empty
      {700, 1032, 4104, 16, 4, true, 4, 1},  // partial tiles both ways, a tail block of 8, column tiles first
      // clusters of 2 (weight halves multicast): a group of 2 over 1 row tile (one CTA of each pair on zeros),
      // groups of 4 with the last one half past M, and kb_cuda_gemm's configuration on a long K
      {128, 256, 512, 5, 4, false, 0, 2},
      {700, 1032, 4104, 16, 4, true, 4, 2},
      {1030, 136, 20544, 128, 4, false, 0, kb::kernels::gemm_cuda::WgmmaGemmArgs{}.cluster},
      // small grids: 5 x 5 tiles in 15 super-tiles of 2 over 4 groups (3 whole waves, then 3 super-tiles
      // stream-K), the same in clusters of 2; 2 x 3 super-tiles over 3 groups (waves only)
      {520, 1032, 1480, 7, 2, false, 0, 1, 8},
      {520, 1032, 1480, 7, 2, false, 0, 2, 8},
      {512, 768, 2048, 0, 2, false, 0, 1, 6},
      // the last partial wave as whole tiles (3 of the 4 groups busy), single CTAs and clusters of 2
      {520, 1032, 1480, 7, 2, false, 0, 1, 8, 50},
      {520, 1032, 1480, 7, 2, false, 0, 2, 8, 50},
      // stream-K pieces run backwards: ranges of a block or two with a partial last K block (loaded first),
      // the small grids (single CTAs, clusters of 2), the long K of kb_cuda_gemm's configuration
      {300, 520, 1000, 3, 4, false, 0, 1, 0, 101, true},
      {128, 256, 512, 0, 4, false, 0, 1, 0, 101, true},
      {520, 1032, 1480, 7, 2, false, 0, 1, 8, 101, true},
      {520, 1032, 1480, 7, 2, false, 0, 2, 8, 101, true},
      {1030, 136, 20544, 128, 4, false, 0, 1, 0, 101, true},
      // tiles of 168 columns: a partial last column tile (520 = 3 x 168 + 16) split over many CTAs, partial
      // tiles both ways with column tiles first, the small grid backwards and with its last wave whole, and a
      // long K over one column tile
      {300, 520, 1000, 3, 4, false, 0, 1, 0, 101, true, 168},
      {700, 1032, 4104, 16, 4, true, 4, 1, 0, 95, true, 168},
      {520, 1032, 1480, 7, 2, false, 0, 1, 8, 101, true, 168},
      {520, 1032, 1480, 7, 2, false, 0, 1, 8, 50, false, 168},
      {1030, 168, 20544, 128, 4, false, 0, 1, 0, 95, true, 168},
      // C only 4-byte aligned: the epilogue's 4-byte stores (else 16-byte ones), on both tile widths
      {300, 520, 1000, 3, 4, false, 0, 1, 0, 101, true, 168, 4},
      {700, 1032, 4104, 16, 4, true, 4, 1, 0, 95, true, 256, 4},
      // row groups in bands: 6 row groups of 4 tiles in bands of 4 and a narrower last one of 2, over the whole
      // grid and over a small one (whole waves, then stream-K); bands of 2 on 168 columns; one band (0)
      {2600, 1032, 1480, 5, 4, false, 0, 1, 0, 101, true, 256, 0, 4},
      {2600, 1032, 1480, 5, 4, false, 0, 1, 16, 101, true, 256, 0, 4},
      {2600, 1032, 1480, 5, 4, false, 0, 2, 16, 101, true, 256, 0, 4},
      {1300, 1032, 1480, 5, 2, false, 0, 1, 8, 101, true, 168, 0, 2},
      {2600, 1032, 1480, 5, 4, false, 0, 1, 16, 101, true, 256, 0, 0},
  };
  int device = 0, sms = 0;
  if (!cuda_ok(cudaGetDevice(&device), "cudaGetDevice") ||
      !cuda_ok(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count"))
    return;
  const std::size_t ws_bytes = kb::kernels::gemm_cuda::wgmma_gemm_workspace_bytes(sms);
  void* ws = nullptr;
  if (!cuda_ok(cudaMalloc(&ws, ws_bytes), "cudaMalloc workspace") || !cuda_ok(cudaMemset(ws, 0, ws_bytes), "zero ws") ||
      !cuda_ok(cudaDeviceSynchronize(), "zero ws landing"))
    return;
  std::uint64_t seed = 0x77a1;
  for (DType t : {DType::bfloat16, DType::float16}) {
    for (const Case& c : cases) {
      const std::string name = fmt::format("wgmma_gemm {} M={} N={} K={} promote {} group {} cluster {}{}{}{}{}{}{}{}{}",
                                           dtype_name(t), c.M, c.N, c.K, c.promote, c.group, c.cluster,
                                           c.n_fastest ? " n-first" : "", c.prefetch ? " prefetch" : "",
                                           c.ctas ? fmt::format(" {} CTAs", c.ctas) : "",
                                           c.last_wave <= 100 ? fmt::format(" last wave whole from {}%", c.last_wave) : "",
                                           c.descending ? " stream-K backwards" : "",
                                           c.tile_n != 256 ? fmt::format(" tile n {}", c.tile_n) : "",
                                           c.c_offset ? fmt::format(" C at +{} bytes", c.c_offset) : "",
                                           c.band >= 0 ? fmt::format(" band {}", c.band) : "");
      std::vector<std::uint16_t> a(static_cast<std::size_t>(c.M * c.K)), b(static_cast<std::size_t>(c.N * c.K)),
          out(static_cast<std::size_t>(c.M * c.N));
      random_fill(a, t, seed++);
      random_fill(b, t, seed++);
      void *da = nullptr, *db = nullptr, *dc = nullptr;
      if (!cuda_ok(cudaMalloc(&da, a.size() * 2), "cudaMalloc A") || !cuda_ok(cudaMalloc(&db, b.size() * 2), "B") ||
          !cuda_ok(cudaMalloc(&dc, out.size() * 2 + 16), "C"))
        return;
      void* const c_at = static_cast<unsigned char*>(dc) + c.c_offset;
      cuda_ok(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice), "upload A");
      cuda_ok(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice), "upload B");
      const std::vector<double> ref = reference(a, b, t, c.M, c.N, c.K);
      for (int trial = 0; trial < 2; ++trial) {
        cuda_ok(cudaMemset(dc, 0xff, out.size() * 2 + 16), "poison C");
        cuda_ok(cudaDeviceSynchronize(), "poison landing");
        WgmmaGemmArgs w;
        w.A = da, w.B = db, w.C = c_at, w.M = c.M, w.N = c.N, w.K = c.K, w.bf16 = t == DType::bfloat16;
        w.promote_every = c.promote, w.group = c.group, w.n_fastest = c.n_fastest, w.prefetch_ahead = c.prefetch;
        w.cluster = c.cluster, w.ctas = c.ctas ? c.ctas : sms;
        w.min_last_wave_percent = c.last_wave, w.descending_stream_k = c.descending, w.tile_n = c.tile_n;
        if (c.band >= 0) w.raster_band = c.band;
        w.workspace = ws, w.workspace_bytes = ws_bytes, w.stream = stream;
        const int e = kb::kernels::gemm_cuda::wgmma_gemm(w);
        if (e == cudaErrorNotSupported) {
          std::printf("skip %s: not supported on this device (compute capability 9.0 only)\n", name.c_str());
          break;
        }
        if (!cuda_ok(static_cast<cudaError_t>(e), "wgmma_gemm launch") ||
            !cuda_ok(cudaStreamSynchronize(stream), "wgmma_gemm run"))
          break;
        cuda_ok(cudaMemcpy(out.data(), c_at, out.size() * 2, cudaMemcpyDeviceToHost), "download C");
        // The bytes before and after C keep their poison: no store lands outside it.
        unsigned char head[16], tail[16];
        const std::size_t tail_bytes = 16 - static_cast<std::size_t>(c.c_offset);
        cuda_ok(cudaMemcpy(head, dc, 16, cudaMemcpyDeviceToHost), "download before C");
        cuda_ok(cudaMemcpy(tail, static_cast<unsigned char*>(c_at) + out.size() * 2, tail_bytes,
                           cudaMemcpyDeviceToHost),
                "download after C");
        if (std::any_of(head, head + c.c_offset, [](unsigned char x) { return x != 0xff; }) ||
            std::any_of(tail, tail + tail_bytes, [](unsigned char x) { return x != 0xff; }))
          fail(fmt::format("{} (trial {}): a store landed outside C", name, trial));
        std::vector<unsigned> flags(static_cast<std::size_t>(sms));
        cuda_ok(cudaMemcpy(flags.data(), ws, flags.size() * sizeof(unsigned), cudaMemcpyDeviceToHost),  // flags first
                "download flags");
        const auto raised = std::count_if(flags.begin(), flags.end(), [](unsigned f) { return f != 0; });
        if (raised) fail(fmt::format("{} (trial {}): {} CTA flags left raised", name, trial, raised));
        const std::vector<float>& tab = table(t);
        std::int64_t bad = 0;
        double max_err = 0;
        std::string first;
        for (std::size_t i = 0; i < ref.size(); ++i) {
          const double err = std::fabs(tab[out[i]] - ref[i]);
          if (!(err <= kAtol + kRtol * std::fabs(ref[i]))) {
            if (bad++ == 0)
              first = fmt::format("C[{}, {}] = {} vs {}", static_cast<std::int64_t>(i) / c.N,
                                  static_cast<std::int64_t>(i) % c.N, tab[out[i]], ref[i]);
          }
          if (err > max_err || std::isnan(err)) max_err = err;
        }
        if (bad) fail(fmt::format("{} (trial {}): {} of {} elements off, first {}", name, trial, bad, ref.size(), first));
        else if (trial == 1) std::printf("ok   %-70s max|err| %.3g\n", name.c_str(), max_err);
      }
      cudaFree(da);
      cudaFree(db);
      cudaFree(dc);
    }
  }
  cudaFree(ws);
}

}  // namespace

int main() {
  auto count = cuda::device_count();
  if (!count) {
    std::printf("skipped: no CUDA device (%s)\n", count.error().message.c_str());
    return 77;
  }
  if (auto info = cuda::device_info(0)) std::printf("device 0: %s, %d SMs\n", info->name.c_str(), info->sm_count);

  Registry registry;
  kb::kernels::add_gemm_cuda(registry);

  cudaStream_t stream = nullptr;
  if (!cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate")) return 1;

  const std::vector<std::int64_t> all_m = {1, 3, 8, 16, 17, 128, 257};
  const std::vector<Shape> shapes = {
      {4096, 4096, all_m},       {128, 2048, all_m}, {256, 7168, {1, 16, 17}},
      {28672, 4096, {1, 3, 16, 17}}, {97, 72, all_m},    {97, 70, all_m},
      // gemv split-K with uneven splits of 9 K steps, the last one short (K = 520), and a short last
      // row block (N = 1000); 16384 x 3072: more row blocks than one wave of blocks, unsplit
      {1000, 520, {1, 5, 16, 17}}, {16384, 3072, {1, 16}},
      // 266 row blocks: at M = 16 (264 slots on 132 SMs) a last wave of 2, which kb_cuda_gemm gives to cuBLASLt
      {8512, 256, {8, 16}},
      // rows spread evenly over a multiple of the SMs (gemv.hpp, GemvBalance): 13-14 rows a block at 7168, 8-9 at 2200
      {7168, 5120, {1, 8, 16}}, {2200, 264, {1, 9, 16}},
      // the long-K path (kernels/gemm/cuda/long_k.hpp): two chunks of 10248 and 10240 (one after the other); three of 9560 (one batch)
      {97, 20488, {3, 17, 257}}, {97, 28680, {1, 17, 130}},
      // kb_cuda_gemm's long-K wgmma kernel (each form forced: single CTAs, clusters of 2, 168-column tiles; Hopper);
      // kb_cublaslt_gemm's chunks
      // beside it
      {136, 20544, {1030}},
  };

  std::uint64_t seed = 1;
  int skipped_impls = 0;
  for (DType t : {DType::float16, DType::bfloat16}) {
    for (const Shape& s : shapes) {
      const Definition def = make_definition(s.N, s.K, t);
      const std::int64_t max_m = *std::max_element(s.Ms.begin(), s.Ms.end());
      Buffers buf;
      if (!cuda_ok(cudaMalloc(&buf.a, static_cast<std::size_t>(max_m * s.K) * 2 + 16), "cudaMalloc A") ||
          !cuda_ok(cudaMalloc(&buf.b, static_cast<std::size_t>(s.N * s.K) * 2), "cudaMalloc B") ||
          !cuda_ok(cudaMalloc(&buf.c, static_cast<std::size_t>(max_m * s.N) * 2), "cudaMalloc C"))
        return 1;
      std::vector<std::uint16_t> b_host(static_cast<std::size_t>(s.N * s.K));
      random_fill(b_host, t, 0x5eed0000 + seed++);
      if (!cuda_ok(cudaMemcpy(buf.b, b_host.data(), b_host.size() * 2, cudaMemcpyHostToDevice), "upload B")) return 1;
      if (!cuda_ok(cudaDeviceSynchronize(), "upload landing")) return 1;

      for (const Implementation& impl : registry.all()) {
        const std::string why = impl.supports(def);
        const bool gemv_refuses_k = impl.name == "kb_cuda_gemv" && s.K % 8 != 0;
        if (gemv_refuses_k) {
          if (why.empty()) fail(fmt::format("{} accepts {} (K % 8 != 0)", impl.name, def.name));
          else if (t == DType::float16) std::printf("ok   %s refuses %s: %s\n", impl.name.c_str(), def.name.c_str(), why.c_str());
          continue;
        }
        if (!why.empty()) {
          if (why.rfind("cuBLASLt not found", 0) == 0) {
            ++skipped_impls;
            std::printf("skip %s on %s: %s\n", impl.name.c_str(), def.name.c_str(), why.c_str());
          } else {
            fail(fmt::format("{} refuses {}: {}", impl.name, def.name, why));
          }
          continue;
        }
        // kb_cuda_gemm on the last long-K shape: kb's wgmma kernel, opted into (gemm_cuda.hpp)
        const bool wgmma = impl.name == "kb_cuda_gemm" && s.N == 136 && s.K == 20544;
        // (single CTAs, clusters of 2, 168-column tiles; none: not forced)
        using kb::kernels::gemm_cuda::LongKForm;
        const std::vector<std::optional<LongKForm>> forms =
            wgmma ? std::vector<std::optional<LongKForm>>{LongKForm::wgmma, LongKForm::wgmma_c2, LongKForm::wgmma_n168}
                  : std::vector<std::optional<LongKForm>>{std::nullopt};
        for (const auto& form : forms) {
          std::optional<kb::kernels::gemm_cuda::ForcedLongKForm> forced;
          if (form) forced.emplace(*form);
          for (std::int64_t M : s.Ms) check_case(impl, def, t, M, s.N, s.K, false, b_host, buf, stream, seed++);
        }
        if (s.N == 4096 && s.K == 4096) check_case(impl, def, t, 3, s.N, s.K, true, b_host, buf, stream, seed++);
        if (s.N == 4096 && s.K == 4096 && impl.name == "kb_cublaslt_gemm") {
          // A new plan with autotuning off: the heuristic's first algorithm.
          {
            const ScopedTuning no_autotune("cublaslt_autotune=0");
            check_case(impl, def, t, 129, s.N, s.K, false, b_host, buf, stream, seed++);
          }
          const std::string problem = fmt::format(": {} M=129 N=4096 K=4096:", dtype_name(t));
          bool found = false;
          for (const std::string& note : kb::kernels::gemm_cuda::cublaslt_plan_notes())
            if (note.find(problem) != std::string::npos) {
              found = true;
              if (note.find("autotuning off") == std::string::npos)
                fail(fmt::format("cublaslt_autotune=0 did not keep the heuristic's choice: {}", note));
            }
          if (!found) fail(fmt::format("no cuBLASLt plan note for {}", problem));
        }
      }
    }
  }
  check_wgmma_direct(stream);
  check_race(registry, stream);
  check_long_k_race(registry, stream);
  check_race_plans(stream);
  check_race_notes();
  cudaStreamDestroy(stream);
  // Every plan was first called on an uncaptured stream: each must be tuned
  // (or have had one candidate only, or autotuning off), with a candidate run.
  const std::vector<std::string> notes = kb::kernels::gemm_cuda::cublaslt_plan_notes();
  if (notes.size() != kb::kernels::gemm_cuda::cublaslt_plan_count())
    fail(fmt::format("{} plan notes for {} plans", notes.size(), kb::kernels::gemm_cuda::cublaslt_plan_count()));
  for (const std::string& note : notes) {
    std::printf("plan %s\n", note.c_str());
    if (note.find("not timed yet") != std::string::npos || note.find("none of its") != std::string::npos)
      fail("cuBLASLt plan not autotuned: " + note);
  }
  if (skipped_impls) std::printf("note: %d (implementation, shape) pairs skipped: cuBLASLt not found\n", skipped_impls);
  std::printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "passed", g_failures);
  return g_failures ? 1 : 0;
}
