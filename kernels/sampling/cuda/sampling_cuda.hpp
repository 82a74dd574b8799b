// kb_cuda_sampling's launcher: top-k / top-p / top-k-then-top-p sampling from
// a [batch, vocab] tensor of probabilities, one sample per row. Plain host
// declarations; the kernels and their rules are in sampling.cu, the choice
// between them in sampling_launch.hpp.
#pragma once

#include <cstdint>

#include "common/result.hpp"
#include "schema/dtype.hpp"
#include "sampling_launch.hpp"

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

// Launches on `stream` (a cudaStream_t) with the configuration
// sampling_launch_config picks for the current device; allocates nothing, no
// synchronization. Argument errors (sizes, dtypes, null pointers) come back
// as values; a row whose probabilities hold no positive mass gets sample -1
// (torch.multinomial refuses such a row; a kernel cannot return an error per
// row). The same seed and configuration give the same samples; another
// configuration (another cluster size, batch or device) draws from the same
// distribution but may give other samples.
Status launch_sampling(const SamplingArgs& a, void* stream);

// launch_sampling with a configuration given (tests force each kernel and
// cluster size): sampling_stream_config or sampling_cluster_config's answer
// for these arguments. A configuration the device cannot run (more shared
// memory than a CTA may take) or that does not match the arguments (vector
// width, slice) is refused as unsupported / invalid_argument.
Status launch_sampling_with(const SamplingArgs& a, const SamplingConfig& config, void* stream);

}  // namespace kb::kernels
