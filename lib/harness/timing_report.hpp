// The timer's fields in an evaluation's performance.extra: the samples, the
// SM clocks and the throttle handling (cuda::TimingResult), then the speed
// against the device's ceilings. One writer for both kinds of timed solution:
// kb's own CUDA solutions, timed in this process (gpu_eval.cpp), and outside
// ones, timed in kb-worker (plugin.cpp), whose TimingResult crosses the
// worker protocol whole.
#pragma once

#include <string>

#include "cuda/timing.hpp"
#include "harness/cost.hpp"

namespace kb {

// The fields from "graph" to "implausible", comma-separated, without braces
// or a leading or trailing comma. `ceilings` and `mma_tflops`: zero where
// not measured (CPU solutions); `implausible`: cuda::implausible_speed's
// answer, "" for none.
std::string timing_extra_fields(const cuda::TimingResult& t, const CallCost& cost, const cuda::Ceilings& ceilings,
                                double mma_tflops, const std::string& implausible);

}  // namespace kb
