// kb_workload, kb_solution and kb_result (one Trace record): loading and
// read-only accessors.
#include <fmt/format.h>

#include <memory>

#include "capi.hpp"
#include "schema/io.hpp"
#include "schema/validate.hpp"

using kb::capi::fail;

namespace {

std::unique_ptr<kb_workload> make_workload(kb::Workload&& w, std::optional<std::string> definition) {
  auto h = std::make_unique<kb_workload>();
  h->workload = std::move(w);
  h->definition = std::move(definition);
  h->json = kb::to_json(h->workload, false);
  return h;
}

std::unique_ptr<kb_solution> make_solution(kb::Solution&& s) {
  auto h = std::make_unique<kb_solution>();
  h->solution = std::move(s);
  h->json = kb::to_json(h->solution, true);
  return h;
}

kb_status finish_solution(kb::Result<kb::Solution>&& r, kb_solution** out) {
  if (!r) return fail(r.error());
  *out = make_solution(std::move(r).value()).release();
  return KB_OK;
}

const char* opt_c_str(const std::optional<std::string>& s) { return s ? s->c_str() : nullptr; }

}  // namespace

extern "C" {

// ---- Workloads -----------------------------------------------------------------

KB_API kb_status kb_workload_load(kb_context* ctx, const char* json, size_t len, kb_workload** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(json);
  return kb::capi::guarded(__func__, [&] {
    auto r = kb::read_workload(std::string_view(json, len), kb::capi::memory_origin);
    if (!r) return fail(r.error());
    *out = make_workload(std::move(r).value(), std::nullopt).release();
    return KB_OK;
  });
}

KB_API kb_status kb_workload_load_trace_line(kb_context* ctx, const char* line, size_t len, kb_workload** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(line);
  return kb::capi::guarded(__func__, [&] {
    auto r = kb::read_trace(std::string_view(line, len), kb::capi::memory_origin);
    if (!r) return fail(r.error());
    kb::Trace t = std::move(r).value();
    *out = make_workload(std::move(t.workload), std::move(t.definition)).release();
    return KB_OK;
  });
}

KB_API void kb_workload_destroy(kb_workload* workload) { delete workload; }

KB_API const char* kb_workload_uuid(const kb_workload* workload) {
  KB_CAPI_REQUIRE_OR(workload, nullptr);
  return workload->workload.uuid.c_str();
}

KB_API const char* kb_workload_definition(const kb_workload* workload) {
  KB_CAPI_REQUIRE_OR(workload, nullptr);
  return opt_c_str(workload->definition);
}

KB_API const char* kb_workload_json(const kb_workload* workload) {
  KB_CAPI_REQUIRE_OR(workload, nullptr);
  return workload->json.c_str();
}

KB_API size_t kb_workload_axis_count(const kb_workload* workload) {
  KB_CAPI_REQUIRE_OR(workload, 0);
  return workload->workload.axes.size();
}

KB_API kb_status kb_workload_axis(const kb_workload* workload, size_t index, const char** name, int64_t* value) {
  KB_CAPI_REQUIRE(workload);
  const auto& axes = workload->workload.axes;
  if (index >= axes.size()) return kb::capi::bad_index(__func__, "axis", index, axes.size());
  if (name) *name = axes[index].first.c_str();
  if (value) *value = axes[index].second;
  return KB_OK;
}

KB_API size_t kb_workload_input_count(const kb_workload* workload) {
  KB_CAPI_REQUIRE_OR(workload, 0);
  return workload->workload.inputs.size();
}

KB_API kb_status kb_workload_input(const kb_workload* workload, size_t index, kb_workload_input_info* out) {
  KB_CAPI_REQUIRE(workload);
  KB_CAPI_REQUIRE(out);
  KB_CAPI_REQUIRE_STRUCT(out, kb_workload_input_info, "KB_WORKLOAD_INPUT_INFO_INIT");
  const auto& inputs = workload->workload.inputs;
  if (index >= inputs.size()) return kb::capi::bad_index(__func__, "input", index, inputs.size());
  const auto& [name, in] = inputs[index];
  out->name = name.c_str();
  out->kind = static_cast<kb_input_kind>(in.kind);
  out->scalar_kind = KB_SCALAR_INT;
  out->int_value = 0;
  out->float_value = 0.0;
  out->path = nullptr;
  out->tensor_key = nullptr;
  if (in.kind == kb::InputKind::scalar) {
    if (const auto* i = std::get_if<std::int64_t>(&in.value)) {
      out->int_value = *i;
      out->float_value = static_cast<double>(*i);
    } else if (const auto* f = std::get_if<double>(&in.value)) {
      out->scalar_kind = KB_SCALAR_FLOAT;
      out->float_value = *f;
    } else {
      bool b = std::get<bool>(in.value);
      out->scalar_kind = KB_SCALAR_BOOL;
      out->int_value = b ? 1 : 0;
      out->float_value = b ? 1.0 : 0.0;
    }
  } else if (in.kind == kb::InputKind::safetensors) {
    out->path = in.path.c_str();
    out->tensor_key = in.tensor_key.c_str();
  }
  return KB_OK;
}

KB_API kb_status kb_workload_check(const kb_workload* workload, const kb_definition* def) {
  KB_CAPI_REQUIRE(workload);
  KB_CAPI_REQUIRE(def);
  return kb::capi::guarded(__func__, [&] {
    if (workload->definition && *workload->definition != def->def.name)
      return fail(KB_ERROR_INVALID_DATA,
                  fmt::format("workload {} belongs to definition \"{}\", not \"{}\"", workload->workload.uuid,
                              *workload->definition, def->def.name));
    kb::CheckContext ctx;
    ctx.path = "workload";
    kb::Diagnostics diags;
    kb::validate_workload_against(workload->workload, def->def, ctx, diags);
    std::size_t errors = diags.error_count();
    if (errors == 0) return KB_OK;
    std::string message = diags.first_error();
    if (errors > 1) message += fmt::format(" (and {} more error{})", errors - 1, errors == 2 ? "" : "s");
    return fail(KB_ERROR_INVALID_DATA, message);
  });
}

// ---- Solutions -----------------------------------------------------------------

KB_API kb_status kb_solution_load(kb_context* ctx, const char* json, size_t len, kb_solution** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(json);
  return kb::capi::guarded(__func__, [&] {
    return finish_solution(kb::read_solution(std::string_view(json, len), kb::capi::memory_origin), out);
  });
}

KB_API kb_status kb_solution_load_file(kb_context* ctx, const char* path, kb_solution** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(path);
  return kb::capi::guarded(__func__, [&] { return finish_solution(kb::read_solution_file(path), out); });
}

KB_API void kb_solution_destroy(kb_solution* solution) { delete solution; }

KB_API const char* kb_solution_name(const kb_solution* solution) {
  KB_CAPI_REQUIRE_OR(solution, nullptr);
  return solution->solution.name.c_str();
}

KB_API const char* kb_solution_definition(const kb_solution* solution) {
  KB_CAPI_REQUIRE_OR(solution, nullptr);
  return solution->solution.definition.c_str();
}

KB_API const char* kb_solution_author(const kb_solution* solution) {
  KB_CAPI_REQUIRE_OR(solution, nullptr);
  return solution->solution.author.c_str();
}

KB_API const char* kb_solution_description(const kb_solution* solution) {
  KB_CAPI_REQUIRE_OR(solution, nullptr);
  return opt_c_str(solution->solution.description);
}

KB_API const char* kb_solution_language(const kb_solution* solution) {
  KB_CAPI_REQUIRE_OR(solution, nullptr);
  return solution->solution.spec.language.c_str();
}

KB_API const char* kb_solution_entry_point(const kb_solution* solution) {
  KB_CAPI_REQUIRE_OR(solution, nullptr);
  return solution->solution.spec.entry_point.c_str();
}

KB_API const char* kb_solution_json(const kb_solution* solution) {
  KB_CAPI_REQUIRE_OR(solution, nullptr);
  return solution->json.c_str();
}

KB_API size_t kb_solution_source_count(const kb_solution* solution) {
  KB_CAPI_REQUIRE_OR(solution, 0);
  return solution->solution.sources.size();
}

KB_API kb_status kb_solution_source(const kb_solution* solution, size_t index, kb_source_info* out) {
  KB_CAPI_REQUIRE(solution);
  KB_CAPI_REQUIRE(out);
  KB_CAPI_REQUIRE_STRUCT(out, kb_source_info, "KB_SOURCE_INFO_INIT");
  const auto& sources = solution->solution.sources;
  if (index >= sources.size()) return kb::capi::bad_index(__func__, "source", index, sources.size());
  out->path = sources[index].path.c_str();
  out->content = sources[index].content.c_str();
  out->content_size = sources[index].content.size();
  return KB_OK;
}

// ---- Results -------------------------------------------------------------------

KB_API const char* kb_eval_status_name(kb_eval_status status) {
  const std::int64_t v = kb::capi::enum_bits(status);
  if (v < KB_EVAL_PASSED || v > KB_EVAL_TIMEOUT) {
    kb::capi::guarded(__func__, [&] {
      return fail(KB_ERROR_INVALID_ARGUMENT, fmt::format("kb_eval_status_name: {} is not a kb_eval_status", v));
    });
    return nullptr;
  }
  // eval_status_name returns views of string literals, so data() is NUL-terminated.
  return kb::eval_status_name(static_cast<kb::EvalStatus>(static_cast<int>(v))).data();
}

KB_API kb_status kb_result_load(kb_context* ctx, const char* json_line, size_t len, kb_result** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(json_line);
  return kb::capi::guarded(__func__, [&] {
    auto r = kb::read_trace(std::string_view(json_line, len), kb::capi::memory_origin);
    if (!r) return fail(r.error());
    auto h = std::make_unique<kb_result>();
    h->trace = std::move(r).value();
    h->json = kb::to_json(h->trace, false);
    *out = h.release();
    return KB_OK;
  });
}

KB_API void kb_result_destroy(kb_result* result) { delete result; }

KB_API kb_status kb_result_get(const kb_result* result, kb_result_info* out) {
  KB_CAPI_REQUIRE(result);
  KB_CAPI_REQUIRE(out);
  KB_CAPI_REQUIRE_STRUCT(out, kb_result_info, "KB_RESULT_INFO_INIT");
  const kb::Trace& t = result->trace;
  out->definition = t.definition.c_str();
  out->solution = opt_c_str(t.solution);
  out->workload_uuid = t.workload.uuid.c_str();
  out->has_evaluation = t.evaluation ? 1 : 0;
  out->status = KB_EVAL_PASSED;
  out->hardware = nullptr;
  out->timestamp = nullptr;
  out->log = nullptr;
  out->has_correctness = 0;
  out->max_relative_error = 0.0;
  out->max_absolute_error = 0.0;
  out->has_performance = 0;
  out->latency_ms = 0.0;
  out->reference_latency_ms = 0.0;
  out->speedup_factor = 0.0;
  if (const auto& e = t.evaluation) {
    out->status = static_cast<kb_eval_status>(e->status);
    out->hardware = e->environment.hardware.c_str();
    out->timestamp = e->timestamp.c_str();
    out->log = e->log.c_str();
    if (e->correctness) {
      out->has_correctness = 1;
      out->max_relative_error = e->correctness->max_relative_error;
      out->max_absolute_error = e->correctness->max_absolute_error;
    }
    if (e->performance) {
      out->has_performance = 1;
      out->latency_ms = e->performance->latency_ms;
      out->reference_latency_ms = e->performance->reference_latency_ms;
      out->speedup_factor = e->performance->speedup_factor;
    }
  }
  return KB_OK;
}

KB_API const char* kb_result_json(const kb_result* result) {
  KB_CAPI_REQUIRE_OR(result, nullptr);
  return result->json.c_str();
}

}  // extern "C"
