// Reading Kernel Calling Records, Benchmark Results and Agent traces: structure, kinds, enums,
// duplicates and each object's own rules, every problem with its line and JSON path.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <initializer_list>
#include <map>
#include <set>

#include "common/near_match.hpp"
#include "json/json.hpp"
#include "json/walker.hpp"
#include "model/records.hpp"

namespace kb::model {
namespace {

using json::Element;
using json::index_path;
using json::member_path;
using json::Object;
using simdjson::dom::element_type;

constexpr const char* kFrameworks = "SGLang, vLLM, MLC-LLM, TRT-LLM";

class Walker : public json::Walker {
 public:
  Walker(const Locator& where, Diagnostics& diags)
      : json::Walker([&where](const std::string& path) { return where.at(path); }, diags) {}

  // A number >= min (or > min when `strict`); absent -> nullopt without error.
  std::optional<double> number_field(Object o, std::string_view key, const std::string& path, double min, bool strict) {
    Element e;
    if (!lookup(o, key, e)) return std::nullopt;
    std::string p = member_path(path, key);
    auto v = number(e, p);
    if (!v) return std::nullopt;
    if (strict ? !(*v > min) : !(*v >= min)) {
      error(p, fmt::format("expected a number {} {}, got {}", strict ? ">" : ">=", json::format_double(min),
                           json::brief(e)));
      return std::nullopt;
    }
    return v;
  }
};

// ---- Kernel Calling Record ----

std::string framework_hint(std::string_view got) {
  for (Framework f : {Framework::sglang, Framework::vllm, Framework::mlc_llm, Framework::trt_llm}) {
    std::string_view name = framework_name(f);
    if (name.size() != got.size()) continue;
    bool same = true;
    for (std::size_t i = 0; i < name.size(); ++i)
      same &= std::tolower(static_cast<unsigned char>(name[i])) == std::tolower(static_cast<unsigned char>(got[i]));
    if (same) return fmt::format("; did you mean \"{}\"?", name);
  }
  return fmt::format(" (known: {})", kFrameworks);
}

std::optional<KernelCall> walk_kernel(Walker& w, Element e, const std::string& path) {
  Object o;
  if (!w.object(e, path, o)) return std::nullopt;
  w.check_keys(o, path, {"id", "count", "axes", "notes"});
  std::size_t before = w.errors();
  KernelCall k;
  if (auto id = w.string_field(o, "id", path, true, true)) k.id = *id;
  Element x;
  if (!Walker::lookup(o, "count", x)) w.error(member_path(path, "count"), "required field is missing");
  else if (auto n = w.integer(x, member_path(path, "count"), 1, "a positive integer (calls per step)")) k.count = *n;
  std::string ap = member_path(path, "axes");
  if (Walker::lookup(o, "axes", x)) {
    if (Object ao; w.object(x, ap, ao)) {
      w.each_member(ao, ap, "duplicate axis", [&](std::string_view name, Element value, const std::string& fp) {
        if (auto v = w.integer(value, fp, 0, "a non-negative integer")) k.axes.emplace_back(name, *v);
      });
    }
  }
  k.notes = w.string_field(o, "notes", path, false);
  if (w.errors() != before) return std::nullopt;
  return k;
}

std::optional<CallingRecord> walk_calling_record(Walker& w, Element root, const std::string& path) {
  Object o;
  if (!w.object(root, path, o)) return std::nullopt;
  w.check_keys(o, path, {"model", "framework", "kernels", "step", "description", "source", "architecture", "notes"});
  std::size_t before = w.errors();
  CallingRecord r;
  if (auto m = w.string_field(o, "model", path, true, true)) r.model = *m;
  if (auto f = w.string_field(o, "framework", path, true)) {
    if (auto fw = framework_from_name(*f)) r.framework = *fw;
    else w.error(member_path(path, "framework"), fmt::format("unknown framework \"{}\"{}", *f, framework_hint(*f)));
  }
  r.step = w.string_field(o, "step", path, false);
  r.description = w.string_field(o, "description", path, false);
  r.source = w.string_field(o, "source", path, false);
  r.notes = w.string_field(o, "notes", path, false);
  Element e;
  std::string archp = member_path(path, "architecture");
  if (Walker::lookup(o, "architecture", e)) {
    if (Object ao; w.object(e, archp, ao)) {
      w.each_member(ao, archp, "duplicate key", [&](std::string_view key, Element v, const std::string& fp) {
        std::int64_t i;
        double d;
        bool b;
        std::string_view s;
        if (v.type() == element_type::INT64 && v.get_int64().get(i) == simdjson::SUCCESS) r.architecture.emplace_back(key, i);
        else if (v.type() == element_type::DOUBLE && v.get_double().get(d) == simdjson::SUCCESS) r.architecture.emplace_back(key, d);
        else if (v.get_bool().get(b) == simdjson::SUCCESS) r.architecture.emplace_back(key, b);
        else if (v.get_string().get(s) == simdjson::SUCCESS) r.architecture.emplace_back(key, std::string(s));
        else w.error(fp, fmt::format("expected a string, number or boolean (one configuration value), got {}", json::describe(v)));
      });
    }
  }
  std::string kp = member_path(path, "kernels");
  if (!Walker::lookup(o, "kernels", e)) {
    w.error(kp, "required field is missing");
  } else if (json::Array a; w.array(e, kp, a, "{id, count} objects")) {
    std::size_t i = 0;
    std::map<std::pair<std::string, std::vector<std::pair<std::string, std::int64_t>>>, std::size_t> seen;
    for (Element k : a) {
      std::string p = index_path(kp, i);
      if (auto call = walk_kernel(w, k, p)) {
        auto sorted = call->axes;
        std::sort(sorted.begin(), sorted.end());
        auto [it, fresh] = seen.emplace(std::pair{call->id, sorted}, i);
        if (!fresh)
          w.error(member_path(p, "id"), fmt::format("kernel \"{}\" is listed again with the same axes (also {}): one entry "
                                                    "per call shape, with the calls added into its count",
                                                    call->id, index_path(kp, it->second)));
        r.kernels.push_back(std::move(*call));
      }
      ++i;
    }
    if (i == 0) w.error(kp, "expected at least one kernel");
  }
  if (w.errors() != before) return std::nullopt;
  return r;
}

// ---- Benchmark Result ----

std::optional<BenchmarkResult> walk_benchmark_result(Walker& w, Element root, const std::string& path) {
  Object o;
  if (!w.object(root, path, o)) return std::nullopt;
  w.check_keys(o, path, {"device", "kernel_id", "source", "compiled", "time", "speedup", "max_diff", "compile_error"});
  std::size_t before = w.errors();
  BenchmarkResult r;
  Element e;
  std::string dp = member_path(path, "device");
  if (!Walker::lookup(o, "device", e)) {
    w.error(dp, "required field is missing");
  } else if (Object d; w.object(e, dp, d)) {
    w.check_keys(d, dp, {"name"});
    if (auto n = w.string_field(d, "name", dp, true, true)) r.device_name = *n;
  }
  if (auto k = w.string_field(o, "kernel_id", path, true, true)) r.kernel_id = *k;
  if (auto s = w.string_field(o, "source", path, true, true)) r.source = *s;
  auto compiled = w.bool_field(o, "compiled", path, true);
  r.time = w.number_field(o, "time", path, 0, false);
  r.speedup = w.number_field(o, "speedup", path, 0, true);
  r.max_diff = w.number_field(o, "max_diff", path, 0, false);
  r.compile_error = w.string_field(o, "compile_error", path, false);
  if (compiled) {
    r.compiled = *compiled;
    if (*compiled && Walker::lookup(o, "compile_error", e))
      w.error(member_path(path, "compile_error"), "a result that compiled has no compile_error");
    if (!*compiled) {
      if (!Walker::lookup(o, "compile_error", e))
        w.error(member_path(path, "compile_error"), "required when compiled is false");
      for (const char* k : {"time", "speedup", "max_diff"})
        if (Walker::lookup(o, k, e))
          w.error(member_path(path, k), "a result that did not compile has no time, speedup or max_diff");
    }
  }
  if (w.errors() != before) return std::nullopt;
  return r;
}

// ---- Agent trace ----

std::optional<Role> role_from_name(std::string_view s) {
  for (Role r : {Role::system, Role::user, Role::assistant, Role::tool})
    if (role_name(r) == s) return r;
  return std::nullopt;
}

// Tool call ids seen so far in one conversation, so a tool message's tool_call_id can be checked.
using CallIds = std::set<std::string, std::less<>>;

std::optional<MessageToolCall> walk_message_tool_call(Walker& w, Element e, const std::string& path) {
  Object o;
  if (!w.object(e, path, o)) return std::nullopt;
  w.check_keys(o, path, {"id", "type", "function"});
  std::size_t before = w.errors();
  MessageToolCall c;
  if (auto id = w.string_field(o, "id", path, true, true)) c.id = *id;
  if (auto t = w.string_field(o, "type", path, true)) {
    if (*t != "function") w.error(member_path(path, "type"), fmt::format("expected \"function\", got \"{}\"", *t));
    c.type = *t;
  }
  Element f;
  std::string fp = member_path(path, "function");
  if (!Walker::lookup(o, "function", f)) {
    w.error(fp, "required field is missing");
  } else if (Object fo; w.object(f, fp, fo)) {
    w.check_keys(fo, fp, {"name", "arguments"});
    if (auto n = w.string_field(fo, "name", fp, true, true)) c.name = *n;
    if (auto a = w.string_field(fo, "arguments", fp, true)) {
      c.arguments = *a;
      // OpenAI passes the model's text through: it may not be JSON, which a reader should see.
      if (!a->empty() && !json::parse(*a, "").ok())
        w.warning(member_path(fp, "arguments"), "is not valid JSON (kept as the model wrote it)");
    }
  }
  if (w.errors() != before) return std::nullopt;
  return c;
}

std::optional<Message> walk_message(Walker& w, Element e, const std::string& path, CallIds& ids,
                                    bool must_be_assistant) {
  Object o;
  if (!w.object(e, path, o)) return std::nullopt;
  w.check_keys(o, path, {"role", "content", "name", "tool_calls", "tool_call_id", "refusal"});
  std::size_t before = w.errors();
  Message m;
  if (auto r = w.string_field(o, "role", path, true)) {
    if (auto role = role_from_name(*r)) m.role = *role;
    else w.error(member_path(path, "role"), fmt::format("unknown role \"{}\" (known: system, user, assistant, tool)", *r));
    if (must_be_assistant && *r != "assistant")
      w.error(member_path(path, "role"), fmt::format("a response message has role \"assistant\", got \"{}\"", *r));
  }
  m.name = w.string_field(o, "name", path, false);
  m.refusal = w.string_field(o, "refusal", path, false);
  Element x;
  std::string tcp = member_path(path, "tool_calls");
  if (Walker::lookup(o, "tool_calls", x)) {
    if (m.role != Role::assistant) w.error(tcp, "only assistant messages carry tool_calls");
    if (json::Array a; w.array(x, tcp, a, "tool calls")) {
      std::size_t i = 0;
      for (Element c : a) {
        std::string p = index_path(tcp, i++);
        if (auto call = walk_message_tool_call(w, c, p)) {
          if (ids.count(call->id)) w.error(member_path(p, "id"), fmt::format("tool call id \"{}\" is used twice", call->id));
          ids.insert(call->id);
          m.tool_calls.push_back(std::move(*call));
        }
      }
    }
  }
  if (auto id = w.string_field(o, "tool_call_id", path, false)) {
    if (m.role != Role::tool) w.error(member_path(path, "tool_call_id"), "only tool messages carry tool_call_id");
    else if (!ids.count(*id))
      w.error(member_path(path, "tool_call_id"), fmt::format("no earlier tool call has id \"{}\"", *id));
    m.tool_call_id = id;
  }
  std::string cp = member_path(path, "content");
  if (!Walker::lookup(o, "content", x)) {
    w.error(cp, "required field is missing");
  } else if (x.is_null()) {
    if (m.role != Role::assistant || (m.tool_calls.empty() && !m.refusal))
      w.error(cp, "only an assistant message with tool_calls or a refusal may have null content");
  } else if (json::Array parts; x.get_array().get(parts) == simdjson::SUCCESS) {
    // A list of content parts ({"type": "text", "text": ...}, images, ...): kept as written.
    std::size_t i = 0;
    for (Element part : parts) {
      std::string pp = index_path(cp, i++);
      Object po;
      if (!w.object(part, pp, po)) continue;
      w.string_field(po, "type", pp, true, true);
    }
    m.content_parts = json::minified(x);
  } else if (auto s = w.string(x, cp)) {
    m.content = *s;
  }
  if (w.errors() != before) return std::nullopt;
  return m;
}

bool walk_conversation(Walker& w, Object o, const std::string& path, std::vector<Message>& out) {
  Element e;
  std::string cp = member_path(path, "conversation");
  if (!Walker::lookup(o, "conversation", e)) {
    w.error(cp, "required field is missing");
    return false;
  }
  json::Array a;
  if (!w.array(e, cp, a, "messages")) return false;
  CallIds ids;
  std::size_t i = 0;
  bool ok = true;
  for (Element m : a) {
    if (auto msg = walk_message(w, m, index_path(cp, i), ids, false)) out.push_back(std::move(*msg));
    else ok = false;
    ++i;
  }
  if (i == 0) {
    w.error(cp, "expected at least one message");
    ok = false;
  }
  return ok;
}

const std::set<std::string_view> kFinishReasons = {"stop", "length", "tool_calls", "content_filter", "function_call"};

std::optional<Response> walk_response(Walker& w, Element e, const std::string& path) {
  Object o;
  if (!w.object(e, path, o)) return std::nullopt;
  w.check_keys(o, path, {"id", "object", "created", "model", "choices", "usage", "system_fingerprint"});
  std::size_t before = w.errors();
  Response r;
  r.id = w.string_field(o, "id", path, false);
  r.object = w.string_field(o, "object", path, false);
  r.system_fingerprint = w.string_field(o, "system_fingerprint", path, false);
  if (auto m = w.string_field(o, "model", path, true, true)) r.model = *m;
  Element x;
  if (Walker::lookup(o, "created", x))
    r.created = w.integer(x, member_path(path, "created"), 0, "a Unix time in seconds");
  std::string chp = member_path(path, "choices");
  if (!Walker::lookup(o, "choices", x)) {
    w.error(chp, "required field is missing");
  } else if (json::Array a; w.array(x, chp, a, "choices")) {
    std::size_t i = 0;
    std::map<std::int64_t, std::size_t> indexes;
    for (Element c : a) {
      std::string p = index_path(chp, i);
      Object co;
      if (w.object(c, p, co)) {
        w.check_keys(co, p, {"index", "message", "finish_reason"});
        Choice ch;
        bool ok = true;
        Element y;
        if (!Walker::lookup(co, "index", y)) {
          w.error(member_path(p, "index"), "required field is missing");
          ok = false;
        } else if (auto n = w.integer(y, member_path(p, "index"), 0, "a non-negative integer")) {
          ch.index = *n;
          auto [it, fresh] = indexes.emplace(*n, i);
          if (!fresh)
            w.error(member_path(p, "index"), fmt::format("index {} is also {}", *n, index_path(chp, it->second)));
        } else {
          ok = false;
        }
        CallIds ids;
        if (!Walker::lookup(co, "message", y)) {
          w.error(member_path(p, "message"), "required field is missing");
          ok = false;
        } else if (auto m = walk_message(w, y, member_path(p, "message"), ids, true)) {
          ch.message = std::move(*m);
        } else {
          ok = false;
        }
        if (Walker::lookup(co, "finish_reason", y) && !y.is_null()) {
          if (auto f = w.string(y, member_path(p, "finish_reason"))) {
            if (!kFinishReasons.count(*f))
              w.error(member_path(p, "finish_reason"),
                      fmt::format("unknown finish_reason \"{}\" (known: stop, length, tool_calls, content_filter, "
                                  "function_call)",
                                  *f));
            ch.finish_reason = *f;
          }
        }
        if (ok) r.choices.push_back(std::move(ch));
      }
      ++i;
    }
    if (i == 0) w.error(chp, "expected at least one choice");
  }
  std::string up = member_path(path, "usage");
  if (Walker::lookup(o, "usage", x) && !x.is_null()) {
    if (Object uo; w.object(x, up, uo)) {
      w.check_keys(uo, up, {"prompt_tokens", "completion_tokens", "total_tokens"});
      Usage u;
      for (auto [k, dest] : {std::pair{"prompt_tokens", &u.prompt_tokens}, std::pair{"completion_tokens", &u.completion_tokens},
                             std::pair{"total_tokens", &u.total_tokens}}) {
        Element y;
        if (!Walker::lookup(uo, k, y)) w.error(member_path(up, k), "required field is missing");
        else if (auto n = w.integer(y, member_path(up, k), 0, "a non-negative integer")) *dest = *n;
      }
      r.usage = u;
    }
  }
  if (w.errors() != before) return std::nullopt;
  return r;
}

std::optional<LlmRequest> walk_llm_request(Walker& w, Object o, const std::string& path, bool entry) {
  std::size_t before = w.errors();
  LlmRequest q;
  if (auto m = w.string_field(o, "model", path, true, true)) q.model = *m;
  q.annotation = w.string_field(o, "annotation", path, false);
  walk_conversation(w, o, path, q.conversation);
  Element e;
  if (Walker::lookup(o, "response", e)) {
    if (auto r = walk_response(w, e, member_path(path, "response"))) q.response = std::move(*r);
  } else if (entry) {
    w.error(member_path(path, "response"), "required field is missing");
  }
  if (w.errors() != before) return std::nullopt;
  return q;
}

std::optional<AgentEntry> walk_entry(Walker& w, Element e, const std::string& path) {
  Object o;
  if (!w.object(e, path, o)) return std::nullopt;
  auto type = w.string_field(o, "type", path, true);
  if (!type) return std::nullopt;
  if (*type == "llm_request") {
    w.check_keys(o, path, {"type", "conversation", "response", "model", "annotation"});
    if (auto q = walk_llm_request(w, o, path, true)) return AgentEntry{std::move(*q)};
    return std::nullopt;
  }
  if (*type == "tool_call") {
    w.check_keys(o, path, {"type", "tool_name", "arguments", "result", "cli_output"});
    std::size_t before = w.errors();
    ToolCall t;
    if (auto n = w.string_field(o, "tool_name", path, true, true)) t.tool_name = *n;
    Element a;
    if (!Walker::lookup(o, "arguments", a)) w.error(member_path(path, "arguments"), "required field is missing");
    else if (Object ao; w.object(a, member_path(path, "arguments"), ao)) t.arguments = json::minified(a);
    if (auto r = w.string_field(o, "result", path, true)) t.result = *r;
    t.cli_output = w.string_field(o, "cli_output", path, false);
    if (w.errors() != before) return std::nullopt;
    return AgentEntry{std::move(t)};
  }
  if (*type == "mcp") return AgentEntry{Mcp{json::minified(e)}};  // its fields are not defined yet: kept whole
  w.error(member_path(path, "type"),
          fmt::format("unknown entry type \"{}\" (known: llm_request, tool_call, mcp)", *type));
  return std::nullopt;
}

std::optional<AgentTrace> walk_agent_trace(Walker& w, Element root, const std::string& path) {
  std::size_t before = w.errors();
  AgentTrace t;
  json::Array a;
  Object o;
  if (root.get_array().get(a) == simdjson::SUCCESS) {
    t.form = AgentTrace::Form::entries;
    std::size_t i = 0;
    for (Element e : a) {
      if (auto entry = walk_entry(w, e, index_path(path, i))) t.entries.push_back(std::move(*entry));
      ++i;
    }
    if (i == 0) w.error(path, "expected at least one entry");
  } else if (root.get_object().get(o) == simdjson::SUCCESS) {
    Element probe;
    if (Walker::lookup(o, "type", probe)) {
      w.error(path, "an entry ({\"type\": ...}) on its own: an agent trace of entries is a list of them");
      return std::nullopt;
    }
    t.form = AgentTrace::Form::conversation;
    w.check_keys(o, path, {"model", "annotation", "conversation", "response"});
    if (auto q = walk_llm_request(w, o, path, false)) t.entries.push_back(std::move(*q));
  } else {
    w.error(path, fmt::format("expected a conversation object or a list of entries, got {}", json::describe(root)));
  }
  if (w.errors() != before) return std::nullopt;
  return t;
}

template <class T, class WalkFn>
Result<T> read_object(std::string_view text, std::string_view origin, Diagnostics* diags, WalkFn walk) {
  Diagnostics local;
  Diagnostics& d = diags ? *diags : local;
  std::size_t before = d.error_count();
  auto doc = json::parse(text, origin);
  if (!doc) {
    d.error("", "", doc.error().message);
    return doc.error();
  }
  Locator where(text, std::string(origin));
  Walker w(where, d);
  auto obj = walk(w, doc->root(), std::string());
  std::size_t after = d.error_count();
  if (after != before || !obj) {
    std::string first = d.error_after(before);
    std::size_t more = after - before - 1;
    if (more) first += fmt::format(" (and {} more error{})", more, more == 1 ? "" : "s");
    return make_error(Code::invalid_data, first);
  }
  return std::move(*obj);
}

template <class T, class ReadFn>
Result<T> read_file(const std::string& path, Diagnostics* diags, ReadFn read) {
  auto text = json::read_text_file(path);
  if (!text) {
    if (diags) diags->error("", "", text.error().message);
    return text.error();
  }
  return read(*text, path, diags);
}

}  // namespace

std::string_view framework_name(Framework f) noexcept {
  switch (f) {
    case Framework::sglang: return "SGLang";
    case Framework::vllm: return "vLLM";
    case Framework::mlc_llm: return "MLC-LLM";
    case Framework::trt_llm: return "TRT-LLM";
  }
  return "?";
}

std::optional<Framework> framework_from_name(std::string_view s) noexcept {
  for (Framework f : {Framework::sglang, Framework::vllm, Framework::mlc_llm, Framework::trt_llm})
    if (framework_name(f) == s) return f;
  return std::nullopt;
}

std::string_view role_name(Role r) noexcept {
  switch (r) {
    case Role::system: return "system";
    case Role::user: return "user";
    case Role::assistant: return "assistant";
    case Role::tool: return "tool";
  }
  return "?";
}

std::string_view kind_name(Kind k) noexcept {
  switch (k) {
    case Kind::none: return "none";
    case Kind::calling_record: return "calling record";
    case Kind::benchmark_result: return "benchmark result";
    case Kind::agent_trace: return "agent trace";
  }
  return "?";
}

const std::int64_t* KernelCall::find_axis(std::string_view name) const {
  for (const auto& [k, v] : axes)
    if (k == name) return &v;
  return nullptr;
}

Kind sniff(std::string_view text) {
  auto doc = json::parse(text, "");
  if (!doc) return Kind::none;
  Element root = doc->root();
  json::Array a;
  if (root.get_array().get(a) == simdjson::SUCCESS) {
    for (Element e : a) {
      Object o;
      Element t;
      return e.get_object().get(o) == simdjson::SUCCESS && o.at_key("type").get(t) == simdjson::SUCCESS
                 ? Kind::agent_trace
                 : Kind::none;
    }
    return Kind::none;
  }
  Object o;
  if (root.get_object().get(o) != simdjson::SUCCESS) return Kind::none;
  Element e;
  auto has = [&](const char* k) { return o.at_key(k).get(e) == simdjson::SUCCESS; };
  if (has("kernels") && (has("framework") || has("model"))) return Kind::calling_record;
  if (has("kernel_id") || (has("compiled") && has("device"))) return Kind::benchmark_result;
  if (has("conversation")) return Kind::agent_trace;
  std::string_view type;
  if (o.at_key("type").get_string().get(type) == simdjson::SUCCESS &&
      (type == "llm_request" || type == "tool_call" || type == "mcp"))
    return Kind::agent_trace;
  return Kind::none;
}

Result<CallingRecord> read_calling_record(std::string_view text, std::string_view origin, Diagnostics* diags) {
  return read_object<CallingRecord>(text, origin, diags, walk_calling_record);
}
Result<BenchmarkResult> read_benchmark_result(std::string_view text, std::string_view origin, Diagnostics* diags) {
  return read_object<BenchmarkResult>(text, origin, diags, walk_benchmark_result);
}
Result<AgentTrace> read_agent_trace(std::string_view text, std::string_view origin, Diagnostics* diags) {
  return read_object<AgentTrace>(text, origin, diags, walk_agent_trace);
}
Result<CallingRecord> read_calling_record_file(const std::string& path, Diagnostics* diags) {
  return read_file<CallingRecord>(path, diags, [](auto t, auto o, auto d) { return read_calling_record(t, o, d); });
}
Result<BenchmarkResult> read_benchmark_result_file(const std::string& path, Diagnostics* diags) {
  return read_file<BenchmarkResult>(path, diags, [](auto t, auto o, auto d) { return read_benchmark_result(t, o, d); });
}
Result<AgentTrace> read_agent_trace_file(const std::string& path, Diagnostics* diags) {
  return read_file<AgentTrace>(path, diags, [](auto t, auto o, auto d) { return read_agent_trace(t, o, d); });
}

std::size_t check_calling_record(const CallingRecord& r, const FindDefinition& find, const std::vector<std::string>& known,
                                 const Locator& where, Diagnostics& diags) {
  std::size_t before = diags.error_count();
  for (std::size_t i = 0; i < r.kernels.size(); ++i) {
    const KernelCall& k = r.kernels[i];
    std::string kp = index_path("kernels", i);
    const Definition* d = find(k.id);
    if (!d) {
      std::string p = member_path(kp, "id");
      diags.error(where.at(p), p,
                  fmt::format("no definition \"{}\" among the {} loaded{}", k.id, known.size(), suggestion_text(k.id, known)));
      continue;
    }
    std::vector<std::string> missing;
    for (const Axis& a : d->axes)
      if (a.kind == AxisKind::var && !k.find_axis(a.name)) missing.push_back(a.name);
    for (const auto& [name, value] : k.axes) {
      std::string p = member_path(member_path(kp, "axes"), name);
      const Axis* a = d->find_axis(name);
      if (!a) {
        std::vector<std::string> axes;
        for (const Axis& x : d->axes) axes.push_back(x.name);
        diags.error(where.at(p), p, fmt::format("definition \"{}\" has no axis \"{}\"{}", d->name, name,
                                                suggestion_text(name, axes)));
      } else if (a->kind == AxisKind::const_ && a->value != value) {
        diags.error(where.at(p), p,
                    fmt::format("axis \"{}\" of \"{}\" is const {}, not {}", name, d->name, a->value, value));
      }
    }
    if (!missing.empty()) {
      std::string p = k.axes.empty() ? kp : member_path(kp, "axes");
      diags.warning(where.at(p), p,
                    fmt::format("var axis{} {} of \"{}\" not given: kb estimate matches recorded workloads on the given "
                                "axes only",
                                missing.size() == 1 ? "" : "es", fmt::format("{}", fmt::join(missing, ", ")), d->name));
    }
  }
  return diags.error_count() - before;
}

}  // namespace kb::model
