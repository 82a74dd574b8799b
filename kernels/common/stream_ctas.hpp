// How many CTAs an SM needs to keep a DRAM stream at the device's bandwidth
// when each CTA, by its own bytes in flight, sustains a fixed rate. Host only,
// no CUDA: tests/kernels/test_launch_rules.cpp checks the rule on the CPU.
#pragma once

#include <algorithm>
#include <cmath>

namespace kb::kernels {

// A paged-decode CTA that streams whole 64-key pages sustained about 25 GB/s
// of KV on its own: H200, GQA 32 / 8 heads d128, batch 16 x 32768 keys at page
// size 64, one split, 128 CTAs: 3182 GB/s, 675 us; two splits (256 CTAs,
// two an SM) 546 us.
constexpr double kPageRunCtaBytesPerS = 25e9;

// CTAs an SM needs for a stream at the rate copies reach (~90% of the
// theoretical DRAM rate, dram_bytes_per_s): one on an H100 SXM (3.35 TB/s,
// 132 SMs: 22.8 GB/s an SM), two on an H200 (4.9 TB/s: 33.5 GB/s). 1 when the
// rate is unknown (0).
inline int stream_ctas_per_sm(double dram_bytes_per_s, int sms, double cta_bytes_per_s = kPageRunCtaBytesPerS) {
  if (sms < 1 || !(dram_bytes_per_s > 0) || !(cta_bytes_per_s > 0)) return 1;
  const double need = 0.9 * dram_bytes_per_s / sms;
  return std::max(1, static_cast<int>(std::ceil(need / cta_bytes_per_s)));
}

}  // namespace kb::kernels
