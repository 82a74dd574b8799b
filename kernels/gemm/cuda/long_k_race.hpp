// kb_cuda_gemm's choice for long K (K > kLongK, M above the gemv's range)
// among cuBLASLt's K chunks as one batch, the same chunks one after the
// other, and kb's Hopper wgmma kernel in single CTAs, (M > 128, where the
// grid pairs up) in clusters of 2, and (M > 128) in single CTAs on tiles of
// 168 columns instead of 256, measured per problem.
//
// Why measure: every form is exact enough (long_k.hpp, wgmma_gemm.hpp), and
// none is fastest on every shape. On an H200 (5376 x 21504 and 8192 x 28672,
// 25 interleaved cold samples per form) the batched chunks were fastest at
// M = 128 (kb's kernel 1.26-1.40x slower there), kb's kernel at M = 512 on
// 8192 x 28672 and at M = 2048 on 5376 x 21504 (by 1.4-3.2%), the chunks one
// by one on 8192 x 28672 from M = 1024 and on 5376 x 21504 at M = 8192 (by
// 1.1-5.4%); on N = 97 the chunks one by one 1.7-6x faster than the batch.
// Racing, kb_cuda_gemm ran 0.996-0.998 of the batched chunks' time (median
// of 12 kb bench rows; 0.948 at best). So, like the small-M race
// (gemv_or_cublaslt.hpp), the first call of a problem on a stream that is
// not being captured runs each form once (cuBLASLt plans and autotunes its
// chunks, buffers are allocated), times them (race.hpp: kRaceRounds x
// kRaceSamples cold samples each, interleaved) and caches the fastest; the
// static rule's form keeps the problem within kRaceTieMargin: the batched
// chunks, or the chunks one by one on outputs of at most two 128 x 128 tiles
// (long_k_one_by_one in long_k.hpp).
//
// - Forms that cannot run the problem stay out: kb's kernel off compute
//   capability 9.0, with N or K not a multiple of 8, or unaligned operands;
//   the one-after-the-other form where the chunks cannot be one batch anyway
//   (it is then the only cuBLASLt form). One form left: no race, no note.
// - Clusters of 2 share each weight block by TMA multicast: a third less
//   traffic from L2. At full clock (kb bench, H200) they were 1-4% faster
//   than single CTAs at M >= 2048 and slower at M = 512; back-to-back at a
//   lower clock never more than 2% faster. So both race.
// - Tiles of 168 columns (wgmma_gemm.hpp, WgmmaGemmArgs::tile_n says why)
//   against kb's 256 (H200, times over one cuBLASLt product): 5376 x 21504
//   at M = 512 0.908 against 0.946 and faster up to M = 4096, slower at
//   8192; on 8192 x 28672 (no whole number of 168-column tiles) slower at
//   M = 512-4096, faster at 8192. So it races from M = 129, where kb's
//   kernel does.
// - The race file (tuning gemm_race_file) keeps the winners across
//   processes (race_file.hpp): a problem the file holds for this machine is
//   not raced (nor left to the static rule under capture or gemm_race=0),
//   and each race appends its winner.
// - gemm_race=0 (read for problems not yet raced) and a call under stream
//   capture take the static rule's form, uncached.
// - ForcedLongKForm (below) runs one form, no race: for tests.
// - The key (race.hpp's RaceKey): device, dtype, M, N, K, whether A, B and C
//   are 16-byte aligned.
// - Throttled batches are set aside and run again after a rest, as kb bench
//   does (median_ms_of_candidates' set_aside_throttled): without it the race
//   ran at M = 8192 under the power cap, timed the batched chunks 22% slower
//   than kb bench then did, and picked kb's kernel, 6-7% slower in kb bench.
// The race costs each form's first call (cuBLASLt's autotuning of its chunk
// plans included) plus forms x 26 cold runs and the rests (H200, the two
// shipped long-K shapes: 0.2-1.8 s up to M = 2048, 2.3-5.6 s at 4096,
// 4.8-8.0 s at 8192, 7.7-12.7 s at 16384); it synchronizes the stream. Races
// run one at a time on a device (race.hpp); a call of a problem already raced
// never waits for one.
#pragma once

#include "common/result.hpp"
#include "gemm_problem.hpp"

namespace kb::kernels::gemm_cuda {

enum class LongKForm {
  chunks,             // cuBLASLt's K chunks as one strided batch (one after the other where they cannot be)
  sequential_chunks,  // cuBLASLt's K chunks one after the other
  wgmma,              // kb's wgmma kernel, single CTAs
  wgmma_c2,           // kb's wgmma kernel, clusters of 2
  wgmma_n168,         // kb's wgmma kernel, single CTAs on 128 x 168 tiles (WgmmaGemmArgs::tile_n)
};
inline constexpr LongKForm kLongKForms[] = {LongKForm::chunks, LongKForm::sequential_chunks, LongKForm::wgmma,
                                            LongKForm::wgmma_c2, LongKForm::wgmma_n168};

// "cuBLASLt chunks", "cuBLASLt chunks one by one", "kb wgmma", "kb wgmma (clusters of 2)",
// "kb wgmma (168-column tiles)". No label holds ", ": race notes list the
// candidates separated by it (tests/gpu/test_gemm.cpp reads them back).
const char* long_k_form_label(LongKForm form);

// kb_cuda_gemm's form for p (p.K > kLongK): forced (ForcedLongKForm),
// cached, raced now, or the static rule (see above). An error only when the
// CUDA context broke.
Result<LongKForm> gemm_long_k_choice(const GemmProblem& p);

// While one lives, kb_cuda_gemm's long-K calls on the constructing thread run
// in `form`, neither raced nor cached (for tests that check each form against
// the oracle through kb_cuda_gemm). Nests; not for use across threads.
class ForcedLongKForm {
 public:
  explicit ForcedLongKForm(LongKForm form) noexcept;
  ~ForcedLongKForm();
  ForcedLongKForm(const ForcedLongKForm&) = delete;
  ForcedLongKForm& operator=(const ForcedLongKForm&) = delete;
  // The innermost live one's form on this thread, if any.
  static const LongKForm* current() noexcept;

 private:
  LongKForm form_;
  const ForcedLongKForm* prev_;
};

// Runs p in `form`. Where kb's kernel cannot run p: with `not_applicable`
// set to true and nothing run; without (nullptr), the batched chunks instead.
Status run_long_k(const GemmProblem& p, LongKForm form, bool* not_applicable = nullptr);

}  // namespace kb::kernels::gemm_cuda
