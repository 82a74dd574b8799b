#include "harness/cupti_report.hpp"

#include <fmt/format.h>

#include "json/json.hpp"

namespace kb {

CuptiReport cupti_report(const Result<cuda::KernelTimingResult>& kt) {
  CuptiReport r;
  if (!kt) {
    r.extra_fields = fmt::format(R"(,"cupti":{})", json::quote(kt.error().message));
    r.log_line = "CUPTI kernel time: not measured: " + kt.error().message + "\n";
    return r;
  }
  r.extra_fields = fmt::format(R"(,"cupti_kernel_ms":{},"cupti_min_ms":{},"cupti_max_ms":{},"cupti_samples":{},)"
                               R"("cupti_kernels_per_call":{},"cupti_graph":{})",
                               kt->median_ms, kt->min_ms, kt->max_ms, kt->samples, kt->kernels_per_call, kt->graph);
  r.log_line = fmt::format("CUPTI kernel time: median {:.6f} ms of {} cold calls ({} kernel(s) a call, {})\n",
                           kt->median_ms, kt->samples, kt->kernels_per_call,
                           kt->graph ? "each replayed from a CUDA graph" : "launched directly: host gaps may be inside");
  return r;
}

}  // namespace kb
