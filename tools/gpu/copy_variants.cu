// Which device-to-device copy reaches the highest bandwidth? kb's ceiling
// (lib/cuda/copy_kernel.cu) measured 2810 GB/s on an H100 where torch's
// b.copy_(a) measured 3000 GB/s on the same 1 GiB: a ceiling below what a
// kernel achieves makes "103% of copy bandwidth" possible. This times, side
// by side on one 1 GiB buffer pair (bytes read + written per second, median
// of 20 after a 10 ms warm-up): cudaMemcpyAsync, kb's grid-stride kernel, and
// one-pass kernels where each thread copies U consecutive 16-byte vectors
// (all loads before the stores), with T threads per block.
// build: nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -o copy_variants tools/gpu/copy_variants.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "standalone_cuda.cuh"  // CK()

__global__ void grid_stride4(const int4* __restrict__ src, int4* __restrict__ dst, size_t n) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const int4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a, dst[i + stride] = b, dst[i + 2 * stride] = c, dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

// Block b copies vectors [b * T * U, (b + 1) * T * U): thread t takes t, t + T, ... (coalesced per step).
// kStreaming: evict-first loads and stores (__ldcs / __stcs).
template <int U, bool kStreaming>
__global__ void one_pass(const int4* __restrict__ src, int4* __restrict__ dst, size_t n) {
  const size_t base = (size_t)blockIdx.x * blockDim.x * U + threadIdx.x;
  int4 v[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const size_t i = base + (size_t)u * blockDim.x;
    if (i < n) v[u] = kStreaming ? __ldcs(src + i) : src[i];
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const size_t i = base + (size_t)u * blockDim.x;
    if (i >= n) continue;
    if constexpr (kStreaming) __stcs(dst + i, v[u]);
    else dst[i] = v[u];
  }
}

static double median_ms(const std::function<void()>& run) {
  auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() < 10) {
    run();
    cudaDeviceSynchronize();
  }
  return median_event_ms(20, [] {}, run);
}

int main() {
  const size_t bytes = size_t{1} << 30, n = bytes / 16;
  void *a, *b;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMemset(a, 1, bytes));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  auto report = [&](const char* name, const std::function<void()>& run) {
    const double ms = median_ms(run);
    std::printf("%-34s %.4f ms  %.0f GB/s\n", name, ms, 2.0 * bytes / (ms * 1e-3) / 1e9);
    std::fflush(stdout);
  };
  const auto* s4 = static_cast<const int4*>(a);
  auto* d4 = static_cast<int4*>(b);
  report("cudaMemcpyAsync", [&] { cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice); });
  report("grid-stride x4, 8 blocks/SM (kb)", [&] { grid_stride4<<<sms * 8, 256>>>(s4, d4, n); });
  report("grid-stride x4, 16 blocks/SM", [&] { grid_stride4<<<sms * 16, 256>>>(s4, d4, n); });
  report("grid-stride x4, 32 blocks/SM", [&] { grid_stride4<<<sms * 32, 128>>>(s4, d4, n); });
  report("one-pass U=1 T=256 plain", [&] { one_pass<1, false><<<(n + 255) / 256, 256>>>(s4, d4, n); });
  report("one-pass U=2 T=256 plain", [&] { one_pass<2, false><<<(n + 511) / 512, 256>>>(s4, d4, n); });
  report("one-pass U=4 T=256 plain", [&] { one_pass<4, false><<<(n + 1023) / 1024, 256>>>(s4, d4, n); });
  report("one-pass U=4 T=128 plain", [&] { one_pass<4, false><<<(n + 511) / 512, 128>>>(s4, d4, n); });
  report("one-pass U=8 T=128 plain", [&] { one_pass<8, false><<<(n + 1023) / 1024, 128>>>(s4, d4, n); });
  report("one-pass U=2 T=256 streaming", [&] { one_pass<2, true><<<(n + 511) / 512, 256>>>(s4, d4, n); });
  report("one-pass U=4 T=256 streaming", [&] { one_pass<4, true><<<(n + 1023) / 1024, 256>>>(s4, d4, n); });
  report("one-pass U=4 T=128 streaming", [&] { one_pass<4, true><<<(n + 511) / 512, 128>>>(s4, d4, n); });
  report("one-pass U=8 T=128 streaming", [&] { one_pass<8, true><<<(n + 1023) / 1024, 128>>>(s4, d4, n); });
  CK(cudaGetLastError());
  return 0;
}
