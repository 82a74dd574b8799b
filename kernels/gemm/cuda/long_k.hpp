// The long-K path of kb's cuBLASLt gemm (cublaslt_gemm.cpp): for K above
// kLongK the product is summed in K chunks of at most kChunkK, each chunk a
// cuBLASLt product into an fp32 buffer (beta = 1 after the first), then one
// rounding to the output dtype (cast_f32 below).
//
// Why: the tensor-core sum of one output element drifts from the exact
// product roughly in proportion to K (H100, cuBLASLt 13.1, largest error
// among elements below 4 in magnitude: 0.0016 at K = 4096, 0.0052 at 14336,
// 0.0096 at 21504, 0.0143 at 28672, N(0,1)-like inputs), so at K = 28672 a
// few elements per million fail FlashInfer-Bench's rule (abs > 0.01 and rel
// > 0.01) against an fp64 product; torch.matmul does the same.
// CUBLAS_COMPUTE_32F_PEDANTIC is exact enough but 16x slower. Chunks of <=
// 14336 keep each tensor-core sum at the error of the shipped K = 14336
// shapes, which pass at every M; the fp32 buffer costs about 3 x M x N x 4
// bytes of extra traffic (0.94-1.10x torch.matmul on an H100; each launch
// has a fixed cost of about 5 us).
// Equal chunks (K a multiple of 8 x chunks: every long-K definition) run as
// one strided-batched product into separate fp32 parts, which cast_f32 adds
// in chunk order (the sequential path's sums) and rounds: one launch whose
// tiles fill the GPU (up to 5% faster than the chunks one after the other at
// M = 128-8192 on an H100, up to 2% slower at M = 2048). What is left at M =
// 512 (1.05-1.08x of torch.matmul, which keeps no fp32 buffer) is mostly the
// buffer's traffic: parts written, read and rounded, ~50 MB.
// Not taken, all measured slower on H100 or H200:
// cuBLASLt's own split-K (2-4 splits, fp32 reduction in its workspace;
// 1.09-1.17 of one full-K product against 1.058 for the batch); more,
// shorter chunks in the batch (one more fp32 part each: 1.125 with 3 chunks,
// 1.150 with 4, against 1.064 with 2); slicing N and casting each slice on a
// side stream while the next slice's batch runs (1.098 against 1.061). An
// fp32 C with a bf16 D (the second chunk rounding as it adds the first) is
// not supported by cuBLASLt 13 for bf16 inputs. kb's own Hopper kernel
// (wgmma_gemm.hpp), which promotes its tensor-core sum every 14336 of K
// instead of chunking, is exact enough in one launch; it is faster than the
// chunks on some shapes and slower on others, so kb_cuda_gemm times it
// against these chunks (as one batch and one by one) on each problem's first
// call and keeps the fastest (long_k_race.hpp).
#pragma once

#include <cstdint>

namespace kb::kernels::gemm_cuda {

inline constexpr std::int64_t kLongK = 20480;   // longer K is summed in chunks
inline constexpr std::int64_t kChunkK = 14336;  // at most this many per chunk

// The static rule's form for chunks that can be one batch (kb_cublaslt_gemm,
// and kb_cuda_gemm where it does not race: under capture, gemm_race=0):
// one by one where the output is at most two 128 x 128 tiles, else one
// batch. From kb_cuda_gemm's race medians on an H200 (K = 28672 float16 and
// 21504 bfloat16, N = 32 .. 8192, M = 17 .. 2048): at M <= 128 and N <= 256
// the batch took 1.05-1.38x the one-by-one time (all 18 problems); at N >=
// 1024, or M = 2048, the batch was fastest or within 1.2% of the one-by-one
// form; four-tile shapes were mixed, so the batch keeps four tiles and more.
// Unaligned N is worse: N = 97 at M = 17 and 130, 1.7-3.2x. Why: cuBLASLt's
// heuristic gives a single chunk of so few tiles a split-K plan (split-K 11 at
// M = 100, N = 256) and the strided batch none. With this rule
// kb_cublaslt_gemm ran 0.725-0.973 of the batch's time where the rule
// differs.
inline bool long_k_one_by_one(std::int64_t M, std::int64_t N) { return ((M + 127) / 128) * ((N + 127) / 128) <= 2; }

// dst[i] = (src[i] + src[S + i] + ... + src[(parts - 1) S + i]), S =
// part_stride, added in that order in fp32, rounded once to float16 (bf16
// false) or bfloat16, i < n, on `stream` (a cudaStream_t). parts > 1 needs
// part_stride >= n and a multiple of 4 (16-byte aligned parts). Returns the
// launch's cudaError_t as an int.
int cast_f32(const float* src, int parts, std::int64_t part_stride, void* dst, std::int64_t n, bool bf16,
             void* stream);

}  // namespace kb::kernels::gemm_cuda
