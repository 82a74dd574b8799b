// kb_plugin_*: outside solutions (plugins and built Solution JSON) behind the
// C ABI. The library is never loaded into the caller's process: lib/plugin
// starts a worker process for it.
#include <fmt/format.h>

#include <memory>

#include "capi.hpp"
#include "cuda/device.hpp"
#include "plugin/plugin.hpp"
#include "schema/io.hpp"
#include "schema/validate.hpp"

using kb::capi::fail;

struct kb_plugin {
  std::shared_ptr<kb::plugin::Plugin> plugin;
  std::vector<kb::Implementation> impls;
};

namespace {

kb_status read_options(const char* function, const kb_plugin_options* opts, kb::plugin::Options& out) {
  if (!opts) return KB_OK;
  if (opts->struct_size < sizeof(kb_plugin_options))
    return kb::capi::short_struct(function, "opts", opts->struct_size, sizeof(kb_plugin_options), "KB_PLUGIN_OPTIONS_INIT");
  if (opts->flags != 0) return fail(KB_ERROR_INVALID_ARGUMENT, fmt::format("{}: opts->flags must be 0", function));
  if (opts->timeout_s > 0) out.timeout_s = opts->timeout_s;
  if (opts->worker_path) out.worker_path = opts->worker_path;
  if (opts->cache_dir) out.cache_dir = opts->cache_dir;
  return KB_OK;
}

// The worker runs CUDA solutions on the device current on the calling thread when the plugin is loaded.
void use_current_device(kb::plugin::Options& o) {
  if (auto d = kb::cuda::current_device()) o.cuda_device = *d;
}

kb_status finish(kb::Result<std::shared_ptr<kb::plugin::Plugin>> p, kb_plugin** out) {
  if (!p) return fail(p.error());
  auto h = std::make_unique<kb_plugin>();
  h->plugin = std::move(*p);
  h->impls = kb::plugin::implementations(h->plugin);
  *out = h.release();
  return KB_OK;
}

}  // namespace

extern "C" {

KB_API kb_status kb_plugin_load(kb_context* ctx, const char* path, const kb_plugin_options* opts, kb_plugin** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(path);
  return kb::capi::guarded(__func__, [&]() -> kb_status {
    const kb::capi::CallScope scope(ctx->call);  // the context's settings and log callback for this call
    kb::plugin::Options o;
    if (kb_status st = read_options(__func__, opts, o); st != KB_OK) return st;
    use_current_device(o);
    return finish(kb::plugin::load(path, o), out);
  });
}

KB_API kb_status kb_plugin_load_solution(kb_context* ctx, const kb_solution* solution, const kb_definition* def,
                                         const kb_plugin_options* opts, kb_plugin** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(solution);
  KB_CAPI_REQUIRE(def);
  return kb::capi::guarded(__func__, [&]() -> kb_status {
    const kb::capi::CallScope scope(ctx->call);  // the context's settings and log callback for this call
    kb::plugin::Options o;
    if (kb_status st = read_options(__func__, opts, o); st != KB_OK) return st;
    use_current_device(o);
    return finish(kb::plugin::load_solution(solution->solution, def->def, o), out);
  });
}

KB_API void kb_plugin_destroy(kb_plugin* plugin) { delete plugin; }

KB_API size_t kb_plugin_solution_count(const kb_plugin* plugin) {
  KB_CAPI_REQUIRE_OR(plugin, 0);
  return plugin->plugin->solutions.size();
}

KB_API kb_status kb_plugin_solution_get(const kb_plugin* plugin, size_t index, kb_plugin_solution_info* out) {
  KB_CAPI_REQUIRE(plugin);
  KB_CAPI_REQUIRE(out);
  KB_CAPI_REQUIRE_STRUCT(out, kb_plugin_solution_info, "KB_PLUGIN_SOLUTION_INFO_INIT");
  const auto& sols = plugin->plugin->solutions;
  if (index >= sols.size()) return kb::capi::bad_index(__func__, "solution", index, sols.size());
  const auto& s = sols[index];
  out->definition = s.definition.c_str();
  out->name = s.name.c_str();
  out->author = s.author.c_str();
  out->description = s.description ? s.description->c_str() : nullptr;
  out->device = s.cuda ? KB_PLUGIN_DEVICE_CUDA : KB_PLUGIN_DEVICE_CPU;
  out->build_failed = plugin->plugin->build_error ? 1 : 0;
  return KB_OK;
}

KB_API kb_status kb_plugin_benchmark_run(kb_context* ctx, kb_plugin* plugin, const char* solution,
                                         const kb_definition* def, const kb_workload* workload,
                                         const kb_benchmark_options* opts, kb_result** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(plugin);
  KB_CAPI_REQUIRE(solution);
  KB_CAPI_REQUIRE(def);
  KB_CAPI_REQUIRE(workload);
  return kb::capi::guarded(__func__, [&]() -> kb_status {
    const kb::capi::CallScope scope(ctx->call);  // the context's settings and log callback for this call
    kb::BenchOptions bo;
    if (kb_status s = kb::capi::read_benchmark_options("kb_plugin_benchmark_run", opts, bo); s != KB_OK) return s;
    const kb::Definition& d = def->def;
    const kb::Workload& w = workload->workload;
    const kb::Implementation* impl = nullptr;
    for (const auto& i : plugin->impls)
      if (i.name == solution) impl = &i;
    if (!impl) return fail(KB_ERROR_NOT_FOUND, fmt::format("kb_plugin_benchmark_run: the plugin has no solution \"{}\"", solution));
    if (auto why = impl->supports(d); !why.empty())
      return fail(KB_ERROR_UNSUPPORTED, fmt::format("kb_plugin_benchmark_run: {} {}", impl->name, why));
    kb::Diagnostics diags;
    kb::CheckContext cc;
    cc.origin = "<workload>";
    cc.path = "workload";
    cc.dataset_root = bo.dataset_root;
    kb::validate_workload_against(w, d, cc, diags);
    if (diags.has_errors()) return fail(KB_ERROR_INVALID_ARGUMENT, "kb_plugin_benchmark_run: " + diags.first_error());
    auto r = kb::plugin::evaluate(d, w, *impl, bo);
    if (!r) return fail(r.error());
    auto h = std::make_unique<kb_result>();
    h->trace.definition = d.name;
    h->trace.workload = w;
    h->trace.solution = impl->name;
    h->trace.evaluation = r->evaluation;
    h->json = kb::to_json(h->trace, false);
    *out = h.release();
    return KB_OK;
  });
}

}  // extern "C"
