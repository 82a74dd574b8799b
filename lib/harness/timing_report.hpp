// Filling a Measurement (measurement.hpp) from kb's timers, for both kinds of
// timed solution: kb's own, timed in this process (harness.cpp on the CPU,
// gpu_eval.cpp on CUDA), and outside ones, timed in kb-worker (plugin.cpp),
// whose cuda::TimingResult crosses the worker protocol whole.
#pragma once

#include <string>
#include <vector>

#include "cuda/timing.hpp"
#include "harness/cost.hpp"
#include "harness/measurement.hpp"

namespace kb {

// CUDA-event timing (cuda::time_gpu): the samples' statistics, the SM clocks
// and throttling, and the L2 flush.
void record_gpu_timer(Measurement& m, const cuda::TimingResult& t);

// Wall-clock timing of every kept sample, in ms: timing, samples, median,
// min, max, mean and rel_noise.
void record_wall_clock(Measurement& m, const std::vector<double>& samples_ms);

// The call's ideal cost and the bytes/s and FLOP/s it implies at m.median_ms
// (so recorded after the timer).
void record_cost(Measurement& m, const CallCost& cost);

// The device's measured ceilings and the fractions of them the call reached
// (after record_cost). A ceiling of 0 was not measured: it and its fraction
// stay absent. `implausible`: cuda::implausible_speed's answer, "" for none.
void record_ceilings(Measurement& m, const cuda::Ceilings& ceilings, double mma_tflops, const std::string& implausible);

}  // namespace kb
