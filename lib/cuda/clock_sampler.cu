// The SM clock averaged over a stretch of GPU work, measured on the GPU itself
// (timing.hpp's batches; nvbench measures its samples' clock the same way).
// NVML reports the clock at the moment it is asked, but under the power cap
// the clock moves within milliseconds: batches whose NVML reading after them
// was above 90% of the maximum still ran 5-7% slow (H200).
//
// A sampler kernel, launched before and after the work, writes each SM's
// cycle counter (clock64) and the global nanosecond timer into a slot indexed
// by the SM's id. The counters of different SMs are not aligned, so cycles
// are only ever subtracted on one SM: start and end slots of the same id.
// The grid is twice the SM count, so nearly every SM writes both slots.
//
// Built into kb, and (with KB_CLOCK_SAMPLER_C_API) as a small shared library
// that bench/torch_timing.py loads, so torch is measured the same way.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "cuda/clock_sampler.hpp"

namespace kb::cuda {

namespace {
__global__ void sample_clocks(unsigned long long* slots, int max_sm) {
  if (threadIdx.x != 0) return;
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  const long long cycles = clock64();
  if (static_cast<int>(sm) < max_sm) {
    slots[2 * sm] = static_cast<unsigned long long>(cycles);
    slots[2 * sm + 1] = ns;
  }
}
}  // namespace

cudaError_t launch_clock_sampler(unsigned long long* slots, int sm_count, cudaStream_t stream) {
  sample_clocks<<<2 * std::max(1, sm_count), 32, 0, stream>>>(slots, kClockSamplerSlots);
  return cudaGetLastError();
}

double average_sm_clock_mhz(const unsigned long long* start, const unsigned long long* end) {
  std::vector<double> mhz;
  for (int sm = 0; sm < kClockSamplerSlots; ++sm) {
    const unsigned long long c0 = start[2 * sm], t0 = start[2 * sm + 1], c1 = end[2 * sm], t1 = end[2 * sm + 1];
    if (t0 == 0 || t1 <= t0 || c1 <= c0) continue;  // this SM did not write both (slots start at 0)
    // Below ~20 us the global timer's granularity (about 1 us on some GPUs) would dominate.
    if (t1 - t0 < 20'000) continue;
    mhz.push_back(static_cast<double>(c1 - c0) / static_cast<double>(t1 - t0) * 1e3);
  }
  if (mhz.empty()) return 0;
  std::nth_element(mhz.begin(), mhz.begin() + mhz.size() / 2, mhz.end());
  return mhz[mhz.size() / 2];
}

}  // namespace kb::cuda

#ifdef KB_CLOCK_SAMPLER_C_API
// For ctypes (bench/torch_timing.py): slots is a device buffer of
// 2 * kb_clock_sampler_slots() 64-bit words, zeroed by the caller.
extern "C" {
int kb_clock_sampler_slots() { return kb::cuda::kClockSamplerSlots; }
int kb_clock_sampler_launch(unsigned long long* slots, int sm_count, void* stream) {
  return static_cast<int>(kb::cuda::launch_clock_sampler(slots, sm_count, static_cast<cudaStream_t>(stream)));
}
double kb_clock_sampler_average_mhz(const unsigned long long* start, const unsigned long long* end) {
  return kb::cuda::average_sm_clock_mhz(start, end);
}
}
#endif
