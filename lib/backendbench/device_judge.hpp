// BackendBench's judgment (score.hpp: judge()) computed on the GPU, for
// outputs that are already in device memory: lines judged against the GPU
// reference would otherwise copy both the reference's and the candidate's
// outputs to the host and compare them there, which dominated a run of the
// large lines (pageable copies into fresh host memory, then a CPU pass).
//
// Same rule as judge(): count, dtypes and shapes first (judge_signature),
// then every element allclose (atol, rtol), NaN equal to NaN, infinities equal
// when equal; the first failing element (in row-major order) is reported with
// its two values, as judge() reports it.
#pragma once

#include <vector>

#include "../../kernels/aten/common/device.hpp"
#include "backendbench/score.hpp"
#include "common/result.hpp"

namespace kb::backendbench {

// Code::unsupported for complex outputs (the caller judges those on the host).
Result<Judgment> device_judge(const std::vector<aten::DView>& expected, const std::vector<aten::DView>& actual,
                              void* stream, double atol = judge_atol, double rtol = judge_rtol);

}  // namespace kb::backendbench
