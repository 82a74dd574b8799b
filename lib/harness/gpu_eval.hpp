// The CUDA half of the harness (CUDA builds only): random floating-point
// inputs generated on the device (inputs/device_fill.hpp, the host
// generator's bytes; on the host too only where the host reads them: a CPU
// oracle, PyTorch, the judges that read inputs), the rest uploaded; outputs
// poisoned on the device, guard regions and inputs checked after each call
// (generated inputs regenerated and compared on the device), outputs judged
// on the host against the oracle's, then timed with kb::cuda::time_gpu over
// rotated input sets: kb's own solutions (Implementation::trusted) on the
// trials' inputs, every rotation judged again after timing; any other code on
// random floating-point inputs drawn again on the device before every call,
// the outputs of a few calls picked at random on the device judged after
// timing against the trial's reference on those very inputs.
#pragma once

#include "harness/harness.hpp"

namespace kb {

Result<EvaluationResult> evaluate_cuda(const Definition& d, const Workload& w, const Implementation& impl,
                                       const BenchOptions& opt);

}  // namespace kb
