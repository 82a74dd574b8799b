// Kernels behind kb's GPU anti-gaming checks (anti_gaming.cpp): a gate that
// holds a stream until the host opens it (or gives up, so it can never hang
// the GPU), a tensor-core loop that measures the device's MMA rate, and
// TimedCallSample's serial counter and reservoir of kept outputs.
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

// TimedCallSample's serial counter (state[0]) and the set's last serial.
__global__ void begin_call(unsigned long long* serial, unsigned long long* last_of_set) {
  const unsigned long long n = *serial + 1;
  *serial = n;
  *last_of_set = n;
}

__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Reservoir sampling (algorithm R): the slot call n goes to, or -1. Every
// thread of every keep kernel of one call computes the same answer.
__device__ __forceinline__ long long reservoir_slot(unsigned long long n, unsigned long long secret,
                                                    unsigned long long slots) {
  if (n == 0) return -1;
  if (n <= slots) return static_cast<long long>(n - 1);
  const unsigned long long j = mix64(secret ^ (n * 0x9E3779B97F4A7C15ull)) % n;
  return j < slots ? static_cast<long long>(j) : -1;
}

// One output of the call now ending, copied into its slot when drawn; the
// first output's kernel also records the slot's (serial, set).
__global__ void keep_output(const unsigned long long* serial, unsigned long long secret, unsigned long long slots,
                            unsigned long long* meta, long long set, const unsigned char* src, unsigned char* dst,
                            unsigned long long slot_bytes, unsigned long long bytes, bool record) {
  const unsigned long long n = *serial;
  const long long slot = reservoir_slot(n, secret, slots);
  if (slot < 0) return;
  unsigned char* out = dst + static_cast<unsigned long long>(slot) * slot_bytes;
  const unsigned long long tid = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const unsigned long long step = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  if (record && tid == 0) {
    meta[2 * slot] = n;
    meta[2 * slot + 1] = static_cast<unsigned long long>(set);
  }
  unsigned long long done = 0;
  if (((reinterpret_cast<unsigned long long>(src) | reinterpret_cast<unsigned long long>(out)) & 15) == 0) {
    const unsigned long long words = bytes / 16;
    for (unsigned long long w = tid; w < words; w += step)
      reinterpret_cast<uint4*>(out)[w] = reinterpret_cast<const uint4*>(src)[w];
    done = words * 16;
  }
  for (unsigned long long b = done + tid; b < bytes; b += step) out[b] = src[b];
}

}  // namespace

cudaError_t launch_begin_call(unsigned long long* serial, unsigned long long* last_of_set, cudaStream_t stream) {
  begin_call<<<1, 1, 0, stream>>>(serial, last_of_set);
  return cudaGetLastError();
}

cudaError_t launch_keep_output(const unsigned long long* serial, unsigned long long secret, unsigned long long slots,
                               unsigned long long* meta, long long set, const void* src, void* dst,
                               unsigned long long slot_bytes, unsigned long long bytes, bool record, int sm_count,
                               cudaStream_t stream) {
  const unsigned long long want = (bytes / 16 + 255) / 256;
  const unsigned blocks =
      static_cast<unsigned>(want < 1 ? 1 : (want > static_cast<unsigned long long>(2 * sm_count) ? 2 * sm_count : want));
  keep_output<<<blocks, 256, 0, stream>>>(serial, secret, slots, meta, set, static_cast<const unsigned char*>(src),
                                          static_cast<unsigned char*>(dst), slot_bytes, bytes, record);
  return cudaGetLastError();
}

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
