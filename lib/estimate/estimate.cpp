#include "estimate/estimate.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include "dispatch/dispatch_table.hpp"
#include "json/json.hpp"
#include "schema/io.hpp"

namespace kb::estimate {
namespace fs = std::filesystem;

namespace {

using Axes = std::vector<std::pair<std::string, std::int64_t>>;

// What the records say about one solution at one point.
struct Candidate {
  double best_ms = 0;   // 0: no timed PASSED record
  bool failed = false;  // a record other than PASSED: out at this point
};

// The records of one definition at one set of var-axis values.
struct Point {
  std::vector<double> reference_ms;              // reference_latency_ms of the PASSED records
  std::map<std::string, Candidate> solutions;
};

// Per definition: points keyed by their axes sorted by name (one key whatever order a line wrote).
using Points = std::map<Axes, Point>;

Result<std::vector<fs::path>> trace_files(const std::vector<std::string>& paths) {
  std::vector<fs::path> files;
  for (const auto& path : paths) {
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) {
      files.emplace_back(path);
      continue;
    }
    if (!fs::is_directory(path, ec)) return make_error(Code::io_error, fmt::format("{}: no such file or folder", path));
    std::vector<fs::path> here;
    for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (it->path().extension() == ".jsonl" && it->is_regular_file()) here.push_back(it->path());
    if (ec) return make_error(Code::io_error, fmt::format("{}: {}", path, ec.message()));
    std::sort(here.begin(), here.end());  // the same estimate whatever order the folder lists
    files.insert(files.end(), here.begin(), here.end());
  }
  return files;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void write_axes(json::Writer& w, const Axes& a) {
  w.begin_object();
  for (const auto& [k, v] : a) w.key(k).integer(v);
  w.end_object();
}

}  // namespace

Result<Estimate> estimate(const model::CallingRecord& record, const std::vector<std::string>& trace_paths,
                          const Options& options) {
  auto files = trace_files(trace_paths);
  if (!files) return std::move(files).error();

  std::set<std::string, std::less<>> ids;
  for (const auto& k : record.kernels) ids.insert(k.id);
  std::map<std::string, Points, std::less<>> by_definition;
  std::map<std::string, std::size_t, std::less<>> filtered_out;  // per definition: records of other devices
  std::set<std::string> hardware;
  Estimate e;

  for (const fs::path& file : *files) {
    std::ifstream in(file);
    if (!in) return make_error(Code::io_error, fmt::format("{}: cannot be read", file.string()));
    std::string line;
    for (std::size_t number = 1; std::getline(in, line); ++number) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      // Most lines of a shared traces folder belong to other definitions: parse only lines that
      // name one of the record's kernels.
      bool relevant = false;
      for (const auto& id : ids) relevant = relevant || line.find(fmt::format("\"{}\"", id)) != std::string::npos;
      if (!relevant) continue;
      auto t = read_trace(line, fmt::format("{}:{}", file.string(), number));
      if (!t) return std::move(t).error();
      if (!ids.count(t->definition) || !t->solution || !t->evaluation) continue;
      const Evaluation& ev = *t->evaluation;
      if (!options.hardware.empty() && ev.environment.hardware != options.hardware) {
        ++filtered_out[t->definition];
        continue;
      }
      hardware.insert(ev.environment.hardware);
      ++e.records;
      Axes key = t->workload.axes;
      std::sort(key.begin(), key.end());
      Point& p = by_definition[t->definition][key];
      Candidate& c = p.solutions[*t->solution];
      if (ev.status != EvalStatus::passed) {
        c.failed = true;
      } else if (ev.performance && ev.performance->latency_ms > 0) {  // untimed (kb bench --no-time): no speed
        if (c.best_ms == 0 || ev.performance->latency_ms < c.best_ms) c.best_ms = ev.performance->latency_ms;
        if (ev.performance->reference_latency_ms > 0) p.reference_ms.push_back(ev.performance->reference_latency_ms);
      }
    }
  }
  if (hardware.size() > 1)
    return make_error(Code::invalid_argument,
                      fmt::format("the traces come from {} devices ({}): timings of different GPUs do not add up to "
                                  "one step; choose one (--hardware NAME)",
                                  hardware.size(), fmt::join(hardware, ", ")));

  e.model = record.model;
  e.framework = std::string(model::framework_name(record.framework));
  e.step = record.step.value_or("");
  e.hardware = hardware.empty() ? std::string() : *hardware.begin();
  e.baseline = options.baseline.empty() ? "reference" : options.baseline;

  for (const auto& call : record.kernels) {
    KernelEstimate k;
    k.id = call.id;
    k.count = call.count;
    k.axes = call.axes;
    auto found = by_definition.find(call.id);
    if (found == by_definition.end()) {
      auto f = filtered_out.find(call.id);
      k.reason = f != filtered_out.end()
                     ? fmt::format("no records on {} ({} on other devices)", options.hardware, f->second)
                     : "no trace records of this definition";
      e.kernels.push_back(std::move(k));
      continue;
    }
    const Point* best_point = nullptr;
    const Axes* best_axes = nullptr;
    double best_distance = 0, baseline_ms = 0, best_ms = 0;
    std::string best_solution;
    std::string missing_axis;
    bool any_usable = false;
    for (const auto& [axes, p] : found->second) {
      // The baseline and the fastest PASSED solution at this point.
      double base = 0;
      if (options.baseline.empty()) {
        if (!p.reference_ms.empty()) base = median(p.reference_ms);
      } else if (auto b = p.solutions.find(options.baseline); b != p.solutions.end() && !b->second.failed) {
        base = b->second.best_ms;
      }
      double fastest = 0;
      std::string fastest_name;
      for (const auto& [name, c] : p.solutions)
        if (!c.failed && c.best_ms > 0 && (fastest == 0 || c.best_ms < fastest)) {
          fastest = c.best_ms;
          fastest_name = name;
        }
      if (base <= 0 || fastest <= 0) continue;
      any_usable = true;
      double distance = 0;
      bool comparable = true;
      for (const auto& [name, value] : call.axes) {
        auto it = std::find_if(axes.begin(), axes.end(), [&name = name](const auto& a) { return a.first == name; });
        if (it == axes.end()) {
          comparable = false;
          missing_axis = name;
          break;
        }
        distance += dispatch::log2_distance(value, it->second);
      }
      if (!comparable) continue;
      if (!best_point || distance < best_distance) {
        best_point = &p;
        best_axes = &axes;
        best_distance = distance;
        baseline_ms = base;
        best_ms = fastest;
        best_solution = fastest_name;
      }
    }
    if (!best_point) {
      if (!any_usable)
        k.reason = options.baseline.empty()
                       ? "no timed PASSED record"
                       : fmt::format("no workload where the baseline {} and a solution both PASSED, timed", options.baseline);
      else
        k.reason = fmt::format("the recorded workloads have no axis \"{}\"", missing_axis);
      e.kernels.push_back(std::move(k));
      continue;
    }
    k.measured = true;
    k.matched_axes = *best_axes;
    k.distance = best_distance;
    k.exact = best_distance == 0 && call.axes.size() == best_axes->size();
    k.baseline_ms = baseline_ms;
    k.best_ms = best_ms;
    k.best_solution = best_solution;
    k.baseline_step_ms = static_cast<double>(call.count) * baseline_ms;
    k.best_step_ms = static_cast<double>(call.count) * best_ms;
    k.speedup = baseline_ms / best_ms;
    e.baseline_ms += k.baseline_step_ms;
    e.best_ms += k.best_step_ms;
    ++e.measured;
    e.kernels.push_back(std::move(k));
  }
  for (auto& k : e.kernels) {
    if (!k.measured) continue;
    k.baseline_share = e.baseline_ms > 0 ? k.baseline_step_ms / e.baseline_ms : 0;
    k.best_share = e.best_ms > 0 ? k.best_step_ms / e.best_ms : 0;
  }
  e.speedup = e.best_ms > 0 ? e.baseline_ms / e.best_ms : 0;
  return e;
}

std::string to_json(const Estimate& e, bool pretty) {
  json::Writer w(pretty);
  w.begin_object();
  w.key("model").string(e.model);
  w.key("framework").string(e.framework);
  w.key("step").string(e.step);
  w.key("hardware").string(e.hardware);
  w.key("baseline").string(e.baseline);
  w.key("records").integer(static_cast<std::int64_t>(e.records));
  w.key("kernels_measured").integer(static_cast<std::int64_t>(e.measured));
  w.key("kernels_total").integer(static_cast<std::int64_t>(e.kernels.size()));
  w.key("baseline_ms").number(e.baseline_ms);
  w.key("best_ms").number(e.best_ms);
  w.key("speedup").number(e.speedup);
  w.key("kernels").begin_array();
  for (const auto& k : e.kernels) {
    w.begin_object();
    w.key("id").string(k.id);
    w.key("count").integer(k.count);
    w.key("axes");
    write_axes(w, k.axes);
    w.key("measured").boolean(k.measured);
    if (!k.measured) {
      w.key("reason").string(k.reason);
    } else {
      w.key("matched_axes");
      write_axes(w, k.matched_axes);
      w.key("exact").boolean(k.exact);
      w.key("distance").number(k.distance);
      w.key("baseline_ms").number(k.baseline_ms);
      w.key("best_solution").string(k.best_solution);
      w.key("best_ms").number(k.best_ms);
      w.key("baseline_step_ms").number(k.baseline_step_ms);
      w.key("best_step_ms").number(k.best_step_ms);
      w.key("baseline_share").number(k.baseline_share);
      w.key("best_share").number(k.best_share);
      w.key("speedup").number(k.speedup);
    }
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return w.take();
}

}  // namespace kb::estimate
