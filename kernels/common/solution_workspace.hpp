// The scratch of one call of a kb CUDA solution (host code): the stream's
// buffer from the solution's own StreamWorkspaces (stream_workspace.hpp),
// with the errors a caller can act on.
#pragma once

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstddef>
#include <string_view>

#include "common/result.hpp"
#include "cuda/runtime.hpp"
#include "stream_workspace.hpp"

namespace kb::kernels {

// At least `bytes` of `stream`'s buffer. Inside stream capture a buffer too
// small cannot grow: that is `unsupported`, naming the fix.
inline Result<void*> solution_workspace(StreamWorkspaces& buffers, void* stream, std::size_t bytes,
                                        std::string_view solution) {
  void* mem = nullptr;
  const cudaError_t e = buffers.get(static_cast<cudaStream_t>(stream), bytes, &mem);
  if (e == cudaErrorStreamCaptureUnsupported)
    return make_error(Code::unsupported,
                      fmt::format("{}: its workspace ({} bytes) is allocated by the first call of this size outside "
                                  "stream capture; run the call once before capturing it",
                                  solution, bytes));
  KB_TRY(cuda::check(e, fmt::format("{}: allocating its {}-byte workspace", solution, bytes)));
  return mem;
}

}  // namespace kb::kernels
