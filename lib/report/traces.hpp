// Trace sets as the report, export and compare read them: every .jsonl under the paths given
// (files, or folders searched recursively, in sorted order), each evaluated line kept with where
// it came from and the author its folder names.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "harness/measurement.hpp"
#include "schema/model.hpp"

namespace kb::report {

struct TraceRecord {
  Trace trace;              // a line with a solution and an evaluation
  std::string origin;       // "file:line"
  // The author: the folder after `traces/` in a dataset's traces/<author>/<op_type>/<definition>.jsonl
  // layout (kb bench writes that layout), "" when the path does not follow it.
  std::string author;
  std::string op_type;      // the folder after the author there, "" otherwise
  // The measurement of a PASSED, timed line (performance.extra read back), nullopt otherwise.
  std::optional<Measurement> measurement;
};

struct TraceSet {
  std::vector<std::string> files;    // the .jsonl files read, in reading order
  std::vector<TraceRecord> records;  // evaluated lines, in reading order
  std::size_t workload_only = 0;     // lines without a solution or evaluation (skipped)
};

// Errors: a path that does not exist (io_error), a file that cannot be read, a line that is not a
// valid Trace or whose performance.extra is malformed (naming file:line). No path, or paths that
// hold no .jsonl file: invalid_argument.
Result<TraceSet> read_traces(const std::vector<std::string>& paths);

// The .jsonl files under `paths` (files as given, folders searched recursively and sorted).
// Every path that is a regular file, and the files ending in `ext` below each
// folder (recursively, sorted): one list, in the order given.
Result<std::vector<std::string>> files_with_extension(const std::vector<std::string>& paths, std::string_view ext);
Result<std::vector<std::string>> trace_files(const std::vector<std::string>& paths);

// The author and op type a trace file's path names (traces/<author>/<op_type>/<file>.jsonl), or "".
std::pair<std::string, std::string> author_from_path(const std::string& path);

// The spread of a measurement as a fraction of its median: rel_noise (stdev / mean) when recorded,
// else half the min..max range over the median; nullopt when neither is recorded.
std::optional<double> relative_spread(const Measurement& m);

}  // namespace kb::report
