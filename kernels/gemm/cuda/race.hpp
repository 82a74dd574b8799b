// What kb_cuda_gemm's two races share: the small-M race among the gemv's
// plans and cuBLASLt (gemv_or_cublaslt.hpp) and the long-K race among the
// cuBLASLt K chunks and kb's wgmma kernel (long_k_race.hpp). Each times its
// candidates on a problem's first uncaptured call with kb's timer (cold
// samples, interleaved rounds; kernels/common/cublaslt_autotune.hpp), keeps
// the fastest for the process and writes one note.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/result.hpp"
#include "common/tuning.hpp"
#include "gemm_problem.hpp"

namespace kb::kernels::gemm_cuda {

// Samples of each candidate: kRaceRounds interleaved rounds of kRaceSamples
// cold samples (more than cuBLASLt's 3 x 3: the margins at stake are a few
// percent).
inline constexpr int kRaceRounds = 5;
inline constexpr int kRaceSamples = 5;

// Within this fraction of each other two candidates count as tied and the
// static rule's side keeps the problem: a near tie does not flip from run to
// run with the noise.
inline constexpr double kRaceTieMargin = 0.01;

// The winner of a race among `count` candidates from their medians (ms;
// negative: that candidate failed to run): the fastest, unless the static
// rule's candidate `static_choice` ran within kRaceTieMargin of it. When
// none ran, `static_choice`.
inline int race_pick(const double* ms, int count, int static_choice) {
  int best = -1;
  for (int c = 0; c < count; ++c)
    if (ms[c] >= 0 && (best < 0 || ms[c] < ms[best])) best = c;
  if (best < 0) return static_choice;
  const double s = ms[static_choice];
  if (s >= 0 && ms[best] * (1 + kRaceTieMargin) >= s) return static_choice;
  return best;
}

// What a race's answer is cached under: the problem on one device, which of
// A, B, C are not 16-byte aligned (kb's kernels need them aligned), and the
// stream's gemv split-K scratch (a cached split plan needs that much; 0 for
// long K).
struct RaceKey {
  int device = 0;
  int dtype = 0;
  std::int64_t M = 0, N = 0, K = 0;
  unsigned misaligned = 0;  // bit 0, 1, 2: A, B, C
  std::size_t scratch_bytes = 0;
  bool operator<(const RaceKey& o) const {
    return std::tie(device, dtype, M, N, K, misaligned, scratch_bytes) <
           std::tie(o.device, o.dtype, o.M, o.N, o.K, o.misaligned, o.scratch_bytes);
  }
};

inline RaceKey race_key(int device, const GemmProblem& p, std::size_t scratch_bytes) {
  const auto off = [](const void* v) { return reinterpret_cast<std::uintptr_t>(v) % 16 != 0 ? 1u : 0u; };
  return RaceKey{device, static_cast<int>(p.dtype), p.M, p.N, p.K, off(p.A) | off(p.B) << 1 | off(p.C) << 2,
                 scratch_bytes};
}

// Held through a race on `device`: one race at a time on a device (two at
// once would disturb each other's samples); races on different devices run
// side by side (an engine's first calls on 8 GPUs from 8 threads). A call of
// a problem being raced waits for its answer; a call of a problem already
// raced does not wait (the caches have their own lock, below). A race (up
// to seconds for long K at large M) takes it after looking in its cache and
// looks again once it holds it. Devices 64 apart share one.
std::mutex& gemm_race_mutex(int device);

// Guards both races' caches and the notes; held only to look up or record.
// Taken after gemm_race_mutex() where both are held, never before it.
std::mutex& gemm_race_cache_mutex();

// A race's cache (a std::map from its key to its choice): the choice cached
// for `key`, if any, and recording one; both under gemm_race_cache_mutex().
template <class Cache>
std::optional<typename Cache::mapped_type> race_cached(const Cache& cache, const typename Cache::key_type& key) {
  std::lock_guard<std::mutex> lock(gemm_race_cache_mutex());
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  return std::nullopt;
}
template <class Cache>
void race_remember(Cache& cache, const typename Cache::key_type& key, const typename Cache::mapped_type& choice) {
  std::lock_guard<std::mutex> lock(gemm_race_cache_mutex());
  cache.emplace(key, choice);
}

// A race's entry, shared by both races: the choice cached for `key` if there
// is one; else `static_choice`, uncached, where the problem is not raced now
// (the tuning setting gemm_race=0, read only here, for problems not yet raced; or a stream
// being captured, as `capturing()` says: the race runs on a later, uncaptured
// call); else nothing, with `race_lock` holding key.device's race lock and
// the cache looked at again under it (another thread may have raced the
// problem meanwhile). `capturing` returns Result<bool>; its error is returned.
template <class Cache, class Capturing>
auto race_entry(const Cache& cache, const RaceKey& key, const typename Cache::mapped_type& static_choice,
                Capturing&& capturing, std::unique_lock<std::mutex>& race_lock)
    -> Result<std::optional<typename Cache::mapped_type>> {
  using Choice = std::optional<typename Cache::mapped_type>;
  if (auto cached = race_cached(cache, key)) return Choice(std::move(cached));
  if (!tuning::current().gemm_race) return Choice(static_choice);
  auto captured = capturing();
  if (!captured) return captured.error();
  if (*captured) return Choice(static_choice);
  race_lock = std::unique_lock<std::mutex>(gemm_race_mutex(key.device));  // one race at a time on a device
  return Choice(race_cached(cache, key));
}

// Records one race's note (takes gemm_race_cache_mutex()) and emits it as an
// info diagnostic (common/tuning.hpp, kb::log).
void add_gemm_race_note(std::string note);

// "<label 0> X us (rule), <label 1> Y us, ...": each candidate's median (ms
// in, microseconds out; "failed" where it did not run); candidate 0 is the
// static rule's.
std::string race_medians(const std::vector<double>& ms, const std::function<std::string(int)>& label);

// Number of problems raced so far (both races, all devices), for tests.
std::size_t gemm_race_count();

// One line per raced problem, in order: "<dtype> M= N= K=: <winner>; median
// of <n> cold samples: <race_medians> (static rule: <its candidate or
// reason>); the race took <t> ms, ...".
std::vector<std::string> gemm_race_notes();

}  // namespace kb::kernels::gemm_cuda
