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
#include "race_file.hpp"

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

}  // namespace

std::string gemv_plan_label(const GemvPlan& g) {
  std::string s = fmt::format("gemv {}r{}", g.rows_per_block, g.bulk ? " bulk" : "");
  if (g.splits > 1) s += fmt::format(" x{}", g.splits);
  if (g.warps != kGemvMaxWarps) s += fmt::format(" ({}w)", g.warps);
  if (g.balanced) s += " balanced";
  return s;
}

namespace {

constexpr const char* kCublasLtLabel = "cuBLASLt";

// What a race file line's choice names for p: cuBLASLt, or the gemv
// plan of that label among the race's candidates; an error naming the line
// where it is neither (a line written by hand, or by a kb whose plans
// differ under the same version).
Result<SmallMChoice> choice_of(const RaceFileEntry& e, const std::string& path, const GemmProblem& p,
                               std::size_t scratch_bytes, const GemvPlan& rule) {
  if (e.choice == kCublasLtLabel) return SmallMChoice{true, rule};
  GemvPlan plans[kGemvRaceMaxPlans] = {rule};
  const int n = gemv_race_plans(p, scratch_bytes, rule, plans);
  std::string known = kCublasLtLabel;
  for (int i = 0; i < n; ++i) {
    if (gemv_plan_label(plans[i]) == e.choice) return SmallMChoice{false, plans[i]};
    known += ", " + gemv_plan_label(plans[i]);
  }
  return make_error(Code::invalid_data,
                    fmt::format("gemm race file {}:{}: \"choice\" \"{}\" is not one of kb_cuda_gemm's small-M "
                                "candidates for M={} N={} K={} ({})",
                                path, e.line, e.choice, p.M, p.N, p.K, known));
}

}  // namespace

Result<SmallMChoice> gemm_small_m_choice(const GemmProblem& p, const StreamScratch& scratch, const GemvPlan& rule) {
  const SmallMChoice static_choice{rule.cublaslt_instead != nullptr, rule};
  int device = 0;
  KB_TRY(cuda::check(cudaGetDevice(&device), "cudaGetDevice"));
  const RaceKey key = race_key(device, p, gemv_scratch_bytes(&scratch));
  if (auto cached = race_cached(choices(), key)) return *cached;  // the common path: a map lookup, no allocation

  // A problem raced by an earlier process on this machine (the race file): its winner, even under
  // capture or gemm_race=0, where this process could not race it.
  const std::string file = race_file_path();
  if (!file.empty()) {
    auto found = race_file_find(file, kRaceSmallM, key);
    if (!found) return found.error();
    if (*found) {
      auto choice = choice_of(**found, file, p, key.scratch_bytes, rule);
      if (!choice) return choice.error();
      race_remember(choices(), key, *choice);
      if (log::enabled(log::LogLevel::info))
        log::emit(log::LogLevel::info,
                  fmt::format("kb gemm race: {} M={} N={} K={}: {}, from the race file {}:{} (not raced)",
                              dtype_name(p.dtype), p.M, p.N, p.K, (*found)->choice, file, (*found)->line));
      return *choice;
    }
  }

  // race_entry reads gemm_race only for a problem not yet raced (as
  // cublaslt_autotune is read when a new cuBLASLt plan is made): the cached
  // path stays a map lookup.
  std::unique_lock<std::mutex> race_lock;
  auto entry =
      race_entry(choices(), key, static_choice, [&] { return cuda::stream_is_capturing(p.stream); }, race_lock);
  if (!entry) return entry.error();
  if (*entry) return **entry;  // cached, or not raced now

  // The gemv's candidates, then cuBLASLt last.
  GemvPlan plans[kGemvRaceMaxPlans] = {rule};
  const int gemvs = gemv_race_plans(p, key.scratch_bytes, rule, plans);
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
  const auto label = [&](int c) { return c == gemvs ? std::string(kCublasLtLabel) : gemv_plan_label(plans[c]); };
  KB_TRY(race_file_keep(file, kRaceSmallM, key, label(won)));

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
