// kb_calling_record, kb_benchmark_result and kb_agent_trace: loading, read-only accessors and
// checking a calling record against definitions (lib/model).
#include <fmt/format.h>

#include <map>
#include <memory>

#include "capi.hpp"
#include "estimate/estimate.hpp"
#include "json/json.hpp"
#include "model/records.hpp"

using kb::capi::fail;

struct kb_calling_record {
  kb::model::CallingRecord record;
  kb::model::Locator where;  // lines of the text it was read from, for kb_calling_record_check's messages
  std::string json;
  std::string framework;
  // kb_kernel_call_info's arrays, per kernel.
  std::vector<std::vector<const char*>> axis_names;
  std::vector<std::vector<std::int64_t>> axis_values;
};

struct kb_benchmark_result {
  kb::model::BenchmarkResult result;
  std::string json;
};

struct kb_agent_trace {
  kb::model::AgentTrace trace;
  std::string json;
  struct Entry {
    std::string json;
    std::string response_json;  // empty: no response
    std::vector<std::string> tool_calls_json;  // per message; empty: none
  };
  std::vector<Entry> entries;
};

namespace {

const char* opt_c_str(const std::optional<std::string>& s) { return s ? s->c_str() : nullptr; }

// Shared by the load and load_file entry points of the three handles.
template <class H, class Make>
kb_status load(const char* function, kb_context* ctx, std::string_view text, std::string_view origin, H** out,
               Make make) {
  (void)ctx;
  return kb::capi::guarded(function, [&] {
    auto h = make(text, origin);
    if (!h) return fail(h.error());
    *out = h.value().release();
    return KB_OK;
  });
}

kb::Result<std::unique_ptr<kb_calling_record>> make_record(std::string_view text, std::string_view origin) {
  auto r = kb::model::read_calling_record(text, origin);
  if (!r) return std::move(r).error();
  auto h = std::make_unique<kb_calling_record>();
  h->record = std::move(r).value();
  h->where = kb::model::Locator(text, std::string(origin));
  h->json = kb::model::to_json(h->record, true);
  h->framework = std::string(kb::model::framework_name(h->record.framework));
  for (const auto& k : h->record.kernels) {
    auto& names = h->axis_names.emplace_back();
    auto& values = h->axis_values.emplace_back();
    for (const auto& [name, value] : k.axes) {
      names.push_back(name.c_str());
      values.push_back(value);
    }
  }
  return h;
}

kb::Result<std::unique_ptr<kb_benchmark_result>> make_result(std::string_view text, std::string_view origin) {
  auto r = kb::model::read_benchmark_result(text, origin);
  if (!r) return std::move(r).error();
  auto h = std::make_unique<kb_benchmark_result>();
  h->result = std::move(r).value();
  h->json = kb::model::to_json(h->result, true);
  return h;
}

kb::Result<std::unique_ptr<kb_agent_trace>> make_trace(std::string_view text, std::string_view origin) {
  auto r = kb::model::read_agent_trace(text, origin);
  if (!r) return std::move(r).error();
  auto h = std::make_unique<kb_agent_trace>();
  h->trace = std::move(r).value();
  h->json = kb::model::to_json(h->trace, true);
  for (const auto& e : h->trace.entries) {
    auto& entry = h->entries.emplace_back();
    entry.json = kb::model::entry_json(e);
    if (const auto* q = std::get_if<kb::model::LlmRequest>(&e)) {
      if (q->response) entry.response_json = kb::model::to_json(*q->response);
      for (const auto& m : q->conversation)
        entry.tool_calls_json.push_back(m.tool_calls.empty() ? std::string() : kb::model::tool_calls_json(m.tool_calls));
    }
  }
  return h;
}

template <class Make, class H>
kb_status load_file(const char* function, kb_context* ctx, const char* path, H** out, Make make) {
  return kb::capi::guarded(function, [&] {
    auto text = kb::json::read_text_file(path);
    if (!text) return fail(text.error());
    return load(function, ctx, *text, path, out, make);
  });
}

}  // namespace

extern "C" {

// ---- Kernel Calling Records ----------------------------------------------------

KB_API kb_status kb_calling_record_load(kb_context* ctx, const char* json, size_t len, kb_calling_record** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(json);
  return load(__func__, ctx, std::string_view(json, len), kb::capi::memory_origin, out, make_record);
}

KB_API kb_status kb_calling_record_load_file(kb_context* ctx, const char* path, kb_calling_record** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(path);
  return load_file(__func__, ctx, path, out, make_record);
}

KB_API void kb_calling_record_destroy(kb_calling_record* record) { delete record; }

KB_API const char* kb_calling_record_model(const kb_calling_record* record) {
  KB_CAPI_REQUIRE_OR(record, nullptr);
  return record->record.model.c_str();
}

KB_API const char* kb_calling_record_framework(const kb_calling_record* record) {
  KB_CAPI_REQUIRE_OR(record, nullptr);
  return record->framework.c_str();
}

KB_API const char* kb_calling_record_json(const kb_calling_record* record) {
  KB_CAPI_REQUIRE_OR(record, nullptr);
  return record->json.c_str();
}

KB_API const char* kb_calling_record_step(const kb_calling_record* record) {
  KB_CAPI_REQUIRE_OR(record, nullptr);
  return opt_c_str(record->record.step);
}

KB_API const char* kb_calling_record_source(const kb_calling_record* record) {
  KB_CAPI_REQUIRE_OR(record, nullptr);
  return opt_c_str(record->record.source);
}

KB_API size_t kb_calling_record_kernel_count(const kb_calling_record* record) {
  KB_CAPI_REQUIRE_OR(record, 0);
  return record->record.kernels.size();
}

KB_API kb_status kb_calling_record_kernel(const kb_calling_record* record, size_t index, kb_kernel_call_info* out) {
  KB_CAPI_REQUIRE(record);
  KB_CAPI_REQUIRE(out);
  KB_CAPI_REQUIRE_STRUCT(out, kb_kernel_call_info, "KB_KERNEL_CALL_INFO_INIT");
  const auto& kernels = record->record.kernels;
  if (index >= kernels.size()) return kb::capi::bad_index(__func__, "kernel", index, kernels.size());
  const auto& k = kernels[index];
  out->id = k.id.c_str();
  out->count = k.count;
  out->axis_count = k.axes.size();
  out->axis_names = k.axes.empty() ? nullptr : record->axis_names[index].data();
  out->axis_values = k.axes.empty() ? nullptr : record->axis_values[index].data();
  out->notes = opt_c_str(k.notes);
  return KB_OK;
}

KB_API kb_status kb_calling_record_check(const kb_calling_record* record, const kb_definition* const* defs,
                                         size_t n_defs) {
  KB_CAPI_REQUIRE(record);
  if (n_defs > 0) KB_CAPI_REQUIRE(defs);
  return kb::capi::guarded(__func__, [&] {
    std::map<std::string, const kb::Definition*, std::less<>> by_name;
    for (size_t i = 0; i < n_defs; ++i)
      if (defs[i]) by_name.emplace(defs[i]->def.name, &defs[i]->def);
    std::vector<std::string> known;
    for (const auto& [name, d] : by_name) known.push_back(name);
    kb::Diagnostics diags;
    std::size_t errors = kb::model::check_calling_record(
        record->record,
        [&](std::string_view n) -> const kb::Definition* {
          auto it = by_name.find(n);
          return it == by_name.end() ? nullptr : it->second;
        },
        known, record->where, diags);
    if (errors == 0) return KB_OK;
    std::string first = diags.first_error();
    if (errors > 1) first += fmt::format(" (and {} more error{})", errors - 1, errors == 2 ? "" : "s");
    return fail(KB_ERROR_INVALID_DATA, first);
  });
}

// ---- Benchmark Results ----------------------------------------------------------

KB_API kb_status kb_benchmark_result_load(kb_context* ctx, const char* json, size_t len, kb_benchmark_result** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(json);
  return load(__func__, ctx, std::string_view(json, len), kb::capi::memory_origin, out, make_result);
}

KB_API kb_status kb_benchmark_result_load_file(kb_context* ctx, const char* path, kb_benchmark_result** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(path);
  return load_file(__func__, ctx, path, out, make_result);
}

KB_API void kb_benchmark_result_destroy(kb_benchmark_result* result) { delete result; }

KB_API const char* kb_benchmark_result_json(const kb_benchmark_result* result) {
  KB_CAPI_REQUIRE_OR(result, nullptr);
  return result->json.c_str();
}

KB_API kb_status kb_benchmark_result_get(const kb_benchmark_result* result, kb_benchmark_result_info* out) {
  KB_CAPI_REQUIRE(result);
  KB_CAPI_REQUIRE(out);
  KB_CAPI_REQUIRE_STRUCT(out, kb_benchmark_result_info, "KB_BENCHMARK_RESULT_INFO_INIT");
  const auto& r = result->result;
  out->device_name = r.device_name.c_str();
  out->kernel_id = r.kernel_id.c_str();
  out->source = r.source.c_str();
  out->compiled = r.compiled ? 1 : 0;
  out->has_time = r.time ? 1 : 0;
  out->time_ms = r.time.value_or(0.0);
  out->has_speedup = r.speedup ? 1 : 0;
  out->speedup = r.speedup.value_or(0.0);
  out->has_max_diff = r.max_diff ? 1 : 0;
  out->max_diff = r.max_diff.value_or(0.0);
  out->compile_error = opt_c_str(r.compile_error);
  return KB_OK;
}

// ---- Agent traces ------------------------------------------------------------------

KB_API kb_status kb_agent_trace_load(kb_context* ctx, const char* json, size_t len, kb_agent_trace** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(json);
  return load(__func__, ctx, std::string_view(json, len), kb::capi::memory_origin, out, make_trace);
}

KB_API kb_status kb_agent_trace_load_file(kb_context* ctx, const char* path, kb_agent_trace** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(path);
  return load_file(__func__, ctx, path, out, make_trace);
}

KB_API void kb_agent_trace_destroy(kb_agent_trace* trace) { delete trace; }

KB_API const char* kb_agent_trace_json(const kb_agent_trace* trace) {
  KB_CAPI_REQUIRE_OR(trace, nullptr);
  return trace->json.c_str();
}

KB_API int kb_agent_trace_is_conversation(const kb_agent_trace* trace) {
  KB_CAPI_REQUIRE_OR(trace, 0);
  return trace->trace.form == kb::model::AgentTrace::Form::conversation ? 1 : 0;
}

KB_API size_t kb_agent_trace_entry_count(const kb_agent_trace* trace) {
  KB_CAPI_REQUIRE_OR(trace, 0);
  return trace->trace.entries.size();
}

KB_API kb_status kb_agent_trace_entry(const kb_agent_trace* trace, size_t index, kb_agent_entry_info* out) {
  KB_CAPI_REQUIRE(trace);
  KB_CAPI_REQUIRE(out);
  KB_CAPI_REQUIRE_STRUCT(out, kb_agent_entry_info, "KB_AGENT_ENTRY_INFO_INIT");
  const auto& entries = trace->trace.entries;
  if (index >= entries.size()) return kb::capi::bad_index(__func__, "entry", index, entries.size());
  const size_t size = out->struct_size;
  *out = kb_agent_entry_info KB_AGENT_ENTRY_INFO_INIT;
  out->struct_size = size;
  const auto& e = entries[index];
  const auto& h = trace->entries[index];
  out->json = h.json.c_str();
  if (const auto* q = std::get_if<kb::model::LlmRequest>(&e)) {
    out->kind = KB_AGENT_LLM_REQUEST;
    out->model = q->model.c_str();
    out->annotation = opt_c_str(q->annotation);
    out->message_count = q->conversation.size();
    if (q->response) {
      out->response_json = h.response_json.c_str();
      if (!q->response->choices.empty()) {
        out->response_content = opt_c_str(q->response->choices[0].message.content);
        out->finish_reason = opt_c_str(q->response->choices[0].finish_reason);
      }
    }
  } else if (const auto* c = std::get_if<kb::model::ToolCall>(&e)) {
    out->kind = KB_AGENT_TOOL_CALL;
    out->tool_name = c->tool_name.c_str();
    out->arguments_json = c->arguments.c_str();
    out->result = c->result.c_str();
    out->cli_output = opt_c_str(c->cli_output);
  } else {
    out->kind = KB_AGENT_MCP;
  }
  return KB_OK;
}

KB_API kb_status kb_agent_trace_message(const kb_agent_trace* trace, size_t entry, size_t message,
                                        kb_agent_message_info* out) {
  KB_CAPI_REQUIRE(trace);
  KB_CAPI_REQUIRE(out);
  KB_CAPI_REQUIRE_STRUCT(out, kb_agent_message_info, "KB_AGENT_MESSAGE_INFO_INIT");
  const auto& entries = trace->trace.entries;
  if (entry >= entries.size()) return kb::capi::bad_index(__func__, "entry", entry, entries.size());
  const auto* q = std::get_if<kb::model::LlmRequest>(&entries[entry]);
  if (!q)
    return fail(KB_ERROR_INVALID_ARGUMENT,
                fmt::format("{}: entry {} is not an llm_request: it has no messages", __func__, entry));
  if (message >= q->conversation.size())
    return kb::capi::bad_index(__func__, "message", message, q->conversation.size());
  const auto& m = q->conversation[message];
  const auto& calls = trace->entries[entry].tool_calls_json[message];
  out->role = kb::model::role_name(m.role).data();  // static strings
  out->content = opt_c_str(m.content);
  out->content_parts_json = opt_c_str(m.content_parts);
  out->name = opt_c_str(m.name);
  out->tool_call_count = m.tool_calls.size();
  out->tool_calls_json = calls.empty() ? nullptr : calls.c_str();
  out->tool_call_id = opt_c_str(m.tool_call_id);
  return KB_OK;
}

}  // extern "C"

// ---- Estimates ------------------------------------------------------------------------


struct kb_estimate {
  kb::estimate::Estimate estimate;
  std::string json;
};

extern "C" {

KB_API kb_status kb_estimate_create(kb_context* ctx, const kb_calling_record* record, const char* const* trace_paths,
                                    size_t n_paths, const kb_estimate_options* opts, kb_estimate** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(record);
  KB_CAPI_REQUIRE(trace_paths);
  if (n_paths == 0) return fail(KB_ERROR_INVALID_ARGUMENT, fmt::format("{}: no traces path given (n_paths is 0)", __func__));
  if (opts) KB_CAPI_REQUIRE_STRUCT(opts, kb_estimate_options, "KB_ESTIMATE_OPTIONS_INIT");
  return kb::capi::guarded(__func__, [&] {
    kb::estimate::Options o;
    if (opts && opts->hardware) o.hardware = opts->hardware;
    if (opts && opts->baseline) o.baseline = opts->baseline;
    std::vector<std::string> paths;
    for (size_t i = 0; i < n_paths; ++i) {
      if (!trace_paths[i])
        return fail(KB_ERROR_INVALID_ARGUMENT, fmt::format("{}: trace_paths[{}] is NULL", __func__, i));
      paths.emplace_back(trace_paths[i]);
    }
    auto e = kb::estimate::estimate(record->record, paths, o);
    if (!e) return fail(e.error());
    auto h = std::make_unique<kb_estimate>();
    h->estimate = std::move(e).value();
    h->json = kb::estimate::to_json(h->estimate, true);
    *out = h.release();
    return KB_OK;
  });
}

KB_API void kb_estimate_destroy(kb_estimate* estimate) { delete estimate; }

KB_API const char* kb_estimate_json(const kb_estimate* estimate) {
  KB_CAPI_REQUIRE_OR(estimate, nullptr);
  return estimate->json.c_str();
}

KB_API kb_status kb_estimate_get(const kb_estimate* estimate, kb_estimate_info* out) {
  KB_CAPI_REQUIRE(estimate);
  KB_CAPI_REQUIRE(out);
  KB_CAPI_REQUIRE_STRUCT(out, kb_estimate_info, "KB_ESTIMATE_INFO_INIT");
  const auto& e = estimate->estimate;
  out->hardware = e.hardware.c_str();
  out->baseline = e.baseline.c_str();
  out->records = e.records;
  out->kernel_count = e.kernels.size();
  out->measured_count = e.measured;
  out->baseline_ms = e.baseline_ms;
  out->best_ms = e.best_ms;
  out->speedup = e.speedup;
  return KB_OK;
}

KB_API kb_status kb_estimate_kernel(const kb_estimate* estimate, size_t index, kb_kernel_estimate_info* out) {
  KB_CAPI_REQUIRE(estimate);
  KB_CAPI_REQUIRE(out);
  KB_CAPI_REQUIRE_STRUCT(out, kb_kernel_estimate_info, "KB_KERNEL_ESTIMATE_INFO_INIT");
  const auto& kernels = estimate->estimate.kernels;
  if (index >= kernels.size()) return kb::capi::bad_index(__func__, "kernel", index, kernels.size());
  const auto& k = kernels[index];
  out->id = k.id.c_str();
  out->count = k.count;
  out->measured = k.measured ? 1 : 0;
  out->reason = k.measured ? nullptr : k.reason.c_str();
  out->exact = k.exact ? 1 : 0;
  out->distance = k.distance;
  out->baseline_ms = k.baseline_ms;
  out->best_solution = k.measured ? k.best_solution.c_str() : nullptr;
  out->best_ms = k.best_ms;
  out->baseline_step_ms = k.baseline_step_ms;
  out->best_step_ms = k.best_step_ms;
  out->baseline_share = k.baseline_share;
  out->best_share = k.best_share;
  out->speedup = k.speedup;
  return KB_OK;
}

}  // extern "C"
