// kb_cuda_gemm's choice for long K (K > kLongK, M above the gemv's range)
// among cuBLASLt's K chunks as one batch, the same chunks one after the
// other, and kb's Hopper wgmma kernel in single CTAs, (M > 128, where the
// grid pairs up) in clusters of 2, and (M > 128) in single CTAs on tiles of
// 168 columns instead of 256, measured per problem.
//
// Why measure: every form is exact enough (long_k.hpp, wgmma_gemm.hpp), and
// none is fastest on every shape. H200, session 28 (benchmarks/h200-2026-
// 12-02-s28/long_k_notes_*.txt, 25 interleaved cold samples per form): on
// 5376 x 21504 and 8192 x 28672 the batched chunks fastest at M = 128 (kb's
// kernel 1.26-1.40x slower there), kb's kernel at M = 512 on 8192 x 28672
// and at M = 2048 on 5376 x 21504 (1.4-3.2%), the chunks one by one on
// 8192 x 28672 from M = 1024 and on 5376 x 21504 at M = 8192 (1.1-5.4%
// where they won); on N = 97 (tests/gpu/test_gemm.cpp) the chunks one by one
// 1.7-6x faster than the batch. Two races of each problem picked the same
// form on 9 of 12; on the other 3 the second kept the batch within the 1%
// margin. Side by side in kb bench (two A/B runs
// against KB_GEMM_LONG_K=chunks in one call, long_k_ab_call2_*.md),
// kb_cuda_gemm ran 0.996 and 0.998 of the batched chunks' time (median of 12
// rows; 0.948 at best); its kb / torch.matmul rows over 1.03 fell from 7 of
// 12 to 4 of 12 in both runs. So, like the small-M race
// (gemv_or_cublaslt.hpp), the first call of a problem on a stream that is
// not being captured runs each form once (cuBLASLt plans and autotunes its
// chunks, buffers are allocated), times them (race.hpp: kRaceRounds x
// kRaceSamples cold samples each, interleaved) and caches the fastest; the
// static rule's form keeps the problem within kRaceTieMargin: the batched
// chunks (kb's default before the race), or the chunks one by one on outputs
// of at most two 128 x 128 tiles (long_k_one_by_one in long_k.hpp, since
// session 29).
//
// - Forms that cannot run the problem stay out: kb's kernel off compute
//   capability 9.0, with N or K not a multiple of 8, or unaligned operands;
//   the one-after-the-other form where the chunks cannot be one batch anyway
//   (it is then the only cuBLASLt form). One form left: no race, no note.
// - Clusters of 2 share each weight block by TMA multicast: a third less
//   traffic from L2. In long_k_variants (back-to-back launches, SM clock
//   about 1.55 GHz) they were never more than 2% faster than single CTAs,
//   and were not raced until session 30. In kb bench (clock up to 1.98 GHz),
//   forced by KB_GEMM_LONG_K (benchmarks/h200-2026-12-02-s30/
//   long_k_forced_call9.md, kb / torch.matmul in one call): at M = 2048
//   1.019 and 1.013 against 1.028-1.031 and 1.025-1.026 for single CTAs, at
//   M = 8192 1.053-1.058 against 1.095-1.101, at M = 512 slower (1.085 and
//   1.010 against 1.061-1.064 and 0.967-0.990). So both race.
// - Tiles of 168 columns (wgmma_gemm.hpp, WgmmaGemmArgs::tile_n says why)
//   against kb's 256, in long_k_variants (H200, session 32, benchmarks/
//   h200-2026-12-02-s32/long_k_variants_n168_call1.txt, times over one
//   cuBLASLt product): 5376 x 21504 at M = 512 0.908 against 0.946, 1024
//   1.036 against 1.056, 2048 1.017 against 1.021, 4096 1.018 against
//   1.027, and slower at 8192 (1.023 against 1.011); on 8192 x 28672 (no
//   whole number of 168-column tiles) slower at M = 512-4096 (1.073 against
//   1.025 at 512), faster at 8192 (1.018-1.039 against 1.033). So it races
//   from M = 129, where kb's kernel does. Session 33 (16-byte stores,
//   promotion every 14336 of K; benchmarks/h200-2026-12-03-s33/
//   long_k_race_notes_call2.txt): it won at M = 512 and 1024 on 5376 x
//   21504, kb's kernel on 256 columns at 2048-4096 there and at 512-2048 on
//   8192 x 28672, clusters of 2 at 8192 x 28672 M = 4096, cuBLASLt's chunks
//   at M = 128 and one by one at 8192.
// - KB_GEMM_RACE_FILE=path keeps the winners across processes
//   (race_file.hpp): a problem the file holds for this machine is not raced
//   (nor left to the static rule under capture or KB_GEMM_RACE=0), and each
//   race appends its winner.
// - KB_GEMM_LONG_K=chunks, sequential, wgmma, wgmma-c2 or wgmma-n168 runs that form, no
//   race (read on every long-K call; a long-K product takes 70 us or more).
// - KB_WGMMA_EXPERIMENT=release-early runs kb's kernel with
//   WgmmaGemmArgs::release_early, for timing it in kb bench (not a setting:
//   it measured no faster).
// - KB_GEMM_RACE=0 (read for problems not yet raced) and a call under stream
//   capture take the static rule's form, uncached.
// - The key (race.hpp's RaceKey): device, dtype, M, N, K, whether A, B and C
//   are 16-byte aligned.
// - Throttled batches are set aside and run again after a rest, as kb bench
//   does (median_ms_of_candidates' set_aside_throttled): without it the race
//   ran at M = 8192 under the power cap, timed the batched chunks 22% slower
//   than kb bench then did, and picked kb's kernel, 6-7% slower in kb bench.
// The race costs each form's first call (cuBLASLt's autotuning of its chunk
// plans included) plus forms x 26 cold runs and the rests: 0.17-1.7 s up to
// M = 2048, 0.6-2.2 s at M = 4096, 2-5.6 s at M = 8192 (H200, the two
// shipped long-K shapes, session 28; with clusters of 2 in the race, session
// 30: 0.19-0.86 s up to M = 2048, 3.5 and 7.2 s at M = 8192, M = 4096 not
// measured; with 168-column tiles too, session 32, long_k_race_notes_call3
// .txt: 0.2-1.8 s up to M = 2048, 2.3 and 5.6 s at 4096, 4.8 and 8.0 s at
// 8192, 7.7 and 12.7 s at 16384); it synchronizes the stream. Races run
// one at a time on a device (race.hpp); a call of a problem already raced
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

// kb_cuda_gemm's form for p (p.K > kLongK): forced, cached, raced now, or
// the static rule (see above). An error only when the CUDA context broke.
Result<LongKForm> gemm_long_k_choice(const GemmProblem& p);

// Runs p in `form`. Where kb's kernel cannot run p: with `not_applicable`
// set to true and nothing run; without (nullptr), the batched chunks instead.
Status run_long_k(const GemmProblem& p, LongKForm form, bool* not_applicable = nullptr);

}  // namespace kb::kernels::gemm_cuda
