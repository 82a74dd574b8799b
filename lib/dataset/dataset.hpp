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

#include "json/diagnostics.hpp"
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
  ConstraintTally constraints;
};

class Dataset {
 public:
  std::string root;
  std::vector<DefinitionEntry> definitions;
  std::vector<SolutionEntry> solutions;
  std::vector<TraceEntry> workloads;  // from workloads/
  std::vector<TraceEntry> traces;     // from traces/

  const DefinitionEntry* find_definition(std::string_view name) const;
  const SolutionEntry* find_solution(std::string_view name) const;
};

// Is `dir` a dataset root (holds definitions/, workloads/, solutions/ or traces/)?
bool is_dataset_root(const std::string& dir);
// Nearest ancestor of `path` (itself included) that is a dataset root, or "".
std::string find_dataset_root(const std::string& path);

Dataset load_dataset(const std::string& root, const LoadOptions& options, Diagnostics& diags,
                     LoadReport* report = nullptr);

// `kb validate`: any mix of dataset directories, other directories (walked
// recursively) and files (.json definitions or solutions, .jsonl traces).
// Files inside a dataset are checked against that dataset's definitions.
// The same walk, keeping what loaded: one Dataset per path (definitions,
// solutions, workload and trace lines that are valid).
std::vector<Dataset> load_paths(const std::vector<std::string>& paths, const LoadOptions& options, Diagnostics& diags,
                                LoadReport* report = nullptr);

LoadReport validate_paths(const std::vector<std::string>& paths, const LoadOptions& options, Diagnostics& diags);

}  // namespace kb
