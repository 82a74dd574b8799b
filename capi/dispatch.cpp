// kb_dispatch: a solution per call, chosen from recorded traces
// (lib/dispatch/dispatch_table.hpp), run through kb_solution_run's path.
#include <cstddef>
#include <fmt/format.h>

#include <memory>

#include "capi.hpp"
#include "dispatch/dispatch_table.hpp"
#include "harness/implementation.hpp"
#include "oracle/oracle.hpp"

using kb::capi::fail;

struct kb_dispatch {
  kb_definition* def = nullptr;  // kb's own copy, reloaded from the caller's JSON
  kb::dispatch::Table table;
  kb::Implementation reference;                // the CPU default when kb has no CPU solution
  const kb::Implementation* fallback_cpu = nullptr;   // nullptr: none
  const kb::Implementation* fallback_cuda = nullptr;
  bool exact = false;
  kb::capi::CallSettings call;  // the creating context's settings and log callback, for kb_dispatch_run
  ~kb_dispatch() { kb_definition_destroy(def); }
};

namespace {

bool on_cuda(const DLTensor* const* tensors, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (tensors[i] && kb::capi::device_type_of(*tensors[i]) == kDLCUDA) return true;
  return false;
}

struct Choice {
  const kb::Implementation* impl = nullptr;
  const kb::dispatch::Entry* entry = nullptr;  // nullptr: the fallback
  bool exact = false;
};

kb_status choose(const char* function, const kb_dispatch* d, const DLTensor* const* inputs, size_t n_inputs,
                 const DLTensor* const* outputs, size_t n_outputs, kb::capi::CallAxes& axes, Choice& choice) {
  kb_check_result check = KB_CHECK_RESULT_INIT;
  check.axis_values = axes.span().data();
  check.axis_capacity = axes.span().size();
  if (kb_status st = kb_definition_check_tensors(d->def, inputs, n_inputs, outputs, n_outputs, &check); st != KB_OK)
    return st;  // message already recorded
  const bool cuda = on_cuda(inputs, n_inputs) || on_cuda(outputs, n_outputs);
  const auto& entries = cuda ? d->table.cuda : d->table.cpu;
  choice.entry = kb::dispatch::nearest(d->table, entries, axes.span(), d->exact);
  if (choice.entry) {
    choice.impl = choice.entry->impl;
    choice.exact = true;
    for (std::size_t i = 0; i < d->table.var_axes.size(); ++i)
      if (choice.entry->var_values[i] != axes[d->table.var_axes[i]]) choice.exact = false;
    return KB_OK;
  }
  choice.impl = cuda ? d->fallback_cuda : d->fallback_cpu;
  if (!choice.impl)
    return fail(KB_ERROR_UNSUPPORTED,
                fmt::format("{}: {}: no {} solution was recorded for these tensors and kb has none of this definition",
                            function, d->def->def.name, cuda ? "CUDA" : "CPU"));
  return KB_OK;
}

}  // namespace

extern "C" {

KB_API kb_status kb_dispatch_create(kb_context* ctx, const kb_definition* def, const char* traces,
                                    const kb_dispatch_options* opts, kb_dispatch** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(def);
  KB_CAPI_REQUIRE(traces);
  return kb::capi::guarded(__func__, [&]() -> kb_status {
    kb_dispatch_options o = KB_DISPATCH_OPTIONS_INIT;
    if (opts) {
      // Version 1 ended at flags; a caller built against it gets the default tie_margin.
      constexpr std::size_t kOptionsV1Size = offsetof(kb_dispatch_options, flags) + sizeof(uint32_t);
      if (kb_status s = kb::capi::read_grown_struct("kb_dispatch_create", "opts", opts, kOptionsV1Size,
                                                    "KB_DISPATCH_OPTIONS_INIT", o);
          s != KB_OK)
        return s;
    }
    if (o.flags & ~KB_DISPATCH_EXACT)
      return fail(KB_ERROR_INVALID_ARGUMENT, fmt::format("kb_dispatch_create: unknown flags 0x{:x}", o.flags));
    if (!(o.tie_margin >= 0 && o.tie_margin <= 1))  // NaN fails both
      return fail(KB_ERROR_INVALID_ARGUMENT,
                  fmt::format("kb_dispatch_create: opts->tie_margin {} is not in [0, 1]", o.tie_margin));
    auto h = std::make_unique<kb_dispatch>();
    if (kb_status s = kb_definition_load(ctx, def->json.data(), def->json.size(), &h->def); s != KB_OK) return s;
    const kb::Definition& d = h->def->def;
    h->exact = (o.flags & KB_DISPATCH_EXACT) != 0;
    h->call = ctx->call;
    const kb::Registry& registry = kb::builtin_registry();

    kb::dispatch::TableOptions table_options;
    if (o.hardware) table_options.hardware = o.hardware;
    table_options.tie_margin = o.tie_margin;
    auto table = kb::dispatch::build_table(d, traces, table_options, registry);
    if (!table) return fail(table.error());
    h->table = std::move(*table);

    // Defaults: kb's first solution of the definition on each device kind (the
    // registry lists the general one first, e.g. kb_cuda_gemm before kb_cuda_gemv),
    // kb's oracle on the CPU when kb has no CPU solution.
    for (const kb::Implementation& impl : registry.all()) {
      if (impl.outside || (impl.supports && !impl.supports(d).empty())) continue;
      auto& slot = impl.device == kb::Device::cpu ? h->fallback_cpu : h->fallback_cuda;
      if (!slot) slot = &impl;
    }
    if (!h->fallback_cpu) {
      h->reference = kb::reference_implementation();
      if (h->reference.supports(d).empty()) h->fallback_cpu = &h->reference;
    }
    if (o.fallback) {
      const kb::Implementation* impl = registry.find(o.fallback);
      if (!impl || impl->outside)
        return fail(KB_ERROR_NOT_FOUND,
                    fmt::format("kb_dispatch_create: fallback: no solution \"{}\" (see kb bench --list)", o.fallback));
      if (auto why = impl->supports(d); !why.empty())
        return fail(KB_ERROR_UNSUPPORTED,
                    fmt::format("kb_dispatch_create: fallback: {} does not handle {}: {}", impl->name, d.name, why));
      (impl->device == kb::Device::cpu ? h->fallback_cpu : h->fallback_cuda) = impl;
    }
    *out = h.release();
    return KB_OK;
  });
}

KB_API void kb_dispatch_destroy(kb_dispatch* dispatch) { delete dispatch; }

KB_API size_t kb_dispatch_entry_count(const kb_dispatch* dispatch) {
  return dispatch ? dispatch->table.cpu.size() + dispatch->table.cuda.size() : 0;
}

KB_API kb_status kb_dispatch_choose(const kb_dispatch* dispatch, const DLTensor* const* inputs, size_t n_inputs,
                                    const DLTensor* const* outputs, size_t n_outputs, kb_dispatch_choice* out) {
  KB_CAPI_REQUIRE(dispatch);
  KB_CAPI_REQUIRE(out);
  if (out->struct_size < sizeof(kb_dispatch_choice))
    return kb::capi::short_struct(__func__, "out", out->struct_size, sizeof(kb_dispatch_choice),
                                  "KB_DISPATCH_CHOICE_INIT");
  return kb::capi::guarded(__func__, [&]() -> kb_status {
    kb::capi::CallAxes axes(dispatch->def->def.axes.size());
    Choice c;
    if (kb_status s = choose("kb_dispatch_choose", dispatch, inputs, n_inputs, outputs, n_outputs, axes, c); s != KB_OK)
      return s;
    out->solution = c.impl->name.c_str();
    out->workload_uuid = c.entry ? c.entry->workload_uuid.c_str() : nullptr;
    out->recorded_latency_ms = c.entry ? c.entry->latency_ms : 0.0;
    out->exact = c.exact ? 1 : 0;
    return KB_OK;
  });
}

KB_API kb_status kb_dispatch_run(const kb_dispatch* dispatch, const DLTensor* const* inputs, size_t n_inputs,
                                 const DLTensor* const* outputs, size_t n_outputs, void* stream) {
  KB_CAPI_REQUIRE(dispatch);
  return kb::capi::guarded(__func__, [&]() -> kb_status {
    const kb::capi::CallScope scope(dispatch->call);  // the creating context's settings and log callback
    const kb::Definition& d = dispatch->def->def;
    kb::capi::CallAxes axes(d.axes.size());
    Choice c;
    if (kb_status s = choose("kb_dispatch_run", dispatch, inputs, n_inputs, outputs, n_outputs, axes, c); s != KB_OK)
      return s;
    return kb::capi::run_checked("kb_dispatch_run", d, axes.span(), *c.impl, inputs, n_inputs, outputs, n_outputs, stream);
  });
}

}  // extern "C"
