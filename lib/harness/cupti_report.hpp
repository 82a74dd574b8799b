// CUPTI's kernel time (kb bench --cupti) in an evaluation's Measurement and
// log, for both kinds of CUDA solution: kb's own, timed in this process
// (gpu_eval.cpp), and outside ones, timed in kb-worker (plugin.cpp).
#pragma once

#include <string>

#include "common/result.hpp"
#include "cuda/timing.hpp"
#include "harness/measurement.hpp"

namespace kb {

// `kt`: the kernel time (the cupti_* fields), or why CUPTI could not record
// it (cupti_error). Returns the log's line, ending with a newline.
std::string record_cupti(Measurement& m, const Result<cuda::KernelTimingResult>& kt);

}  // namespace kb
