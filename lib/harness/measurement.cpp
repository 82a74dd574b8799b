#include "harness/measurement.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "json/json.hpp"

namespace kb {

namespace {

// Every key of `extra` with its field, in the order written. The writer and
// the reader both walk this list, so they cannot disagree on a key or a kind.
template <class M, class F>
void for_each_field(M& m, F&& f) {
  f("cuda_device", m.cuda_device);
  f("pci_bus_id", m.pci_bus_id);
  f("timing", m.timing);
  f("worker", m.worker);
  f("l2_flushed", m.l2_flushed);
  f("input_sets", m.input_sets);
  f("rotations_checked", m.rotations_checked);
  f("stream_check", m.stream_check);
  f("graph", m.graph);
  f("samples", m.samples);
  f("min_ms", m.min_ms);
  f("max_ms", m.max_ms);
  f("mean_ms", m.mean_ms);
  f("rel_noise", m.rel_noise);
  f("sm_clock_mhz", m.sm_clock_mhz);
  f("sm_clock_max_mhz", m.sm_clock_max_mhz);
  f("sm_clock_lowest_kept_mhz", m.sm_clock_lowest_kept_mhz);
  f("throttled", m.throttled);
  f("throttled_samples_set_aside", m.throttled_samples_set_aside);
  f("throttle_reasons", m.throttle_reasons);
  f("bytes", m.bytes);
  f("achieved_gbs", m.achieved_gbs);
  f("copy_bandwidth_gbs", m.copy_bandwidth_gbs);
  f("fraction_of_copy_bandwidth", m.fraction_of_copy_bandwidth);
  f("flops", m.flops);
  f("achieved_tflops", m.achieved_tflops);
  f("mma_bf16_tflops", m.mma_bf16_tflops);
  f("fraction_of_mma_bf16", m.fraction_of_mma_bf16);
  f("cost_basis", m.cost_basis);
  f("empty_kernel_ms", m.empty_kernel_ms);
  f("one_read_kernel_ms", m.one_read_kernel_ms);
  f("implausible", m.implausible);
  f("l2_flush", m.l2_flush);
  f("baseline", m.baseline);
  f("judge_s", m.judge_s);
  f("timing_s", m.timing_s);
  f("cupti_kernel_ms", m.cupti_kernel_ms);
  f("cupti_min_ms", m.cupti_min_ms);
  f("cupti_max_ms", m.cupti_max_ms);
  f("cupti_samples", m.cupti_samples);
  f("cupti_kernels_per_call", m.cupti_kernels_per_call);
  f("cupti_graph", m.cupti_graph);
  f("cupti", m.cupti_error);
  f("samples_ms", m.samples_ms);
}

template <class E>
struct Names;
template <>
struct Names<TimingMethod> {
  static constexpr std::pair<TimingMethod, std::string_view> list[] = {{TimingMethod::cuda_events, "cuda_events"},
                                                                       {TimingMethod::wall_clock, "wall_clock"}};
};
template <>
struct Names<StreamCheck> {
  static constexpr std::pair<StreamCheck, std::string_view> list[] = {{StreamCheck::same_stream, "same_stream"},
                                                                      {StreamCheck::inconclusive, "inconclusive"},
                                                                      {StreamCheck::not_checked, "not_checked"}};
};
template <>
struct Names<L2FlushMode> {
  static constexpr std::pair<L2FlushMode, std::string_view> list[] = {
      {L2FlushMode::clean, "clean"}, {L2FlushMode::write, "write"}, {L2FlushMode::none, "none"}};
};

template <>
struct Names<CostBasis> {
  static constexpr std::pair<CostBasis, std::string_view> list[] = {{CostBasis::exact, "exact"},
                                                                    {CostBasis::upper_bound, "upper_bound"},
                                                                    {CostBasis::tensor_sizes, "tensor_sizes"}};
};

template <class E>
std::string_view name_of(E e) {
  for (const auto& [v, n] : Names<E>::list)
    if (v == e) return n;
  return {};
}

void put(json::Writer& w, double v) { w.number(v); }
void put(json::Writer& w, std::uint64_t v) { w.integer(static_cast<std::int64_t>(v)); }
void put(json::Writer& w, std::int64_t v) { w.integer(v); }
void put(json::Writer& w, bool v) { w.boolean(v); }
void put(json::Writer& w, const std::string& v) { w.string(v); }
void put(json::Writer& w, const std::pair<std::uint64_t, std::uint64_t>& v) {
  w.begin_array();
  put(w, v.first);
  put(w, v.second);
  w.end_array();
}
template <class E>
  requires std::is_enum_v<E>
void put(json::Writer& w, E e) {
  w.string(name_of(e));
}

class Reader {
 public:
  Reader(std::string_view origin, std::string path) : origin_(origin), path_(std::move(path)) {}

  Error wrong(std::string_view key, std::string_view expected, const json::Element& e) const {
    return make_error(Code::invalid_data, fmt::format("{}: {}: expected {}, got {}", origin_,
                                                      json::member_path(path_, key), expected, json::describe(e)));
  }

  Status get(std::string_view key, const json::Element& e, std::optional<double>& out) const {
    double v = 0;
    if (!(e.is_int64() || e.is_uint64() || e.is_double()) || e.get_double().get(v) != simdjson::SUCCESS)
      return wrong(key, "a number", e);
    out = v;
    return ok_status();
  }
  Status get(std::string_view key, const json::Element& e, std::optional<std::uint64_t>& out) const {
    std::uint64_t v = 0;
    if (!(e.is_int64() || e.is_uint64()) || e.get_uint64().get(v) != simdjson::SUCCESS)
      return wrong(key, "a non-negative integer", e);
    out = v;
    return ok_status();
  }
  Status get(std::string_view key, const json::Element& e, std::optional<std::int64_t>& out) const {
    std::int64_t v = 0;
    if (!e.is_int64() || e.get_int64().get(v) != simdjson::SUCCESS) return wrong(key, "an integer", e);
    out = v;
    return ok_status();
  }
  Status get(std::string_view key, const json::Element& e, std::optional<bool>& out) const {
    bool v = false;
    if (e.get_bool().get(v) != simdjson::SUCCESS) return wrong(key, "true or false", e);
    out = v;
    return ok_status();
  }
  Status get(std::string_view key, const json::Element& e, std::optional<std::string>& out) const {
    std::string_view v;
    if (e.get_string().get(v) != simdjson::SUCCESS) return wrong(key, "a string", e);
    out = std::string(v);
    return ok_status();
  }
  Status get(std::string_view key, const json::Element& e,
             std::optional<std::pair<std::uint64_t, std::uint64_t>>& out) const {
    json::Array a;
    std::uint64_t v[2] = {};
    bool fine = e.get_array().get(a) == simdjson::SUCCESS && a.size() == 2;
    for (std::size_t i = 0; fine && i < 2; ++i) fine = a.at(i).get_uint64().get(v[i]) == simdjson::SUCCESS;
    if (!fine) return wrong(key, "[before, after]: two non-negative integers", e);
    out = std::pair{v[0], v[1]};
    return ok_status();
  }
  Status get(std::string_view key, const json::Element& e, std::vector<double>& out) const {
    json::Array a;
    if (e.get_array().get(a) != simdjson::SUCCESS) return wrong(key, "an array of numbers", e);
    out.clear();
    std::size_t i = 0;
    for (json::Element x : a) {
      double v = 0;
      if (!(x.is_int64() || x.is_uint64() || x.is_double()) || x.get_double().get(v) != simdjson::SUCCESS)
        return make_error(Code::invalid_data,
                          fmt::format("{}: {}: expected a number, got {}", origin_,
                                      json::index_path(json::member_path(path_, key), i), json::describe(x)));
      out.push_back(v);
      ++i;
    }
    return ok_status();
  }
  template <class E>
    requires std::is_enum_v<E>
  Status get(std::string_view key, const json::Element& e, std::optional<E>& out) const {
    bool b = false;
    if constexpr (std::is_same_v<E, StreamCheck>)
      if (e.get_bool().get(b) == simdjson::SUCCESS && b) {
        out = StreamCheck::same_stream;
        return ok_status();
      }
    std::string_view s;
    if (e.get_string().get(s) == simdjson::SUCCESS)
      for (const auto& [v, n] : Names<E>::list)
        if (n == s) {
          out = v;
          return ok_status();
        }
    std::string expected = "one of";
    for (const auto& [v, n] : Names<E>::list) expected += fmt::format(" \"{}\"", n);
    return wrong(key, expected, e);
  }

 private:
  std::string_view origin_;
  std::string path_;
};

std::string percent(double fraction) { return fmt::format("{:.0f}%", fraction * 100); }

}  // namespace

std::string write_extra(const Measurement& m) {
  json::Writer w;
  w.begin_object();
  for_each_field(m, [&](std::string_view key, const auto& field) {
    if constexpr (std::is_same_v<std::decay_t<decltype(field)>, std::vector<double>>) {
      if (field.empty()) return;
      w.key(key).begin_array();
      for (double v : field) w.number(v);
      w.end_array();
    } else {
      if (!field) return;
      w.key(key);
      put(w, *field);
    }
  });
  for (const auto& [key, value] : m.other) w.key(key).raw(value);
  w.end_object();
  return w.take();
}

void record(const Measurement& m, Performance& perf) {
  perf.latency_ms = m.median_ms;
  std::string extra = write_extra(m);
  if (extra == "{}")
    perf.extra.reset();
  else
    perf.extra = std::move(extra);
}

Result<Measurement> read_extra(std::string_view extra_json, std::string_view origin, std::string_view path) {
  auto doc = json::parse(extra_json, fmt::format("{}: {}", origin, path));
  if (!doc) return std::move(doc).error();
  json::Object o;
  if (doc->root().get_object().get(o) != simdjson::SUCCESS)
    return make_error(Code::invalid_data, fmt::format("{}: {}: expected an object, got {}", origin, path,
                                                      json::describe(doc->root())));
  Reader reader(origin, std::string(path));
  Measurement m;
  for (auto field_kv : o) {
    // Named copies: lambdas below capture them (structured bindings cannot be captured before clang 16).
    std::string_view key = field_kv.key;
    auto value = field_kv.value;
    bool known = false;
    Status st = ok_status();
    for_each_field(m, [&](std::string_view k, auto& field) {
      if (known || k != key) return;
      known = true;
      st = reader.get(key, value, field);
    });
    if (!st.ok()) return std::move(st).error();
    if (!known) {
      auto at = std::find_if(m.other.begin(), m.other.end(), [&](const auto& kv) { return kv.first == key; });
      if (at != m.other.end()) m.other.erase(at);  // a repeated key: the last one holds, as for kb's own keys
      m.other.emplace_back(std::string(key), json::minified(value));
    }
  }
  return m;
}

Result<std::optional<Measurement>> read_measurement(const Trace& t, std::string_view origin) {
  if (!t.evaluation || !t.evaluation->performance) return std::optional<Measurement>();
  const Performance& p = *t.evaluation->performance;
  Measurement m;
  if (p.extra) {
    auto r = read_extra(*p.extra, origin, "evaluation.performance.extra");
    if (!r) return std::move(r).error();
    m = std::move(*r);
  }
  m.median_ms = p.latency_ms;
  return std::optional<Measurement>(std::move(m));
}

std::string write_judge_counts(const JudgeCounts& c) {
  json::Writer w;
  w.begin_object();
  if (c.tvd) w.key("tvd").number(*c.tvd);
  if (c.tvd_threshold) w.key("tvd_threshold").number(*c.tvd_threshold);
  if (c.bins) w.key("bins").integer(*c.bins);
  if (c.draws) w.key("draws").integer(*c.draws);
  if (c.out_of_support) w.key("out_of_support").boolean(*c.out_of_support);
  if (c.mismatched) w.key("mismatched").integer(*c.mismatched);
  if (c.total) w.key("total").integer(*c.total);
  if (c.matched_ratio) w.key("matched_ratio").number(*c.matched_ratio);
  w.key("trials_run").integer(c.trials_run);
  w.end_object();
  return w.take();
}

std::string latency_cell(const Measurement& m) {
  return fmt::format("{:.4f}{}", m.median_ms, m.throttled.value_or(false) ? "*" : "");
}

std::string noise_cell(const Measurement& m) {
  return m.rel_noise ? fmt::format("{:.1f}%", *m.rel_noise * 100) : "-";
}

std::string achieved_cell(const Measurement& m) {
  const double copy = m.fraction_of_copy_bandwidth.value_or(-1), mma = m.fraction_of_mma_bf16.value_or(-1);
  if (copy < 0 && mma < 0) return "-";
  return copy >= mma ? percent(copy) + " copy" : percent(mma) + " mma";
}

std::string cupti_cell(const Measurement& m) {
  if (m.cupti_kernel_ms) return fmt::format("{:.4f}", *m.cupti_kernel_ms);
  return m.cupti_error ? "n/a" : "-";
}

}  // namespace kb
