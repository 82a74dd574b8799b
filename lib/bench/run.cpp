#include "bench/run.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "common/near_match.hpp"
#include "cuda/device.hpp"
#include "dataset/dataset.hpp"
#include "harness/measurement.hpp"
#include "harness/trace_writer.hpp"
#include "inputs/inputs.hpp"

namespace kb::bench {

namespace {

bool wanted(const std::vector<std::string>& only, const std::string& name) {
  return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
}

// Total input elements of a workload, to order workloads small to large.
std::int64_t workload_size(const Definition& d, const Workload& w) {
  std::int64_t total = 0;
  for (const auto& t : d.inputs)
    if (auto n = element_count(t, d, &w)) total += *n;
  return total;
}

Error about(Option* out, Option which, Error e) {
  if (out) *out = which;
  return e;
}

void emit(const EventFn& on_event, RunEvent::Kind kind, std::string message) {
  RunEvent e;
  e.kind = kind;
  e.message = std::move(message);
  if (on_event) on_event(e);
}

// What run_dataset() and list_solutions() share: options checked, the device chosen, the datasets
// loaded, the selection and its shard worked out, outside solutions loaded (built unless listing).
struct Setup {
  BenchOptions bench;
  Device device = Device::cpu;
  Result<int> cuda_count = 0;
  std::vector<Dataset> datasets;
  Registry registry;
  std::set<std::string> in_shard;
  std::size_t selected_definitions = 0;
  bool sharded = false;
  std::vector<Listing::SolutionJson> solution_json;  // listing: runnable Solution JSON, not built
  std::size_t problems = 0;

  bool shard_has(const std::string& name) const { return !sharded || in_shard.count(name) > 0; }
};

Status prepare(const RunOptions& o, bool listing, const EventFn& on_event, Option* option, Setup& s) {
  s.bench = o.bench;
  if (s.bench.reference == ReferenceSource::torch && !listing) {
    auto tv = torch_version(s.bench.torch);
    if (!tv) return about(option, Option::reference, tv.error());
    emit(on_event, RunEvent::Kind::reference, *tv);
  }
  if (!o.tolerance_file.empty()) {
    auto p = TolerancePolicy::load(o.tolerance_file);
    if (!p) return about(option, Option::tolerances, p.error());
    s.bench.tolerances = std::move(*p);
  }
  s.bench.tolerances.atol = o.atol;
  s.bench.tolerances.rtol = o.rtol;
  s.bench.tolerances.required_matched_ratio = o.matched_ratio;
  if (o.shard_count < 1 || o.shard_index < 1 || o.shard_index > o.shard_count)
    return make_error(Code::invalid_argument,
                      fmt::format("shard {}/{}: the index must be in 1..count", o.shard_index, o.shard_count));

  // Where solutions run: a CUDA device if one is usable, unless told otherwise. With cuda:N everything
  // (kb's solutions, the oracles, the timer, the workers of outside solutions) runs on device N.
  s.cuda_count = cuda::device_count();
  s.device = s.cuda_count ? Device::cuda : Device::cpu;
  if (o.device == "cpu") s.device = Device::cpu;
  if (!o.device.empty() && o.device != "cpu") {
    auto ordinal = cuda::parse_cuda_device(o.device);
    if (!ordinal) return about(option, Option::device, ordinal.error());
    if (!s.cuda_count) return about(option, Option::device, s.cuda_count.error());
    s.device = Device::cuda;
    if (*ordinal >= 0)
      if (auto st = cuda::select_device(*ordinal); !st) return about(option, Option::device, st.error());
  }
  plugin::Options plugin_options = o.plugin_options;
  if (s.device == Device::cuda)
    if (auto current = cuda::current_device()) plugin_options.cuda_device = *current;

  s.registry = builtin_registry();
  Diagnostics diags;
  s.datasets = load_paths(o.datasets, LoadOptions{}, diags);
  for (const auto& x : diags.items())
    if (x.severity == Severity::error) {
      ++s.problems;
      emit(on_event, RunEvent::Kind::dataset_error, x.to_string());
    }
  {
    std::set<std::string> all, names;
    for (const auto& ds : s.datasets)
      for (const auto& e : ds.definitions) {
        all.insert(e.definition.name);
        if (wanted(o.definitions, e.definition.name)) names.insert(e.definition.name);
      }
    for (const auto& name : o.definitions)
      if (!all.count(name))
        return about(option, Option::definitions,
                     make_error(Code::not_found,
                                fmt::format("no definition \"{}\" in {}{}", name, fmt::join(o.datasets, ", "),
                                            suggestion_text(name, {all.begin(), all.end()}))));
    s.selected_definitions = names.size();
    s.sharded = o.shard_count > 1;
    long i = 0;
    for (const auto& name : names)
      if (i++ % o.shard_count == o.shard_index - 1) s.in_shard.insert(name);
  }

  // Outside solutions: the plugins, then the datasets' Solution JSON (built into the cache). They run
  // in worker processes (lib/plugin).
  auto add_outside = [&](const std::vector<Implementation>& impls, const std::string& from) {
    for (const auto& impl : impls) {
      if (s.registry.find(impl.name)) {
        ++s.problems;
        emit(on_event, RunEvent::Kind::solution_error,
             fmt::format("{}: solution {} is already defined; this one is ignored", from, impl.name));
        continue;
      }
      s.registry.add(impl);
    }
  };
  for (const auto& path : o.plugins) {
    auto p = plugin::load(path, plugin_options);
    if (!p) return about(option, Option::plugin, p.error());
    add_outside(plugin::implementations(*p), path);
  }
  for (const auto& ds : s.datasets)
    for (const auto& e : ds.solutions) {
      const Solution& sol = e.solution;
      if (!wanted(o.solutions, sol.name) || !wanted(o.definitions, sol.definition) || !s.shard_has(sol.definition))
        continue;
      if (auto why = plugin::unsupported_language(sol.spec.language); !why.empty()) {
        emit(on_event, RunEvent::Kind::not_runnable, fmt::format("{} ({}): {}", sol.name, e.file, why));
        continue;
      }
      const DefinitionEntry* de = ds.find_definition(sol.definition);
      if (!de) {
        emit(on_event, RunEvent::Kind::not_runnable,
             fmt::format("{} ({}): no definition {} in its dataset", sol.name, e.file, sol.definition));
        continue;
      }
      if (listing) {
        s.solution_json.push_back({sol.name, sol.spec.language, sol.author, e.file, sol.definition});
        continue;
      }
      emit(on_event, RunEvent::Kind::building, sol.name);
      auto p = plugin::load_solution(sol, de->definition, plugin_options);
      emit(on_event, RunEvent::Kind::built, sol.name);
      if (!p) {
        if (p.error().code == Code::unsupported) {
          emit(on_event, RunEvent::Kind::not_runnable, fmt::format("{} ({}): {}", sol.name, e.file, p.error().message));
        } else {
          ++s.problems;
          emit(on_event, RunEvent::Kind::solution_error, fmt::format("{}: {}", e.file, p.error().message));
        }
        continue;
      }
      add_outside(plugin::implementations(*p), e.file);
    }

  // A name in --solutions must name something: kb's solutions in this build, a plugin's, a dataset's
  // Solution JSON (runnable or not), or the PyTorch reference under --reference torch.
  if (!o.solutions.empty()) {
    std::set<std::string> known;
    for (const auto& impl : s.registry.all()) known.insert(impl.name);
    for (const auto& ds : s.datasets)
      for (const auto& e : ds.solutions) known.insert(e.solution.name);
    if (s.bench.reference == ReferenceSource::torch) {
      known.insert(reference_implementation().name);
      known.insert(gpu_reference_implementation().name);
    }
    bool has_cuda = false;
    for (const auto& impl : s.registry.all()) has_cuda |= impl.device == Device::cuda;
    for (const auto& name : o.solutions)
      if (!known.count(name))
        return about(option, Option::solutions,
                     make_error(Code::not_found,
                                fmt::format("no solution \"{}\" in kb, its plugins or {}{}{}", name,
                                            fmt::join(o.datasets, ", "),
                                            !has_cuda && name.rfind("kb_cuda_", 0) == 0
                                                ? " (kb's CUDA solutions need a kb built with CUDA)"
                                                : "",
                                            suggestion_text(name, {known.begin(), known.end()}))));
  }
  // --baseline names "reference", "none", "torch" or a solution of the selection.
  if (o.baseline == "torch") {
    auto tv = torch_version(s.bench.torch);
    if (!tv) return about(option, Option::baseline, tv.error());
  } else if (!o.baseline.empty() && o.baseline != "reference" && o.baseline != "none") {
    std::set<std::string> known;
    for (const auto& impl : s.registry.all()) known.insert(impl.name);
    for (const auto& ds : s.datasets)
      for (const auto& e : ds.solutions) known.insert(e.solution.name);
    if (!known.count(o.baseline)) {
      std::vector<std::string> names{"reference", "none", "torch"};
      names.insert(names.end(), known.begin(), known.end());
      return about(option, Option::baseline,
                   make_error(Code::not_found, fmt::format("no solution \"{}\" to time against{}", o.baseline,
                                                           suggestion_text(o.baseline, names))));
    }
    if (!wanted(o.solutions, o.baseline))
      return about(option, Option::baseline,
                   make_error(Code::invalid_argument,
                              fmt::format("{} is not among the selected solutions (--solutions): add it", o.baseline)));
  }
  return ok_status();
}

// The definition's PyTorch reference timed on the run's device, on the inputs of the workload's
// first trial (seed as the judge draws them): the median of kTorchBaselineRuns calls after a
// warm-up, each synchronized on CUDA.
constexpr int kTorchBaselineRuns = 10;
Result<double> time_torch_baseline(const Definition& d, const Workload& w, const BenchOptions& opt, Device device,
                                   const std::optional<std::string>& dataset_root) {
  auto m = materialize(d, w, MaterializeOptions{opt.seed, dataset_root});
  if (!m) return m.error();
  rebind_args(*m);
  auto outputs = allocate_outputs(d, m->axes);
  if (!outputs) return outputs.error();
  TorchReferenceOptions t = opt.torch;
  t.timed_runs = kTorchBaselineRuns;
  if (device == Device::cuda) {
    auto current = cuda::current_device();
    if (!current) return current.error();
    t.device = fmt::format("cuda:{}", *current);
  }
  auto run = run_torch_reference(d, m->args, *outputs, t);
  if (!run) return run.error();
  return run->reference_ms;
}

// Sets what the speedup divides by: `latency_ms` of `baseline` (0: no speedup), named in extra.
void set_baseline(Evaluation& ev, const std::string& baseline, double latency_ms) {
  if (!ev.performance) return;
  Performance& perf = *ev.performance;
  Measurement m;
  if (perf.extra) {
    auto read = read_extra(*perf.extra, "kb", "evaluation.performance.extra");
    if (!read) return;  // kb wrote it: an unreadable extra is left as it is
    m = *read;
  }
  m.median_ms = perf.latency_ms;
  if (latency_ms > 0) m.baseline = baseline;
  else m.baseline.reset();
  record(m, perf);
  perf.reference_latency_ms = latency_ms;
  perf.speedup_factor = latency_ms > 0 && perf.latency_ms > 0 ? latency_ms / perf.latency_ms : 0;
}

}  // namespace

std::string axes_text(const Workload& w) {
  std::string s;
  for (const auto& [k, v] : w.axes) s += fmt::format("{}{}={}", s.empty() ? "" : " ", k, v);
  return s.empty() ? "-" : s;
}

Result<Listing> list_solutions(const RunOptions& options, const EventFn& on_event, Option* option) {
  if (option) *option = Option::none;
  Listing listing;
  // not_runnable belongs to the listing; everything else goes on to the caller.
  EventFn forward = [&](const RunEvent& e) {
    if (e.kind == RunEvent::Kind::not_runnable) listing.not_runnable.push_back(e.message);
    else if (on_event) on_event(e);
  };
  Setup s;
  KB_TRY(prepare(options, true, forward, option, s));
  listing.solution_json = std::move(s.solution_json);
  for (const auto& impl : s.registry.all()) {
    Listing::Solution l{impl.name, impl.author, impl.description, impl.device, {}, {}};
    for (const auto& ds : s.datasets)
      for (const auto& e : ds.definitions)
        if (impl.supports(e.definition).empty()) {
          l.handles.push_back(e.definition.name);
          l.handles_op_types.push_back(e.definition.op_type);
        }
    listing.solutions.push_back(std::move(l));
  }
  for (const auto& ds : s.datasets) listing.definitions += ds.definitions.size();
  return listing;
}

Result<RunSummary> run_dataset(const RunOptions& options, const EventFn& on_event, Option* option) {
  if (option) *option = Option::none;
  RunSummary summary;
  auto event = [&](const RunEvent& e) {
    if (e.kind == RunEvent::Kind::skipped) ++summary.skipped;
    if (e.kind == RunEvent::Kind::not_runnable) ++summary.not_runnable;
    if (on_event) on_event(e);
  };
  auto skip = [&](std::string why) {
    RunEvent e;
    e.kind = RunEvent::Kind::skipped;
    e.message = std::move(why);
    event(e);
  };
  Setup s;
  KB_TRY(prepare(options, false, event, option, s));
  summary.device = s.device;
  summary.problems = s.problems;

  TraceWriter writer(options.out_dir);
  std::set<std::tuple<std::string, std::string, std::string>> done;
  if (options.resume) {
    auto r = writer.recorded();
    if (!r) return r.error();
    done = std::move(*r);
  }

  struct Job {
    const Definition* def;
    const Workload* wl;
    const Implementation* impl;
    std::optional<std::string> dataset_root;
  };
  std::vector<Job> jobs;
  const Implementation oracle_solution = reference_implementation();
  const Implementation gpu_oracle_solution = gpu_reference_implementation();
  const BenchOptions& opt = s.bench;
  for (const auto& ds : s.datasets) {
    for (const auto& e : ds.definitions) {
      const Definition& d = e.definition;
      if (!wanted(options.definitions, d.name) || !s.shard_has(d.name)) continue;
      auto has_oracle = find_oracle(d);
      if (!has_oracle && (opt.reference == ReferenceSource::native || d.op_type == "sampling")) {
        skip(fmt::format("{}: {}{}", d.name, has_oracle.error().message,
                         opt.reference == ReferenceSource::native && d.op_type != "sampling"
                             ? " (--reference torch can judge it against its PyTorch reference)"
                             : ""));
        continue;
      }
      std::vector<const Workload*> wls;
      for (const auto& t : ds.workloads)
        if (t.valid && t.trace.definition == d.name) wls.push_back(&t.trace.workload);
      std::stable_sort(wls.begin(), wls.end(),
                       [&](auto* a, auto* b) { return workload_size(d, *a) < workload_size(d, *b); });
      if (options.max_workloads > 0 && wls.size() > options.max_workloads) wls.resize(options.max_workloads);
      if (wls.empty()) {
        skip(fmt::format("{}: no workloads", d.name));
        continue;
      }
      bool any = false;
      std::vector<const Implementation*> candidates;
      for (const auto& impl : s.registry.all()) candidates.push_back(&impl);
      // Against torch, kb's oracles (CPU, and GPU where there is one) are solutions like any other.
      if (opt.reference == ReferenceSource::torch && has_oracle) candidates.push_back(&oracle_solution);
      if (opt.reference == ReferenceSource::torch && gpu_oracle_solution.supports(d).empty())
        candidates.push_back(&gpu_oracle_solution);
      for (const auto* impl : candidates) {
        if (!wanted(options.solutions, impl->name) || !impl->supports(d).empty()) continue;
        if (impl->device != s.device) {
          skip(fmt::format("{} on {}: needs {}{}", impl->name, d.name, device_name(impl->device),
                           impl->device == Device::cuda && !s.cuda_count
                               ? fmt::format(" ({})", s.cuda_count.error().message)
                               : ""));
          continue;
        }
        any = true;
        for (const auto* w : wls) {
          if (done.count({d.name, w->uuid, impl->name})) {
            ++summary.already_recorded;
            continue;
          }
          jobs.push_back({&d, w, impl, ds.root.empty() ? std::nullopt : std::optional(ds.root)});
        }
      }
      if (!any) skip(fmt::format("{}: no {} solution handles it", d.name, device_name(s.device)));
    }
  }

  // A named baseline runs first on each definition, so every other row can show its speedup.
  const std::string& baseline = options.baseline;
  const bool named_baseline =
      !baseline.empty() && baseline != "reference" && baseline != "none" && baseline != "torch";
  if (named_baseline) {
    std::map<const Definition*, std::size_t> first;
    for (std::size_t j = 0; j < jobs.size(); ++j) first.emplace(jobs[j].def, j);
    std::stable_sort(jobs.begin(), jobs.end(), [&](const Job& a, const Job& b) {
      return std::pair(first[a.def], a.impl->name != baseline) < std::pair(first[b.def], b.impl->name != baseline);
    });
  }
  std::map<std::pair<std::string, std::string>, double> baseline_ms;  // (definition, workload uuid) -> latency

  summary.evaluations = jobs.size();
  {
    RunEvent e;
    e.kind = RunEvent::Kind::planned;
    e.total = jobs.size();
    e.shard_definitions = s.sharded ? s.in_shard.size() : s.selected_definitions;
    e.selected_definitions = s.selected_definitions;
    event(e);
  }
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const Job& job = jobs[j];
    RunEvent e;
    e.definition = job.def;
    e.workload = job.wl;
    e.solution = job.impl;
    e.index = j;
    e.total = jobs.size();
    e.kind = RunEvent::Kind::evaluating;
    event(e);
    BenchOptions o = opt;
    o.dataset_root = job.dataset_root;
    auto r = plugin::evaluate(*job.def, *job.wl, *job.impl, o);
    if (!r) {
      if (r.error().code == Code::unsupported) {
        skip(fmt::format("{} on {} {}: {}", job.impl->name, job.def->name, axes_text(*job.wl), r.error().message));
        continue;
      }
      ++summary.errors;
      e.kind = RunEvent::Kind::evaluation_error;
      e.message = r.error().message;
      event(e);
      continue;
    }
    if (named_baseline) {
      const auto key = std::pair(job.def->name, job.wl->uuid);
      const Evaluation& ev = r->evaluation;
      if (job.impl->name == baseline && ev.status == EvalStatus::passed && ev.performance &&
          ev.performance->latency_ms > 0)
        baseline_ms[key] = ev.performance->latency_ms;
      auto b = baseline_ms.find(key);
      set_baseline(r->evaluation, baseline, b == baseline_ms.end() ? 0.0 : b->second);
    } else if (baseline == "torch") {
      const auto key = std::pair(job.def->name, job.wl->uuid);
      auto b = baseline_ms.find(key);
      if (b == baseline_ms.end()) {
        auto ms = time_torch_baseline(*job.def, *job.wl, opt, s.device, job.dataset_root);
        if (!ms) r->evaluation.log += "baseline torch: " + ms.error().message + "\n";
        b = baseline_ms.emplace(key, ms ? *ms : 0.0).first;
      }
      set_baseline(r->evaluation, "torch", b->second);
    } else if (baseline == "none") {
      set_baseline(r->evaluation, "", 0);
    } else if (r->evaluation.performance && r->evaluation.performance->reference_latency_ms > 0) {
      set_baseline(r->evaluation, "reference", r->evaluation.performance->reference_latency_ms);
    }
    Trace t;
    t.definition = job.def->name;
    t.workload = *job.wl;
    t.solution = job.impl->name;
    t.evaluation = r->evaluation;
    // A trace that cannot be written safely is this evaluation's error; the run goes on.
    if (auto st = writer.append(job.impl->author, *job.def, t); !st) {
      ++summary.errors;
      e.kind = RunEvent::Kind::evaluation_error;
      e.message = fmt::format("{}: {}", job.impl->name, st.error().message);
      event(e);
      continue;
    }
    (r->evaluation.status == EvalStatus::passed ? summary.passed : summary.failed)++;
    e.kind = RunEvent::Kind::evaluated;
    e.result = &*r;
    e.trace = &t;
    event(e);
  }
  return summary;
}

}  // namespace kb::bench
