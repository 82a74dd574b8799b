// How CUPTI's kernel time (kb bench --cupti) is written into an evaluation:
// the fields beside the event timing in performance.extra, and the log's
// line. One place for both kinds of CUDA solution: kb's own, timed in this
// process (gpu_eval.cpp), and outside ones, timed in kb-worker (plugin.cpp).
#pragma once

#include <string>

#include "common/result.hpp"
#include "cuda/timing.hpp"

namespace kb {

struct CuptiReport {
  std::string extra_fields;  // starts with a comma: appended inside extra's object
  std::string log_line;      // ends with a newline
};

// `kt`: the kernel time, or why CUPTI could not record it (then extra holds
// "cupti": the reason, and the log says "not measured").
CuptiReport cupti_report(const Result<cuda::KernelTimingResult>& kt);

}  // namespace kb
