// Kernel Calling Records, Benchmark Results and Agent traces: the schema set's examples read,
// every kind of problem is reported with its line and JSON path, and what kb writes reads back.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <string>

#include "model/records.hpp"
#include "schema/io.hpp"

using namespace kb::model;

namespace {

std::string with(std::string text, const std::string& from, const std::string& to) {
  auto pos = text.find(from);
  REQUIRE_MESSAGE(pos != std::string::npos, from);
  return text.replace(pos, from.size(), to);
}

template <class ReadFn>
std::string first_error(ReadFn read, const std::string& text) {
  kb::Diagnostics d;
  auto r = read(text, "x.json", &d);
  CHECK(r.ok() == !d.has_errors());
  return r ? std::string() : d.first_error();
}
std::string record_error(const std::string& t) {
  return first_error([](auto a, auto b, auto c) { return read_calling_record(a, b, c); }, t);
}
std::string result_error(const std::string& t) {
  return first_error([](auto a, auto b, auto c) { return read_benchmark_result(a, b, c); }, t);
}
std::string agent_error(const std::string& t) {
  return first_error([](auto a, auto b, auto c) { return read_agent_trace(a, b, c); }, t);
}

template <class T, class ReadFn>
T roundtrip(const T& x, ReadFn read) {
  for (bool pretty : {true, false}) {
    std::string text = to_json(x, pretty);
    kb::Diagnostics d;
    auto back = read(text, "roundtrip", &d);
    REQUIRE_MESSAGE(back.ok(), (d.errors_text() + "\n" + text));
    CHECK(*back == x);
    CHECK(to_json(*back, pretty) == text);
  }
  return x;
}

// The schema set's examples, as printed there except for the trailing commas JSON does not allow
// (the verbatim text is tested below).
const char* kSeedRecord = R"({
  "model": "meta-llama/Llama-3.1-8B",
  "framework": "SGLang",
  "kernels": [
    {
      "id": "silu_and_mul",
      "count": 4
    },
    {
      "id": "rmsnorm",
      "count": 2
    }
  ]
})";

const char* kSeedSuccess = R"({
  "device": {
    "name": "NVIDIA A100-SXM4-80GB"
  },
  "kernel_id": "gemm",
  "source": "flashinfer",
  "compiled": true,
  "time": 0.250,
  "speedup": 2.0,
  "max_diff": 1e-6
})";

const char* kSeedCompileFailure = R"({
  "device": {
    "name": "NVIDIA A100-SXM4-80GB"
  },
  "kernel_id": "gemm",
  "source": "flashinfer",
  "compiled": false,
  "compile_error": "..."
})";

const char* kSeedSimple = R"({
  "model": "gpt-4o",
  "annotation": "Basic geography question",
  "conversation": [
    {
      "role": "system",
      "content": "You are a helpful assistant."
    },
    {
      "role": "user",
      "content": "What is the capital of France?"
    },
    {
      "role": "assistant",
      "content": "The capital of France is Paris."
    }
  ]
})";

const char* kSeedToolCall = R"({
  "model": "gpt-4o",
  "annotation": "Basic geography question",
  "conversation": [
    {
      "role": "user",
      "content": "What's the weather like in New York?"
    },
    {
      "role": "assistant",
      "content": "I'll check the weather in New York for you.",
      "tool_calls": [
        {
          "id": "call_123",
          "type": "function",
          "function": {
            "name": "get_weather",
            "arguments": "{\"location\": \"New York, NY\"}"
          }
        }
      ]
    },
    {
      "role": "tool",
      "content": "Current weather in New York: 72°F, partly cloudy"
    },
    {
      "role": "assistant",
      "content": "The weather in New York is 72°F, partly cloudy."
    }
  ]
})";

const char* kSeedMultiAgent = R"([
  {
    "type": "llm_request",
    "conversation": [
      {
        "role": "user",
        "content": "Analyze this code for security issues."
      },
      {
        "role": "assistant",
        "content": "I'll analyze the code for potential security vulnerabilities."
      }
    ],
    "response": {
      "model": "claude-3-sonnet",
      "choices": [
        {
          "index": 0,
          "message": {
            "role": "assistant",
            "content": "I'll analyze the code for potential security vulnerabilities."
          },
          "finish_reason": "stop"
        }
      ]
    },
    "model": "claude-3-sonnet",
    "annotation": "Security analysis agent"
  },
  {
    "type": "llm_request",
    "conversation": [
      {
        "role": "system",
        "content": "You are a code optimization specialist."
      },
      {
        "role": "user",
        "content": "Review this code for performance improvements."
      }
    ],
    "response": {
      "model": "gpt-4o",
      "choices": [
        {
          "index": 0,
          "message": {
            "role": "assistant",
            "content": "I'll review the code for optimization opportunities."
          },
          "finish_reason": "stop"
        }
      ]
    },
    "model": "gpt-4o",
    "annotation": "Performance optimization agent"
  }
])";

// An entry list with every entry type and the OpenAI fields kb reads.
const char* kEntries = R"([
  {
    "type": "llm_request",
    "model": "gpt-4o",
    "conversation": [
      {"role": "system", "content": "You write CUDA kernels."},
      {"role": "user", "content": [{"type": "text", "text": "Make rmsnorm faster."}], "name": "alice"}
    ],
    "response": {
      "id": "chatcmpl-1", "object": "chat.completion", "created": 1733390000, "model": "gpt-4o-2024-08-06",
      "choices": [
        {"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
          {"id": "call_1", "type": "function", "function": {"name": "kb_bench", "arguments": "{\"definition\": \"rmsnorm_h4096\"}"}}
        ]}, "finish_reason": "tool_calls"}
      ],
      "usage": {"prompt_tokens": 31, "completion_tokens": 12, "total_tokens": 43},
      "system_fingerprint": "fp_1"
    }
  },
  {
    "type": "tool_call",
    "tool_name": "kb_bench",
    "arguments": {"definition": "rmsnorm_h4096", "trials": 3, "nested": {"x": [1, 2.5, true, null]}},
    "result": "PASSED 0.012 ms",
    "cli_output": "kb bench: 1 passed\n"
  },
  {"type": "mcp", "server": "files", "method": "read", "params": {"path": "a.cu"}}
])";

}  // namespace

TEST_CASE("the schema set's calling record reads and round-trips") {
  kb::Diagnostics d;
  auto r = read_calling_record(kSeedRecord, "seed.json", &d);
  REQUIRE_MESSAGE(r.ok(), d.errors_text());
  CHECK(d.warning_count() == 0);
  CHECK(r->model == "meta-llama/Llama-3.1-8B");
  CHECK(r->framework == Framework::sglang);
  REQUIRE(r->kernels.size() == 2);
  CHECK(r->kernels[0].id == "silu_and_mul");
  CHECK(r->kernels[0].count == 4);
  CHECK(r->kernels[1].id == "rmsnorm");
  CHECK(r->kernels[1].count == 2);
  roundtrip(*r, [](auto a, auto b, auto c) { return read_calling_record(a, b, c); });
  // The example's own text is written back unchanged.
  CHECK(to_json(*r) == kSeedRecord);
  CHECK(sniff(kSeedRecord) == Kind::calling_record);
}

TEST_CASE("every framework the schema allows reads; others are refused with the list") {
  for (const char* f : {"SGLang", "vLLM", "MLC-LLM", "TRT-LLM"}) {
    auto r = read_calling_record(with(kSeedRecord, "SGLang", f), "x.json");
    REQUIRE(r.ok());
    CHECK(framework_name(r->framework) == f);
  }
  CHECK(record_error(with(kSeedRecord, "SGLang", "sglang")) ==
        "x.json:3: framework: unknown framework \"sglang\"; did you mean \"SGLang\"?");
  CHECK(record_error(with(kSeedRecord, "SGLang", "TGI")) ==
        "x.json:3: framework: unknown framework \"TGI\" (known: SGLang, vLLM, MLC-LLM, TRT-LLM)");
}

TEST_CASE("calling record problems name the line and the JSON path") {
  CHECK(record_error(with(kSeedRecord, "\"count\": 4", "\"count\": 0")) ==
        "x.json:7: kernels[0].count: expected a positive integer (calls per step), got 0");
  CHECK(record_error(with(kSeedRecord, "\"count\": 2", "\"count\": 2.5")) ==
        "x.json:11: kernels[1].count: expected a positive integer (calls per step), got number 2.5");
  CHECK(record_error(with(kSeedRecord, "\"count\": 2", "\"counts\": 2")) ==
        "x.json:9: kernels[1].count: required field is missing");
  CHECK(record_error(with(kSeedRecord, "\"model\": \"meta-llama/Llama-3.1-8B\",", "")) ==
        "x.json:1: model: required field is missing");
  CHECK(record_error(with(kSeedRecord, "\"id\": \"rmsnorm\"", "\"id\": \"silu_and_mul\"")) ==
        "x.json:10: kernels[1].id: kernel \"silu_and_mul\" is listed again with the same axes (also kernels[0]): one "
        "entry per call shape, with the calls added into its count");
  CHECK(record_error(with(kSeedRecord, "\"id\": \"rmsnorm\"", "\"id\": \"\"")) ==
        "x.json:10: kernels[1].id: must not be empty");
  CHECK(record_error(R"({"model": "m", "framework": "vLLM", "kernels": []})") ==
        "x.json:1: kernels: expected at least one kernel");
  CHECK(record_error(R"({"model": "m", "framework": "vLLM", "kernels": {}})") ==
        "x.json:1: kernels: expected a list of {id, count} objects, got object {}");
  CHECK(record_error(R"({"model": "m", "framework": "vLLM", "kernels": [{"id": "a", "count": 1, "axes": {"M": -1}}]})") ==
        "x.json:1: kernels[0].axes.M: expected a non-negative integer, got -1");
  CHECK(record_error(R"({"model": "m", "framework": "vLLM", "kernels": [{"id": "a", "count": 1}],
    "architecture": {"layers": [1]}})") ==
        "x.json:2: architecture.layers: expected a string, number or boolean (one configuration value), got array [1]");
  // The same kernel at two call shapes is two entries.
  CHECK(record_error(R"({"model": "m", "framework": "vLLM", "kernels": [{"id": "a", "count": 1, "axes": {"M": 1}},
    {"id": "a", "count": 1, "axes": {"M": 2}}]})") == "");
  // Problems are all reported, the first carried by the Result.
  kb::Diagnostics d;
  auto r = read_calling_record(with(with(kSeedRecord, "\"count\": 4", "\"count\": -4"), "SGLang", "x"), "x.json", &d);
  REQUIRE(!r.ok());
  CHECK(d.error_count() == 2);
  CHECK(r.error().message == "x.json:3: framework: unknown framework \"x\" (known: SGLang, vLLM, MLC-LLM, TRT-LLM) (and 1 more error)");
  // Unknown fields are warnings.
  kb::Diagnostics w;
  REQUIRE(read_calling_record(with(kSeedRecord, "\"kernels\"", "\"gpu\": \"H100\", \"kernels\""), "x.json", &w).ok());
  REQUIRE(w.warning_count() == 1);
  CHECK(w.items()[0].to_string() == "x.json:4: warning: gpu: unknown field (ignored)");
}

TEST_CASE("kb's additions to the calling record round-trip") {
  const char* text = R"({
  "model": "Qwen/Qwen3-30B-A3B",
  "framework": "vLLM",
  "step": "decode",
  "description": "one decode step",
  "source": "https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json",
  "architecture": {
    "num_hidden_layers": 48,
    "rms_norm_eps": 1e-06,
    "tie_word_embeddings": false,
    "torch_dtype": "bfloat16"
  },
  "notes": "tp 1",
  "kernels": [
    {
      "id": "gemm_n5120_k2048",
      "count": 48,
      "axes": {
        "M": 64
      },
      "notes": "qkv projection"
    }
  ]
})";
  kb::Diagnostics d;
  auto r = read_calling_record(text, "x.json", &d);
  REQUIRE_MESSAGE(r.ok(), d.errors_text());
  CHECK(d.warning_count() == 0);
  CHECK(r->step == "decode");
  REQUIRE(r->architecture.size() == 4);
  CHECK(std::get<std::int64_t>(r->architecture[0].second) == 48);
  CHECK(std::get<double>(r->architecture[1].second) == 1e-6);
  CHECK(std::get<bool>(r->architecture[2].second) == false);
  CHECK(std::get<std::string>(r->architecture[3].second) == "bfloat16");
  REQUIRE(r->kernels[0].find_axis("M"));
  CHECK(*r->kernels[0].find_axis("M") == 64);
  CHECK(r->kernels[0].find_axis("N") == nullptr);
  roundtrip(*r, [](auto a, auto b, auto c) { return read_calling_record(a, b, c); });
  CHECK(to_json(*r) == text);
}

TEST_CASE("kernel ids and axes are checked against loaded definitions") {
  const char* def_text = R"({
    "name": "gemm_n8_k4", "op_type": "gemm",
    "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 8}, "K": {"type": "const", "value": 4}},
    "inputs": {"A": {"shape": ["M", "K"], "dtype": "float16"}, "B": {"shape": ["N", "K"], "dtype": "float16"}},
    "outputs": {"C": {"shape": ["M", "N"], "dtype": "float16"}},
    "reference": "def run(A, B):\n    return A @ B.T\n"})";
  auto def = kb::read_definition(def_text, "d.json");
  REQUIRE(def.ok());
  FindDefinition find = [&](std::string_view n) -> const kb::Definition* { return n == def->name ? &*def : nullptr; };
  std::vector<std::string> known{def->name};
  auto check = [&](const std::string& text) {
    auto r = read_calling_record(text, "r.json");
    REQUIRE(r.ok());
    kb::Diagnostics d;
    Locator where(text, "r.json");
    std::size_t errors = check_calling_record(*r, find, known, where, d);
    CHECK(errors == d.error_count());
    std::vector<std::string> out;
    for (const auto& x : d.items()) out.push_back(x.to_string());
    return out;
  };
  using V = std::vector<std::string>;
  CHECK(check(R"({"model": "m", "framework": "vLLM", "kernels": [
      {"id": "gemm_n8_k4", "count": 3, "axes": {"M": 16, "N": 8}}]})") == V{});
  CHECK(check(R"({"model": "m", "framework": "vLLM", "kernels": [
      {"id": "gemm_n8_k5", "count": 3}]})") ==
        V{"r.json:2: kernels[0].id: no definition \"gemm_n8_k5\" among the 1 loaded; did you mean gemm_n8_k4?"});
  CHECK(check(R"({"model": "m", "framework": "vLLM", "kernels": [
      {"id": "gemm_n8_k4", "count": 3,
       "axes": {"m": 16, "K": 5}}]})") ==
        V{"r.json:3: kernels[0].axes.m: definition \"gemm_n8_k4\" has no axis \"m\"; did you mean K, M, N?",
          "r.json:3: kernels[0].axes.K: axis \"K\" of \"gemm_n8_k4\" is const 4, not 5",
          "r.json:3: warning: kernels[0].axes: var axis M of \"gemm_n8_k4\" not given: kb estimate matches recorded "
          "workloads on the given axes only"});
  CHECK(check(R"({"model": "m", "framework": "vLLM", "kernels": [{"id": "gemm_n8_k4", "count": 3}]})") ==
        V{"r.json:1: warning: kernels[0]: var axis M of \"gemm_n8_k4\" not given: kb estimate matches recorded "
          "workloads on the given axes only"});
}

TEST_CASE("the schema set's benchmark results read and round-trip") {
  kb::Diagnostics d;
  auto ok = read_benchmark_result(kSeedSuccess, "x.json", &d);
  REQUIRE_MESSAGE(ok.ok(), d.errors_text());
  CHECK(ok->device_name == "NVIDIA A100-SXM4-80GB");
  CHECK(ok->kernel_id == "gemm");
  CHECK(ok->source == "flashinfer");
  CHECK(ok->compiled);
  CHECK(ok->time == 0.25);
  CHECK(ok->speedup == 2.0);
  CHECK(ok->max_diff == 1e-6);
  CHECK(!ok->compile_error);
  roundtrip(*ok, [](auto a, auto b, auto c) { return read_benchmark_result(a, b, c); });
  auto failed = read_benchmark_result(kSeedCompileFailure, "x.json", &d);
  REQUIRE_MESSAGE(failed.ok(), d.errors_text());
  CHECK(!failed->compiled);
  CHECK(failed->compile_error == "...");
  CHECK(!failed->time);
  roundtrip(*failed, [](auto a, auto b, auto c) { return read_benchmark_result(a, b, c); });
  CHECK(to_json(*failed) == kSeedCompileFailure);
  CHECK(d.warning_count() == 0);
  CHECK(sniff(kSeedSuccess) == Kind::benchmark_result);
  CHECK(sniff(kSeedCompileFailure) == Kind::benchmark_result);
}

TEST_CASE("benchmark result problems name the line and the JSON path") {
  CHECK(result_error(with(kSeedSuccess, "\"compiled\": true,", "")) == "x.json:1: compiled: required field is missing");
  CHECK(result_error(with(kSeedSuccess, "\"compiled\": true", "\"compiled\": \"yes\"")) ==
        "x.json:7: compiled: expected true or false, got string \"yes\"");
  CHECK(result_error(with(kSeedSuccess, "0.250", "-1")) == "x.json:8: time: expected a number >= 0.0, got -1");
  CHECK(result_error(with(kSeedSuccess, "2.0", "0")) == "x.json:9: speedup: expected a number > 0.0, got 0");
  CHECK(result_error(with(kSeedSuccess, "\"name\": \"NVIDIA A100-SXM4-80GB\"", "\"id\": 0")) ==
        "x.json:2: device.name: required field is missing");
  CHECK(result_error(with(kSeedSuccess, "\"max_diff\": 1e-6", "\"max_diff\": 1e-6, \"compile_error\": \"x\"")) ==
        "x.json:10: compile_error: a result that compiled has no compile_error");
  CHECK(result_error(with(kSeedCompileFailure, "\"compile_error\": \"...\"", "\"time\": 1.0")) ==
        "x.json:1: compile_error: required when compiled is false");
  CHECK(result_error(with(kSeedCompileFailure, "\"compile_error\": \"...\"", "\"compile_error\": \"e\", \"speedup\": 1.5")) ==
        "x.json:8: speedup: a result that did not compile has no time, speedup or max_diff");
  CHECK(result_error(with(kSeedSuccess, "\"source\": \"flashinfer\",", "")) == "x.json:1: source: required field is missing");
}

TEST_CASE("the schema set's agent traces read in both forms and round-trip") {
  for (const char* text : {kSeedSimple, kSeedToolCall}) {
    kb::Diagnostics d;
    auto t = read_agent_trace(text, "x.json", &d);
    REQUIRE_MESSAGE(t.ok(), d.errors_text());
    CHECK(d.warning_count() == 0);
    CHECK(t->form == AgentTrace::Form::conversation);
    REQUIRE(t->entries.size() == 1);
    const auto& q = std::get<LlmRequest>(t->entries[0]);
    CHECK(q.model == "gpt-4o");
    CHECK(q.annotation == "Basic geography question");
    CHECK(!q.response);
    roundtrip(*t, [](auto a, auto b, auto c) { return read_agent_trace(a, b, c); });
    CHECK(sniff(text) == Kind::agent_trace);
  }
  auto t = read_agent_trace(kSeedToolCall, "x.json");
  REQUIRE(t.ok());
  const auto& q = std::get<LlmRequest>(t->entries[0]);
  REQUIRE(q.conversation.size() == 4);
  REQUIRE(q.conversation[1].tool_calls.size() == 1);
  CHECK(q.conversation[1].tool_calls[0].id == "call_123");
  CHECK(q.conversation[1].tool_calls[0].name == "get_weather");
  CHECK(q.conversation[1].tool_calls[0].arguments == "{\"location\": \"New York, NY\"}");
  CHECK(q.conversation[2].role == Role::tool);
  CHECK(*q.conversation[2].content == "Current weather in New York: 72°F, partly cloudy");

  kb::Diagnostics d;
  auto multi = read_agent_trace(kSeedMultiAgent, "x.json", &d);
  REQUIRE_MESSAGE(multi.ok(), d.errors_text());
  CHECK(multi->form == AgentTrace::Form::entries);
  REQUIRE(multi->entries.size() == 2);
  const auto& first = std::get<LlmRequest>(multi->entries[0]);
  CHECK(first.model == "claude-3-sonnet");
  REQUIRE(first.response);
  CHECK(first.response->choices[0].finish_reason == "stop");
  roundtrip(*multi, [](auto a, auto b, auto c) { return read_agent_trace(a, b, c); });
  CHECK(sniff(kSeedMultiAgent) == Kind::agent_trace);
}

TEST_CASE("an entry list with tool calls, MCP and OpenAI's optional fields round-trips") {
  kb::Diagnostics d;
  auto t = read_agent_trace(kEntries, "x.json", &d);
  REQUIRE_MESSAGE(t.ok(), d.errors_text());
  CHECK(d.warning_count() == 0);
  REQUIRE(t->entries.size() == 3);
  const auto& q = std::get<LlmRequest>(t->entries[0]);
  CHECK(q.conversation[1].content_parts == R"([{"type":"text","text":"Make rmsnorm faster."}])");
  CHECK(q.conversation[1].name == "alice");
  REQUIRE(q.response);
  CHECK(q.response->created == 1733390000);
  CHECK(q.response->usage->total_tokens == 43);
  CHECK(!q.response->choices[0].message.content);
  CHECK(q.response->choices[0].message.tool_calls[0].name == "kb_bench");
  const auto& c = std::get<ToolCall>(t->entries[1]);
  CHECK(c.tool_name == "kb_bench");
  CHECK(c.arguments == R"({"definition":"rmsnorm_h4096","trials":3,"nested":{"x":[1,2.5,true,null]}})");
  CHECK(c.cli_output == "kb bench: 1 passed\n");
  CHECK(std::get<Mcp>(t->entries[2]).json == R"({"type":"mcp","server":"files","method":"read","params":{"path":"a.cu"}})");
  roundtrip(*t, [](auto a, auto b, auto c) { return read_agent_trace(a, b, c); });
}

TEST_CASE("agent trace problems name the line and the JSON path") {
  CHECK(agent_error(with(kSeedSimple, "\"role\": \"system\"", "\"role\": \"developer\"")) ==
        "x.json:6: conversation[0].role: unknown role \"developer\" (known: system, user, assistant, tool)");
  CHECK(agent_error(with(kSeedSimple, "\"model\": \"gpt-4o\",", "")) == "x.json:1: model: required field is missing");
  CHECK(agent_error(with(kSeedSimple, "\"content\": \"What is the capital of France?\"", "\"content\": null")) ==
        "x.json:11: conversation[1].content: only an assistant message with tool_calls or a refusal may have null content");
  CHECK(agent_error(with(kSeedSimple, "\"content\": \"What is the capital of France?\"", "\"text\": \"x\"")) ==
        "x.json:9: conversation[1].content: required field is missing");
  CHECK(agent_error(with(kSeedToolCall, "\"role\": \"assistant\",\n      \"content\": \"I'll", "\"role\": \"user\",\n      \"content\": \"I'll")) ==
        "x.json:12: conversation[1].tool_calls: only assistant messages carry tool_calls");
  CHECK(agent_error(with(kSeedToolCall, "\"type\": \"function\"", "\"type\": \"retrieval\"")) ==
        "x.json:15: conversation[1].tool_calls[0].type: expected \"function\", got \"retrieval\"");
  CHECK(agent_error(with(kSeedToolCall, "\"role\": \"tool\",", "\"role\": \"tool\", \"tool_call_id\": \"call_9\",")) ==
        "x.json:24: conversation[2].tool_call_id: no earlier tool call has id \"call_9\"");
  CHECK(agent_error(with(kSeedToolCall, "\"role\": \"tool\",", "\"role\": \"tool\", \"tool_call_id\": \"call_123\",")) == "");
  CHECK(agent_error(with(kSeedMultiAgent, "\"finish_reason\": \"stop\"", "\"finish_reason\": \"done\"")) ==
        "x.json:23: [0].response.choices[0].finish_reason: unknown finish_reason \"done\" (known: stop, length, "
        "tool_calls, content_filter, function_call)");
  CHECK(agent_error(with(kSeedMultiAgent, "\"role\": \"assistant\",\n            \"content\": \"I'll analyze",
                         "\"role\": \"user\",\n            \"content\": \"I'll analyze")) ==
        "x.json:20: [0].response.choices[0].message.role: a response message has role \"assistant\", got \"user\"");
  CHECK(agent_error(with(kSeedMultiAgent, "\"type\": \"llm_request\"", "\"type\": \"llm_call\"")) ==
        "x.json:3: [0].type: unknown entry type \"llm_call\" (known: llm_request, tool_call, mcp)");
  CHECK(agent_error(with(kSeedMultiAgent, "\"annotation\": \"Security analysis agent\"",
                         "\"annotation\": \"Security analysis agent\", \"response\": 1")) ==
        "x.json:14: [0].response: duplicate key");
  std::string no_response = kSeedMultiAgent;
  auto from = no_response.find("\"response\"");
  auto to = no_response.find("\"model\": \"claude-3-sonnet\",\n    \"annotation\"");
  no_response.erase(from, to - from);
  CHECK(agent_error(no_response) == "x.json:2: [0].response: required field is missing");
  CHECK(agent_error(R"([{"type": "tool_call", "tool_name": "ls", "arguments": "-l", "result": ""}])") ==
        "x.json:1: [0].arguments: expected an object, got string \"-l\"");
  CHECK(agent_error(R"([])") == "x.json:1: expected at least one entry");
  CHECK(agent_error(R"({"type": "mcp"})") ==
        "x.json:1: an entry ({\"type\": ...}) on its own: an agent trace of entries is a list of them");
  CHECK(agent_error(R"("hello")") == "x.json:1: expected a conversation object or a list of entries, got string \"hello\"");
  // Arguments the model wrote that are not JSON are kept, with a warning.
  kb::Diagnostics w;
  REQUIRE(read_agent_trace(with(kSeedToolCall, R"({\"location\": \"New York, NY\"})", "{location"), "x.json", &w).ok());
  REQUIRE(w.warning_count() == 1);
  CHECK(w.items()[0].to_string() ==
        "x.json:18: warning: conversation[1].tool_calls[0].function.arguments: is not valid JSON (kept as the model wrote it)");
}

TEST_CASE("the schema set's text as printed (trailing commas) is refused with the line and column") {
  std::string printed = with(kSeedSuccess, "\"max_diff\": 1e-6", "\"max_diff\": 1e-6,");
  kb::Diagnostics d;
  auto r = read_benchmark_result(printed, "seed.json", &d);
  REQUIRE(!r.ok());
  CHECK(r.error().code == kb::Code::parse_error);
  CHECK(r.error().message == "seed.json: invalid JSON: line 11, column 1: expected a string key after ',', found '}'");
}

TEST_CASE("sniff tells the three apart from definitions, solutions and other JSON") {
  CHECK(sniff(R"({"name": "x", "op_type": "gemm", "axes": {}})") == Kind::none);
  CHECK(sniff(R"({"name": "x", "spec": {}, "sources": []})") == Kind::none);
  CHECK(sniff(R"([1, 2])") == Kind::none);
  CHECK(sniff(R"([])") == Kind::none);
  CHECK(sniff("not json") == Kind::none);
  CHECK(sniff(R"({"type": "tool_call"})") == Kind::agent_trace);
}

TEST_CASE("the locator finds lines of values, of missing fields' objects, and of quoted keys") {
  std::string text = "{\n  \"a\": [\n    1,\n    {\"b\": 2}\n  ],\n  \"c.d\": {\n    \"e\": \"\\u00e9\\\"\"\n  }\n}";
  Locator l(text, "f.json");
  CHECK(l.line("") == 1);
  CHECK(l.line("a") == 2);
  CHECK(l.line("a[0]") == 3);
  CHECK(l.line("a[1].b") == 4);
  CHECK(l.line("a[1].missing") == 4);
  CHECK(l.line("a[7]") == 2);
  CHECK(l.line("[\"c.d\"]") == 6);
  CHECK(l.line("[\"c.d\"].e") == 7);
  CHECK(l.line("[\"c.d\"].zz") == 6);
  CHECK(l.at("a[0]") == "f.json:3");
  CHECK(Locator("", "g.json").at("x") == "g.json");
}
