// Problems found while reading or validating, each tied to a place:
//   workloads/gemm/x.jsonl:12: workload.axes.M: expected a non-negative integer, got -3
// Readers append to a Diagnostics list instead of stopping at the first
// problem, so `kb validate` can report every problem of a file in one run.
//
// What is kept is bounded whatever the input: origin, path and message are
// made printable when added (common/printable.hpp: controls escaped, long
// names cut), and at most kMaxPerFile errors and kMaxPerFile other problems of
// one file are kept; past that, one line per file counts the rest
// ("... and K more problems in FILE"), except warnings and notes of a
// category, which category_counts() counts. The counts (error_count, warning_count,
// category_counts) include every problem.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kb {

enum class Severity { error, warning, note };

struct Diagnostic {
  Severity severity = Severity::error;
  std::string origin;   // "file" or "file:line" (JSONL); may be empty for in-memory text
  std::string path;     // JSON path inside the document ("definition.inputs.q.shape[2]"); may be empty
  std::string message;  // what is wrong, with the offending value where useful
  // Optional machine-readable kind ("missing-blob"), so callers can group
  // many diagnostics of one kind; empty for most.
  std::string category;

  // "origin: path: message" (warnings and notes prefixed "warning: " / "note: ").
  std::string to_string() const;
};

class Diagnostics {
 public:
  static constexpr std::size_t kMaxPerFile = 50;

  void error(std::string origin, std::string path, std::string message);
  void warning(std::string origin, std::string path, std::string message, std::string category = {});
  void note(std::string origin, std::string path, std::string message);
  void add(Diagnostic d);
  void append(const Diagnostics& other);

  const std::vector<Diagnostic>& items() const { return items_; }
  std::size_t error_count() const { return errors_; }
  std::size_t warning_count() const { return warnings_; }
  bool has_errors() const { return error_count() != 0; }
  // Problems of `category`, kept or not, per file (origin without its ":line").
  std::map<std::string, std::size_t> category_counts(std::string_view category) const;
  // First error as one line, or "" when there is none.
  std::string first_error() const;
  // All errors, one per line.
  std::string errors_text() const;
  // The first error added after the list held `errors_before` errors (for an
  // error past its file's cap, that file's "... and K more" line).
  std::string error_after(std::size_t errors_before) const;
  void clear() {
    items_.clear();
    errors_ = warnings_ = 0;
    error_index_.clear();
    files_.clear();
    categories_.clear();
  }

 private:
  struct FileCount {
    std::size_t kept_errors = 0;
    std::size_t kept_others = 0;
    std::size_t dropped = 0;
    std::size_t line = 0;  // position in items_ of the "... and K more" line, once there is one
  };
  std::vector<Diagnostic> items_;
  // Per error (in order): its position in items_; past its file's cap, the position of that file's count line.
  std::vector<std::size_t> error_index_;
  std::map<std::string, FileCount, std::less<>> files_;  // by origin without its ":line"
  std::map<std::pair<std::string, std::string>, std::size_t> categories_;  // (category, file) -> count
  std::size_t errors_ = 0;
  std::size_t warnings_ = 0;
};

}  // namespace kb
