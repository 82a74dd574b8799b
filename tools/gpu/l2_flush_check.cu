// Does kb's clean L2 flush (lib/cuda/timing.hpp L2Flush: the memset of twice
// the L2 size, then one read of it all) leave the L2 as cold as the write
// flush (the memset alone, nvbench's way), and what does the write flush's
// dirty L2 cost the kernel timed after it? Two probes, each after the same
// flushes (none, write, clean):
//   1. latency: one thread chases pointers through 4096 lines spread over a
//      32 MB buffer it has just read (so they were in L2), loads that skip
//      L1 (ld.global.cg): cycles per load. L2 hits after no flush; if the
//      clean flush evicts as well as the write flush, both read DRAM latency.
//   2. a read of R MB (16-byte vectors, one pass; R = 16, 73, 117, 470: the
//      gemv weights' sizes), timed by events after the flush: the write
//      flush's dirty lines are written back while it reads.
// Built by tools/gpu/prepare.sh; run by on_device.sh ceilings.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "standalone_cuda.cuh"  // CK(), median_event_ms()

namespace {

constexpr int kChaseLines = 4096;

// buf[i] holds the next word's index (the chase order, one word per
// 128-byte line): `steps` dependent loads, timed by the SM's cycle counter.
__global__ void chase(const unsigned long long* buf, unsigned long long start, int steps, long long* cycles,
                      unsigned long long* sink) {
  unsigned long long i = start;
  const long long t0 = clock64();
  for (int s = 0; s < steps; ++s) i = __ldcg(buf + i);
  const long long t1 = clock64();
  *cycles = t1 - t0;
  *sink = i;
}

__global__ void read16(const int4* src, std::size_t n, int* never) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int4 v = __ldcg(src + i);
  if ((v.x ^ v.y ^ v.z ^ v.w) == 0x5eed1e55 && v.x == 0x0dd0dd0d) *never = v.x;
}

void launch_read(const void* p, std::size_t bytes, int* never) {
  const std::size_t n = bytes / 16;
  read16<<<static_cast<unsigned>((n + 255) / 256), 256>>>(static_cast<const int4*>(p), n, never);
}

}  // namespace

int main() {
  int l2 = 0;
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const std::size_t flush_bytes = std::size_t{2} * l2;
  const std::size_t chase_bytes = std::size_t{32} << 20;
  const std::size_t max_read = std::size_t{470} << 20;
  void *flush = nullptr, *chase_buf = nullptr, *data = nullptr;
  long long* cycles = nullptr;
  unsigned long long* sink = nullptr;
  int* never = nullptr;
  CK(cudaMalloc(&flush, flush_bytes));
  CK(cudaMalloc(&chase_buf, chase_bytes));
  CK(cudaMalloc(&data, max_read));
  CK(cudaMalloc(&cycles, sizeof(long long)));
  CK(cudaMalloc(&sink, sizeof(unsigned long long)));
  CK(cudaMalloc(&never, sizeof(int)));
  CK(cudaMemset(data, 0x3c, max_read));

  // The chase: kChaseLines lines at random among the buffer's 128-byte lines,
  // visited in a random cycle.
  const std::size_t lines = chase_bytes / 128;
  std::mt19937_64 rng(7);
  std::vector<std::size_t> pick(lines);
  std::iota(pick.begin(), pick.end(), 0);
  std::shuffle(pick.begin(), pick.end(), rng);
  pick.resize(kChaseLines);
  std::vector<unsigned long long> host(chase_bytes / 8, 0);
  for (int i = 0; i < kChaseLines; ++i) host[pick[i] * 16] = pick[(i + 1) % kChaseLines] * 16;
  CK(cudaMemcpy(chase_buf, host.data(), chase_bytes, cudaMemcpyHostToDevice));
  const auto* cb = static_cast<const unsigned long long*>(chase_buf);
  const unsigned long long start = pick[0] * 16;

  const char* names[3] = {"none", "write", "clean"};
  auto do_flush = [&](int mode, int k) {
    if (mode == 0) return;
    cudaMemsetAsync(flush, k & 0xff, flush_bytes);
    if (mode == 2) launch_read(flush, flush_bytes, never);
  };

  std::printf("device: %s, %d SMs, L2 %d MiB; flush buffer %zu MiB\n\n", prop.name, prop.multiProcessorCount, l2 >> 20,
              flush_bytes >> 20);
  std::printf("1. pointer chase over %d lines of a 32 MB buffer just read (ld.global.cg): cycles per load, median of 9\n\n",
              kChaseLines);
  std::printf("| flush | cycles per load |\n| --- | ---: |\n");
  for (int mode = 0; mode < 3; ++mode) {
    std::vector<double> per;
    for (int r = 0; r < 9; ++r) {
      chase<<<1, 1>>>(cb, start, kChaseLines, cycles, sink);  // brings the lines into L2
      do_flush(mode, r);
      chase<<<1, 1>>>(cb, start, kChaseLines, cycles, sink);
      long long c = 0;
      CK(cudaMemcpy(&c, cycles, sizeof c, cudaMemcpyDeviceToHost));
      per.push_back(static_cast<double>(c) / kChaseLines);
    }
    std::sort(per.begin(), per.end());
    std::printf("| %s | %.0f |\n", names[mode], per[per.size() / 2]);
  }
  CK(cudaGetLastError());

  std::printf("\n2. one read of R MB (16-byte vectors, ld.global.cg), cold after the flush: us, median of 30 "
              "(GB/s)\n\n| R MB | write | clean | none (warm where R fits L2) |\n| ---: | ---: | ---: | ---: |\n");
  for (std::size_t mb : {16, 73, 117, 470}) {
    const std::size_t bytes = mb << 20;
    double us[3];
    for (int mode : {1, 2, 0}) {
      int k = 0;
      launch_read(data, bytes, never);  // warm-up
      us[mode] = 1e3 * median_event_ms(30, [&] { do_flush(mode, k++); }, [&] { launch_read(data, bytes, never); });
    }
    std::printf("| %zu | %.1f (%.0f) | %.1f (%.0f) | %.1f (%.0f) |\n", mb, us[1], bytes / us[1] / 1e3, us[2],
                bytes / us[2] / 1e3, us[0], bytes / us[0] / 1e3);
  }
  CK(cudaGetLastError());
  return 0;
}
