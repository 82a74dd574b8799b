// The SM clock averaged over GPU work, from the GPU's own counters
// (clock_sampler.cu says how and why).
#pragma once

#include <cuda_runtime_api.h>

namespace kb::cuda {

// Slots per sampling: one per SM id (ids may exceed the SM count), two
// 64-bit words each (cycles, nanoseconds). A sampling buffer is
// 2 * kClockSamplerSlots words, zeroed before the sampler writes it.
inline constexpr int kClockSamplerSlots = 512;

cudaError_t launch_clock_sampler(unsigned long long* slots, int sm_count, cudaStream_t stream);

// The median over SMs of cycles / nanoseconds between two samplings (host
// copies of the buffers), in MHz; 0 when no SM wrote both or the span was
// under 20 us.
double average_sm_clock_mhz(const unsigned long long* start, const unsigned long long* end);

}  // namespace kb::cuda
