// `kb bench`: flags -> kb::bench::RunOptions -> kb::bench::run_dataset(), whose events this file
// prints: the table of evaluations on stdout, progress on a terminal's stderr, problems on stderr.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <unistd.h>
#include <vector>

#include "bench/run.hpp"
#include "commands.hpp"
#include "common/printable.hpp"
#include "common/tuning.hpp"
#include "harness/measurement.hpp"
#include "cuda/device.hpp"
#include "cuda/timing.hpp"

namespace {

constexpr const char* kBenchUsage = R"(usage: kb bench [options] [DATASET...]

Runs every workload of every selected definition through each solution that
handles it, judges the outputs against kb's oracle (the reference) over
several trials with fresh seeded inputs, times the passing ones, prints a
table and appends one trace line per evaluation to
OUT/traces/<author>/<op_type>/<definition>.jsonl (flushed and fsync'ed).
DATASET is a FlashInfer-Bench dataset directory or any folder of definitions
and workloads; default: kb's bundled dataset. Hidden folders and build trees
under it are not read (a warning names each).

options:
  --definitions A,B   only these definitions (names)
  --solutions S,T     only these solutions (names; see kb bench --list)
  --device cpu|cuda|cuda:N   where solutions run (default: cuda if a device is
                      usable, else cpu); cuda:N picks device N (kb devices lists
                      them; numbered as CUDA_VISIBLE_DEVICES leaves them), cuda
                      the current one (0 unless CUDA_VISIBLE_DEVICES says)
  --trials N          correctness trials per workload, fresh inputs each (default 3)
  --seed S            base seed; trial t uses S + t (default 27490)
  --out DIR           where traces go (default: kb-results)
  --resume            skip evaluations already recorded under --out
  --smallest          only the smallest workload of each definition
  --max-workloads N   at most N workloads per definition (smallest first)
  --shard K/N         only the K-th of N slices of the selected definitions (by
                      name: sorted, every N-th from the K-th), so N processes,
                      one a GPU (--device cuda:I), cover a dataset between them;
                      their trace files never overlap (one file a definition)
  --tolerances FILE   tolerance config (default, op_type, definition sections)
  --atol X --rtol X --matched-ratio X   tolerances applied on top of everything
  --warmup-runs N     calls before timing, at least (default: CPU 1, CUDA 3 and
                      10 ms of calls)
  --iterations N      timed samples, at least: kb's timer is adaptive and goes
                      on until the median is stable (CUDA: relative standard
                      error 0.5%) or its time cap; an outside CPU solution is
                      timed once on each of max(N, 5) fresh input sets
  FlashInfer-Bench's names are accepted too: --num-trials (= --trials),
  --required-matched-ratio (= --matched-ratio); --timeout limits one call of an
  outside solution (FlashInfer-Bench's limits a whole evaluation)
  --no-time           judge correctness only
  --baseline reference|none|torch|SOLUTION   what the speedup column divides
                      by (recorded in each trace): reference (default) the
                      reference's own time where the run times it (the CPU:
                      kb's oracle, or the PyTorch reference); none; torch: the
                      definition's PyTorch reference on the run's device (needs
                      python3 with torch), median of 10 synchronized calls
                      after a warm-up, Python's overhead included; or a
                      selected solution's latency at the same workload (it runs
                      first on each definition; rows where it did not PASS
                      show no speedup)
  --cupti             CUDA: also time each solution's kernels alone from CUPTI's
                      records (the GPU's start and end of each kernel), recorded
                      in the trace's extra beside the CUDA-event latency
  --l2-flush clean|write   CUDA: how each cold sample's L2 flush leaves the L2
                      (default clean: a buffer twice the L2 size written, then
                      read back, so no dirty lines remain for the timed kernel
                      to write back; write: the write alone, nvbench's way).
                      The same as KB_L2_FLUSH; the traces record it (l2_flush)
  --reference native|torch   where expected outputs come from: kb's oracles
                      (default), or the definition's own PyTorch `reference`
                      run by python3 (needs torch), on CUDA tensors of the
                      run's device with --device cuda where that torch has
                      CUDA (else on the CPU, said in the log). With torch,
                      definitions kb has no oracle for become evaluable and
                      kb's oracle is judged too, as the solution "reference"
                      (reference_cuda: kb's GPU oracle). Sampling is
                      always judged by distribution against kb's oracle.
  --sampling-draws N  calls per trial when judging sampling by distribution
                      (default 1000; the TVD threshold follows from N)
  --list              list kb's solutions and the definitions each handles
  --plugin PATH       also judge the solutions of this plugin (a shared library
                      exporting kb_plugin_entry_v1; repeatable). Solution JSON
                      in the datasets' solutions/ (language cpp or cuda) is built
                      and judged too; python/triton/tilelang ones are reported
                      as unsupported. Outside solutions run in a worker process:
                      a crash is RUNTIME_ERROR, a hang TIMEOUT.
  --timeout S         limit on one call of an outside solution (default 30)
  --cache DIR         where Solution JSON builds go (default: $KB_CACHE_DIR,
                      else ~/.cache/kb)
  -h, --help          this text

Exit status: 0 when every evaluation PASSED, 1 when any failed or a workload
could not be evaluated, 2 on bad usage.
)";

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// The table: a header, then one row per evaluation.
constexpr const char* kRowFormat = "{:<34} {:<24} {:<24} {:<20} {:>9} {:>9} {:>11} {:>8} {:>6} {:>9}\n";
constexpr std::size_t kAxesWidth = 24;  // kRowFormat's second column

// A workload's axes ("A=1 B=2", kb::bench::axes_text) in lines of at most kAxesWidth characters, so that
// a workload with many axes keeps the columns after them in place; an axis longer than the column
// has a line of its own.
std::vector<std::string> axes_lines(const kb::Workload& w) {
  std::vector<std::string> lines(1);
  std::stringstream words(kb::bench::axes_text(w));
  std::string word;
  while (words >> word) {
    if (!lines.back().empty() && lines.back().size() + 1 + word.size() > kAxesWidth) lines.emplace_back();
    lines.back() += (lines.back().empty() ? "" : " ") + word;
  }
  return lines;
}

// True when every output of the call is empty (a batch of 0): its time is the call's overhead alone,
// so a speedup over the reference's says nothing about the kernel.
bool no_work(const kb::Definition& d, const kb::Workload& w) {
  if (d.outputs.empty()) return false;
  for (const auto& t : d.outputs) {
    if (!t.shape) return false;  // a Python scalar: one value
    bool empty = false;
    for (const auto& name : *t.shape) {
      const kb::Axis* a = d.find_axis(name);
      const std::int64_t* bound = w.find_axis(name);
      if (a && (a->kind == kb::AxisKind::const_ ? a->value == 0 : bound && *bound == 0)) empty = true;
    }
    if (!empty) return false;
  }
  return true;
}

void print_header() {
  fmt::print(kRowFormat, "definition", "axes", "solution", "status", "max_abs", "max_rel", "latency_ms", "speedup", "noise",
             "achieved");
}

// An evaluation and, for a failure (or a pass faster than the measured ceilings allow), the line that
// says why.
void print_row(const kb::Definition& d, const kb::Workload& w, const kb::Implementation& solution,
               const kb::EvaluationResult& r, bool timed) {
  const auto& ev = r.evaluation;
  auto num = [](double v) { return fmt::format("{:.3g}", v); };
  // The timing cells render the evaluation's one measurement record, as every printer does.
  std::optional<kb::Measurement> m;
  if (ev.performance && timed) {
    if (!ev.performance->extra) m.emplace();
    else if (auto read = kb::read_extra(*ev.performance->extra, d.name, "evaluation.performance.extra")) m = *read;
    if (m) m->median_ms = ev.performance->latency_ms;
  }
  const bool has_speedup = m && ev.performance->speedup_factor > 0 && !no_work(d, w);
  const std::vector<std::string> axes = axes_lines(w);
  fmt::print(kRowFormat, d.name, axes.front(), solution.name, kb::eval_status_name(ev.status),
             ev.correctness ? num(ev.correctness->max_absolute_error) : "-",
             ev.correctness ? num(ev.correctness->max_relative_error) : "-", m ? kb::latency_cell(*m) : "-",
             has_speedup ? fmt::format("{:.2f}x", ev.performance->speedup_factor) : "-",
             m ? kb::noise_cell(*m) : "-", m ? kb::achieved_cell(*m) : "-");
  for (std::size_t i = 1; i < axes.size(); ++i) fmt::print("{:<34} {}\n", "", axes[i]);
  if (ev.status != kb::EvalStatus::passed || r.summary.find("IMPLAUSIBLE") != std::string::npos)
    fmt::print("    {}\n", r.summary);
  std::fflush(stdout);
}

// 42s, 3m05s, 1h02m.
std::string duration_text(double seconds) {
  long s = static_cast<long>(seconds + 0.5);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

// Each solution, what it is, and what it handles among the datasets' definitions: per op_type, how
// many definitions and their names (what --definitions takes).
int print_listing(const kb::bench::Listing& l, const std::vector<std::string>& datasets) {
  const bool bundled = datasets.size() == 1 && datasets.front() == KB_BUNDLED_DATASET;
  fmt::print("kb's solutions and the definitions each handles, of the {} definition{} in {}{}:\n", l.definitions,
             l.definitions == 1 ? "" : "s", fmt::join(datasets, ", "), bundled ? " (kb's bundled dataset)" : "");
  for (const auto& s : l.solution_json)
    fmt::print("{} (Solution JSON, {}, by {}): {}\n  handles: {}\n", s.name, s.language, s.author, s.file,
               s.definition);
  for (const auto& n : l.not_runnable) fmt::print("not runnable: {}\n", n);
  for (const auto& s : l.solutions) {
    fmt::print("{} ({}, by {}): {}\n", s.name, kb::device_name(s.device), s.author, s.description);
    if (s.handles.empty()) {
      fmt::print("  handles nothing in these datasets\n");
      continue;
    }
    std::vector<std::pair<std::string, std::vector<std::string>>> by_op;  // op types in first-seen order
    for (std::size_t i = 0; i < s.handles.size(); ++i) {
      const std::string op = i < s.handles_op_types.size() && !s.handles_op_types[i].empty() ? s.handles_op_types[i]
                                                                                             : "(no op_type)";
      auto it = std::find_if(by_op.begin(), by_op.end(), [&](const auto& p) { return p.first == op; });
      if (it == by_op.end()) it = by_op.insert(by_op.end(), {op, {}});
      it->second.push_back(s.handles[i]);
    }
    for (auto& [op, names] : by_op) {
      std::sort(names.begin(), names.end());
      fmt::print("  {}: {} definition{}: {}\n", op, names.size(), names.size() == 1 ? "" : "s", fmt::join(names, ", "));
    }
  }
  if (!l.solutions.empty() || !l.solution_json.empty())
    fmt::print("\nkb bench --solutions NAME,... runs only these; --definitions NAME,... only those definitions.\n");
  return 0;
}

}  // namespace

int cmd_bench(const std::vector<std::string>& args) {
  kb::bench::RunOptions o;
  kb::BenchOptions& opt = o.bench;
  bool smallest = false, list = false;
  long max_workloads = 0;
  auto need = [&](std::size_t& i, const std::string& flag) -> std::optional<std::string> {
    if (i + 1 >= args.size()) {
      fmt::print(stderr, "kb bench: {} needs a value\n", flag);
      return std::nullopt;
    }
    return args[++i];
  };
  auto number = [](const std::string& flag, const std::string& v, auto& dest) {
    try {
      std::size_t used = 0;
      if constexpr (std::is_same_v<std::decay_t<decltype(dest)>, std::optional<double>>) dest = std::stod(v, &used);
      else dest = static_cast<std::decay_t<decltype(dest)>>(std::stoll(v, &used));
      if (used != v.size()) throw std::invalid_argument(v);
      return true;
    } catch (...) {
      fmt::print(stderr, "kb bench: {} expects a number, got \"{}\"\n", flag, v);
      return false;
    }
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::optional<std::string> v;
    if (is_help(a)) {
      std::fputs(kBenchUsage, stdout);
      return 0;
    } else if (a == "--definitions") {
      if (!(v = need(i, a))) return 2;
      o.definitions = split_list(*v);
    } else if (a == "--solutions") {
      if (!(v = need(i, a))) return 2;
      o.solutions = split_list(*v);
    } else if (a == "--device") {
      if (!(v = need(i, a))) return 2;
      o.device = *v;
      if (o.device != "cpu" && !kb::cuda::parse_cuda_device(o.device)) {
        fmt::print(stderr, "kb bench: --device is cpu, cuda or cuda:N (N a device ordinal, see kb devices), got \"{}\"\n",
                   o.device);
        return 2;
      }
    } else if (a == "--trials" || a == "--num-trials") {
      if (!(v = need(i, a)) || !number(a, *v, opt.trials) || opt.trials < 1) return 2;
    } else if (a == "--seed") {
      if (!(v = need(i, a)) || !number(a, *v, opt.seed)) return 2;
    } else if (a == "--out") {
      if (!(v = need(i, a))) return 2;
      o.out_dir = *v;
    } else if (a == "--reference") {
      if (!(v = need(i, a))) return 2;
      if (*v != "native" && *v != "torch") {
        fmt::print(stderr, "kb bench: --reference is native or torch, got \"{}\"\n", *v);
        return 2;
      }
      opt.reference = *v == "torch" ? kb::ReferenceSource::torch : kb::ReferenceSource::native;
    } else if (a == "--sampling-draws") {
      if (!(v = need(i, a)) || !number(a, *v, opt.sampling.draws)) return 2;
      if (opt.sampling.draws < kb::minimum_sampling_draws(opt.sampling)) {
        fmt::print(stderr, "kb bench: --sampling-draws {} is too few for a meaningful TVD test (at least {})\n",
                   opt.sampling.draws, kb::minimum_sampling_draws(opt.sampling));
        return 2;
      }
    } else if (a == "--tolerances") {
      if (!(v = need(i, a))) return 2;
      o.tolerance_file = *v;
    } else if (a == "--atol" || a == "--rtol" || a == "--matched-ratio" || a == "--required-matched-ratio") {
      std::optional<double>& dest = a == "--atol" ? o.atol : a == "--rtol" ? o.rtol : o.matched_ratio;
      if (!(v = need(i, a)) || !number(a, *v, dest)) return 2;
      const kb::ToleranceField field = &dest == &o.matched_ratio ? kb::ToleranceField::required_matched_ratio
                                   : &dest == &o.atol          ? kb::ToleranceField::atol
                                                               : kb::ToleranceField::rtol;
      if (const char* expected = kb::tolerance_range_error(field, *dest)) {
        fmt::print(stderr, "kb bench: {} expects {}, got {}\n", a, expected, *v);
        return 2;
      }
    } else if (a == "--baseline") {
      if (!(v = need(i, a))) return 2;
      o.baseline = *v;
    } else if (a == "--warmup-runs") {
      int n = 0;
      if (!(v = need(i, a)) || !number(a, *v, n)) return 2;
      if (n < 0) {
        fmt::print(stderr, "kb bench: --warmup-runs must be 0 or more, got {}\n", n);
        return 2;
      }
      opt.warmup = n;
      opt.gpu_warmup = n;
    } else if (a == "--iterations") {
      int n = 0;
      if (!(v = need(i, a)) || !number(a, *v, n)) return 2;
      if (n < 1) {
        fmt::print(stderr, "kb bench: --iterations must be at least 1, got {}\n", n);
        return 2;
      }
      opt.min_samples = n;
      opt.max_samples = std::max(opt.max_samples, n);
      opt.gpu_min_samples = n;
    } else if (a == "--max-workloads") {
      if (!(v = need(i, a)) || !number(a, *v, max_workloads) || max_workloads < 1) return 2;
    } else if (a == "--shard") {
      if (!(v = need(i, a))) return 2;
      const auto slash = v->find('/');
      std::optional<long> k, n;
      auto digits = [](std::string_view t) {
        return !t.empty() && t.size() <= 6 && t.find_first_not_of("0123456789") == std::string_view::npos;
      };
      if (slash != std::string::npos && digits(std::string_view(*v).substr(0, slash)) &&
          digits(std::string_view(*v).substr(slash + 1))) {
        k = std::stol(v->substr(0, slash));
        n = std::stol(v->substr(slash + 1));
      }
      if (!k || !n || *n < 1 || *k < 1 || *k > *n) {
        fmt::print(stderr, "kb bench: --shard is K/N with 1 <= K <= N (e.g. 2/8), got \"{}\"\n", *v);
        return 2;
      }
      o.shard_index = *k;
      o.shard_count = *n;
    } else if (a == "--resume") {
      o.resume = true;
    } else if (a == "--smallest") {
      smallest = true;
    } else if (a == "--no-time") {
      opt.time = false;
    } else if (a == "--cupti") {
      opt.cupti = true;
    } else if (a == "--l2-flush") {
      if (!(v = need(i, a))) return 2;
      if (!kb::cuda::parse_l2_flush(v->c_str())) {
        fmt::print(stderr, "kb bench: --l2-flush is clean or write, got \"{}\"\n", *v);
        return 2;
      }
      // The process default is what kb's own timer reads; the environment
      // carries the choice to the worker processes that time outside solutions.
      kb::tuning::Settings s = kb::tuning::process_default();
      (void)kb::tuning::set(s, "l2_flush", *v);
      kb::tuning::set_process_default(s);
      setenv("KB_L2_FLUSH", v->c_str(), 1);
    } else if (a == "--list") {
      list = true;
    } else if (a == "--plugin") {
      if (!(v = need(i, a))) return 2;
      o.plugins.push_back(*v);
    } else if (a == "--timeout") {
      std::optional<double> t;
      if (!(v = need(i, a)) || !number(a, *v, t)) return 2;
      if (!(*t > 0)) {
        fmt::print(stderr, "kb bench: --timeout must be positive, got \"{}\"\n", *v);
        return 2;
      }
      o.plugin_options.timeout_s = *t;
    } else if (a == "--cache") {
      if (!(v = need(i, a))) return 2;
      o.plugin_options.cache_dir = *v;
    } else if (a.size() > 1 && a[0] == '-') {
      fmt::print(stderr, "kb bench: unknown option {} (see kb bench --help)\n", a);
      return 2;
    } else {
      o.datasets.push_back(a);
    }
  }
  if (o.datasets.empty()) o.datasets.push_back(KB_BUNDLED_DATASET);
  o.max_workloads = smallest ? 1 : static_cast<std::size_t>(max_workloads);

  const bool tty = isatty(STDERR_FILENO);
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::string> skipped, not_runnable;
  bool progress = false;  // a progress line is on the terminal: the next event clears it
  auto on_event = [&](const kb::bench::RunEvent& e) {
    using Kind = kb::bench::RunEvent::Kind;
    // Messages quote dataset text: printed with controls escaped and long names cut.
    const std::string message = kb::printable(e.message, kb::Lines::many);
    if (progress) {
      fmt::print(stderr, "\r\x1b[K");
      progress = false;
    }
    switch (e.kind) {
      case Kind::reference:
        fmt::print(stderr, "kb bench: reference: the definitions' PyTorch code (torch {}, CPU)\n", message);
        break;
      case Kind::dataset_error: fmt::print(stderr, "{}\n", message); break;
      case Kind::solution_error: fmt::print(stderr, "kb bench: {}\n", message); break;
      case Kind::building:
        if ((progress = tty)) fmt::print(stderr, "\rbuilding {} ...\x1b[K", message);
        break;
      case Kind::built: break;
      case Kind::not_runnable: not_runnable.push_back(message); break;
      case Kind::skipped: skipped.push_back(message); break;
      case Kind::planned:
        if (o.shard_count > 1)
          fmt::print("shard {}/{}: {} of the {} selected definitions\n", o.shard_index, o.shard_count,
                     e.shard_definitions, e.selected_definitions);
        if (e.total > 0) print_header();  // no table when nothing loaded or selected
        break;
      case Kind::evaluating:
        if ((progress = tty)) {
          // Elapsed time, and what is left at the pace so far (shown once one evaluation finished).
          double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
          std::string eta = e.index > 0 ? fmt::format(", ~{} left", duration_text(elapsed / static_cast<double>(e.index) *
                                                                                   static_cast<double>(e.total - e.index)))
                                        : std::string();
          fmt::print(stderr, "\r[{}/{}] {} {} {} ({}{}) ...\x1b[K", e.index + 1, e.total, e.definition->name,
                     kb::bench::axes_text(*e.workload), e.solution->name, duration_text(elapsed), eta);
        }
        break;
      case Kind::evaluated: print_row(*e.definition, *e.workload, *e.solution, *e.result, opt.time); break;
      case Kind::evaluation_error:
        fmt::print(stderr, "kb bench: {} workload {}: cannot evaluate: {}\n", e.definition->name, kb::printable(e.workload->uuid),
                   message);
        break;
    }
  };

  kb::bench::Option bad = kb::bench::Option::none;
  auto fail = [&](const kb::Error& error) {
    using Option = kb::bench::Option;
    const std::string message = kb::printable(error.message, kb::Lines::many);
    switch (bad) {
      case Option::device: fmt::print(stderr, "kb bench: --device {}: {}\n", o.device, message); return 1;
      case Option::reference: fmt::print(stderr, "kb bench: --reference torch: {}\n", message); return 1;
      case Option::plugin: fmt::print(stderr, "kb bench: --plugin {}\n", message); return 1;
      case Option::baseline: fmt::print(stderr, "kb bench: --baseline: {}\n", message); return 2;
      case Option::tolerances: fmt::print(stderr, "kb bench: {}\n", message); return 2;
      case Option::definitions: fmt::print(stderr, "kb bench: --definitions: {}\n", message); return 2;
      case Option::solutions: fmt::print(stderr, "kb bench: --solutions: {}\n", message); return 2;
      case Option::none: break;
    }
    fmt::print(stderr, "kb bench: {}\n", message);
    return 1;
  };
  if (list) {
    auto l = kb::bench::list_solutions(o, on_event, &bad);
    return l ? print_listing(*l, o.datasets) : fail(l.error());
  }
  auto r = kb::bench::run_dataset(o, on_event, &bad);
  if (!r) return fail(r.error());
  for (const auto& s : skipped) fmt::print("skipped: {}\n", s);
  for (const auto& s : not_runnable) fmt::print("not run (unsupported): {}\n", s);
  // Traces are written only by evaluations (a run that loaded nothing names no folder).
  fmt::print("{} evaluations on {}: {} passed, {} failed, {} could not run{}{}{}\n", r->evaluations,
             kb::device_name(r->device), r->passed, r->failed, r->errors,
             r->already_recorded ? fmt::format(", {} already recorded (--resume)", r->already_recorded) : "",
             not_runnable.empty() ? "" : fmt::format(", {} solution{} in languages kb cannot run", not_runnable.size(),
                                                     not_runnable.size() == 1 ? "" : "s"),
             r->evaluations > 0 ? fmt::format("; traces in {}/traces", o.out_dir) : "");
  return r->all_passed() ? 0 : 1;
}
