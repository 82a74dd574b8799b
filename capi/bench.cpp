// kb_bench_run: lib/bench's run_dataset() behind the C ABI, its events as kb_bench_events.
#include <fmt/format.h>

#include <cstddef>

#include <string>
#include <vector>

#include "bench/run.hpp"
#include "capi.hpp"
#include "cuda/device.hpp"
#include "harness/sampling_judge.hpp"
#include "schema/io.hpp"

using kb::capi::fail;

namespace {

std::vector<std::string> split_commas(const char* text) {
  std::vector<std::string> out;
  if (!text) return out;
  std::string item;
  for (const char* p = text;; ++p) {
    if (*p == ',' || *p == '\0') {
      if (!item.empty()) out.push_back(std::move(item));
      item.clear();
      if (*p == '\0') break;
    } else {
      item += *p;
    }
  }
  return out;
}

kb_status invalid(const std::string& message) {
  return fail(KB_ERROR_INVALID_ARGUMENT, "kb_bench_run: " + message);
}

kb_status read_options(const kb_bench_options* in, kb::bench::RunOptions& o) {
  // The fields up to `flags` are required; later ones are read as far as the caller's struct reaches.
  constexpr std::size_t required = offsetof(kb_bench_options, baseline);
  if (in->struct_size < required)
    return kb::capi::short_struct("kb_bench_run", "opts", in->struct_size, required, "KB_BENCH_OPTIONS_INIT");
  auto reaches = [&](std::size_t offset, std::size_t size) { return in->struct_size >= offset + size; };
  if (reaches(offsetof(kb_bench_options, baseline), sizeof in->baseline) && in->baseline) o.baseline = in->baseline;
  if (!in->dataset) return kb::capi::null_argument("kb_bench_run", "opts->dataset");
  if (!in->out_dir) return kb::capi::null_argument("kb_bench_run", "opts->out_dir");
  if (in->n_plugins > 0 && !in->plugins) return kb::capi::null_argument("kb_bench_run", "opts->plugins");
  if (in->flags != 0) return invalid("opts->flags must be 0");
  if (in->trials < 1) return invalid(fmt::format("opts->trials is {}; it must be at least 1", in->trials));
  const std::int64_t reference = kb::capi::enum_bits(in->reference);
  if (reference != KB_BENCH_REFERENCE_NATIVE && reference != KB_BENCH_REFERENCE_TORCH)
    return invalid(fmt::format("opts->reference is {}, not a kb_bench_reference", reference));
  const std::uint32_t shards = in->shard_count == 0 ? 1 : in->shard_count;
  if (shards > 1 && (in->shard_index < 1 || in->shard_index > shards))
    return invalid(fmt::format("opts->shard_index is {}; with shard_count {} it must be in 1..{}", in->shard_index,
                               shards, shards));
  o.datasets = {in->dataset};
  o.out_dir = in->out_dir;
  o.definitions = split_commas(in->definitions);
  o.solutions = split_commas(in->solutions);
  if (in->device) {
    o.device = in->device;
    if (o.device != "cpu")
      if (auto ordinal = kb::cuda::parse_cuda_device(o.device); !ordinal)
        return invalid(fmt::format("opts->device \"{}\": is not \"cpu\", \"cuda\" or \"cuda:N\"", o.device));
  }
  o.bench.trials = in->trials;
  o.bench.seed = in->seed;
  o.bench.time = in->time != 0;
  o.bench.cupti = in->cupti != 0;
  o.bench.reference = reference == KB_BENCH_REFERENCE_TORCH ? kb::ReferenceSource::torch : kb::ReferenceSource::native;
  if (in->sampling_draws != 0) {
    o.bench.sampling.draws = in->sampling_draws;
    if (in->sampling_draws < kb::minimum_sampling_draws(o.bench.sampling))
      return invalid(fmt::format("opts->sampling_draws {} is too few for a meaningful TVD test (at least {})",
                                 in->sampling_draws, kb::minimum_sampling_draws(o.bench.sampling)));
  }
  o.resume = in->resume != 0;
  o.max_workloads = in->max_workloads;
  o.shard_index = shards > 1 ? in->shard_index : 1;
  o.shard_count = shards;
  if (in->tolerances) o.tolerance_file = in->tolerances;
  if (in->atol >= 0) o.atol = in->atol;
  if (in->rtol >= 0) o.rtol = in->rtol;
  if (in->required_matched_ratio >= 0) o.matched_ratio = in->required_matched_ratio;
  for (std::size_t i = 0; i < in->n_plugins; ++i) {
    if (!in->plugins[i]) return invalid(fmt::format("opts->plugins[{}] is NULL", i));
    o.plugins.emplace_back(in->plugins[i]);
  }
  if (const kb_plugin_options* p = in->plugin_options) {
    if (p->struct_size < sizeof(kb_plugin_options))
      return kb::capi::short_struct("kb_bench_run", "opts->plugin_options", p->struct_size, sizeof(kb_plugin_options),
                                    "KB_PLUGIN_OPTIONS_INIT");
    if (p->flags != 0) return invalid("opts->plugin_options->flags must be 0");
    if (p->timeout_s > 0) o.plugin_options.timeout_s = p->timeout_s;
    if (p->worker_path) o.plugin_options.worker_path = p->worker_path;
    if (p->cache_dir) o.plugin_options.cache_dir = p->cache_dir;
  }
  return KB_OK;
}

// "opts->device \"cuda:7\": " and the like: which option an error of the run is about.
std::string option_text(kb::bench::Option option, const kb::bench::RunOptions& o) {
  using Option = kb::bench::Option;
  switch (option) {
    case Option::device: return fmt::format("opts->device \"{}\": ", o.device);
    case Option::reference: return "opts->reference (torch): ";
    case Option::tolerances: return "opts->tolerances: ";
    case Option::definitions: return "opts->definitions: ";
    case Option::solutions: return "opts->solutions: ";
    case Option::plugin: return "opts->plugins: ";
    case Option::baseline: return "opts->baseline: ";
    case Option::none: break;
  }
  return "";
}

}  // namespace

extern "C" {

KB_API kb_status kb_bench_run(kb_context* ctx, const kb_bench_options* opts, kb_bench_event_fn on_event, void* user,
                              kb_bench_summary* out) {
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(opts);
  if (out) KB_CAPI_REQUIRE_STRUCT(out, kb_bench_summary, "KB_BENCH_SUMMARY_INIT");
  return kb::capi::guarded(__func__, [&]() -> kb_status {
    kb::bench::RunOptions o;
    if (kb_status st = read_options(opts, o); st != KB_OK) return st;

    // cuda:N makes N current on this thread for the run; the caller's device comes back afterwards.
    std::optional<int> callers_device;
    if (o.device.rfind("cuda:", 0) == 0)
      if (auto current = kb::cuda::current_device()) callers_device = *current;

    auto forward = [&](const kb::bench::RunEvent& e) {
      using Kind = kb::bench::RunEvent::Kind;
      kb_bench_event ev{};
      ev.struct_size = sizeof ev;
      kb_result result;
      switch (e.kind) {
        case Kind::evaluating: ev.kind = KB_BENCH_EVENT_STARTED; break;
        case Kind::evaluated:
          ev.kind = KB_BENCH_EVENT_EVALUATED;
          result.trace = *e.trace;
          result.json = kb::to_json(result.trace, false);
          ev.result = &result;
          break;
        case Kind::skipped:
        case Kind::not_runnable: ev.kind = KB_BENCH_EVENT_SKIPPED; break;
        case Kind::dataset_error:
        case Kind::solution_error:
        case Kind::evaluation_error: ev.kind = KB_BENCH_EVENT_PROBLEM; break;
        default: return;  // reference, building, built, planned: what the command shows, nothing to act on
      }
      if (e.kind != Kind::evaluating && e.kind != Kind::evaluated) ev.message = e.message.c_str();
      if (e.definition) ev.definition = e.definition->name.c_str();
      if (e.solution) ev.solution = e.solution->name.c_str();
      if (e.workload) ev.workload_uuid = e.workload->uuid.c_str();
      ev.index = e.index;
      ev.total = e.total;
      if (on_event) on_event(user, &ev);
    };
    kb::bench::Option option = kb::bench::Option::none;
    auto r = kb::bench::run_dataset(o, forward, &option);
    if (callers_device) (void)kb::cuda::select_device(*callers_device);
    if (!r) {
      kb::Error e = std::move(r).error();
      e.message = "kb_bench_run: " + option_text(option, o) + e.message;
      return fail(e);
    }
    if (out) {
      out->evaluations = r->evaluations;
      out->passed = r->passed;
      out->failed = r->failed;
      out->errors = r->errors;
      out->skipped = r->skipped + r->not_runnable;
      out->already_recorded = r->already_recorded;
      out->problems = r->problems;
      out->cuda = r->device == kb::Device::cuda ? 1 : 0;
    }
    return KB_OK;
  });
}

}  // extern "C"
