// Writing FlashInfer Trace objects. Field order follows FlashInfer-Bench's
// files; optional fields are omitted when absent so output stays minimal.
#include <fmt/format.h>

#include <cmath>

#include "json/json.hpp"
#include "schema/io.hpp"

namespace kb {
namespace {

void write_tensor_map(json::Writer& w, const std::vector<TensorSpec>& ts) {
  w.begin_object();
  for (const auto& t : ts) {
    w.key(t.name).begin_object();
    w.key("shape");
    if (!t.shape) {
      w.null();
    } else {
      w.begin_array();
      for (const auto& s : *t.shape) w.string(s);
      w.end_array();
    }
    w.key("dtype").string(dtype_name(t.dtype));
    if (t.description) w.key("description").string(*t.description);
    if (t.optional) w.key("optional").boolean(true);
    w.end_object();
  }
  w.end_object();
}

void write_string_list(json::Writer& w, const std::vector<std::string>& v) {
  w.begin_array();
  for (const auto& s : v) w.string(s);
  w.end_array();
}

void write_workload(json::Writer& w, const Workload& wl) {
  w.begin_object();
  w.key("uuid").string(wl.uuid);
  w.key("axes").begin_object();
  for (const auto& [k, v] : wl.axes) w.key(k).integer(v);
  w.end_object();
  w.key("inputs").begin_object();
  for (const auto& [k, in] : wl.inputs) {
    w.key(k).begin_object();
    switch (in.kind) {
      case InputKind::random:
        w.key("type").string("random");
        break;
      case InputKind::scalar:
        w.key("type").string("scalar");
        w.key("value");
        std::visit(
            [&](auto v) {
              using V = decltype(v);
              if constexpr (std::is_same_v<V, bool>) w.boolean(v);
              else if constexpr (std::is_same_v<V, double>) w.number(v);
              else w.integer(v);
            },
            in.value);
        break;
      case InputKind::safetensors:
        w.key("type").string("safetensors");
        w.key("path").string(in.path);
        w.key("tensor_key").string(in.tensor_key);
        break;
    }
    w.end_object();
  }
  w.end_object();
  w.end_object();
}

void write_evaluation(json::Writer& w, const Evaluation& e) {
  w.begin_object();
  w.key("status").string(eval_status_name(e.status));
  w.key("environment").begin_object();
  w.key("hardware").string(e.environment.hardware);
  w.key("libs").begin_object();
  for (const auto& [k, v] : e.environment.libs) w.key(k).string(v);
  w.end_object();
  w.end_object();
  w.key("timestamp").string(e.timestamp);
  w.key("log").string(e.log);
  if (e.correctness) {
    w.key("correctness").begin_object();
    // FlashInfer-Bench writes NaN errors as the string "NaN"; so does kb.
    for (auto [key, v] : {std::pair{"max_relative_error", e.correctness->max_relative_error},
                          std::pair{"max_absolute_error", e.correctness->max_absolute_error}}) {
      w.key(key);
      if (std::isnan(v)) w.string("NaN");
      else w.number(v);
    }
    if (e.correctness->extra) w.key("extra").raw(*e.correctness->extra);
    w.end_object();
  } else {
    w.key("correctness").null();
  }
  if (e.performance) {
    w.key("performance").begin_object();
    w.key("latency_ms").number(e.performance->latency_ms);
    w.key("reference_latency_ms").number(e.performance->reference_latency_ms);
    w.key("speedup_factor").number(e.performance->speedup_factor);
    if (e.performance->extra) w.key("extra").raw(*e.performance->extra);
    w.end_object();
  } else {
    w.key("performance").null();
  }
  w.end_object();
}

}  // namespace

std::string to_json(const Definition& d, bool pretty) {
  json::Writer w(pretty);
  w.begin_object();
  w.key("name").string(d.name);
  if (d.description) w.key("description").string(*d.description);
  w.key("op_type").string(d.op_type);
  w.key("tags");
  write_string_list(w, d.tags);
  w.key("axes").begin_object();
  for (const auto& a : d.axes) {
    w.key(a.name).begin_object();
    w.key("type").string(a.kind == AxisKind::const_ ? "const" : "var");
    if (a.kind == AxisKind::const_) w.key("value").integer(a.value);
    if (a.description) w.key("description").string(*a.description);
    if (a.parent) w.key("parent").string(*a.parent);
    w.end_object();
  }
  w.end_object();
  if (!d.constraints.empty()) {
    w.key("constraints");
    write_string_list(w, d.constraints);
  }
  w.key("inputs");
  write_tensor_map(w, d.inputs);
  w.key("outputs");
  write_tensor_map(w, d.outputs);
  w.key("reference").string(d.reference);
  w.end_object();
  return w.take();
}

std::string to_json(const Workload& wl, bool pretty) {
  json::Writer w(pretty);
  write_workload(w, wl);
  return w.take();
}

std::string to_json(const Evaluation& e, bool pretty) {
  json::Writer w(pretty);
  write_evaluation(w, e);
  return w.take();
}

std::string to_json(const Trace& t, bool pretty) {
  json::Writer w(pretty);
  w.begin_object();
  w.key("definition").string(t.definition);
  w.key("workload");
  write_workload(w, t.workload);
  w.key("solution");
  if (t.solution) w.string(*t.solution);
  else w.null();
  w.key("evaluation");
  if (t.evaluation) write_evaluation(w, *t.evaluation);
  else w.null();
  w.end_object();
  return w.take();
}

std::string to_json(const Solution& s, bool pretty) {
  json::Writer w(pretty);
  w.begin_object();
  w.key("name").string(s.name);
  w.key("definition").string(s.definition);
  w.key("author").string(s.author);
  if (s.description) w.key("description").string(*s.description);
  w.key("spec").begin_object();
  w.key("language").string(s.spec.language);
  w.key("target_hardware");
  write_string_list(w, s.spec.target_hardware);
  w.key("entry_point").string(s.spec.entry_point);
  w.key("dependencies");
  write_string_list(w, s.spec.dependencies);
  w.key("destination_passing_style").boolean(s.spec.destination_passing_style);
  if (s.spec.binding) w.key("binding").string(*s.spec.binding);
  w.end_object();
  w.key("sources").begin_array();
  for (const auto& f : s.sources) {
    w.begin_object();
    w.key("path").string(f.path);
    w.key("content").string(f.content);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return w.take();
}

}  // namespace kb
