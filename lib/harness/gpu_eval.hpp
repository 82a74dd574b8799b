// The CUDA half of the harness (CUDA builds only): inputs uploaded, outputs
// poisoned on the device, guard regions and inputs checked after each call,
// outputs judged on the host against the CPU oracle, then timed with
// kb::cuda::time_gpu over rotated input sets.
#pragma once

#include "harness/harness.hpp"

namespace kb {

Result<EvaluationResult> evaluate_cuda(const Definition& d, const Workload& w, const Implementation& impl,
                                       const BenchOptions& opt);

}  // namespace kb
