// What the dsa_paged kernels keep per device and stream.
//
// workspace_for: per-(device, stream) scratch memory, at least 1 MiB: split
// partials of the sparse attention, the indexer's scores
// (kernels/common/stream_workspace.hpp: grown by the first call that needs
// more, kept until exit, refused under stream capture).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <mutex>
#include <utility>

#include "../../common/stream_workspace.hpp"

namespace kb::kernels::dsa_cuda {

inline cudaError_t workspace_for(cudaStream_t stream, std::size_t bytes, void** out) {
  static auto* ws = new StreamWorkspaces(std::size_t{1} << 20);
  return ws->get(stream, bytes, out);
}

// Lets `kernel` use up to the device's opt-in shared memory a CTA, once per
// (kernel, device): launches of different sizes then never race on the
// attribute.
inline cudaError_t allow_max_smem(const void* kernel) {
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, bool>* done = new std::map<std::pair<const void*, int>, bool>;
  int device = 0, max_smem = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(mu);
  if (done->count({kernel, device})) return cudaSuccess;
  if (cudaError_t e = cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device); e != cudaSuccess)
    return e;
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem); e != cudaSuccess)
    return e;
  (*done)[{kernel, device}] = true;
  return cudaSuccess;
}

}  // namespace kb::kernels::dsa_cuda
