// A FlashInfer-Bench dataset directory, loaded unchanged:
//   definitions/<op_type>/<definition>.json
//   workloads/<op_type>/<definition>.jsonl        (workload-only Trace lines)
//   solutions/<author>/<op_type>/<definition>/<solution>.json
//   traces/<author>/<op_type>/<definition>.jsonl
//   blob/...                                     (safetensors inputs)
// Loading keeps every valid object and reports every problem with its place.
#pragma once

#include <string>
#include <vector>

#include "common/result.hpp"
#include "json/diagnostics.hpp"
#include "model/records.hpp"
#include "schema/model.hpp"
#include "schema/validate.hpp"

namespace kb {

struct DefinitionEntry {
  Definition definition;
  std::string file;
};
struct SolutionEntry {
  Solution solution;
  std::string file;
};
struct TraceEntry {
  Trace trace;
  std::string file;
  std::size_t line = 0;
  bool valid = true;  // false when it breaks a rule of its definition (reported)
};

// Kernel Calling Records, Benchmark Results and Agent traces met among the .json files outside
// definitions/ and solutions/ (recognized by their fields, model::sniff). A calling record keeps
// its Locator so its kernel ids can be checked, with lines, once every path's definitions are loaded.
struct CallingRecordEntry {
  model::CallingRecord record;
  std::string file;
  model::Locator where;
};
struct BenchmarkResultEntry {
  model::BenchmarkResult result;
  std::string file;
};
struct AgentTraceEntry {
  model::AgentTrace trace;
  std::string file;
};

struct LoadOptions {
  bool strict = false;            // missing blobs and unknown fields become errors
  bool report_unchecked = false;  // a note per constraint kb could not evaluate
};

// What was examined (valid or not) and how constraints fared.
struct LoadReport {
  std::size_t definitions = 0;
  std::size_t workloads = 0;
  std::size_t solutions = 0;
  std::size_t traces = 0;
  std::size_t calling_records = 0;
  std::size_t benchmark_results = 0;
  std::size_t agent_traces = 0;
  ConstraintTally constraints;
};

class Dataset {
 public:
  std::string root;
  std::vector<DefinitionEntry> definitions;
  std::vector<SolutionEntry> solutions;
  std::vector<TraceEntry> workloads;  // from workloads/
  std::vector<TraceEntry> traces;     // from traces/
  std::vector<CallingRecordEntry> calling_records;
  std::vector<BenchmarkResultEntry> benchmark_results;
  std::vector<AgentTraceEntry> agent_traces;

  const DefinitionEntry* find_definition(std::string_view name) const;
  const SolutionEntry* find_solution(std::string_view name) const;
};

// Is `dir` a dataset root (holds definitions/, workloads/, solutions/ or traces/)?
bool is_dataset_root(const std::string& dir);
// Nearest ancestor of `path` (itself included) that is a dataset root, or "".
std::string find_dataset_root(const std::string& path);

// The definition named `name` in `dir`: a dataset root (its definitions/ folder is searched) or any
// folder of definitions (searched recursively, as kb's bundled kernels/<op_type>/definitions/). A file
// <name>.json is tried first, then every .json definition under it (a file may be named otherwise).
// Errors: Code::not_found "no definition \"NAME\" in DIR (N definitions); did you mean A, B?" (the
// near matches, else the first names); the file's own error when <name>.json names it but breaks a
// rule; Code::io_error when `dir` is not a directory; Code::invalid_argument for an empty name.
Result<DefinitionEntry> find_definition_by_name(const std::string& dir, std::string_view name);

Dataset load_dataset(const std::string& root, const LoadOptions& options, Diagnostics& diags,
                     LoadReport* report = nullptr);

// `kb validate`: any mix of dataset directories, other directories (walked
// recursively) and files (.json definitions or solutions, .jsonl traces;
// .json calling records, benchmark results and agent traces outside
// definitions/ and solutions/). Files inside a dataset are checked against
// that dataset's definitions; calling records against the definitions of
// every path given (a warning says so when no path gave any).
// The same walk, keeping what loaded: one Dataset per path (definitions,
// solutions, workload and trace lines that are valid).
std::vector<Dataset> load_paths(const std::vector<std::string>& paths, const LoadOptions& options, Diagnostics& diags,
                                LoadReport* report = nullptr);

LoadReport validate_paths(const std::vector<std::string>& paths, const LoadOptions& options, Diagnostics& diags);

}  // namespace kb
