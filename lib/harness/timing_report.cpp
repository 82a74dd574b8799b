#include "harness/timing_report.hpp"

#include <fmt/format.h>

#include "cuda/nvml.hpp"
#include "json/json.hpp"

namespace kb {

std::string timing_extra_fields(const cuda::TimingResult& t, const CallCost& cost, const cuda::Ceilings& ceilings,
                                double mma_tflops, const std::string& implausible) {
  const double seconds = t.median_ms * 1e-3;
  const double gbs = seconds > 0 ? cost.bytes / seconds / 1e9 : 0;
  const double bw = ceilings.copy_bandwidth_gbs;
  return fmt::format(
      R"("graph":{},"samples":{},"min_ms":{},"max_ms":{},"rel_noise":{},"sm_clock_mhz":[{},{}],"sm_clock_max_mhz":{},)"
      R"("sm_clock_lowest_kept_mhz":{},"throttled":{},"throttled_samples_set_aside":{},"throttle_reasons":{},)"
      R"("bytes":{},"achieved_gbs":{},"copy_bandwidth_gbs":{},"fraction_of_copy_bandwidth":{},"flops":{},)"
      R"("achieved_tflops":{},"mma_bf16_tflops":{},"empty_kernel_ms":{},"one_read_kernel_ms":{},"implausible":{},)"
      R"("l2_flush":"{}")",
      t.graph, t.samples, t.min_ms, t.max_ms, t.rel_noise, t.sm_clock_mhz_before, t.sm_clock_mhz_after,
      t.sm_clock_mhz_max, t.sm_clock_mhz_lowest_kept, t.throttled, t.throttled_samples_set_aside,
      json::quote(cuda::clock_event_reason_names(t.throttle_reasons)), cost.bytes, gbs, bw, bw > 0 ? gbs / bw : 0,
      cost.flops, seconds > 0 ? cost.flops / seconds / 1e12 : 0, mma_tflops, ceilings.empty_kernel_ms,
      ceilings.one_read_kernel_ms, json::quote(implausible), t.l2_flush_name());
}

}  // namespace kb
