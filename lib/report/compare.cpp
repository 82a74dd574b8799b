#include "report/compare.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "json/json.hpp"

namespace kb::report {

namespace {

constexpr std::array<std::pair<std::string_view, std::string_view>, kChangeCount> kNames = {{
    {"faster", "faster"},
    {"slower", "slower"},
    {"within noise", "within_noise"},
    {"no spread recorded", "no_spread"},
    {"now failing", "now_failing"},
    {"now passing", "now_passing"},
    {"still failing", "still_failing"},
    {"untimed", "untimed"},
    {"only in old", "only_old"},
    {"only in new", "only_new"},
}};

using Key = std::tuple<std::string, std::string, std::string>;  // definition, solution, workload uuid

struct Indexed {
  std::map<Key, const TraceRecord*> by_key;
  std::size_t repeats = 0;
  std::vector<std::string> devices;
};

Indexed index(const TraceSet& set) {
  Indexed out;
  std::set<std::string> devices;
  for (const auto& r : set.records) {
    auto [it, inserted] = out.by_key.insert_or_assign(Key{r.trace.definition, *r.trace.solution, r.trace.workload.uuid}, &r);
    if (!inserted) ++out.repeats;
    devices.insert(r.trace.evaluation->environment.hardware);
  }
  out.devices.assign(devices.begin(), devices.end());
  return out;
}

CompareSide side(const TraceRecord* r) {
  CompareSide s;
  if (!r) return s;
  const Evaluation& ev = *r->trace.evaluation;
  s.status = std::string(eval_status_name(ev.status));
  s.origin = r->origin;
  if (ev.status == EvalStatus::passed && ev.performance && ev.performance->latency_ms > 0) {
    s.latency_ms = ev.performance->latency_ms;
    if (r->measurement) s.spread = relative_spread(*r->measurement);
  }
  return s;
}

void write_side(json::Writer& w, const CompareSide& s) {
  w.begin_object();
  if (s.status.empty()) w.key("status").null();
  else w.key("status").string(s.status);
  if (s.latency_ms) w.key("latency_ms").number(*s.latency_ms);
  if (s.spread) w.key("spread").number(*s.spread);
  if (!s.origin.empty()) w.key("origin").string(s.origin);
  w.end_object();
}

}  // namespace

std::string_view change_name(Change c) noexcept { return kNames[static_cast<std::size_t>(c)].first; }
std::string_view change_key(Change c) noexcept { return kNames[static_cast<std::size_t>(c)].second; }

Change classify(double old_ms, std::optional<double> old_spread, double new_ms, std::optional<double> new_spread,
                std::optional<double>* noise) {
  std::optional<double> n;
  if (old_spread && new_spread) n = std::min(*old_spread, *new_spread);
  else if (old_spread) n = old_spread;
  else if (new_spread) n = new_spread;
  if (noise) *noise = n;
  if (!n) return Change::no_spread;
  const double d = (new_ms - old_ms) / old_ms;
  if (std::fabs(d) <= *n) return Change::within_noise;
  return d < 0 ? Change::faster : Change::slower;
}

Comparison compare(const TraceSet& old_set, const TraceSet& new_set) {
  Indexed a = index(old_set), b = index(new_set);
  Comparison c;
  c.old_devices = a.devices;
  c.new_devices = b.devices;
  c.old_repeats = a.repeats;
  c.new_repeats = b.repeats;
  std::set<Key> keys;
  for (const auto& [k, r] : a.by_key) keys.insert(k);
  for (const auto& [k, r] : b.by_key) keys.insert(k);
  double log_sum = 0;
  for (const Key& k : keys) {
    auto ia = a.by_key.find(k), ib = b.by_key.find(k);
    const TraceRecord* ra = ia == a.by_key.end() ? nullptr : ia->second;
    const TraceRecord* rb = ib == b.by_key.end() ? nullptr : ib->second;
    CompareRow row;
    std::tie(row.definition, row.solution, row.workload) = k;
    row.axes = (ra ? ra : rb)->trace.workload.axes;
    row.old_side = side(ra);
    row.new_side = side(rb);
    const bool pa = row.old_side.status == "PASSED", pb = row.new_side.status == "PASSED";
    if (!ra) row.change = Change::only_new;
    else if (!rb) row.change = Change::only_old;
    else if (pa && !pb) row.change = Change::now_failing;
    else if (!pa && pb) row.change = Change::now_passing;
    else if (!pa && !pb) row.change = Change::still_failing;
    else if (!row.old_side.latency_ms || !row.new_side.latency_ms) row.change = Change::untimed;
    else {
      const double o = *row.old_side.latency_ms, n = *row.new_side.latency_ms;
      row.difference = (n - o) / o;
      row.change = classify(o, row.old_side.spread, n, row.new_side.spread, &row.noise);
      log_sum += std::log(n / o);
      ++c.timed_pairs;
    }
    ++c.counts[static_cast<std::size_t>(row.change)];
    c.rows.push_back(std::move(row));
  }
  // Within a definition and solution, workloads in the order of their axes (then uuid).
  std::stable_sort(c.rows.begin(), c.rows.end(), [](const CompareRow& x, const CompareRow& y) {
    return std::tie(x.definition, x.solution, x.axes, x.workload) < std::tie(y.definition, y.solution, y.axes, y.workload);
  });
  if (c.timed_pairs) c.geomean_ratio = std::exp(log_sum / static_cast<double>(c.timed_pairs));
  return c;
}

std::string to_json(const Comparison& c, bool pretty) {
  json::Writer w(pretty);
  w.begin_object();
  w.key("old_devices").begin_array();
  for (const auto& d : c.old_devices) w.string(d);
  w.end_array();
  w.key("new_devices").begin_array();
  for (const auto& d : c.new_devices) w.string(d);
  w.end_array();
  w.key("summary").begin_object();
  w.key("rows").integer(static_cast<std::int64_t>(c.rows.size()));
  for (std::size_t i = 0; i < kChangeCount; ++i)
    w.key(change_key(static_cast<Change>(i))).integer(static_cast<std::int64_t>(c.counts[i]));
  w.key("timed_pairs").integer(static_cast<std::int64_t>(c.timed_pairs));
  w.key("geomean_ratio").number(c.geomean_ratio);
  w.key("old_repeats").integer(static_cast<std::int64_t>(c.old_repeats));
  w.key("new_repeats").integer(static_cast<std::int64_t>(c.new_repeats));
  w.end_object();
  w.key("rows").begin_array();
  for (const auto& r : c.rows) {
    w.begin_object();
    w.key("definition").string(r.definition);
    w.key("workload").string(r.workload);
    w.key("axes").begin_object();
    for (const auto& [k, v] : r.axes) w.key(k).integer(v);
    w.end_object();
    w.key("solution").string(r.solution);
    w.key("old");
    write_side(w, r.old_side);
    w.key("new");
    write_side(w, r.new_side);
    if (r.difference) w.key("difference").number(*r.difference);
    if (r.noise) w.key("noise").number(*r.noise);
    w.key("change").string(change_key(r.change));
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return w.take();
}

}  // namespace kb::report
