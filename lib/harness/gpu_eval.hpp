// The CUDA half of the harness (CUDA builds only): random floating-point
// inputs generated on the device (inputs/device_fill.hpp, the host
// generator's bytes; on the host too only where the host reads them: a CPU
// oracle, PyTorch, the judges that read inputs), the rest uploaded; outputs
// poisoned on the device, guard regions and inputs checked after each call
// (generated inputs regenerated and compared on the device), outputs judged
// on the host against the oracle's, then timed with kb::cuda::time_gpu over
// rotated input sets.
#pragma once

#include "harness/harness.hpp"

namespace kb {

Result<EvaluationResult> evaluate_cuda(const Definition& d, const Workload& w, const Implementation& impl,
                                       const BenchOptions& opt);

}  // namespace kb
