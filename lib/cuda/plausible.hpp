// Is a measured latency physically plausible? A solution cannot move its
// inputs and outputs faster than the device copies memory, nor compute faster
// than its tensor cores. kb measures both ceilings (timing.hpp:
// measure_ceilings, anti_gaming.hpp: measured_mma_tflops); a latency that
// beats them by more than a margin means the work did not happen where kb
// timed it (another stream, a cached result, skipped work). Header only, no
// CUDA: tested on CPU.
#pragma once

#include <fmt/format.h>

#include <string>

namespace kb::cuda {

// Good kernels reach ~90-95% of peak DRAM bandwidth where a device-to-device
// copy reaches ~85-90%: 1.25x leaves room for that and for noise.
inline constexpr double kBandwidthMargin = 1.25;
// The MMA rate is measured with mma.sync in bf16; wgmma reaches ~1.5x that on
// Hopper and fp8 doubles it again: 4x is beyond any honest kernel.
inline constexpr double kMmaMargin = 4.0;

// "" when plausible, else why not (one line). Ceilings of 0 are not checked.
inline std::string implausible_speed(double bytes, double flops, double latency_ms, double copy_bandwidth_gbs,
                                     double mma_tflops) {
  if (!(latency_ms > 0)) return {};
  double seconds = latency_ms * 1e-3;
  double gbs = bytes / seconds / 1e9;
  double tflops = flops / seconds / 1e12;
  std::string why;
  if (copy_bandwidth_gbs > 0 && gbs > kBandwidthMargin * copy_bandwidth_gbs)
    why = fmt::format("{:.0f} GB/s achieved is {:.1f}x the measured copy bandwidth ({:.0f} GB/s)", gbs,
                      gbs / copy_bandwidth_gbs, copy_bandwidth_gbs);
  if (mma_tflops > 0 && tflops > kMmaMargin * mma_tflops)
    why += fmt::format("{}{:.0f} TFLOP/s achieved is {:.1f}x the measured bf16 tensor-core rate ({:.0f} TFLOP/s)",
                       why.empty() ? "" : "; ", tflops, tflops / mma_tflops, mma_tflops);
  return why;
}

}  // namespace kb::cuda
