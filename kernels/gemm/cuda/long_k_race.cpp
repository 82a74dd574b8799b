// kb_cuda_gemm's measured choice of long-K form (long_k_race.hpp says why and how).
#include "long_k_race.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "../../common/cublaslt_autotune.hpp"
#include "cublaslt_gemm.hpp"
#include "cuda/device.hpp"
#include "long_k.hpp"
#include "race.hpp"
#include "race_file.hpp"
#include "wgmma_gemm.hpp"

namespace kb::kernels::gemm_cuda {

namespace {

// The raced problems' forms, guarded by gemm_race_cache_mutex() (race.hpp:
// race_cached, race_remember). Leaked on purpose, like cublaslt_gemm.cpp's
// state.
std::map<RaceKey, LongKForm>& choices() {
  static auto* m = new std::map<RaceKey, LongKForm>;
  return *m;
}

thread_local const ForcedLongKForm* t_forced = nullptr;

// kb's wgmma kernel on p with clusters of `cluster` CTAs and tiles `tile_n`
// columns wide; `not_applicable` set (nothing run) where the kernel does not
// apply (not compute capability 9.0, N or K not a multiple of 8, unaligned
// tensors; for clusters, a grid they do not divide, e.g. an odd SM count).
Status run_wgmma(const GemmProblem& p, int cluster, int tile_n, bool* not_applicable) {
  *not_applicable = false;
  WgmmaGemmArgs args;
  args.A = p.A, args.B = p.B, args.C = p.C;
  args.M = p.M, args.N = p.N, args.K = p.K;
  args.bf16 = p.dtype == DType::bfloat16;
  args.stream = p.stream;
  int device = 0, sms = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess)
    return make_error(Code::cuda_error, fmt::format("cudaGetDevice: {}", cudaGetErrorString(e)));
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess)
    return make_error(Code::cuda_error, fmt::format("cudaDeviceGetAttribute: {}", cudaGetErrorString(e)));
  args.ctas = sms;
  args.workspace_bytes = wgmma_gemm_workspace_bytes(sms);
  auto ws = wgmma_workspace(p.stream, args.workspace_bytes);
  if (!ws) return ws.error();
  args.workspace = *ws;
  args.cluster = cluster;
  args.tile_n = tile_n;
  const int e = wgmma_gemm(args);
  if (e == cudaErrorNotSupported) {
    *not_applicable = true;
    return ok_status();
  }
  if (e != 0) {
    const auto err = static_cast<cudaError_t>(e);
    return make_error(Code::cuda_error, fmt::format("kb long-K wgmma gemm launch (M={} N={} K={}): {} ({})", p.M, p.N,
                                                    p.K, cudaGetErrorString(err), cudaGetErrorName(err)));
  }
  return ok_status();
}

// The form a race file line names; an error naming the line if none.
Result<LongKForm> form_of(const RaceFileEntry& e, const std::string& path) {
  for (LongKForm f : kLongKForms)
    if (e.choice == long_k_form_label(f)) return f;
  return make_error(Code::invalid_data, fmt::format("gemm race file {}:{}: \"choice\" \"{}\" is not one of kb's "
                                                    "long-K forms", path, e.line, e.choice));
}

// The static rule's form (long_k.hpp): the chunks one by one on small
// outputs where they could be one batch, else the batch.
LongKForm static_form(const GemmProblem& p) {
  return long_k_batches(p) && long_k_one_by_one(p.M, p.N) ? LongKForm::sequential_chunks : LongKForm::chunks;
}

}  // namespace

ForcedLongKForm::ForcedLongKForm(LongKForm form) noexcept : form_(form), prev_(t_forced) { t_forced = this; }
ForcedLongKForm::~ForcedLongKForm() { t_forced = prev_; }
const LongKForm* ForcedLongKForm::current() noexcept { return t_forced ? &t_forced->form_ : nullptr; }

const char* long_k_form_label(LongKForm form) {
  switch (form) {
    case LongKForm::chunks: return "cuBLASLt chunks";
    case LongKForm::sequential_chunks: return "cuBLASLt chunks one by one";
    case LongKForm::wgmma: return "kb wgmma";
    case LongKForm::wgmma_c2: return "kb wgmma (clusters of 2)";
    case LongKForm::wgmma_n168: return "kb wgmma (168-column tiles)";
  }
  return "?";
}

Status run_long_k(const GemmProblem& p, LongKForm form, bool* not_applicable) {
  if (not_applicable) *not_applicable = false;
  if (form == LongKForm::wgmma || form == LongKForm::wgmma_c2 || form == LongKForm::wgmma_n168) {
    bool na = false;
    Status s = run_wgmma(p, form == LongKForm::wgmma_c2 ? 2 : 1, form == LongKForm::wgmma_n168 ? 168 : 256, &na);
    if (!s.ok() || !na) return s;
    if (not_applicable) {  // the race: this form does not run here
      *not_applicable = true;
      return ok_status();
    }
    // A call in this form (forced, or cached): clusters that cannot run here run as single CTAs, else the chunks.
    if (form == LongKForm::wgmma_c2) {
      s = run_wgmma(p, 1, 256, &na);
      if (!s.ok() || !na) return s;
    }
    form = static_form(p);
  }
  return cublaslt_long_k_gemm(p, form == LongKForm::sequential_chunks);
}

Result<LongKForm> gemm_long_k_choice(const GemmProblem& p) {
  if (const LongKForm* forced = ForcedLongKForm::current()) return *forced;
  int device = 0;
  KB_TRY(cuda::check(cudaGetDevice(&device), "cudaGetDevice"));
  const RaceKey key = race_key(device, p, 0);

  if (auto cached = race_cached(choices(), key)) return *cached;  // the common path: a map lookup, no allocation

  const LongKForm rule = static_form(p);
  // A problem raced by an earlier process on this machine (the race file): its winner, even under
  // capture or gemm_race=0, where this process could not race it.
  const std::string file = race_file_path();
  if (!file.empty()) {
    auto found = race_file_find(file, kRaceLongK, key);
    if (!found) return found.error();
    if (*found) {
      auto form = form_of(**found, file);
      if (!form) return form.error();
      race_remember(choices(), key, *form);
      if (log::enabled(log::LogLevel::info))
        log::emit(log::LogLevel::info,
                  fmt::format("kb gemm race: {} M={} N={} K={}: {}, from the race file {}:{} (not raced)",
                              dtype_name(p.dtype), p.M, p.N, p.K, long_k_form_label(*form), file, (*found)->line));
      return *form;
    }
  }
  std::unique_lock<std::mutex> race_lock;
  auto entry = race_entry(choices(), key, rule, [&] { return cuda::stream_is_capturing(p.stream); }, race_lock);
  if (!entry) return entry.error();
  if (*entry) return **entry;  // cached, or not raced now

  const auto race_start = std::chrono::steady_clock::now();  // the first call's cost, in the note
  // Each form's first call, outside the samples: cuBLASLt plans and
  // autotunes its chunks, kb's buffers are allocated, and a form that cannot
  // run the problem drops out (with its reason, for the note).
  // The static rule's form first (race_pick's static candidate, the note's "(rule)").
  std::vector<LongKForm> forms = {rule};
  if (long_k_batches(p))
    forms.push_back(rule == LongKForm::chunks ? LongKForm::sequential_chunks : LongKForm::chunks);
  forms.push_back(LongKForm::wgmma);
  // Clusters of 2 take neighbouring row tiles: with one (M <= 128) half the CTAs would compute on zeros. Where
  // the grid cannot pair up, the form drops out below (not applicable).
  if (p.M > 128) forms.push_back(LongKForm::wgmma_c2);
  // 168-column tiles: at M = 128 the chunks win by far whatever the tile (long_k_race.hpp).
  if (p.M > 128) forms.push_back(LongKForm::wgmma_n168);
  std::vector<LongKForm> ran;
  std::string dropped;
  for (LongKForm f : forms) {
    bool na = false;
    const Status s = run_long_k(p, f, &na);
    if (s.ok() && !na) {
      ran.push_back(f);
      continue;
    }
    if (!s.ok()) {
      if (cuda::context_is_broken()) return s.error();
      (void)cudaGetLastError();
    }
    dropped += fmt::format("; {} did not run ({})", long_k_form_label(f),
                           na ? "not applicable here" : s.error().message);
  }
  if (ran.size() < 2 || ran.front() != rule) {
    // Nothing to race, or the static rule's form itself failed: cache what ran (else the
    // static rule's form, whose real call reports the error), no note.
    const LongKForm only = ran.empty() ? rule : ran.front();
    if (!ran.empty()) race_remember(choices(), key, only);
    return only;
  }
  // The forms run on the stream time_gpu hands them, `p.stream` itself (graph capture of the same stream).
  auto run = [&](int c, void* s) -> Status {
    GemmProblem q = p;
    q.stream = s;
    return run_long_k(q, ran[static_cast<std::size_t>(c)]);
  };
  const int count = static_cast<int>(ran.size());
  // Throttled batches set aside, as kb bench does: at M = 8192 the samples meet the power cap.
  auto ms = median_ms_of_candidates(count, run, p.stream, /*cold_l2=*/true, kRaceRounds, kRaceSamples,
                                    /*set_aside_throttled=*/true);
  if (!ms) return ms.error();
  const int won = race_pick(ms->data(), count, 0);
  race_remember(choices(), key, ran[static_cast<std::size_t>(won)]);
  KB_TRY(race_file_keep(file, kRaceLongK, key, long_k_form_label(ran[static_cast<std::size_t>(won)])));

  const auto label = [&](int c) { return std::string(long_k_form_label(ran[static_cast<std::size_t>(c)])); };
  const double race_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - race_start).count();
  add_gemm_race_note(fmt::format(
      "{} M={} N={} K={}: {}; median of {} cold samples: {} (static rule: {}){}; the race took {:.1f} ms, each "
      "form's first call (cuBLASLt's planning) included",
      dtype_name(p.dtype), p.M, p.N, p.K, label(won), kRaceRounds * kRaceSamples, race_medians(*ms, label),
      long_k_form_label(rule), dropped, race_ms));
  return ran[static_cast<std::size_t>(won)];
}

}  // namespace kb::kernels::gemm_cuda
