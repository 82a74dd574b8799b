// kb_cuda_gemm's measured choice between the gemv and cuBLASLt at small M
// (gemv_or_cublaslt.hpp says why and how).
#include "gemv_or_cublaslt.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

#include "../../common/cublaslt_autotune.hpp"
#include "cublaslt_gemm.hpp"
#include "gemv.hpp"

namespace kb::kernels::gemm_cuda {

namespace {

struct RaceKey {
  int device = 0;
  int dtype = 0;
  std::int64_t M = 0, N = 0, K = 0;
  bool c_aligned = false;
  bool operator<(const RaceKey& o) const {
    return std::tie(device, dtype, M, N, K, c_aligned) < std::tie(o.device, o.dtype, o.M, o.N, o.K, o.c_aligned);
  }
};

struct RaceState {
  std::mutex mu;
  std::map<RaceKey, bool> cublaslt;  // key -> cuBLASLt takes it
  std::vector<std::string> notes;
};

// Leaked on purpose, like cublaslt_gemm.cpp's state: no static destructor
// after the CUDA runtime has shut down.
RaceState& race_state() {
  static RaceState* s = new RaceState;
  return *s;
}

bool race_enabled() { return !env_is("KB_GEMM_RACE", "0"); }

Status launch_failure(const char* what, int e) {
  const auto err = static_cast<cudaError_t>(e);
  return make_error(Code::cuda_error, fmt::format("{}: {} ({})", what, cudaGetErrorString(err), cudaGetErrorName(err)));
}

}  // namespace

Result<bool> gemm_prefers_cublaslt(const GemmProblem& p, const StreamScratch& scratch, const GemvPlan& plan) {
  const bool static_rule = plan.cublaslt_instead != nullptr;
  auto stream = static_cast<cudaStream_t>(p.stream);
  RaceKey key;
  if (cudaError_t e = cudaGetDevice(&key.device); e != cudaSuccess)
    return make_error(Code::cuda_error, fmt::format("cudaGetDevice: {}", cudaGetErrorString(e)));
  key.dtype = static_cast<int>(p.dtype);
  key.M = p.M, key.N = p.N, key.K = p.K;
  key.c_aligned = reinterpret_cast<std::uintptr_t>(p.C) % 16 == 0;

  RaceState& st = race_state();
  std::lock_guard<std::mutex> lock(st.mu);  // one race at a time; later calls wait for its answer
  if (auto it = st.cublaslt.find(key); it != st.cublaslt.end()) return it->second;
  // KB_GEMM_RACE is read only here, for a problem not yet raced (as
  // KB_CUBLASLT_AUTOTUNE is read when a new cuBLASLt plan is made): the
  // cached path stays a map lookup.
  if (!race_enabled()) return static_rule;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaError_t e = cudaStreamIsCapturing(stream, &capture); e != cudaSuccess)
    return make_error(Code::cuda_error, fmt::format("cudaStreamIsCapturing: {}", cudaGetErrorString(e)));
  if (capture != cudaStreamCaptureStatusNone) return static_rule;  // race on a later, uncaptured call

  // cuBLASLt's first call of the problem plans and autotunes its algorithms,
  // outside the race's samples. If cuBLASLt cannot run it the gemv takes it.
  if (Status s = cublaslt_gemm(p); !s.ok()) {
    if (cuda::context_is_broken()) return s.error();
    (void)cudaGetLastError();
    st.cublaslt.emplace(key, false);
    st.notes.push_back(fmt::format("{} M={} N={} K={}: the gemv; cuBLASLt did not run ({})", dtype_name(p.dtype), p.M,
                                   p.N, p.K, s.error().message));
    return false;
  }
  // The candidates run on the stream time_gpu hands them, `stream` itself
  // (graph capture of the same stream), whose scratch `scratch` is.
  auto run = [&](int c, void* s) -> Status {
    GemmProblem q = p;
    q.stream = s;
    if (c == 1) return cublaslt_gemm(q);
    const int e = gemv_launch(q, &scratch, plan);
    return e == 0 ? ok_status() : launch_failure("kb gemv kernel launch (racing cuBLASLt)", e);
  };
  auto ms = median_ms_of_candidates(2, run, p.stream, /*cold_l2=*/true, kRaceRounds, kRaceSamples);
  if (!ms) return ms.error();
  const double gemv_ms = (*ms)[0], lt_ms = (*ms)[1];
  const bool lt = race_picks_cublaslt(gemv_ms, lt_ms, static_rule);
  st.cublaslt.emplace(key, lt);
  const auto us = [](double v) { return v < 0 ? std::string("failed") : fmt::format("{:.4f} us", v * 1e3); };
  st.notes.push_back(fmt::format("{} M={} N={} K={}: {}; median of {} cold samples: gemv {}, cuBLASLt {} (static "
                                 "rule: {})",
                                 dtype_name(p.dtype), p.M, p.N, p.K, lt ? "cuBLASLt" : "the gemv",
                                 kRaceRounds * kRaceSamples, us(gemv_ms), us(lt_ms),
                                 static_rule ? plan.cublaslt_instead : "the gemv"));
  if (cublaslt_log_enabled()) fmt::print(stderr, "kb gemm race: {}\n", st.notes.back());
  return lt;
}

std::size_t gemm_race_count() {
  RaceState& st = race_state();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.notes.size();
}

std::vector<std::string> gemm_race_notes() {
  RaceState& st = race_state();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.notes;
}

}  // namespace kb::kernels::gemm_cuda
