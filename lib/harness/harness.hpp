// The evaluation harness: one workload, one implementation, judged against
// the oracle over several trials with fresh seeded inputs, then timed.
//
// Anti-gaming from the start: outputs are poisoned (every byte 0xFF: NaN for
// float dtypes) before each call, inputs are compared with a snapshot after
// it, guard bytes around every buffer are checked, and each trial uses new
// inputs, so a solution cannot return a remembered answer.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "harness/implementation.hpp"
#include "harness/judge.hpp"
#include "harness/sampling_judge.hpp"
#include "harness/torch_reference.hpp"
#include "inputs/inputs.hpp"
#include "schema/model.hpp"

namespace kb {

struct BenchOptions {
  int trials = 3;
  std::uint64_t seed = 0x6b62;  // trial t uses seed + t; recorded in the trace
  TolerancePolicy tolerances;
  std::optional<std::string> dataset_root;
  // CPU timing: warm-up outside timing, then samples until both minimums
  // are met or a cap is hit; the median is reported.
  int warmup = 1;
  int min_samples = 5;
  int max_samples = 50;
  double min_time_s = 0.05;
  double max_time_s = 2.0;
  bool time = true;  // false: correctness only
  // CUDA: the adaptive timer's minimums (cuda::TimingOptions warmup and
  // min_samples); 0 keeps its defaults. FlashInfer-Bench's --warmup-runs and
  // --iterations set these and, for the CPU, warmup and min_samples above.
  int gpu_warmup = 0;
  int gpu_min_samples = 0;
  // CUDA: also time each solution by CUPTI's kernel records (cuda/timing.hpp,
  // time_kernels_cupti) and record them beside the event timing in `extra`.
  bool cupti = false;
  // Where the expected outputs come from: kb's oracles, or the definition's
  // PyTorch reference run in a python3 subprocess (torch_reference.hpp).
  // With torch, definitions without a kb oracle become evaluable and the
  // oracle itself can be judged. Sampling is always judged by distribution
  // against kb's sampling oracle's filtered probabilities (sampling_judge.hpp).
  ReferenceSource reference = ReferenceSource::native;
  // CUDA, native reference: the CPU oracle for every workload, also those large
  // enough for the GPU oracle (the tests that judge the GPU oracle itself).
  bool cpu_oracle_only = false;
  TorchReferenceOptions torch;
  SamplingOptions sampling;
};

// What kb records for one (workload, implementation).
struct EvaluationResult {
  Evaluation evaluation;  // FlashInfer-Bench's fields
  std::string summary;    // one line for tables: first problem or "ok"
};

// Judges `impl` on `w`. A Result error means the workload itself could not be
// evaluated (invalid workload, no oracle): nothing is recorded for it.
Result<EvaluationResult> evaluate(const Definition& d, const Workload& w, const Implementation& impl,
                                  const BenchOptions& opt);

// CPU wall time of `impl` on fixed inputs, every sample in ms: opt.warmup
// calls, then samples until opt's minimums are met or a cap is hit (no checks
// inside timing). For kb's own implementations and oracles; outside solutions
// are timed in their worker on fresh inputs (plugin.hpp).
Result<std::vector<double>> time_wall_clock(const Implementation& impl, const Definition& d, Materialized& m,
                                            std::vector<Tensor>& outputs, const BenchOptions& opt);

// The environment block kb records (hardware name, library versions).
EvalEnvironment current_environment(Device device);
// Now, ISO 8601 UTC with milliseconds.
std::string iso_timestamp_now();

// An evaluation begun now on `device`: its environment and timestamp set, and
// the first line of its log (seed, trials and the tolerance that judges it).
Evaluation begin_evaluation(Device device, const BenchOptions& opt, const Tolerance& tol, std::string& log);

}  // namespace kb
