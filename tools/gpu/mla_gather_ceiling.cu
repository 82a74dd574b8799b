// What read bandwidth can ANY kernel reach on the MLA decode KV cache layout
// with random page order? The paged cache is two arrays, ckv [pages, ps, 512]
// bf16 (1024 B a row) and kpe [pages, ps, 64] bf16 (128 B a row), so at page
// size 1 every key row is a random 1024-byte ckv read plus a random 128-byte
// kpe read. Our decode kernel reached 83% of copy bandwidth at ps 1 but 94-96%
// at ps 64; the suspicion was that the random 128-byte kpe rows have poor DRAM
// efficiency and set that ceiling. They do not: on an H100 the real layout
// gathers at 96-97% of copy (benchmarks/h100-2026-11-25-s7/mla_gather_ceiling.txt),
// so the kernel, not the layout, was the limit. This times read-only gathers that do
// nothing but load every byte in page-table order (and XOR it into a checksum):
//   ckv+kpe  the real layout, both arrays, same row index in each
//   ckv      only the 1024-byte rows
//   kpe      only the 128-byte rows
//   contig   the same bytes as ckv+kpe read sequentially (no page table)
// for ps 1 and 64 and caches of ~604 MB and ~2416 MB (rows = bytes / 1152),
// pages in a fixed random permutation (mt19937 seed 1234). Each variant is
// reported as bytes read / s and as % of copy bandwidth: cudaMemcpyAsync of
// 1 GiB device to device, (read + write bytes) / s, median of 20, as the
// harness defines it. Each gather sample is preceded (outside the timed
// interval, same stream) by an L2 flush; 3 warm-ups, then median of 15.
// build: nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -o mla_gather_ceiling tools/gpu/mla_gather_ceiling.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "standalone_cuda.cuh"  // CK()

enum class Mode { kBoth, kCkv, kKpe, kContig };
constexpr int kThreads = 256;
constexpr int kUnroll = 8;  // independent 16-byte loads per thread per grid-stride step

// Address of 16-byte vector j of the gather. The gather is a flat stream of
// kV vectors per logical row (64 of ckv then 8 of kpe for kBoth), so 32
// consecutive lanes read 512 contiguous bytes of a row, every 32-byte sector
// touched is fully used (kV, 64 and 8 are even), and a warp straddling a row
// boundary simply reads the tail of one row and the head of the next. The
// page-table read (4 B a row at ps 1, 0.35% of 1152 B) is not counted as
// bytes read, as it is not in the real kernel's figure.
template <Mode M, int kPs>
__device__ __forceinline__ const uint4* vec_addr(const uint4* ckv, const uint4* kpe, const int* pages, uint32_t j) {
  if constexpr (M == Mode::kContig) {
    return ckv + j;
  } else {
    constexpr uint32_t kC = M == Mode::kKpe ? 0 : 64, kK = M == Mode::kCkv ? 0 : 8, kV = kC + kK;
    const uint32_t row = j / kV, k = j % kV;  // logical row in page-table order
    const size_t phys = (size_t)__ldg(pages + row / kPs) * kPs + row % kPs;
    if constexpr (M == Mode::kCkv) return ckv + phys * 64 + k;
    else if constexpr (M == Mode::kKpe) return kpe + phys * 8 + k;
    else return k < kC ? ckv + phys * 64 + k : kpe + phys * 8 + (k - kC);
  }
}

// Grid-stride over n vectors, kUnroll loads per step. ptxas keeps this at 32
// registers (2048 threads/SM) and starts XORing the first vectors before the
// last loads issue, so ~5 of the 8 are outstanding per thread: ~160 KB in
// flight per SM, several times what Little's law asks for at 3.35 TB/s.
// One checksum store per thread (~1 MB for the whole grid, <0.2% of the bytes
// read) keeps the loads alive without adding meaningful write traffic.
template <Mode M, int kPs>
__global__ void __launch_bounds__(kThreads) gather(const uint4* __restrict__ ckv, const uint4* __restrict__ kpe,
                                                   const int* __restrict__ pages, uint32_t n, unsigned* __restrict__ out) {
  const uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;
  unsigned acc = 0;
  uint32_t i = tid;
  // Full steps unguarded (a per-load guard splits the loads into separate
  // branches and stops them being issued back to back), then a short tail.
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldg(vec_addr<M, kPs>(ckv, kpe, pages, i + u * stride));
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = __ldg(vec_addr<M, kPs>(ckv, kpe, pages, i));
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  out[tid] = acc;
}

// Median of `reps` event-timed runs after `warm` untimed ones; `flush` runs
// before every run in the same stream but outside the events' interval.
static double median_ms(int warm, int reps, const std::function<void()>& flush, const std::function<void()>& run) {
  for (int s = 0; s < warm; ++s) flush(), run();
  cudaDeviceSynchronize();
  return median_event_ms(reps, flush, run);
}

// Exactly one full wave of resident blocks; grid-stride covers the rest.
template <Mode M, int kPs>
static int grid_for(int sms) {
  int per_sm = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gather<M, kPs>, kThreads, 0);
  return sms * std::max(per_sm, 1);
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

  // 1. Reference copy bandwidth (L2 is irrelevant at 1 GiB, so no flush).
  double copy_gbs = 0;
  {
    const size_t bytes = size_t{1} << 30;
    void *a, *b;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(a, 1, bytes));
    const double ms = median_ms(3, 20, [] {}, [&] { cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice); });
    CK(cudaGetLastError());
    copy_gbs = 2.0 * bytes / (ms * 1e-3) / 1e9;
    CK(cudaFree(a));
    CK(cudaFree(b));
  }
  std::printf("copy_gbs %.1f\n", copy_gbs);
  std::fflush(stdout);

  // 2. One allocation holds the cache of the largest size: ckv rows first,
  // kpe rows right after, so "contig" reads exactly the ckv+kpe bytes.
  const uint32_t sizes[] = {524288, 2097152};  // rows: ~604 MB and ~2416 MB
  const uint32_t max_rows = 2097152;
  const size_t flush_bytes = size_t{128} << 20;  // > 2x the 50 MB L2
  char* cache;
  int* pages;
  uint4* scratch;
  unsigned* out;
  CK(cudaMalloc(&cache, (size_t)max_rows * 1152));
  CK(cudaMalloc(&pages, (size_t)max_rows * sizeof(int)));
  CK(cudaMalloc(&scratch, flush_bytes));
  CK(cudaMalloc(&out, (size_t)sms * 2048 * sizeof(unsigned)));  // >= one wave of threads
  CK(cudaMemset(cache, 0x5a, (size_t)max_rows * 1152));
  CK(cudaMemset(scratch, 0x3c, flush_bytes));

  // L2 flush by *reading* 128 MB rather than memsetting it: a memset leaves
  // up to 50 MB of dirty lines whose write-back would land inside the next
  // timed gather and be billed to it. After this read, L2 holds only clean
  // scratch lines, none of which the gathers touch.
  const int flush_grid = grid_for<Mode::kContig, 1>(sms);
  auto flush = [&] {
    gather<Mode::kContig, 1><<<flush_grid, kThreads>>>(scratch, nullptr, nullptr, uint32_t(flush_bytes / 16), out);
  };

  auto report = [&](const char* name, const char* ps, uint32_t rows, size_t bytes, double ms) {
    const double gbs = bytes / (ms * 1e-3) / 1e9;
    std::printf("gather %-7s ps %-2s rows %7u MB %4.0f us %7.1f %6.1f GB/s %5.1f%% of copy\n", name, ps, rows,
                bytes / 1e6, ms * 1e3, gbs, 100.0 * gbs / copy_gbs);
    std::fflush(stdout);
  };

  // Times gather<M, kPs> over `rows` logical rows of the cache.
  auto time_gather = [&]<Mode M, int kPs>(uint32_t rows) {
    const auto* ckv = reinterpret_cast<const uint4*>(cache);
    const auto* kpe = reinterpret_cast<const uint4*>(cache + (size_t)rows * 1024);
    const uint32_t vpr = M == Mode::kCkv ? 64 : M == Mode::kKpe ? 8 : 72;
    const int grid = grid_for<M, kPs>(sms);
    return median_ms(3, 15, flush, [&] { gather<M, kPs><<<grid, kThreads>>>(ckv, kpe, pages, rows * vpr, out); });
  };

  for (const uint32_t rows : sizes) {
    // Sequential reference: same bytes as ckv+kpe, no page table.
    report("contig", "-", rows, (size_t)rows * 1152, time_gather.template operator()<Mode::kContig, 1>(rows));
    CK(cudaGetLastError());
    for (const int ps : {1, 64}) {
      // Random page order, fixed seed; the table is uploaded once per (size, ps).
      const uint32_t num_pages = rows / ps;
      std::vector<int> perm(num_pages);
      std::iota(perm.begin(), perm.end(), 0);
      std::mt19937 rng(1234);
      std::shuffle(perm.begin(), perm.end(), rng);
      CK(cudaMemcpy(pages, perm.data(), num_pages * sizeof(int), cudaMemcpyHostToDevice));
      const char* pss = ps == 1 ? "1" : "64";
      double ms[3];
      if (ps == 1) {
        ms[0] = time_gather.template operator()<Mode::kBoth, 1>(rows);
        ms[1] = time_gather.template operator()<Mode::kCkv, 1>(rows);
        ms[2] = time_gather.template operator()<Mode::kKpe, 1>(rows);
      } else {
        ms[0] = time_gather.template operator()<Mode::kBoth, 64>(rows);
        ms[1] = time_gather.template operator()<Mode::kCkv, 64>(rows);
        ms[2] = time_gather.template operator()<Mode::kKpe, 64>(rows);
      }
      CK(cudaGetLastError());
      report("ckv+kpe", pss, rows, (size_t)rows * 1152, ms[0]);
      report("ckv", pss, rows, (size_t)rows * 1024, ms[1]);
      report("kpe", pss, rows, (size_t)rows * 128, ms[2]);
    }
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
