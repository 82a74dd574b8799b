// The report of a trace set as one typed record: what `kb report` renders as HTML, markdown, CSV
// and JSON (render.hpp). Built here from trace records, calling records (through lib/estimate)
// and agent traces; the printers only lay it out.
//
// Definitions used throughout:
//   baseline    per workload, the median reference_latency_ms of its PASSED records (the
//               reference kb bench and FlashInfer-Bench time beside every solution), or with
//               Options::baseline that solution's latency there;
//   speedup     baseline / latency of a PASSED, timed record;
//   fast_p(p)   of a solution on a definition: the fraction of the definition's workloads where
//               it PASSED and its speedup exceeds p (FlashInfer-Bench's and KernelBench's fast_p;
//               fast_0 is the fraction correct);
//   win rate    of an author: every (definition, workload) with a PASSED, timed solution is won by
//               the author of the fastest one; wins / the workloads where that author had any
//               solution evaluated.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "estimate/estimate.hpp"
#include "model/records.hpp"
#include "report/traces.hpp"

namespace kb::report {

using Axes = std::vector<std::pair<std::string, std::int64_t>>;

struct Options {
  std::string title = "kb report";
  std::string baseline;  // non-empty: this solution's latency is the baseline (else the reference)
  std::vector<std::string> trace_paths;  // what the traces were read from (for estimates and the header)
  std::vector<std::string> record_paths;  // calling records: .json files or folders of them
  std::vector<std::string> agent_trace_paths;  // agent trace files
  std::string hardware;  // estimates: use only records of this device
};

// One solution at one workload.
struct Cell {
  bool present = false;
  std::string status;                // "PASSED", "INCORRECT_NUMERICAL", ...
  std::optional<double> latency_ms;  // PASSED and timed
  std::optional<double> speedup;     // against the workload's baseline
  std::optional<double> spread;      // relative_spread of the measurement
  std::string message;               // not PASSED: the evaluation log's first lines
  std::string origin;                // file:line of the record used (the last one read)
};

struct WorkloadRow {
  std::string uuid;
  Axes axes;
  std::optional<double> baseline_ms;
};

struct SolutionSummary {
  std::string name;
  std::string author;  // "" when the trace files do not say
  std::size_t evaluated = 0;  // workloads it has a record for
  std::size_t passed = 0;
  std::size_t timed = 0;      // PASSED with a latency and a baseline (speedup known)
  std::optional<double> geomean_speedup, min_speedup, max_speedup;
  std::vector<std::pair<std::string, std::size_t>> statuses;  // status -> workloads, by count
};

// Latency against one var axis: one series per solution (and the baseline), one point per workload
// with a latency (x: the axis value). Workloads that differ in other axes share an x.
struct Series {
  std::string label;
  bool baseline = false;
  std::vector<std::pair<double, double>> points;  // (x, latency ms), sorted by x
};
struct AxisChart {
  std::string axis;
  bool log_x = false;  // the values span more than a factor of 8
  std::vector<Series> series;
};

struct FastP {
  std::vector<double> p;  // the thresholds, ascending, from 0
  std::vector<std::pair<std::string, std::vector<double>>> curves;  // (solution or author, fraction at each p)
};

struct DefinitionReport {
  std::string name;
  std::string op_type;  // from the trace folders, "" when they do not say
  std::vector<std::string> var_axes;    // as the workloads name them, in first-seen order
  std::vector<WorkloadRow> workloads;   // sorted by axes
  std::vector<SolutionSummary> solutions;  // sorted by name
  std::vector<std::vector<Cell>> cells;    // [solution][workload]
  std::vector<AxisChart> charts;           // one per var axis with at least two values
  FastP fast_p;                            // per solution
  std::vector<std::string> devices;
};

struct AuthorRow {
  std::string author;
  std::size_t solutions = 0;
  std::size_t entered = 0;  // (definition, workload) pairs where it had a solution evaluated
  std::size_t wins = 0;
  double win_rate = 0;
  std::size_t passed = 0;  // of `entered`, those where one of its solutions PASSED
};

struct Count {
  std::string name;
  std::size_t records = 0;
};

struct ModelPage {
  std::string path;
  std::string error;  // the record could not be read or estimated: why (then `estimate` is empty)
  std::optional<model::CallingRecord> record;
  std::optional<estimate::Estimate> estimate;
};

struct AgentPage {
  std::string path;
  model::AgentTrace trace;
};

struct Report {
  std::string title;
  std::vector<std::string> trace_paths;
  std::size_t trace_files = 0;
  std::size_t records = 0;
  std::string baseline;  // "reference" or the solution
  std::vector<Count> devices;  // environment.hardware, by records
  std::vector<Count> timing;   // how the latencies were timed (performance.extra.timing), by records
  std::vector<Count> statuses;
  std::vector<DefinitionReport> definitions;  // sorted by name
  std::vector<AuthorRow> authors;             // by win rate, then name
  FastP author_fast_p;                        // per author, over every workload it entered
  std::vector<ModelPage> models;
  std::vector<AgentPage> agents;
};

// Errors: the agent traces that cannot be read (the reader's message). A calling record that cannot
// be read or estimated is kept on the model page with its error.
Result<Report> build(const TraceSet& traces, const Options& options);

// The first lines of a log for a status cell: at most `max_lines` lines and `max_chars` characters.
std::string log_excerpt(const std::string& log, std::size_t max_lines = 6, std::size_t max_chars = 600);

}  // namespace kb::report
