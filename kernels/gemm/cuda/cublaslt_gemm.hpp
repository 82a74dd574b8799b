// cuBLASLt for kb's gemm solutions, opened at run time (dlopen), never
// linked: libkb must load on machines without CUDA libraries.
//
// - libcublasLt.so.13 (else .so.12, else .so) is opened once, on first use;
//   its functions are called through pointers found with dlsym, declared with
//   cublasLt.h's types.
// - One cuBLASLt handle per device, created lazily under a mutex (cuBLAS
//   handles may be shared by threads; kb never changes a handle's settings).
// - Scratch per (device, stream): 32 MiB of cuBLASLt workspace (Hopper's
//   recommended size; 256-byte aligned) plus the gemv kernel's split-K scratch,
//   one cudaMalloc the first time a gemm runs on that stream, cached for the
//   life of the process. That first call therefore allocates (and zeroes the
//   gemv counters with cudaMemsetAsync on the stream): warm a stream up before
//   timing it or capturing it in a CUDA graph; later calls allocate nothing.
// - One plan per problem: (device, M, N, K, dtype, alignment of A, B and C)
//   -> matmul and layout descriptors plus the algorithm to use. The
//   heuristic (cublasLtMatmulAlgoGetHeuristic) is asked once per key for up
//   to 16 algorithms (split-K reductions in fp32 only); the first call of the
//   key on a stream that is not being captured times each of them on the
//   caller's buffers with kb's timer (clock ramp, then three interleaved
//   rounds of 3 cold samples; kernels/common/cublaslt_autotune.hpp) and keeps
//   the fastest.
// - K > kLongK (long_k.hpp): the product is summed in K chunks through an
//   fp32 buffer per (device, stream), allocated on the first such call
//   outside stream capture and grown as needed, then rounded once. That
//   is planning, once per key, like FlashInfer's plan step: it costs up to
//   about 20 ms plus 16 x 10 runs of the product and L2 flushes, synchronizes the stream, and
//   uses kb's L2 flush buffer (twice the L2 size, allocated once per
//   device). Warm a stream up before timing it. KB_CUBLASLT_AUTOTUNE=0 keeps the heuristic's
//   first algorithm instead. Plans are never freed (a var axis M has few
//   distinct values in practice).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "gemm_problem.hpp"

namespace kb::kernels::gemm_cuda {

inline constexpr std::size_t kLtWorkspaceBytes = std::size_t{32} << 20;

// "" when cuBLASLt was opened and every function kb uses was found, else
// "cuBLASLt not found: ..." with the loader's reasons. Opens the library on
// the first call.
const std::string& cublaslt_unavailable();

// The scratch of (current device, stream), allocated on the first call for
// that pair (see above). The pointer stays valid for the life of the process.
Result<const StreamScratch*> stream_scratch(void* stream);

// C = A @ B^T through cublasLtMatmul on p.stream (float16/bfloat16, fp32
// compute and scale). Code::unsupported when cuBLASLt is absent or has no
// algorithm for the problem. Long K: the chunks one by one or as one batch
// by the static rule (long_k_one_by_one).
Status cublaslt_gemm(const GemmProblem& p);

// The long-K path alone (p.K > kLongK; else as cublaslt_gemm): the K chunks
// as one batch where long_k_batches(p), else, or with `sequential`, one
// after the other. kb_cuda_gemm's long-K race (long_k_race.hpp) times both.
Status cublaslt_long_k_gemm(const GemmProblem& p, bool sequential);

// Whether the long-K chunks of p can run as one strided batch (equal chunks
// of a multiple of 8; every shipped long-K definition).
bool long_k_batches(const GemmProblem& p);

// The workspace of kb's long-K wgmma kernel (wgmma_gemm.hpp) for (current
// device, stream), at least `bytes`, zeroed: allocated (cudaMalloc +
// cudaMemset) on the first call of a larger size, which must not be inside
// stream capture (Code::unsupported says so). The kernel leaves it zeroed.
Result<void*> wgmma_workspace(void* stream, std::size_t bytes);

// Number of cached plans (heuristic queries made so far), for tests.
std::size_t cublaslt_plan_count();

// One line per cached plan: the problem, which algorithm it runs and why
// (autotuned: the winner's heuristic rank and configuration, every
// candidate's median; or the heuristic's choice, and why not tuned).
std::vector<std::string> cublaslt_plan_notes();

}  // namespace kb::kernels::gemm_cuda
