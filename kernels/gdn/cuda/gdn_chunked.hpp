// kb_cuda_gdn's chunked prefill (gdn_chunked.cu): device-side declarations
// for gdn.cu's dispatch.
#pragma once

#include <cuda_runtime_api.h>

#include "gdn_cuda.hpp"

namespace kb::kernels {

// Tokens a chunk: the UT transform inverts a [64, 64] triangle a chunk.
constexpr int kGdnChunk = 64;

// Runs the prefill of `a` (cu_seqlens set, gdn_prefill_uses_chunks(a)) in
// three launches on `stream`; `workspace` holds gdn_workspace_bytes(a).
cudaError_t launch_gdn_chunked_prefill(const GdnArgs& a, void* workspace, void* stream);

}  // namespace kb::kernels
