// The SM copy kernel kb measures its copy-bandwidth ceiling with. A
// cudaMemcpyAsync captured into a CUDA graph may run on the copy engines,
// which on an H100 moved 2.4 TB/s where SM kernels (and PyTorch's copy)
// reach about 3 TB/s: a ceiling must not be below what kernels achieve.
#include <cuda_runtime.h>

#include <cstddef>

namespace kb::cuda {

namespace {
// One 16-byte vector per thread, one pass, no grid-stride loop: on an H100
// this measured 3003 GB/s where a grid-stride loop with four loads in flight
// per thread measured 2791-2818 GB/s and torch's b.copy_(a) 2879-3000.
// Does nothing: kb times it like any solution (graph replay, L2 flushed
// before each sample) to record the floor a launch costs in kb's own method.
__global__ void empty_kernel() {}

// One thread copies one 16-byte vector: with L2 flushed, one DRAM read (and
// its TLB walk) and one write past the launch. The floor for any kernel that
// must read memory before it can finish (a batch-1 RMSNorm, say).
__global__ void one_read_kernel(const int4* __restrict__ src, int4* __restrict__ dst) { *dst = *src; }

// Reads every 16-byte vector of a buffer once (the clean L2 flush,
// timing.hpp's L2Flush): the loads allocate in L2 and so evict its dirty
// lines; the XOR is written only if it equals a value the reads cannot
// produce in practice, so the loads are kept without writing anything back.
__global__ void read16_kernel(const int4* src, std::size_t n, int* never) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int4 v = __ldcg(src + i);
  const int x = v.x ^ v.y ^ v.z ^ v.w;
  if (x == 0x5eed1e55 && v.x == 0x0dd0dd0d) *never = x;
}

__global__ void copy16_kernel(const int4* __restrict__ src, int4* __restrict__ dst, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i];
}
}  // namespace

// bytes must be a multiple of 16 and both pointers 16-byte aligned (cudaMalloc'd).
// sm_count is unused (the grid covers the buffer); kept for the callers.
cudaError_t launch_copy_kernel(void* dst, const void* src, std::size_t bytes, int sm_count, cudaStream_t stream) {
  (void)sm_count;
  constexpr unsigned kThreads = 256;
  const std::size_t n = bytes / 16;
  const std::size_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks == 0) return cudaSuccess;
  if (blocks > 0x7fffffffu) return cudaErrorInvalidValue;
  copy16_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(static_cast<const int4*>(src),
                                                                       static_cast<int4*>(dst), n);
  return cudaGetLastError();
}

// bytes: a multiple of 16 (the flush buffer's size, twice the L2's).
// The store target is the buffer itself: written only by the impossible case.
cudaError_t launch_read_kernel(const void* src, std::size_t bytes, cudaStream_t stream) {
  constexpr unsigned kThreads = 256;
  const std::size_t n = bytes / 16;
  const std::size_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks == 0) return cudaSuccess;
  if (blocks > 0x7fffffffu) return cudaErrorInvalidValue;
  read16_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const int4*>(src), n, static_cast<int*>(const_cast<void*>(src)));
  return cudaGetLastError();
}

cudaError_t launch_empty_kernel(cudaStream_t stream) {
  empty_kernel<<<1, 32, 0, stream>>>();
  return cudaGetLastError();
}

cudaError_t launch_one_read_kernel(void* dst, const void* src, cudaStream_t stream) {
  one_read_kernel<<<1, 1, 0, stream>>>(static_cast<const int4*>(src), static_cast<int4*>(dst));
  return cudaGetLastError();
}

}  // namespace kb::cuda
