// Running a dataset: every selected definition's workloads through every
// solution that handles them (kb's own, plugins, built Solution JSON), judged,
// timed and appended to trace files. What `kb bench` and kb_bench_run() do.
//
// Nothing here prints: what happens during a run arrives as RunEvents on the
// caller's callback, in order, on the calling thread; what stops a run is the
// returned Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "harness/harness.hpp"
#include "harness/implementation.hpp"
#include "plugin/plugin.hpp"
#include "schema/model.hpp"

namespace kb::bench {

struct RunOptions {
  // Dataset directories, or any folders of definitions and workloads (kb::load_paths).
  std::vector<std::string> datasets;
  std::vector<std::string> definitions;  // only these (names); empty: every definition
  std::vector<std::string> solutions;    // only these (names); empty: every solution that handles one
  // Where solutions run: "" (a CUDA device if one is usable, else the CPU), "cpu", "cuda" (the calling
  // thread's current device) or "cuda:N" (made the calling thread's current device for the run and left so).
  std::string device;
  std::string out_dir = "kb-results";  // traces go to OUT/traces/<author>/<op_type>/<definition>.jsonl
  bool resume = false;                 // skip (definition, workload, solution) already recorded under out_dir
  std::size_t max_workloads = 0;       // per definition, the smallest first; 0: all
  // Only the shard_index-th (1-based) of shard_count slices of the selected definitions: their names
  // sorted, every shard_count-th from the shard_index-th. A name in several datasets stays in one
  // shard, so shards never write the same trace file.
  long shard_index = 1;
  long shard_count = 1;
  // Tolerances: a config file (default, op_type and definition sections; "": kb's policy), then
  // these on top of everything.
  std::string tolerance_file;
  std::optional<double> atol, rtol, matched_ratio;
  // Trials, seed, timing, CUPTI, reference source, sampling draws. Its tolerances and dataset_root
  // are set by the run (from the fields above and each workload's dataset).
  BenchOptions bench;
  // What the speedup column divides by, recorded in each trace (reference_latency_ms, and extra's
  // "baseline"): "" or "reference" (the reference's own time, when the run timed it: kb's oracle or
  // the PyTorch reference on the CPU; GPU runs time none), "none" (no speedup), "torch" (the
  // definition's PyTorch reference timed on the run's device, once per workload), or a solution's name
  // (its latency at the same workload when it PASSED there; it runs first on each definition).
  std::string baseline;
  std::vector<std::string> plugins;  // plugin libraries (kb_plugin_entry_v1) whose solutions run too
  // Timeout, worker and cache of outside solutions (plugins and the datasets' Solution JSON);
  // cuda_device is set by the run.
  plugin::Options plugin_options;
};

// Which option an error of run_dataset() or list_solutions() is about.
enum class Option { none, device, reference, tolerances, definitions, solutions, plugin, baseline };

// What happens during a run, in this order: reference (torch only), then dataset_error, solution_error,
// building/built, not_runnable and skipped while the run is planned, then planned, then per evaluation
// evaluating and either evaluated, evaluation_error or skipped. Everything an event points to is
// borrowed for the callback's duration.
struct RunEvent {
  enum class Kind {
    reference,         // message: the torch version that will run the definitions' PyTorch references
    dataset_error,     // message: a problem in a dataset file ("file:line: json.path: what"); it is left out
    solution_error,    // message: an outside solution that cannot be used (a duplicate name, a failed load)
    building,          // message: the Solution JSON about to be built (or found in the cache)
    built,             // message: the same, built (or not: a solution_error or not_runnable follows)
    not_runnable,      // message: "name (file): why" for Solution JSON in a language kb cannot run
    skipped,           // message: "what: why" for something that is not evaluated
    planned,           // total: the evaluations to come; shard_definitions of selected_definitions
    evaluating,        // definition, workload, solution; index of total (0-based)
    evaluated,         // also result and trace: the line just appended to its trace file
    evaluation_error,  // definition, workload, solution, message: the workload could not be evaluated
  };
  Kind kind = Kind::planned;
  std::string message;
  const Definition* definition = nullptr;
  const Workload* workload = nullptr;
  const Implementation* solution = nullptr;
  const EvaluationResult* result = nullptr;
  const Trace* trace = nullptr;
  std::size_t index = 0;
  std::size_t total = 0;
  std::size_t shard_definitions = 0;
  std::size_t selected_definitions = 0;
};

using EventFn = std::function<void(const RunEvent&)>;

struct RunSummary {
  Device device = Device::cpu;   // where the solutions ran
  std::size_t evaluations = 0;   // planned (evaluated, unsupported at run time, or could not evaluate)
  std::size_t passed = 0;
  std::size_t failed = 0;        // evaluated with any status other than PASSED
  std::size_t errors = 0;        // evaluation_error events: the workload could not be evaluated
  std::size_t skipped = 0;       // skipped events
  std::size_t already_recorded = 0;  // left out by resume
  std::size_t not_runnable = 0;      // not_runnable events
  std::size_t problems = 0;          // dataset_error and solution_error events
  // Every evaluation PASSED and nothing was left out for a problem (skips do not count).
  bool all_passed() const { return failed == 0 && errors == 0 && problems == 0; }
};

// Runs the selection. Returns the summary, or an error that stopped the run: an unusable option (named
// through *option when option is not null: the device, the torch reference, the tolerance file, a
// definition name no dataset has, a plugin that does not load), a trace file that cannot be read
// (resume) or written. Evaluations already appended stay in their files.
Result<RunSummary> run_dataset(const RunOptions& options, const EventFn& on_event, Option* option = nullptr);

// What run_dataset() would run with, without building or running anything.
struct Listing {
  struct SolutionJson {  // a Solution JSON of the datasets kb can build
    std::string name, language, author, file, definition;
  };
  struct Solution {  // one of kb's solutions or a plugin's
    std::string name, author, description;
    Device device = Device::cpu;
    std::vector<std::string> handles;  // definitions of the datasets it handles
    std::vector<std::string> handles_op_types;  // the op_type of each of `handles`, in its order
  };
  std::vector<SolutionJson> solution_json;
  std::vector<std::string> not_runnable;  // "name (file): why"
  std::vector<Solution> solutions;
  std::size_t definitions = 0;  // definitions in the datasets looked in
};

// Lists the solutions of the selection (options.solutions, definitions, shard and plugins apply; the
// datasets' problems and unusable plugins arrive as events). Errors as run_dataset()'s.
Result<Listing> list_solutions(const RunOptions& options, const EventFn& on_event, Option* option = nullptr);

// A workload's axes as "A=1 B=2" ("-" for none), as kb's tables and messages name a workload.
std::string axes_text(const Workload& w);

}  // namespace kb::bench
