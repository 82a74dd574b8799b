// Running BackendBench traces through kb's ATen operators.
//
// On the CPU each line is materialized (seeded, exact strides, valid indices),
// run through the operator's oracle and checked against the oracle's own
// invariants: the outputs' count, shapes and dtypes equal the meta call's, a
// functional operator leaves its inputs untouched, and a second run on freshly
// materialized inputs gives bit-identical outputs. That validates shapes,
// dtypes and materialization; judging numerical correctness needs a second
// implementation (a CUDA kernel, judged against the oracle with
// BackendBench's tolerances in score.hpp). With a baseline file (from
// bench/torch_baseline.py) each passing line gets a speedup.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backendbench/score.hpp"
#include "backendbench/torch_reference.hpp"
#include "backendbench/trace.hpp"
#include "common/result.hpp"

namespace kb::backendbench {

struct RunOptions {
  std::vector<std::string> ops;  // empty: every implemented operator in the file
  std::size_t limit_per_op = 0;  // 0: every line; else the N lines with the smallest inputs
  std::uint64_t seed = 0;        // 0: materialize.hpp's default_seed
  // Baseline times in ms: operator -> line index (within the operator) -> ms.
  std::map<std::string, std::map<std::size_t, double>> baseline;
  // CPU runs: also judge each line against PyTorch eager on the same inputs
  // (torch_reference.hpp) with BackendBench's judge, kb's oracle being the
  // candidate. Operators whose values PyTorch leaves unspecified or random
  // (new_empty, new_empty_strided, empty_like, bernoulli), which BackendBench
  // keeps out of its correctness tests, are judged by count, dtypes and
  // shapes (and bernoulli's values lying in {0, 1}).
  bool torch_reference = false;
  TorchOptions torch;
  std::int64_t torch_batch_bytes = std::int64_t{512} << 20;  // input bytes handed to one subprocess
};

struct LineOutcome {
  std::string op;
  std::size_t index = 0;        // within the operator
  std::size_t source_line = 0;
  bool passed = false;
  std::string problem;          // why it did not pass
  double kb_ms = 0;
  std::optional<double> baseline_ms;
  bool by_reference = false;    // --device cuda: judged against the GPU fp64 reference, not the CPU oracle
  std::optional<double> max_abs_error;  // the judge's, where a line was compared against a reference
  std::optional<double> max_rel_error;
};

struct CoverageRow {
  std::string op;
  std::size_t lines = 0;
  std::uint64_t count = 0;  // sum of cnt
  bool cpu_oracle = false;  // unimplemented on a --device cuda run, yet kb has its CPU oracle: not run on CUDA
};

// Where a --device cuda run spent its time (seconds, summed over lines): the
// device side's steps, and its waits for the host side (materialization and
// CPU oracles run on a thread pool a batch of lines ahead).
struct DevicePhases {
  double upload_s = 0;     // inputs to the device
  double reference_s = 0;  // the GPU reference (its input copy, plan and run)
  double candidate_s = 0;  // the candidate's plan and first run
  double judge_s = 0;      // comparing outputs (on the device, or copied back and on the host)
  double timing_s = 0;     // warm-up and timed calls
  double host_wait_s = 0;  // the device side idle, waiting for prepared lines
  void add(const DevicePhases& o) {
    upload_s += o.upload_s;
    reference_s += o.reference_s;
    candidate_s += o.candidate_s;
    judge_s += o.judge_s;
    timing_s += o.timing_s;
    host_wait_s += o.host_wait_s;
  }
};

struct RunReport {
  std::vector<OpScore> ops;            // implemented operators run, in file order
  std::vector<LineOutcome> lines;
  Summary summary;
  std::vector<CoverageRow> implemented;    // in the file and in kb's table
  std::vector<CoverageRow> unimplemented;  // by lines, most first
  std::size_t total_lines = 0;
  std::uint64_t total_count = 0;
  std::vector<std::string> unknown_ops;    // --ops names kb does not implement or the file lacks
  std::string fatal;                       // a CUDA run stopped early (the context broke): why
  DevicePhases phases;                     // --device cuda
  std::size_t resumed_lines = 0;           // taken from CudaRunOptions::resume, not run
  // The time of an empty call through the run's own timing (CPU: the timer
  // around a call that does nothing, median of many), for BackendBench's
  // overhead-dominated flag; unset where the run did not measure one.
  std::optional<double> empty_call_ms;
};

// --device cuda: lines of the operators with a CUDA kernel (kernels/aten/*/cuda/)
// judged against the CPU oracle (score.hpp) and timed with CUDA events like
// bench/torch_baseline.py: warm, `warmup` untimed calls, then the
// median of `reps` calls each between its own event pair (run_cuda.cpp).
struct CudaRunOptions {
  int warmup = 3;
  int reps = 20;
  unsigned host_threads = 0;  // CPU oracles run this many lines ahead in parallel; 0: all cores
  unsigned judge_threads = 0;  // large outputs are compared on this many threads; 0: all cores
  // The fp64 CPU oracle costs ~10^7 elements/s and ~2 GFLOP/s per core, so the
  // whole shared file (1.4e11 input elements, 1.7e13 matmul FLOPs) is hours of
  // CPU time. Lines over these budgets are not run ("not judged") and do not
  // pass; 0 lifts a budget.
  // The defaults keep a run of the whole file to a few minutes on 16 cores.
  std::int64_t oracle_elements = std::int64_t{1} << 23;
  double oracle_flops = 0x1p32;
  // Judge lines over the budgets against the GPU fp64 reference instead of
  // skipping them: kb's own CUDA plans rerun with fp64 compute everywhere,
  // 64-bit indexing, no unrolled paths and fp64 cuBLASLt matmuls, rounded once
  // to the output dtype like the oracles. Not independent of the kernels
  // judged (same planning and formulas, which the CPU oracle checks on the
  // lines within budget); it checks their precision and large-size paths.
  bool gpu_reference = false;
  double time_limit_s = 0;  // > 0: lines not started by then are reported "not run: time limit" (the report is still written)
  // Lines already run (read_saved_lines, keyed by operator and line index):
  // taken as they are instead of being run again, so a run cut by a time
  // limit continues in another call (their baseline times come with them:
  // each line's speedup is measured within one session).
  std::map<std::pair<std::string, std::size_t>, LineOutcome> resume;
};
// False in builds without CUDA (run_cuda_trace then answers Code::unsupported).
bool cuda_runs_available();
bool has_cuda_kernel(std::string_view op);
Result<RunReport> run_cuda_trace(const TraceFile& trace, const RunOptions& options, const CudaRunOptions& copt);

// The file's operators with blocks of the same canonical name joined (aten.sum.SymInt
// lines join aten.sum.dim_IntList's), in order of first appearance. A line's
// index (for baselines and seeds) is its position in its merged operator.
std::vector<Operator> merge_operators(const TraceFile& trace);
// Lines of one operator in the order --limit-per-op takes them (smallest inputs first, then index).
std::vector<std::size_t> sample_lines(const Operator& op, std::size_t limit);

Result<RunReport> run_cpu_trace(const TraceFile& trace, const RunOptions& options);

// Every line outcome of a report as JSON ({"format": "kb-backendbench-lines-1",
// "device": ..., "lines": [{"op", "index", "source_line", "passed", "kb_ms",
// "baseline_ms" (or null), "by_reference", "problem"}]}), and back. Lines
// reported "not run" are not written (a resumed run runs them).
Status write_saved_lines(const RunReport& report, const std::string& device, const std::string& path);
Result<std::map<std::pair<std::string, std::size_t>, LineOutcome>> read_saved_lines(const std::string& path);

// Reads a baseline JSON written by bench/torch_baseline.py:
//   {"format": "kb-backendbench-baseline-1", "device": "...", "times_ms": {"aten.add.Tensor": {"0": 0.01, ...}}}
// (null times, for lines torch could not run, are skipped).
Result<std::map<std::string, std::map<std::size_t, double>>> read_baseline(const std::string& path);

}  // namespace kb::backendbench
