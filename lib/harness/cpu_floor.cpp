#include "harness/cpu_floor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace kb {

double cpu_copy_floor_ms(double bytes) {
  // Up to 1 GiB is measured at its size; beyond, the rate of 1 GiB scaled.
  const double cap = 1024.0 * 1024 * 1024;
  double measured = std::min(std::max(bytes, 2.0), cap);
  std::size_t half = static_cast<std::size_t>(measured / 2);
  std::vector<unsigned char> src(half, 1), dst(half, 0);
  double best = 1e300;
  for (int i = 0; i < 5; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), half);
    auto t1 = std::chrono::steady_clock::now();
    // Keep the copy observable so it is not elided.
    src[static_cast<std::size_t>(i) % half] = static_cast<unsigned char>(dst[half - 1] + 1);
    best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return best * (bytes / measured);
}

std::string implausible_cpu_latency(double bytes, double latency_ms) {
  if (!(latency_ms > 0)) return fmt::format("a latency of {} ms: the timed calls did no measurable work", latency_ms);
  if (!(bytes > 0)) return {};
  double floor = cpu_copy_floor_ms(bytes);
  if (latency_ms * kCpuFloorMargin >= floor) return {};
  return fmt::format("{:.6f} ms is {:.1f}x faster than the host copies the {:.0f} bytes the call must move ({:.6f} ms)",
                     latency_ms, floor / latency_ms, bytes, floor);
}

}  // namespace kb
