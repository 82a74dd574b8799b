// The L2 policy of a read-once stream (a decode's KV cache, a gemv's weight):
// evict_first while the stream is at most kEvictFirstL2s times the L2 size,
// no hint above (evict_unchanged: as a plain load).
//
// Measured on an H100 (50 MB L2; kb's cold timing: L2 flushed by a memset
// before each sample), side by side:
//  - paged decode: evict_first 3-15% faster up to
//    ~230 MB of KV (MLA batch 1 x 32768 keys 41.4 -> 35.3 us, GQA batch 4 x
//    8192 67.0 -> 62.5), level at 270-450 MB, 1-4% slower from ~540 MB (GQA
//    batch 4 x 32768 page size 64 204 -> 212 us);
//  - gemv: evict_first faster up to the 272 MB of
//    37888 x 3584 (7168 x 5120, 73 MB: 32.9 against 38.0 us), level or
//    slower above (34816 x 5120, 356 MB, M = 1: 133.5 against 130.5;
//    8192 x 28672, 470 MB: 178 against 169).
// Likely: while the stream is a few times the L2, the lines it evicts are
// mostly the ones that were there before it (here the flush's dirty lines,
// each a write-back; in an engine, whatever the previous kernels left), and
// evict_first makes it replace its own clean lines instead. Longer streams
// pay for that more than they save (not understood further).
#pragma once

#include <atomic>
#include <cstdint>

namespace kb::kernels {

inline constexpr std::int64_t kEvictFirstL2s = 6;

// Host: the policy for a stream of `bytes` on a device with `l2_bytes` of L2.
inline bool stream_evict_first(std::int64_t bytes, std::int64_t l2_bytes) {
  return bytes <= kEvictFirstL2s * l2_bytes;
}

// The fraction l2_stream_policy takes (kernels get it as a parameter).
inline float evict_first_fraction(bool evict_first) { return evict_first ? 1.0f : 0.0f; }

#if defined(__CUDACC__)
// Host: the L2 size of `device` in bytes, looked up once per device (0 if
// the query fails: then no stream gets evict_first).
inline std::int64_t device_l2_bytes(int device) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices];
  const bool cached = device >= 0 && device < kMaxDevices;
  if (cached) {
    if (int v = cache[device].load(std::memory_order_relaxed)) return v;
  }
  int v = 0;
  if (cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  if (cached) cache[device].store(v, std::memory_order_relaxed);
  return v;
}

// Host: the peak DRAM rate of `device` in bytes/s (memory clock x bus width x
// 2), looked up once per device (0 if a query fails: rules that need it then
// take their "unknown" branch).
inline double device_dram_bytes_per_s(int device) {
  constexpr int kMaxDevices = 64;
  static std::atomic<double> cache[kMaxDevices];
  const bool cached = device >= 0 && device < kMaxDevices;
  if (cached) {
    if (const double v = cache[device].load(std::memory_order_relaxed); v > 0) return v;
  }
  int khz = 0, bits = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  const double v = 1e3 * khz * 2.0 * bits / 8.0;
  if (cached) cache[device].store(v, std::memory_order_relaxed);
  return v;
}

// Device: a createpolicy value for ld / cp.async .L2::cache_hint: the
// fraction of accesses that are evict_first (kernels pass 1 or 0, from a
// kernel parameter); the others take the secondary priority, evict_unchanged
// (as without a hint). One instruction with the fraction as an operand, not a
// choice between two policies, which cost the gemv up to 30 registers.
__device__ __forceinline__ std::uint64_t l2_stream_policy(float fraction) {
  std::uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.L2::evict_unchanged.b64 %0, %1;" : "=l"(policy) : "f"(fraction));
  return policy;
}
#endif

}  // namespace kb::kernels
