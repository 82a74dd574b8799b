#include "dispatch/dispatch_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include "schema/io.hpp"

namespace kb::dispatch {
namespace fs = std::filesystem;

namespace {

Result<std::vector<fs::path>> trace_files(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return std::vector<fs::path>{path};
  if (!fs::is_directory(path, ec)) return make_error(Code::io_error, fmt::format("{}: no such file or folder", path));
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->path().extension() == ".jsonl" && it->is_regular_file()) files.push_back(it->path());
  if (ec) return make_error(Code::io_error, fmt::format("{}: {}", path, ec.message()));
  std::sort(files.begin(), files.end());  // the same table whatever order the folder lists
  return files;
}

double log_size(std::int64_t v) { return std::log2(static_cast<double>(std::max<std::int64_t>(v, 1))); }

}  // namespace

TableBuilder::TableBuilder(const Definition& def, const TableOptions& options, const Registry& registry)
    : def_(def), options_(options), registry_(registry), quoted_name_(fmt::format("\"{}\"", def.name)) {
  for (std::size_t i = 0; i < def.axes.size(); ++i)
    if (def.axes[i].kind == AxisKind::var) table_.var_axes.push_back(i);
}

Status TableBuilder::add_line(std::string_view line, std::string_view file, std::size_t number) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return ok_status();
  // Most lines of a shared traces folder belong to other definitions.
  if (line.find(quoted_name_) == std::string_view::npos) return ok_status();
  const std::string origin = fmt::format("{}:{}", file, number);
  auto trace = read_trace(line, origin);
  if (!trace) return std::move(trace).error();
  if (trace->definition != def_.name || !trace->solution || !trace->evaluation) return ok_status();
  ++table_.records;
  const Implementation* impl = registry_.find(*trace->solution);
  if (!impl || impl->outside || (impl->supports && !impl->supports(def_).empty())) return ok_status();
  const Evaluation& ev = *trace->evaluation;
  if (!options_.hardware.empty() && ev.environment.hardware != options_.hardware) return ok_status();
  std::vector<std::int64_t> values;
  for (std::size_t a : table_.var_axes) {
    const std::int64_t* v = trace->workload.find_axis(def_.axes[a].name);
    if (!v)
      return make_error(Code::invalid_data, fmt::format("{}: workload {} has no value for var axis \"{}\" of {}", origin,
                                                        trace->workload.uuid, def_.axes[a].name, def_.name));
    values.push_back(*v);
  }
  ++table_.used;
  Candidate& c = seen_[Key{impl->device, std::move(values), impl->name}];
  if (ev.status != EvalStatus::passed) {
    c.failed = true;
  } else if (ev.performance && ev.performance->latency_ms > 0 &&  // untimed (kb bench --no-time): no speed
             (c.uuid.empty() || ev.performance->latency_ms < c.best_ms)) {
    c.best_ms = ev.performance->latency_ms;
    c.uuid = trace->workload.uuid;
  }
  return ok_status();
}

Table TableBuilder::finish() && {
  // `seen_` is ordered by (device, values, solution): one run per (device,
  // values). Its winner: the earliest in the registry's order among the
  // passing solutions within tie_margin of the fastest.
  const Implementation* registry_begin = registry_.all().data();
  for (auto it = seen_.begin(); it != seen_.end();) {
    const auto& [device, values, name] = it->first;
    auto run_end = it;
    double fastest = 0;
    bool any = false;
    for (; run_end != seen_.end() && std::get<0>(run_end->first) == device && std::get<1>(run_end->first) == values;
         ++run_end) {
      const Candidate& c = run_end->second;
      if (c.failed || c.uuid.empty()) continue;
      if (!any || c.best_ms < fastest) fastest = c.best_ms;
      any = true;
    }
    Entry best;
    std::ptrdiff_t best_rank = 0;
    for (; any && it != run_end; ++it) {
      const Candidate& c = it->second;
      if (c.failed || c.uuid.empty() || c.best_ms > fastest * (1 + options_.tie_margin)) continue;
      const Implementation* impl = registry_.find(std::get<2>(it->first));
      const std::ptrdiff_t rank = impl - registry_begin;
      if (!best.impl || rank < best_rank) {
        best.impl = impl;
        best_rank = rank;
        best.latency_ms = c.best_ms;
        best.workload_uuid = c.uuid;
      }
    }
    it = run_end;
    if (!best.impl) continue;
    best.var_values = values;
    (device == Device::cpu ? table_.cpu : table_.cuda).push_back(std::move(best));
  }
  return std::move(table_);
}

Result<Table> build_table(const Definition& def, const std::string& path, const TableOptions& options,
                          const Registry& registry) {
  auto files = trace_files(path);
  if (!files) return std::move(files).error();
  TableBuilder builder(def, options, registry);
  for (const fs::path& file : *files) {
    std::ifstream in(file);
    if (!in) return make_error(Code::io_error, fmt::format("{}: cannot be read", file.string()));
    const std::string name = file.string();
    std::string line;
    for (std::size_t number = 1; std::getline(in, line); ++number) KB_TRY(builder.add_line(line, name, number));
  }
  return std::move(builder).finish();
}

double log2_distance(std::int64_t a, std::int64_t b) { return std::abs(log_size(a) - log_size(b)); }

const Entry* nearest(const Table& table, const std::vector<Entry>& entries, std::span<const std::int64_t> axis_values,
                     bool exact) {
  const Entry* best = nullptr;
  double best_distance = 0;
  for (const Entry& e : entries) {
    double distance = 0;
    for (std::size_t i = 0; i < table.var_axes.size(); ++i) {
      const std::size_t a = table.var_axes[i];
      const std::int64_t call = a < axis_values.size() ? axis_values[a] : -1;
      if (call == e.var_values[i]) continue;
      distance += log2_distance(call, e.var_values[i]);
      if (exact) distance += 1;  // any difference disqualifies
    }
    if (exact && distance > 0) continue;
    if (!best || distance < best_distance) {
      best = &e;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace kb::dispatch
