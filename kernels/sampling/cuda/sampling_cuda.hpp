// kb_cuda_sampling's launcher: top-k / top-p / top-k-then-top-p sampling from
// a [batch, vocab] tensor of probabilities, one sample per row. Plain host
// declarations; the kernel and its rules are in sampling.cu.
#pragma once

#include <cstdint>

#include "common/result.hpp"
#include "schema/dtype.hpp"

namespace kb::kernels {

struct SamplingArgs {
  const void* probs = nullptr;  // [batch, vocab], contiguous; float32, float16 or bfloat16
  DType probs_dtype = DType::float32;
  std::int64_t batch = 0;
  std::int64_t vocab = 0;
  const void* top_k = nullptr;  // [batch] int32/int64, or null: no top-k rule
  DType top_k_dtype = DType::int32;
  const void* top_p = nullptr;  // [batch] float32/float16/bfloat16, or null: no top-p rule
  DType top_p_dtype = DType::float32;
  void* samples = nullptr;  // [batch] int64 or int32
  DType samples_dtype = DType::int64;
  std::uint64_t seed = 0;  // with the row and the round, the key of every random number drawn
  // Rejection rounds before the exact search takes over (tests set 0 or 1 to
  // reach the search on every row).
  int rejection_rounds = 32;
};

// One CTA per row. `vector_width` elements a load (16-byte loads where the
// rows are 16-byte aligned and vocab is a multiple of it, else 1);
// `block_threads` a multiple of 32, at most 1024, at least four loads a
// thread before the block grows.
struct SamplingConfig {
  int vector_width = 1;
  int block_threads = 32;
};

SamplingConfig sampling_launch_config(std::int64_t vocab, int element_bytes, bool rows_aligned16);

// Launches on `stream` (a cudaStream_t); allocates nothing, no
// synchronization. Argument errors (sizes, dtypes, null pointers) come back
// as values; a row whose probabilities hold no positive mass gets sample -1
// (torch.multinomial refuses such a row; a kernel cannot return an error per
// row).
Status launch_sampling(const SamplingArgs& a, void* stream);

}  // namespace kb::kernels
