// The qk 192 / vo 128 instantiation of the prefill kernel
// (kernels/attention/prefill.cuh) for kb_cuda_mla_ragged_prefill; the launcher
// that checks the arguments is launch_gqa_prefill
// (kernels/attention/prefill_gqa.cu). Own file: compiles beside it.
#include <cuda_runtime.h>

#include "prefill.cuh"

namespace kb::kernels {

// 8 warps x 16 rows (BM 128), 32-key tiles: 94 KB of shared memory, two CTAs
// per SM.
using Mla192 = prefill::Config<192, 128, 1, 8, 1, 32, false>;

cudaError_t launch_prefill_qk192_vo128(const prefill::Params& p, prefill::Mode mode, cudaStream_t stream) {
  return prefill::launch<Mla192, 2>(p, mode, stream);
}

}  // namespace kb::kernels
