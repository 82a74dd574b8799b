// kb_cuda_gemm's measured choice among the gemv's plans and cuBLASLt at small M
// (gemv_or_cublaslt.hpp says why and how).
#include "gemv_or_cublaslt.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>

#include "../../common/cublaslt_autotune.hpp"
#include "cublaslt_gemm.hpp"
#include "gemv.hpp"

namespace kb::kernels::gemm_cuda {

namespace {

// The raced problems' choices, guarded by gemm_race_cache_mutex() (race.hpp:
// race_cached, race_remember). Leaked on purpose, like cublaslt_gemm.cpp's
// state.
std::map<RaceKey, SmallMChoice>& choices() {
  static auto* m = new std::map<RaceKey, SmallMChoice>;
  return *m;
}

Status launch_failure(const char* what, int e) {
  const auto err = static_cast<cudaError_t>(e);
  return make_error(Code::cuda_error, fmt::format("{}: {} ({})", what, cudaGetErrorString(err), cudaGetErrorName(err)));
}

// "gemv 32r bulk", "gemv 16r x4 (3w)": rows per block, kernel, blocks along K
// and warps where they are not the plain defaults.
std::string plan_label(const GemvPlan& g) {
  std::string s = fmt::format("gemv {}r{}", g.rows_per_block, g.bulk ? " bulk" : "");
  if (g.splits > 1) s += fmt::format(" x{}", g.splits);
  if (g.warps != kGemvMaxWarps) s += fmt::format(" ({}w)", g.warps);
  if (g.balanced) s += " balanced";
  return s;
}

}  // namespace

Result<SmallMChoice> gemm_small_m_choice(const GemmProblem& p, const StreamScratch& scratch, const GemvPlan& rule) {
  const SmallMChoice static_choice{rule.cublaslt_instead != nullptr, rule};
  int device = 0;
  KB_TRY(cuda::check(cudaGetDevice(&device), "cudaGetDevice"));
  const RaceKey key = race_key(device, p, gemv_scratch_bytes(&scratch));

  // race_entry reads KB_GEMM_RACE only for a problem not yet raced (as
  // KB_CUBLASLT_AUTOTUNE is read when a new cuBLASLt plan is made): the
  // cached path stays a map lookup.
  std::unique_lock<std::mutex> race_lock;
  auto entry =
      race_entry(choices(), key, static_choice, [&] { return cuda::stream_is_capturing(p.stream); }, race_lock);
  if (!entry) return entry.error();
  if (*entry) return **entry;  // cached, or not raced now

  // The gemv's candidates (KB_GEMM_RACE=cublaslt: the rule plan alone), then cuBLASLt last.
  GemvPlan plans[kGemvRaceMaxPlans] = {rule};
  const int gemvs = env_is("KB_GEMM_RACE", "cublaslt") ? 1 : gemv_race_plans(p, key.scratch_bytes, rule, plans);
  const auto race_start = std::chrono::steady_clock::now();  // the first call's cost, in the note
  // cuBLASLt's first call of the problem plans and autotunes its algorithms,
  // outside the race's samples. If cuBLASLt cannot run it the gemv's
  // candidates race alone.
  const Status lt_first = cublaslt_gemm(p);
  if (!lt_first.ok()) {
    if (cuda::context_is_broken()) return lt_first.error();
    (void)cudaGetLastError();
  }
  // The candidates run on the stream time_gpu hands them, `stream` itself
  // (graph capture of the same stream), whose scratch `scratch` is.
  auto run = [&](int c, void* s) -> Status {
    GemmProblem q = p;
    q.stream = s;
    if (c == gemvs) return cublaslt_gemm(q);
    const int e = gemv_launch(q, &scratch, plans[c]);
    return e == 0 ? ok_status() : launch_failure("kb gemv kernel launch (racing cuBLASLt)", e);
  };
  const int count = lt_first.ok() ? gemvs + 1 : gemvs;
  auto ms = median_ms_of_candidates(count, run, p.stream, /*cold_l2=*/true, kRaceRounds, kRaceSamples);
  if (!ms) return ms.error();
  const int static_index = static_choice.cublaslt && lt_first.ok() ? gemvs : 0;
  const int won = race_pick(ms->data(), count, static_index);
  const SmallMChoice choice{won == gemvs, won == gemvs ? rule : plans[won]};
  race_remember(choices(), key, choice);

  const auto label = [&](int c) { return c == gemvs ? std::string("cuBLASLt") : plan_label(plans[c]); };
  const double race_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - race_start).count();
  add_gemm_race_note(fmt::format(
      "{} M={} N={} K={}: {}; median of {} cold samples: {}{} (static rule: {}); the race took {:.1f} ms, cuBLASLt's "
      "planning included",
      dtype_name(p.dtype), p.M, p.N, p.K, label(won), kRaceRounds * kRaceSamples, race_medians(*ms, label),
      lt_first.ok() ? "" : fmt::format(", cuBLASLt did not run ({})", lt_first.error().message),
      static_choice.cublaslt ? rule.cublaslt_instead : "the gemv", race_ms));
  return choice;
}

}  // namespace kb::kernels::gemm_cuda
