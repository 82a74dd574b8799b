#include "report/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

namespace kb::report {
namespace fs = std::filesystem;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Keys in first-seen order with their counts, then sorted by count (descending, stable).
struct Counter {
  std::vector<Count> items;
  void add(const std::string& name) {
    for (auto& c : items)
      if (c.name == name) {
        ++c.records;
        return;
      }
    items.push_back({name, 1});
  }
  std::vector<Count> sorted() const {
    auto out = items;
    std::stable_sort(out.begin(), out.end(), [](const Count& a, const Count& b) { return a.records > b.records; });
    return out;
  }
};

// How a record was timed: the harness's "timing: ..." log line, else performance.extra's method.
std::string timing_text(const TraceRecord& r) {
  const std::string& log = r.trace.evaluation->log;
  for (std::size_t pos = 0; pos < log.size();) {
    std::size_t end = log.find('\n', pos);
    if (end == std::string::npos) end = log.size();
    std::string_view line(log.data() + pos, end - pos);
    if (line.starts_with("timing: ")) return std::string(line.substr(8));
    pos = end + 1;
  }
  if (r.measurement && r.measurement->timing)
    return *r.measurement->timing == TimingMethod::cuda_events ? "CUDA events" : "wall clock";
  return "not recorded";
}

// The thresholds of a fast_p curve: tenths up to 1.5, then 1.75 and 2, then a coarser series until
// past the largest speedup (the same grid for every definition with the same largest speedup).
std::vector<double> thresholds(double largest) {
  std::vector<double> p;
  for (int i = 0; i <= 15; ++i) p.push_back(i / 10.0);
  for (double v : {1.75, 2.0}) p.push_back(v);
  for (double v : {2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 50.0, 100.0, 200.0, 500.0, 1000.0}) {
    if (p.back() > largest) break;
    p.push_back(v);
  }
  return p;
}

Result<std::vector<std::string>> record_files(const std::vector<std::string>& paths) {
  return files_with_extension(paths, ".json");
}

}  // namespace

std::string log_excerpt(const std::string& log, std::size_t max_lines, std::size_t max_chars) {
  std::string out;
  std::size_t lines = 0, pos = 0;
  while (pos < log.size() && lines < max_lines) {
    std::size_t end = log.find('\n', pos);
    if (end == std::string::npos) end = log.size();
    out.append(log, pos, end - pos).push_back('\n');
    ++lines;
    pos = end + 1;
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  bool cut = pos < log.size();
  if (out.size() > max_chars) {
    out.resize(max_chars);
    // Never end inside a UTF-8 sequence.
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
    if (!out.empty() && (static_cast<unsigned char>(out.back()) & 0x80)) out.pop_back();
    cut = true;
  }
  if (cut) out += " ...";
  return out;
}

Result<Report> build(const TraceSet& traces, const Options& options) {
  Report rep;
  rep.title = options.title;
  rep.trace_paths = options.trace_paths;
  rep.trace_files = traces.files.size();
  rep.records = traces.records.size();
  rep.baseline = options.baseline.empty() ? "reference" : options.baseline;

  Counter devices, timing, statuses;
  // definition -> its records, in reading order (a later line for the same cell replaces an earlier one).
  std::map<std::string, std::vector<const TraceRecord*>> by_definition;
  std::map<std::string, std::string> author_of;  // solution -> author
  for (const auto& r : traces.records) {
    const Evaluation& ev = *r.trace.evaluation;
    devices.add(ev.environment.hardware);
    statuses.add(std::string(eval_status_name(ev.status)));
    if (ev.status == EvalStatus::passed && ev.performance && ev.performance->latency_ms > 0) timing.add(timing_text(r));
    by_definition[r.trace.definition].push_back(&r);
    if (!r.author.empty()) author_of.try_emplace(*r.trace.solution, r.author);
  }
  rep.devices = devices.sorted();
  rep.timing = timing.sorted();
  rep.statuses = statuses.sorted();

  // Per author, over every definition: (definition, workload) -> entered, passed, won; the author's
  // best speedup per entered workload for its fast_p curve.
  struct AuthorAcc {
    std::set<std::string> solutions;
    std::size_t entered = 0, passed = 0, wins = 0;
    std::vector<double> best_speedups;  // one per entered workload, 0 where none PASSED timed
  };
  std::map<std::string, AuthorAcc> authors;
  double largest_author_speedup = 0;

  for (const auto& [name, recs] : by_definition) {
    DefinitionReport d;
    d.name = name;
    std::map<std::string, std::size_t> wl_index;  // uuid -> workload
    std::map<std::string, std::size_t> sol_index;
    std::set<std::string> devs;
    for (const TraceRecord* r : recs) {
      if (d.op_type.empty()) d.op_type = r->op_type;
      devs.insert(r->trace.evaluation->environment.hardware);
      for (const auto& [axis, v] : r->trace.workload.axes)
        if (std::find(d.var_axes.begin(), d.var_axes.end(), axis) == d.var_axes.end()) d.var_axes.push_back(axis);
      if (wl_index.try_emplace(r->trace.workload.uuid, 0).second)
        d.workloads.push_back({r->trace.workload.uuid, r->trace.workload.axes, std::nullopt});
      sol_index.try_emplace(*r->trace.solution, 0);
    }
    d.devices.assign(devs.begin(), devs.end());
    std::stable_sort(d.workloads.begin(), d.workloads.end(), [&](const WorkloadRow& a, const WorkloadRow& b) {
      // By the definition's axes in first-seen order, so a chart's x and the table agree.
      for (const auto& axis : d.var_axes) {
        auto find = [&](const Axes& ax) -> std::int64_t {
          for (const auto& [k, v] : ax)
            if (k == axis) return v;
          return -1;
        };
        const auto va = find(a.axes), vb = find(b.axes);
        if (va != vb) return va < vb;
      }
      return a.uuid < b.uuid;
    });
    for (std::size_t i = 0; i < d.workloads.size(); ++i) wl_index[d.workloads[i].uuid] = i;
    std::size_t si = 0;
    for (auto& [sol, idx] : sol_index) {
      idx = si++;
      SolutionSummary s;
      s.name = sol;
      if (auto a = author_of.find(sol); a != author_of.end()) s.author = a->second;
      d.solutions.push_back(std::move(s));
    }
    d.cells.assign(d.solutions.size(), std::vector<Cell>(d.workloads.size()));

    // The cells, and the references per workload for the baseline.
    std::vector<std::vector<double>> references(d.workloads.size());
    for (const TraceRecord* r : recs) {
      const Evaluation& ev = *r->trace.evaluation;
      Cell& c = d.cells[sol_index[*r->trace.solution]][wl_index[r->trace.workload.uuid]];
      c = Cell{};
      c.present = true;
      c.status = std::string(eval_status_name(ev.status));
      c.origin = r->origin;
      if (ev.status == EvalStatus::passed) {
        if (ev.performance && ev.performance->latency_ms > 0) {
          c.latency_ms = ev.performance->latency_ms;
          if (r->measurement) c.spread = relative_spread(*r->measurement);
          if (ev.performance->reference_latency_ms > 0)
            references[wl_index[r->trace.workload.uuid]].push_back(ev.performance->reference_latency_ms);
        }
      } else {
        c.message = log_excerpt(ev.log);
      }
    }
    std::optional<std::size_t> baseline_solution;
    if (!options.baseline.empty())
      if (auto b = sol_index.find(options.baseline); b != sol_index.end()) baseline_solution = b->second;
    for (std::size_t w = 0; w < d.workloads.size(); ++w) {
      if (options.baseline.empty()) {
        if (!references[w].empty()) d.workloads[w].baseline_ms = median(references[w]);
      } else if (baseline_solution) {
        d.workloads[w].baseline_ms = d.cells[*baseline_solution][w].latency_ms;
      }
    }

    // Speedups, summaries, fast_p.
    double largest = 0;
    for (std::size_t s = 0; s < d.solutions.size(); ++s) {
      SolutionSummary& sum = d.solutions[s];
      std::map<std::string, std::size_t> st;
      double log_sum = 0;
      for (std::size_t w = 0; w < d.workloads.size(); ++w) {
        Cell& c = d.cells[s][w];
        if (!c.present) continue;
        ++sum.evaluated;
        ++st[c.status];
        if (c.status == "PASSED") ++sum.passed;
        if (c.latency_ms && d.workloads[w].baseline_ms) {
          c.speedup = *d.workloads[w].baseline_ms / *c.latency_ms;
          ++sum.timed;
          log_sum += std::log(*c.speedup);
          sum.min_speedup = std::min(sum.min_speedup.value_or(*c.speedup), *c.speedup);
          sum.max_speedup = std::max(sum.max_speedup.value_or(*c.speedup), *c.speedup);
          largest = std::max(largest, *c.speedup);
        }
      }
      if (sum.timed) sum.geomean_speedup = std::exp(log_sum / static_cast<double>(sum.timed));
      for (const auto& [k, v] : st) sum.statuses.emplace_back(k, v);
      std::stable_sort(sum.statuses.begin(), sum.statuses.end(),
                       [](const auto& a, const auto& b) { return a.second > b.second; });
    }
    d.fast_p.p = thresholds(largest);
    for (std::size_t s = 0; s < d.solutions.size(); ++s) {
      std::vector<double> curve;
      for (double p : d.fast_p.p) {
        std::size_t n = 0;
        for (const Cell& c : d.cells[s]) n += c.status == "PASSED" && c.speedup && *c.speedup > p;
        curve.push_back(d.workloads.empty() ? 0 : static_cast<double>(n) / static_cast<double>(d.workloads.size()));
      }
      d.fast_p.curves.emplace_back(d.solutions[s].name, std::move(curve));
    }

    // Latency against each var axis with at least two distinct values.
    for (const auto& axis : d.var_axes) {
      std::set<std::int64_t> values;
      for (const auto& w : d.workloads)
        for (const auto& [k, v] : w.axes)
          if (k == axis) values.insert(v);
      if (values.size() < 2) continue;
      AxisChart chart;
      chart.axis = axis;
      chart.log_x = *values.begin() > 0 && *values.rbegin() > 8 * *values.begin();
      auto x_of = [&](const WorkloadRow& w) -> std::optional<double> {
        for (const auto& [k, v] : w.axes)
          if (k == axis) return static_cast<double>(v);
        return std::nullopt;
      };
      Series base{rep.baseline == "reference" ? "baseline (reference)" : "baseline (" + rep.baseline + ")", true, {}};
      for (const auto& w : d.workloads)
        if (auto x = x_of(w); x && w.baseline_ms) base.points.emplace_back(*x, *w.baseline_ms);
      if (!base.points.empty()) chart.series.push_back(std::move(base));
      for (std::size_t s = 0; s < d.solutions.size(); ++s) {
        Series series{d.solutions[s].name, false, {}};
        for (std::size_t w = 0; w < d.workloads.size(); ++w)
          if (auto x = x_of(d.workloads[w]); x && d.cells[s][w].latency_ms)
            series.points.emplace_back(*x, *d.cells[s][w].latency_ms);
        if (!series.points.empty()) chart.series.push_back(std::move(series));
      }
      for (auto& s : chart.series) std::stable_sort(s.points.begin(), s.points.end());
      if (!chart.series.empty()) d.charts.push_back(std::move(chart));
    }

    // Authors: who entered each workload, who won it.
    for (std::size_t w = 0; w < d.workloads.size(); ++w) {
      std::map<std::string, double> best;  // author -> best speedup here (0: none timed)
      std::map<std::string, bool> passed;
      std::string winner;
      double winner_ms = 0;
      for (std::size_t s = 0; s < d.solutions.size(); ++s) {
        const Cell& c = d.cells[s][w];
        if (!c.present) continue;
        const std::string author = d.solutions[s].author.empty() ? "(unknown)" : d.solutions[s].author;
        authors[author].solutions.insert(d.solutions[s].name);
        double& b = best[author];
        if (c.speedup) b = std::max(b, *c.speedup);
        passed[author] = passed[author] || c.status == "PASSED";
        if (c.latency_ms && (winner.empty() || *c.latency_ms < winner_ms)) {
          winner = author;
          winner_ms = *c.latency_ms;
        }
      }
      for (const auto& [author, b] : best) {
        AuthorAcc& a = authors[author];
        ++a.entered;
        a.passed += passed[author];
        a.best_speedups.push_back(b);
        largest_author_speedup = std::max(largest_author_speedup, b);
      }
      if (!winner.empty()) ++authors[winner].wins;
    }
    rep.definitions.push_back(std::move(d));
  }

  for (const auto& [name, a] : authors) {
    AuthorRow row;
    row.author = name;
    row.solutions = a.solutions.size();
    row.entered = a.entered;
    row.passed = a.passed;
    row.wins = a.wins;
    row.win_rate = a.entered ? static_cast<double>(a.wins) / static_cast<double>(a.entered) : 0;
    rep.authors.push_back(row);
  }
  std::stable_sort(rep.authors.begin(), rep.authors.end(),
                   [](const AuthorRow& a, const AuthorRow& b) { return a.win_rate > b.win_rate; });
  rep.author_fast_p.p = thresholds(largest_author_speedup);
  for (const auto& row : rep.authors) {
    const AuthorAcc& a = authors[row.author];
    std::vector<double> curve;
    for (double p : rep.author_fast_p.p) {
      std::size_t n = 0;
      for (double s : a.best_speedups) n += s > p;
      curve.push_back(a.entered ? static_cast<double>(n) / static_cast<double>(a.entered) : 0);
    }
    rep.author_fast_p.curves.emplace_back(row.author, std::move(curve));
  }

  // Model pages.
  if (!options.record_paths.empty()) {
    auto files = record_files(options.record_paths);
    if (!files) return std::move(files).error();
    estimate::Options eo;
    eo.hardware = options.hardware;
    eo.baseline = options.baseline;
    for (const auto& file : *files) {
      ModelPage page;
      page.path = file;
      Diagnostics diags;
      auto record = model::read_calling_record_file(file, &diags);
      if (!record) {
        page.error = record.error().message;
      } else {
        page.record = *record;
        auto e = estimate::estimate(*record, options.trace_paths, eo);
        if (!e) page.error = e.error().message;
        else page.estimate = std::move(*e);
      }
      rep.models.push_back(std::move(page));
    }
  }
  for (const auto& file : options.agent_trace_paths) {
    auto t = model::read_agent_trace_file(file);
    if (!t) return std::move(t).error();
    rep.agents.push_back({file, std::move(*t)});
  }
  return rep;
}

}  // namespace kb::report
