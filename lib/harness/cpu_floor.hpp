// Is a CPU latency physically plausible? A solution must at least read its
// inputs and write its outputs; the host copies `bytes` (half read, half
// written) at some rate, measured here at that size, so the copy's time is a
// floor no honest call beats by much. A call timed under the floor divided by
// kCpuFloorMargin did not do the work it was timed for (a skipped call, a
// result cached elsewhere).
#pragma once

#include <string>

namespace kb {

// Caches and prefetchers favour a streaming kernel over memcpy at some sizes;
// 4x is beyond any of those effects.
inline constexpr double kCpuFloorMargin = 4.0;

// The best of several memcpy calls moving `bytes` in all (bytes/2 read, bytes/2
// written), in ms, with the buffers warm as a timed call's are.
double cpu_copy_floor_ms(double bytes);

// "" when plausible, else why not (one line). Checks latency against the floor
// measured now; a latency of 0 or less is never plausible.
std::string implausible_cpu_latency(double bytes, double latency_ms);

}  // namespace kb
