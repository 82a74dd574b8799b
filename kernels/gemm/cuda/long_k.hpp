// The long-K path of kb's cuBLASLt gemm (cublaslt_gemm.cpp): for K above
// kLongK the product is summed in K chunks of at most kChunkK, each chunk a
// cuBLASLt product into an fp32 buffer (beta = 1 after the first), then one
// rounding to the output dtype (cast_f32 below).
//
// Why (H100, cuBLASLt 13.1, benchmarks/h100-2026-11-24-s3/gemm_precision_by_k.txt):
// the tensor-core sum of one output element drifts from the exact product
// roughly in proportion to K (largest error among elements below 4 in
// magnitude: 0.0016 at K = 4096, 0.0052 at 14336, 0.0096 at 21504, 0.0143 at
// 28672, N(0,1)-like inputs), so at K = 28672 a few elements per million fail
// FlashInfer-Bench's rule (abs > 0.01 and rel > 0.01) against an fp64
// product; torch.matmul does the same. CUBLAS_COMPUTE_32F_PEDANTIC is exact
// enough but 16x slower. Chunks of <= 14336 keep each tensor-core sum at the
// error of the shipped K = 14336 shapes, which pass at every M; the fp32
// buffer costs about 3 x M x N x 4 bytes of extra traffic. Measured against
// torch.matmul (benchmarks/h100-2026-11-24-s3/compare_gemm_long_k.md):
// 0.94-1.10x; at M = 512 a 10752-long chunk took 0.0843 ms where the whole
// 21504 took 0.1575: each launch has a fixed cost of about 5 us.
// Equal chunks (K a multiple of 8 x chunks: every long-K definition) run as
// one strided-batched product into separate fp32 parts, which cast_f32 adds
// in chunk order (the sequential path's sums) and rounds: one launch whose
// tiles fill the GPU. Side by side in one run (H100,
// benchmarks/h100-2026-11-24-s6/long_k_*.md, KB_GEMM_LONG_K=sequential for
// the other): 5376 x 21504 M = 128 98.7 against 104.6 us, M = 512 170.1
// against 174.4, M = 2048 661.5 against 654.4, M = 8192 2629 against 2699;
// 8192 x 28672 M = 128 180.5 against 190.6, M = 512 330.7 against 333.5,
// M = 2048 1304 against 1285, M = 8192 5840 against 5717. What is left
// at M = 512 (1.05-1.08x of torch.matmul, which keeps no fp32 buffer) is
// mostly the buffer's traffic: parts written, read and rounded, ~50 MB.
// Other formulations, side by side in one run with an fp64 check
// (tools/gpu/long_k_variants.cu, benchmarks/h100-2026-11-25-s11/
// long_k_variants.txt; 8192 x 28672 M = 512, times over one full-K cuBLASLt
// product, which fails the rule on 20 of 4.2M elements): these chunks as one
// batch 1.058, one after the other 1.068, cuBLASLt's own split-K (2, 3, 4
// splits, fp32 reduction in its workspace) 1.09-1.17, all exact enough; an
// fp32 C with a bf16 D (the second chunk rounding as it adds the first) is
// not supported by cuBLASLt 13 for bf16 inputs. More, shorter chunks in the
// batch (more tiles to fill the SMs, one more fp32 part each) are slower
// (H100, benchmarks/h100-2026-11-28-s15/long_k_chunks.txt, same run):
// 5376 x 21504 M = 512 1.064 of one product with 2 chunks, 1.125 with 3,
// 1.150 with 4; M = 2048 1.055 / 1.079 / 1.170; 8192 x 28672 M = 512 1.061
// with 2, 1.098 with 4. Nor does slicing N and casting each slice on a side
// stream while the next slice's batch runs (H200, benchmarks/h200-2026-11-28-
// s16/long_k_slices.md): 5376 x 21504 M = 512 1.098 with 2 slices against
// 1.061 for one batch. kb's own Hopper kernel (wgmma_gemm.hpp), which
// promotes its tensor-core sum every 14336 of K instead of chunking, is exact
// enough in one launch and, since session 19, 0.5-7% faster than these
// chunks in tools/gpu/long_k_variants.cu from M = 2048, but mixed in kb bench
// (H200, benchmarks/h200-2026-11-28-s19/: 1.7% faster to 9% slower at M >=
// 512): kb_cuda_gemm times it against these chunks (as one batch and one
// by one) on each problem's first call and keeps the fastest
// (long_k_race.hpp).
#pragma once

#include <cstdint>

namespace kb::kernels::gemm_cuda {

inline constexpr std::int64_t kLongK = 20480;   // longer K is summed in chunks
inline constexpr std::int64_t kChunkK = 14336;  // at most this many per chunk

// The static rule's form for chunks that can be one batch (kb_cublaslt_gemm,
// and kb_cuda_gemm where it does not race: under capture, KB_GEMM_RACE=0):
// one by one where the output is at most two 128 x 128 tiles, else one
// batch. H200, session 29 (benchmarks/h200-2026-12-02-s29/race_sweep_*.md,
// kb_cuda_gemm's race medians, K = 28672 float16 and 21504 bfloat16, N =
// 32 .. 8192, M = 17 .. 2048): at M <= 128 and N <= 256 the batch took
// 1.05-1.38x the one-by-one time (all 18 problems); at N >= 1024, or M =
// 2048, the batch was fastest or within 1.2% of the one-by-one form. In
// between (M = 512, N = 32 or 96: four tiles) the one-by-one form won 6 of
// the 8 races of calls 2 and 3 (by 3-11%) and the batch 2 (by 6-9%); other
// four-tile shapes (M = 256, N = 256; M = 128, N = 512) were not measured,
// so the batch keeps four tiles and more. Unaligned N is worse: N = 97 at M = 17 and 130
// (tests/gpu/test_gemm.cpp, session 28) 1.7-3.2x. Why: cuBLASLt's heuristic
// gives a single chunk of so few tiles a split-K plan (split-K 11 at M =
// 100, N = 256) and the strided batch none. kb_cublaslt_gemm with this rule
// against the batch everywhere, side by side (race_sweep_ab_call3_*.md):
// 0.725-0.973 of its time where the rule differs, 0.955-1.044 (noise) where
// it does not.
inline bool long_k_one_by_one(std::int64_t M, std::int64_t N) { return ((M + 127) / 128) * ((N + 127) / 128) <= 2; }

// dst[i] = (src[i] + src[S + i] + ... + src[(parts - 1) S + i]), S =
// part_stride, added in that order in fp32, rounded once to float16 (bf16
// false) or bfloat16, i < n, on `stream` (a cudaStream_t). parts > 1 needs
// part_stride >= n and a multiple of 4 (16-byte aligned parts). Returns the
// launch's cudaError_t as an int.
int cast_f32(const float* src, int parts, std::int64_t part_stride, void* dst, std::int64_t n, bool bf16,
             void* stream);

}  // namespace kb::kernels::gemm_cuda
