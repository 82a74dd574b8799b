// Choosing a solution per call from recorded traces (kb_dispatch in the C ABI).
//
// A table is built once, off the hot path: every Trace line of one definition
// under a path (a .jsonl file, or a folder searched for them) whose solution
// kb can run in this process (a solution of `registry` that handles the
// definition). For each workload's var-axis values and each device kind, the
// table keeps the fastest solution that PASSED there, within a tie margin of
// the registry's order (TableOptions; records without a latency, from
// kb bench --no-time, are not timings and are passed over); a
// solution with any other status on those axis values is out for them,
// whatever its other records say. At call time, nearest() picks the entry whose axis values are
// closest to the call's (distance: the sum over var axes of |log2 a - log2 b|,
// so batch 1 against 2 weighs as 1024 against 2048), or only an exact match.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "common/result.hpp"
#include "harness/implementation.hpp"
#include "schema/model.hpp"

namespace kb::dispatch {

struct TableOptions {
  // Non-empty: only records whose evaluation.environment.hardware equals it
  // (timings from another GPU say little about this one).
  std::string hardware;
  // On one (values, device kind), a solution must be faster by more than this
  // fraction than one the registry lists before it to win over it; 0: the
  // strictly fastest. Noise between equivalent solutions (one kernel behind
  // two names) then does not flip the choice from run to run.
  double tie_margin = 0.02;
};

struct Entry {
  std::vector<std::int64_t> var_values;  // the definition's var axes, in definition order
  std::string workload_uuid;             // of the record that won
  const Implementation* impl = nullptr;  // from the registry the table was built with
  double latency_ms = 0;
};

struct Table {
  std::vector<std::size_t> var_axes;  // indexes into the definition's axes
  std::vector<Entry> cpu, cuda;       // sorted by var_values
  std::size_t records = 0;            // trace lines of this definition with a solution
  std::size_t used = 0;               // of those, the ones of a solution kb runs in this process
};

// Builds a Table line by line: build_table feeds it files, the fuzz target
// (tests/fuzz/fuzz_dispatch.cpp) arbitrary text.
class TableBuilder {
 public:
  // `def`, `options` and `registry` must outlive the builder.
  TableBuilder(const Definition& def, const TableOptions& options, const Registry& registry);
  // One line of a trace file; `file` and `number` name it in errors. The
  // errors are build_table's.
  Status add_line(std::string_view line, std::string_view file, std::size_t number);
  Table finish() &&;

 private:
  // What the records say about one solution on one set of axis values.
  struct Candidate {
    double best_ms = 0;
    std::string uuid;
    bool failed = false;  // a record other than PASSED: out for these axis values
  };
  using Key = std::tuple<Device, std::vector<std::int64_t>, std::string>;  // device, var values, solution

  const Definition& def_;
  const TableOptions& options_;
  const Registry& registry_;
  std::string quoted_name_;  // "\"<name>\"": lines without it are another definition's
  Table table_;
  std::map<Key, Candidate> seen_;
};

// Reads every Trace line of `def` under `path`. A line that is not a valid
// Trace, or a record of `def` whose workload lacks one of its var axes, is an
// error naming the file and line (invalid_data / parse_error); a missing path
// is io_error. Lines of other definitions are skipped unread beyond their
// definition field.
Result<Table> build_table(const Definition& def, const std::string& path, const TableOptions& options,
                          const Registry& registry);

// The distance of one var axis between a call and a recorded workload: |log2 a - log2 b| (values
// below 1 count as 1), so batch 1 against 2 weighs as 1024 against 2048. nearest() sums it over
// the var axes; kb estimate matches a calling record's calls by the same rule.
double log2_distance(std::int64_t a, std::int64_t b);

// The entry nearest to a call with the definition's axis values `axis_values`
// (all axes, definition order), or nullptr when `entries` is empty or, with
// exact, when none has the call's values. Ties go to the first in table order.
// Allocates nothing.
const Entry* nearest(const Table& table, const std::vector<Entry>& entries, std::span<const std::int64_t> axis_values,
                     bool exact);

}  // namespace kb::dispatch
