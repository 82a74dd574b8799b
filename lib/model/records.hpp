// The model-level objects of the FlashInfer schema set (shared/seeds/flashinfer-schema-set.md,
// shared/notes/formats.md), field for field, as plain data:
//   Kernel Calling Record  a model on a framework, and how often each kernel runs in one step;
//   Benchmark Result       one kernel from one source on one device: compiled or not, time, speedup;
//   Agent trace            an agent's LLM requests and tool calls, in order (two forms).
// Reading (with every problem as a Diagnostic: "file:line: json.path: message"), writing and
// checking against loaded definitions are declared at the end; io lives in read.cpp / write.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/result.hpp"
#include "json/diagnostics.hpp"
#include "model/locate.hpp"
#include "schema/model.hpp"

namespace kb::model {

// ---- Kernel Calling Record --------------------------------------------------

// The inference frameworks the schema allows, in its order.
enum class Framework { sglang, vllm, mlc_llm, trt_llm };
std::string_view framework_name(Framework f) noexcept;  // "SGLang", "vLLM", "MLC-LLM", "TRT-LLM"
std::optional<Framework> framework_from_name(std::string_view s) noexcept;

// A value from a model's configuration (config.json), kept with its JSON kind.
using ConfigValue = std::variant<std::int64_t, double, bool, std::string>;

struct KernelCall {
  std::string id;           // a definition name
  std::int64_t count = 0;   // calls per step, >= 1
  // kb's addition: the values of the definition's var axes at this call (batch size, tokens, pages...),
  // what `kb estimate` matches recorded workloads against. Document order.
  std::vector<std::pair<std::string, std::int64_t>> axes;
  std::optional<std::string> notes;  // kb's addition: where the count comes from, shape caveats

  const std::int64_t* find_axis(std::string_view name) const;
  bool operator==(const KernelCall&) const = default;
};

struct CallingRecord {
  std::string model;        // Hugging Face id, e.g. "meta-llama/Llama-3.1-8B"
  Framework framework = Framework::sglang;
  std::vector<KernelCall> kernels;
  // kb's additions, all optional: which step the counts describe ("decode", "prefill", free text),
  // where the architecture numbers come from (model card / config.json URL), the config values the
  // counts follow from, and free notes.
  std::optional<std::string> step;
  std::optional<std::string> description;
  std::optional<std::string> source;
  std::vector<std::pair<std::string, ConfigValue>> architecture;
  std::optional<std::string> notes;

  bool operator==(const CallingRecord&) const = default;
};

// ---- Benchmark Result -------------------------------------------------------

struct BenchmarkResult {
  std::string device_name;   // device.name
  std::string kernel_id;     // a definition name
  std::string source;        // where the kernel comes from ("flashinfer", a solution's author or name)
  bool compiled = true;
  // Compiled results only (each optional: an incorrect kernel has no time). time is in milliseconds,
  // as the traces' latency_ms; speedup is the baseline's time over this one; max_diff the largest
  // absolute difference from the reference.
  std::optional<double> time;
  std::optional<double> speedup;
  std::optional<double> max_diff;
  std::optional<std::string> compile_error;  // exactly when compiled is false

  bool operator==(const BenchmarkResult&) const = default;
};

// ---- Agent trace ------------------------------------------------------------

enum class Role { system, user, assistant, tool };
std::string_view role_name(Role r) noexcept;

// An OpenAI tool call inside an assistant message ({"id", "type": "function", "function": {"name", "arguments"}}).
struct MessageToolCall {
  std::string id;
  std::string type = "function";
  std::string name;
  std::string arguments;  // JSON text, as the model produced it (a string in OpenAI's format)
  bool operator==(const MessageToolCall&) const = default;
};

// An OpenAI chat message.
struct Message {
  Role role = Role::user;
  // The text; nullopt for `"content": null` (an assistant message that only calls tools) or when
  // the content is a list of parts (then content_parts holds that list as minified JSON).
  std::optional<std::string> content;
  std::optional<std::string> content_parts;
  std::optional<std::string> name;
  std::vector<MessageToolCall> tool_calls;   // assistant messages only
  std::optional<std::string> tool_call_id;   // tool messages only
  std::optional<std::string> refusal;        // assistant messages only
  bool operator==(const Message&) const = default;
};

struct Choice {
  std::int64_t index = 0;
  Message message;
  std::optional<std::string> finish_reason;  // "stop", "length", "tool_calls", "content_filter"; null while streaming
  bool operator==(const Choice&) const = default;
};

struct Usage {
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  std::int64_t total_tokens = 0;
  bool operator==(const Usage&) const = default;
};

// An OpenAI chat completion (the fields the schema considers, and the common optional ones).
struct Response {
  std::optional<std::string> id;
  std::optional<std::string> object;  // "chat.completion"
  std::optional<std::int64_t> created;
  std::string model;
  std::vector<Choice> choices;
  std::optional<Usage> usage;
  std::optional<std::string> system_fingerprint;
  bool operator==(const Response&) const = default;
};

struct LlmRequest {
  std::string model;
  std::optional<std::string> annotation;
  std::vector<Message> conversation;
  std::optional<Response> response;  // required in the entry-list form
  bool operator==(const LlmRequest&) const = default;
};

struct ToolCall {
  std::string tool_name;
  std::string arguments;  // a JSON object, minified
  std::string result;
  std::optional<std::string> cli_output;
  bool operator==(const ToolCall&) const = default;
};

// The schema leaves MCP entries to be determined: kept whole, verbatim (minified).
struct Mcp {
  std::string json;
  bool operator==(const Mcp&) const = default;
};

using AgentEntry = std::variant<LlmRequest, ToolCall, Mcp>;

struct AgentTrace {
  // conversation: one object {model, annotation?, conversation} (entries holds one LlmRequest);
  // entries: a list of {"type": "llm_request" | "tool_call" | "mcp", ...} in chronological order.
  enum class Form { conversation, entries };
  Form form = Form::entries;
  std::vector<AgentEntry> entries;
  bool operator==(const AgentTrace&) const = default;
};

// ---- Reading, writing, checking --------------------------------------------

// Which of the three a JSON document is, from its top-level fields (none: something else, e.g. a
// Definition or Solution, or not JSON).
enum class Kind { none, calling_record, benchmark_result, agent_trace };
Kind sniff(std::string_view text);
std::string_view kind_name(Kind k) noexcept;  // "calling record", "benchmark result", "agent trace"

// `origin` names the text in messages (a path, or "<memory>"); each problem's origin is
// "origin:line" with the line of the value it is about. Structure and the object's own rules
// are checked; kernel ids are checked against definitions by check_calling_record.
Result<CallingRecord> read_calling_record(std::string_view text, std::string_view origin, Diagnostics* diags = nullptr);
Result<BenchmarkResult> read_benchmark_result(std::string_view text, std::string_view origin,
                                              Diagnostics* diags = nullptr);
Result<AgentTrace> read_agent_trace(std::string_view text, std::string_view origin, Diagnostics* diags = nullptr);
Result<CallingRecord> read_calling_record_file(const std::string& path, Diagnostics* diags = nullptr);
Result<BenchmarkResult> read_benchmark_result_file(const std::string& path, Diagnostics* diags = nullptr);
Result<AgentTrace> read_agent_trace_file(const std::string& path, Diagnostics* diags = nullptr);

// Pretty (2-space indent) or one line. The text reads back to an equal object.
std::string to_json(const CallingRecord& r, bool pretty = true);
std::string to_json(const BenchmarkResult& r, bool pretty = true);
std::string to_json(const AgentTrace& t, bool pretty = true);
// Parts of an agent trace, one line: an OpenAI response, one entry (with its "type"), a message's
// tool calls as a list.
std::string to_json(const Response& r, bool pretty = false);
std::string entry_json(const AgentEntry& e, bool pretty = false);
std::string tool_calls_json(const std::vector<MessageToolCall>& calls);

// A record's kernel ids against the definitions `find` knows (nullptr: no such definition), and
// each call's axes against its definition: every axis named is a var axis of it (a const axis
// may be given only with its value), and the var axes left out are warned about (kb estimate then
// matches on the given ones only). `known` lists every definition name, for near-match hints.
// Problems go to `diags` with `where`'s places. Returns the number of errors added.
using FindDefinition = std::function<const Definition*(std::string_view name)>;
std::size_t check_calling_record(const CallingRecord& r, const FindDefinition& find, const std::vector<std::string>& known,
                                 const Locator& where, Diagnostics& diags);

}  // namespace kb::model
