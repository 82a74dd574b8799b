// Writing the model-level objects. Field order follows the schema set's examples; kb's optional
// fields are written only when present, so a seed-style record stays as small as it was.
#include <variant>

#include "json/json.hpp"
#include "model/records.hpp"

namespace kb::model {
namespace {

void opt_string(json::Writer& w, const char* key, const std::optional<std::string>& v) {
  if (v) w.key(key).string(*v);
}

void write_tool_calls(json::Writer& w, const std::vector<MessageToolCall>& calls) {
  w.begin_array();
  for (const auto& c : calls) {
    w.begin_object();
    w.key("id").string(c.id);
    w.key("type").string(c.type);
    w.key("function").begin_object();
    w.key("name").string(c.name);
    w.key("arguments").string(c.arguments);
    w.end_object();
    w.end_object();
  }
  w.end_array();
}

void write_message(json::Writer& w, const Message& m) {
  w.begin_object();
  w.key("role").string(role_name(m.role));
  w.key("content");
  if (m.content) w.string(*m.content);
  else if (m.content_parts) w.raw(*m.content_parts);
  else w.null();
  opt_string(w, "name", m.name);
  opt_string(w, "refusal", m.refusal);
  if (!m.tool_calls.empty()) {
    w.key("tool_calls");
    write_tool_calls(w, m.tool_calls);
  }
  opt_string(w, "tool_call_id", m.tool_call_id);
  w.end_object();
}

void write_response(json::Writer& w, const Response& r) {
  w.begin_object();
  opt_string(w, "id", r.id);
  opt_string(w, "object", r.object);
  if (r.created) w.key("created").integer(*r.created);
  w.key("model").string(r.model);
  w.key("choices").begin_array();
  for (const auto& c : r.choices) {
    w.begin_object();
    w.key("index").integer(c.index);
    w.key("message");
    write_message(w, c.message);
    w.key("finish_reason");
    if (c.finish_reason) w.string(*c.finish_reason);
    else w.null();
    w.end_object();
  }
  w.end_array();
  if (r.usage) {
    w.key("usage").begin_object();
    w.key("prompt_tokens").integer(r.usage->prompt_tokens);
    w.key("completion_tokens").integer(r.usage->completion_tokens);
    w.key("total_tokens").integer(r.usage->total_tokens);
    w.end_object();
  }
  opt_string(w, "system_fingerprint", r.system_fingerprint);
  w.end_object();
}

// The fields of an llm_request after "type" (or of the conversation form).
void write_request_fields(json::Writer& w, const LlmRequest& q) {
  w.key("model").string(q.model);
  opt_string(w, "annotation", q.annotation);
  w.key("conversation").begin_array();
  for (const auto& m : q.conversation) write_message(w, m);
  w.end_array();
  if (q.response) {
    w.key("response");
    write_response(w, *q.response);
  }
}

void write_entry(json::Writer& w, const AgentEntry& e) {
  if (const auto* q = std::get_if<LlmRequest>(&e)) {
    w.begin_object();
    w.key("type").string("llm_request");
    write_request_fields(w, *q);
    w.end_object();
  } else if (const auto* c = std::get_if<ToolCall>(&e)) {
    w.begin_object();
    w.key("type").string("tool_call");
    w.key("tool_name").string(c->tool_name);
    w.key("arguments").raw(c->arguments.empty() ? "{}" : c->arguments);
    w.key("result").string(c->result);
    opt_string(w, "cli_output", c->cli_output);
    w.end_object();
  } else {
    w.raw(std::get<Mcp>(e).json);
  }
}

}  // namespace

std::string to_json(const Response& r, bool pretty) {
  json::Writer w(pretty);
  write_response(w, r);
  return w.take();
}

std::string entry_json(const AgentEntry& e, bool pretty) {
  json::Writer w(pretty);
  write_entry(w, e);
  return w.take();
}

std::string tool_calls_json(const std::vector<MessageToolCall>& calls) {
  json::Writer w(false);
  write_tool_calls(w, calls);
  return w.take();
}

std::string to_json(const CallingRecord& r, bool pretty) {
  json::Writer w(pretty);
  w.begin_object();
  w.key("model").string(r.model);
  w.key("framework").string(framework_name(r.framework));
  opt_string(w, "step", r.step);
  opt_string(w, "description", r.description);
  opt_string(w, "source", r.source);
  if (!r.architecture.empty()) {
    w.key("architecture").begin_object();
    for (const auto& [k, v] : r.architecture) {
      w.key(k);
      std::visit(
          [&](const auto& x) {
            using V = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<V, std::int64_t>) w.integer(x);
            else if constexpr (std::is_same_v<V, double>) w.number(x);
            else if constexpr (std::is_same_v<V, bool>) w.boolean(x);
            else w.string(x);
          },
          v);
    }
    w.end_object();
  }
  opt_string(w, "notes", r.notes);
  w.key("kernels").begin_array();
  for (const auto& k : r.kernels) {
    w.begin_object();
    w.key("id").string(k.id);
    w.key("count").integer(k.count);
    if (!k.axes.empty()) {
      w.key("axes").begin_object();
      for (const auto& [a, v] : k.axes) w.key(a).integer(v);
      w.end_object();
    }
    opt_string(w, "notes", k.notes);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return w.take();
}

std::string to_json(const BenchmarkResult& r, bool pretty) {
  json::Writer w(pretty);
  w.begin_object();
  w.key("device").begin_object().key("name").string(r.device_name).end_object();
  w.key("kernel_id").string(r.kernel_id);
  w.key("source").string(r.source);
  w.key("compiled").boolean(r.compiled);
  if (r.time) w.key("time").number(*r.time);
  if (r.speedup) w.key("speedup").number(*r.speedup);
  if (r.max_diff) w.key("max_diff").number(*r.max_diff);
  opt_string(w, "compile_error", r.compile_error);
  w.end_object();
  return w.take();
}

std::string to_json(const AgentTrace& t, bool pretty) {
  json::Writer w(pretty);
  if (t.form == AgentTrace::Form::conversation && t.entries.size() == 1 &&
      std::holds_alternative<LlmRequest>(t.entries[0])) {
    w.begin_object();
    write_request_fields(w, std::get<LlmRequest>(t.entries[0]));
    w.end_object();
    return w.take();
  }
  w.begin_array();
  for (const auto& e : t.entries) write_entry(w, e);
  w.end_array();
  return w.take();
}

}  // namespace kb::model
