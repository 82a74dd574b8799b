#include "harness/cupti_report.hpp"

#include <fmt/format.h>

namespace kb {

std::string record_cupti(Measurement& m, const Result<cuda::KernelTimingResult>& kt) {
  if (!kt) {
    m.cupti_error = kt.error().message;
    return "CUPTI kernel time: not measured: " + kt.error().message + "\n";
  }
  m.cupti_kernel_ms = kt->median_ms;
  m.cupti_min_ms = kt->min_ms;
  m.cupti_max_ms = kt->max_ms;
  m.cupti_samples = kt->samples;
  m.cupti_kernels_per_call = kt->kernels_per_call;
  m.cupti_graph = kt->graph;
  return fmt::format("CUPTI kernel time: median {:.6f} ms of {} cold calls ({} kernel(s) a call, {})\n", kt->median_ms,
                     kt->samples, kt->kernels_per_call,
                     kt->graph ? "each replayed from a CUDA graph" : "launched directly: host gaps may be inside");
}

}  // namespace kb
