#include "harness/timing_report.hpp"

#include <algorithm>
#include <cmath>

#include "cuda/nvml.hpp"

namespace kb {

void record_gpu_timer(Measurement& m, const cuda::TimingResult& t) {
  m.timing = TimingMethod::cuda_events;
  m.median_ms = t.median_ms;
  m.graph = t.graph;
  m.samples = t.samples;
  m.min_ms = t.min_ms;
  m.max_ms = t.max_ms;
  m.mean_ms = t.mean_ms;
  m.rel_noise = t.rel_noise;
  m.sm_clock_mhz = std::pair<std::uint64_t, std::uint64_t>{t.sm_clock_mhz_before, t.sm_clock_mhz_after};
  m.sm_clock_max_mhz = t.sm_clock_mhz_max;
  m.sm_clock_lowest_kept_mhz = t.sm_clock_mhz_lowest_kept;
  m.throttled = t.throttled;
  m.throttled_samples_set_aside = t.throttled_samples_set_aside;
  m.throttle_reasons = cuda::clock_event_reason_names(t.throttle_reasons);
  m.l2_flushed = t.l2_flushed;
  m.l2_flush = !t.l2_flushed ? L2FlushMode::none
               : t.l2_flush == cuda::L2Flush::clean ? L2FlushMode::clean
                                                    : L2FlushMode::write;
}

void record_wall_clock(Measurement& m, const std::vector<double>& samples_ms) {
  m.timing = TimingMethod::wall_clock;
  m.samples = samples_ms.size();
  if (samples_ms.empty()) return;
  std::vector<double> v = samples_ms;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  m.median_ms = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  m.min_ms = v.front();
  m.max_ms = v.back();
  double sum = 0;
  for (double x : v) sum += x;
  const double mean = sum / static_cast<double>(n);
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  m.mean_ms = mean;
  m.rel_noise = n > 1 && mean > 0 ? std::sqrt(ss / static_cast<double>(n - 1)) / mean : 0.0;
}

void record_cost(Measurement& m, const CallCost& cost) {
  const double seconds = m.median_ms * 1e-3;
  m.bytes = cost.bytes;
  m.achieved_gbs = seconds > 0 ? cost.bytes / seconds / 1e9 : 0;
  m.flops = cost.flops;
  m.achieved_tflops = seconds > 0 ? cost.flops / seconds / 1e12 : 0;
  m.cost_basis = cost.basis;
}

void record_ceilings(Measurement& m, const cuda::Ceilings& ceilings, double mma_tflops,
                     const std::string& implausible) {
  if (ceilings.copy_bandwidth_gbs > 0) {
    m.copy_bandwidth_gbs = ceilings.copy_bandwidth_gbs;
    m.fraction_of_copy_bandwidth = m.achieved_gbs.value_or(0) / ceilings.copy_bandwidth_gbs;
  }
  if (mma_tflops > 0) {
    m.mma_bf16_tflops = mma_tflops;
    m.fraction_of_mma_bf16 = m.achieved_tflops.value_or(0) / mma_tflops;
  }
  if (ceilings.empty_kernel_ms > 0) m.empty_kernel_ms = ceilings.empty_kernel_ms;
  if (ceilings.one_read_kernel_ms > 0) m.one_read_kernel_ms = ceilings.one_read_kernel_ms;
  m.implausible = implausible;
}

}  // namespace kb
