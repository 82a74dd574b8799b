// Kernels behind kb's GPU anti-gaming checks (anti_gaming.cpp): a gate that
// holds a stream until the host opens it (or gives up, so it can never hang
// the GPU), and a tensor-core loop that measures the device's MMA rate.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <mma.h>

namespace kb::cuda {

namespace {

__global__ void gate_kernel(volatile int* release, volatile int* expired, long long timeout_cycles) {
  long long start = clock64();
  while (*release == 0) {
    if (clock64() - start > timeout_cycles) {
      *expired = 1;  // the host learns the gate did not hold to the end
      __threadfence_system();
      break;
    }
  }
}

// Each warp chains dependent-free bf16 16x16x16 MMAs on register fragments.
__global__ void mma_loop(float* sink, int iterations) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c0, c1, c2, c3;
  wmma::fill_fragment(a, __float2bfloat16(1.0f / 1024));
  wmma::fill_fragment(b, __float2bfloat16(1.0f / 1024));
  wmma::fill_fragment(c0, 0.f);
  wmma::fill_fragment(c1, 0.f);
  wmma::fill_fragment(c2, 0.f);
  wmma::fill_fragment(c3, 0.f);
  for (int i = 0; i < iterations; ++i) {
    wmma::mma_sync(c0, a, b, c0);
    wmma::mma_sync(c1, a, b, c1);
    wmma::mma_sync(c2, a, b, c2);
    wmma::mma_sync(c3, a, b, c3);
  }
  float s = c0.x[0] + c1.x[0] + c2.x[0] + c3.x[0];
  if (s == 12345.f) sink[threadIdx.x] = s;  // keeps the loop alive; never true in practice
#else
  if (iterations < 0) sink[0] = 0;
#endif
}

}  // namespace

// About 2 s at 2 GHz: far beyond a probe, short enough to never look like a hang.
cudaError_t launch_gate(volatile int* release, volatile int* expired, cudaStream_t stream) {
  gate_kernel<<<1, 1, 0, stream>>>(release, expired, 4'000'000'000LL);
  return cudaGetLastError();
}

// FLOPs of one launch: blocks * 4 warps * iterations * 4 MMAs * 2*16*16*16.
cudaError_t launch_mma_loop(float* sink, int blocks, int iterations, cudaStream_t stream, double* flops) {
  *flops = static_cast<double>(blocks) * 4 * iterations * 4 * 2.0 * 16 * 16 * 16;
  mma_loop<<<blocks, 128, 0, stream>>>(sink, iterations);
  return cudaGetLastError();
}

}  // namespace kb::cuda
