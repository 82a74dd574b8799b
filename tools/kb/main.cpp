// The `kb` command: a thin shell over lib/. Each subcommand parses its own
// flags, prints to stdout (results) and stderr (problems), and exits 0 only
// on success.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <unistd.h>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backendbench/command.hpp"
#include "cuda/device.hpp"
#include "cuda/nvml.hpp"
#include "cuda/timing.hpp"
#include "dataset/dataset.hpp"
#include "dispatch/dispatch_table.hpp"
#include "harness/harness.hpp"
#include "harness/trace_writer.hpp"
#include "inputs/inputs.hpp"
#include "plugin/plugin.hpp"
#include "expr/expr.hpp"
#include "json/json.hpp"
#include "schema/io.hpp"

#ifndef KB_VERSION_STRING
#define KB_VERSION_STRING "0.0.0"
#endif
#ifndef KB_BUNDLED_DATASET
#define KB_BUNDLED_DATASET "kernels"
#endif

namespace {

constexpr const char* kUsage = R"(usage: kb <command> [options] [args]

commands:
  bench [DATASET...]   judge and time solutions on every workload; write traces
  validate [PATH...]   check definitions, workloads, solutions and traces
  show NAME|FILE       print a definition in human form
  format FILE...       rewrite definitions, solutions and trace lines as kb writes them
  devices              list the CUDA devices kb can use
  dispatch DEF TRACES  what kb_dispatch chooses per call from recorded traces
  backendbench CMD FILE  parse, import or run BackendBench operator traces (CMD: parse, import, run)

options:
  -h, --help           help for kb or for a command (kb validate --help)
  --version            print kb's version

With no PATH, `kb bench` and `kb validate` use kb's bundled dataset ()" KB_BUNDLED_DATASET R"().
)";

constexpr const char* kValidateUsage = R"(usage: kb validate [options] [PATH...]

Checks FlashInfer Trace objects: dataset directories (definitions/, workloads/,
solutions/, traces/, blob/), other directories (walked), and single files
(.json definitions or solutions, .jsonl trace or workload lines). Files inside
a dataset are checked against that dataset's definitions.

Prints one line per problem, then
  validated N definitions, N workloads, N solutions, N traces: N errors
and exits 0 only when there are no errors.

options:
  --strict       missing safetensors blobs are errors, not warnings
  -v, --verbose  list every warning and every constraint kb could not evaluate
  -q, --quiet    print errors and the summary only
  -h, --help     this text
)";

constexpr const char* kBenchUsage = R"(usage: kb bench [options] [DATASET...]

Runs every workload of every selected definition through each solution that
handles it, judges the outputs against kb's oracle (the reference) over
several trials with fresh seeded inputs, times the passing ones, prints a
table and appends one trace line per evaluation to
OUT/traces/<author>/<op_type>/<definition>.jsonl (flushed and fsync'ed).
DATASET is a FlashInfer-Bench dataset directory or any folder of definitions
and workloads; default: kb's bundled dataset.

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
  --no-time           judge correctness only
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
                      run by python3 (needs torch; CPU). With torch, definitions
                      kb has no oracle for become evaluable and kb's oracle is
                      judged too, as the solution "reference". Sampling is
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

constexpr const char* kShowUsage = R"(usage: kb show [--dataset DIR] NAME|FILE

Prints a definition: axes, signature, constraints and tags. NAME is looked up
in DIR (default: the bundled dataset); FILE is a definition .json.
)";

constexpr const char* kFormatUsage = R"(usage: kb format FILE...

Reads each FILE (a .json definition or solution, or .jsonl trace lines) and
prints it as kb writes it: the current FlashInfer Trace dialect (seed-001 input
is converted), canonical field order, one line per trace. Exit 1 if any input
is invalid (its problems are printed, nothing is written for it).
)";

constexpr const char* kDevicesUsage = R"(usage: kb devices

Lists the CUDA devices kb can use, or says why there are none (exit 1): for each,
the ordinal that kb bench --device cuda:N takes, its name and size, and the
physical GPU behind it (PCI bus id, nvidia-smi's index), which CUDA_VISIBLE_DEVICES
and CUDA_DEVICE_ORDER can renumber.
)";

bool is_help(std::string_view a) { return a == "-h" || a == "--help"; }

int cmd_validate(const std::vector<std::string>& args) {
  kb::LoadOptions opt;
  bool verbose = false, quiet = false;
  std::vector<std::string> paths;
  for (const auto& a : args) {
    if (is_help(a)) {
      std::fputs(kValidateUsage, stdout);
      return 0;
    } else if (a == "--strict") {
      opt.strict = true;
    } else if (a == "-v" || a == "--verbose") {
      verbose = true;
    } else if (a == "-q" || a == "--quiet") {
      quiet = true;
    } else if (a.size() > 1 && a[0] == '-') {
      fmt::print(stderr, "kb validate: unknown option {} (see kb validate --help)\n", a);
      return 2;
    } else {
      paths.push_back(a);
    }
  }
  if (paths.empty()) paths.push_back(KB_BUNDLED_DATASET);
  opt.report_unchecked = verbose;

  kb::Diagnostics diags;
  kb::LoadReport r = kb::validate_paths(paths, opt, diags);

  // Missing blobs are expected in published datasets: one line per file
  // unless --verbose asks for each.
  std::map<std::string, std::size_t> missing_blobs;
  for (const auto& d : diags.items()) {
    if (d.severity == kb::Severity::error) {
      fmt::print(stderr, "{}\n", d.to_string());
      continue;
    }
    if (quiet) continue;
    if (!verbose && d.category == "missing-blob") {
      ++missing_blobs[d.origin.substr(0, d.origin.rfind(':'))];
      continue;
    }
    if (d.severity == kb::Severity::note && !verbose) continue;
    fmt::print(stderr, "{}\n", d.to_string());
  }
  for (const auto& [file, n] : missing_blobs)
    fmt::print(stderr, "{}: warning: {} safetensors input{} name blobs that are not present (kb will generate "
                       "valid values for them; --verbose lists each, --strict makes them errors)\n",
               file, n, n == 1 ? "" : "s");

  std::size_t errors = diags.error_count();
  fmt::print("validated {} definitions, {} workloads, {} solutions, {} traces: {} error{}\n", r.definitions,
             r.workloads, r.solutions, r.traces, errors, errors == 1 ? "" : "s");
  if (!quiet)
    fmt::print("constraints: {} held, {} violated, {} unchecked (tensor values not available{}); {} warning{}\n",
               r.constraints.held, r.constraints.violated, r.constraints.unchecked,
               verbose ? "" : "; --verbose lists them", diags.warning_count(),
               diags.warning_count() == 1 ? "" : "s");
  return errors == 0 ? 0 : 1;
}

std::string shape_text(const kb::TensorSpec& t) {
  if (!t.shape) return "scalar";
  return fmt::format("[{}]", fmt::join(*t.shape, ", "));
}

void print_definition(const kb::Definition& d, const std::string& file) {
  fmt::print("{}  ({})\n", d.name, d.op_type.empty() ? "no op_type" : d.op_type);
  if (!file.empty()) fmt::print("  file: {}\n", file);
  if (d.description) fmt::print("  {}\n", *d.description);
  fmt::print("\naxes:\n");
  for (const auto& a : d.axes) {
    std::string kind = a.kind == kb::AxisKind::const_ ? fmt::format("= {}", a.value) : "var";
    fmt::print("  {:<20} {:<10}{}\n", a.name, kind, a.description ? "  " + *a.description : std::string());
  }
  auto sig = [](const std::vector<kb::TensorSpec>& ts) {
    std::vector<std::string> parts;
    for (const auto& t : ts) parts.push_back(fmt::format("{}: {} {}", t.name, kb::dtype_name(t.dtype), shape_text(t)));
    return parts;
  };
  fmt::print("\nsignature (destination passing: run(*inputs, *outputs)):\n");
  fmt::print("  inputs:\n");
  for (const auto& s : sig(d.inputs)) fmt::print("    {}\n", s);
  fmt::print("  outputs:\n");
  for (const auto& s : sig(d.outputs)) fmt::print("    {}\n", s);
  if (!d.constraints.empty()) {
    fmt::print("\nconstraints:\n");
    for (const auto& c : d.constraints) {
      auto e = kb::expr::parse(c);
      fmt::print("  {}{}\n", c, e && e->needs_tensors() ? "    (checked when tensors exist)" : "");
    }
  }
  if (!d.tags.empty()) fmt::print("\ntags: {}\n", fmt::join(d.tags, " "));
}

// A definition named by FILE (a .json) or NAME (looked up as <NAME>.json under
// `dataset`, a dataset root or the bundled kernels/<op_type>/definitions tree),
// with the file it came from; its problems are printed, prefixed by `command`.
std::optional<std::pair<kb::Definition, std::string>> find_definition(const char* command, const std::string& target,
                                                                      const std::string& dataset) {
  std::error_code ec;
  kb::Diagnostics diags;
  if (std::filesystem::is_regular_file(target, ec)) {
    auto d = kb::read_definition_file(target, &diags);
    if (!d) {
      for (const auto& x : diags.items())
        if (x.severity == kb::Severity::error) fmt::print(stderr, "{}\n", x.to_string());
      return std::nullopt;
    }
    return std::pair{std::move(*d), target};
  }
  std::vector<std::string> files;
  for (auto it = std::filesystem::recursive_directory_iterator(dataset, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    if (it->path().extension() == ".json" && it->path().stem() == target) files.push_back(it->path().string());
  for (const auto& f : files) {
    auto d = kb::read_definition_file(f, &diags);
    if (d && d->name == target) return std::pair{std::move(*d), f};
  }
  fmt::print(stderr, "{}: no definition \"{}\" under {}\n", command, target, dataset);
  return std::nullopt;
}

int cmd_show(const std::vector<std::string>& args) {
  std::string dataset = KB_BUNDLED_DATASET, target;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (is_help(args[i])) {
      std::fputs(kShowUsage, stdout);
      return 0;
    } else if (args[i] == "--dataset" && i + 1 < args.size()) {
      dataset = args[++i];
    } else if (args[i].size() > 1 && args[i][0] == '-') {
      fmt::print(stderr, "kb show: unknown option {} (see kb show --help)\n", args[i]);
      return 2;
    } else if (target.empty()) {
      target = args[i];
    } else {
      fmt::print(stderr, "kb show: one NAME or FILE, got a second: {}\n", args[i]);
      return 2;
    }
  }
  if (target.empty()) {
    std::fputs(kShowUsage, stderr);
    return 2;
  }
  auto found = find_definition("kb show", target, dataset);
  if (!found) return 1;
  print_definition(found->first, found->second);
  return 0;
}

constexpr const char* kDispatchUsage = R"(usage: kb dispatch [options] NAME|FILE TRACES

Prints what kb_dispatch (the C ABI's per-call choice for engines) builds from
the trace lines under TRACES (a .jsonl file, or a folder such as kb bench's
--out): for each recorded workload's var-axis values and device kind, the
fastest of kb's solutions that PASSED there, one that kb bench --list names
earlier winning ties within --tie-margin (a solution with any other status
on those values is out for them; untimed records, from --no-time, are passed
over). NAME is looked up as kb show does; FILE is a
definition .json.

options:
  --dataset DIR       where NAME is looked up (default: the bundled dataset)
  --hardware NAME     only records from this hardware (evaluation.environment)
  --call A=V,B=W      also print the choice for a call with these var-axis
                      values on each device kind: the nearest recorded
                      workload (sum over var axes of |log2 a - log2 b|)
  --exact             with --call: only an exactly matching workload counts
  --tie-margin F      a solution must be faster by more than this fraction
                      than one listed before it to win over it (default
                      0.02, kb_dispatch's; 0: the strictly fastest)

Exit 0; 1 when the definition or the traces cannot be read (the file and line
are named); 2 on bad usage.
)";

int cmd_dispatch(const std::vector<std::string>& args) {
  std::string dataset = KB_BUNDLED_DATASET, hardware, call_text;
  std::vector<std::string> positional;
  bool exact = false;
  kb::dispatch::TableOptions options;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (is_help(a)) {
      std::fputs(kDispatchUsage, stdout);
      return 0;
    }
    if ((a == "--dataset" || a == "--hardware" || a == "--call" || a == "--tie-margin") && i + 1 >= args.size()) {
      fmt::print(stderr, "kb dispatch: {} needs a value (see kb dispatch --help)\n", a);
      return 2;
    }
    if (a == "--dataset") {
      dataset = args[++i];
    } else if (a == "--hardware") {
      hardware = args[++i];
    } else if (a == "--call") {
      call_text = args[++i];
    } else if (a == "--exact") {
      exact = true;
    } else if (a == "--tie-margin") {
      const std::string& v = args[++i];
      double m = -1;
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), m);
      if (ec != std::errc() || end != v.data() + v.size() || !(m >= 0 && m <= 1)) {
        fmt::print(stderr, "kb dispatch: --tie-margin: \"{}\" is not a number in [0, 1]\n", v);
        return 2;
      }
      options.tie_margin = m;
    } else if (a.size() > 1 && a[0] == '-') {
      fmt::print(stderr, "kb dispatch: unknown option {} (see kb dispatch --help)\n", a);
      return 2;
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 2) {
    std::fputs(kDispatchUsage, stderr);
    return 2;
  }
  auto found = find_definition("kb dispatch", positional[0], dataset);
  if (!found) return 1;
  const kb::Definition& d = found->first;

  // The call's axis values: const axes from the definition, var axes from --call.
  std::vector<std::int64_t> call(d.axes.size(), -1);
  for (std::size_t i = 0; i < d.axes.size(); ++i)
    if (d.axes[i].kind == kb::AxisKind::const_) call[i] = d.axes[i].value;
  if (!call_text.empty()) {
    std::stringstream items(call_text);
    std::string item;
    while (std::getline(items, item, ',')) {
      const auto eq = item.find('=');
      const kb::Axis* axis = eq == std::string::npos ? nullptr : d.find_axis(item.substr(0, eq));
      std::int64_t v = -1;
      const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (!axis || axis->kind != kb::AxisKind::var || ec != std::errc() || end != value.data() + value.size() || v < 0) {
        fmt::print(stderr, "kb dispatch: --call: \"{}\" is not VAR_AXIS=N for a var axis of {}\n", item, d.name);
        return 2;
      }
      call[static_cast<std::size_t>(axis - d.axes.data())] = v;
    }
  }

  options.hardware = hardware;
  auto table = kb::dispatch::build_table(d, positional[1], options, kb::builtin_registry());
  if (!table) {
    fmt::print(stderr, "kb dispatch: {}\n", table.error().message);
    return 1;
  }
  auto axes_text = [&](const std::vector<std::int64_t>& values) {
    std::string t;
    for (std::size_t i = 0; i < table->var_axes.size(); ++i)
      t += fmt::format("{}{}={}", i ? "," : "", d.axes[table->var_axes[i]].name, values[i]);
    return t;
  };
  fmt::print("{} ({}): {} records under {}, {} of them of kb's solutions that handle it here{}\n", d.name,
             found->second, table->records, positional[1], table->used,
             hardware.empty() ? "" : fmt::format(" (hardware \"{}\")", hardware));
  for (const auto* kind : {"cpu", "cuda"}) {
    const auto& entries = std::string_view(kind) == "cpu" ? table->cpu : table->cuda;
    for (const auto& e : entries)
      fmt::print("  {:<5} {:<24} {:<26} {:>10.4f} ms  {}\n", kind, axes_text(e.var_values), e.impl->name,
                 e.latency_ms, e.workload_uuid);
  }
  if (table->cpu.empty() && table->cuda.empty()) fmt::print("  (no entries: every call takes kb_dispatch's fallback)\n");
  if (!call_text.empty()) {
    std::vector<std::int64_t> var_values;
    for (std::size_t a : table->var_axes) var_values.push_back(call[a]);
    for (const auto* kind : {"cpu", "cuda"}) {
      const auto& entries = std::string_view(kind) == "cpu" ? table->cpu : table->cuda;
      const kb::dispatch::Entry* e = kb::dispatch::nearest(*table, entries, call, exact);
      if (e)
        fmt::print("call {} on {}: {} (recorded {}{}, {:.4f} ms)\n", axes_text(var_values), kind, e->impl->name,
                   axes_text(e->var_values), e->var_values == var_values ? ", exact" : "", e->latency_ms);
      else
        fmt::print("call {} on {}: the fallback (no {}recorded workload)\n", axes_text(var_values), kind,
                   exact ? "exactly matching " : "");
    }
  }
  return 0;
}

int cmd_format(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(kFormatUsage, stderr);
    return 2;
  }
  int status = 0;
  for (const auto& a : args) {
    if (is_help(a)) {
      std::fputs(kFormatUsage, stdout);
      return 0;
    }
  }
  for (const auto& file : args) {
    kb::Diagnostics diags;
    auto text = kb::json::read_text_file(file);
    if (!text) {
      fmt::print(stderr, "{}\n", text.error().message);
      status = 1;
      continue;
    }
    std::string out;
    if (std::filesystem::path(file).extension() == ".jsonl") {
      std::size_t pos = 0, line = 0;
      std::string_view all = *text;
      while (pos < all.size()) {
        std::size_t end = all.find('\n', pos);
        if (end == std::string_view::npos) end = all.size();
        std::string_view l = all.substr(pos, end - pos);
        pos = end + 1;
        ++line;
        if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
        if (auto t = kb::read_trace(l, fmt::format("{}:{}", file, line), &diags)) out += kb::to_json(*t) + "\n";
      }
    } else if (text->find("\"sources\"") != std::string::npos && text->find("\"spec\"") != std::string::npos) {
      if (auto s = kb::read_solution(*text, file, &diags)) out = kb::to_json(*s) + "\n";
    } else {
      if (auto d = kb::read_definition(*text, file, &diags)) out = kb::to_json(*d) + "\n";
    }
    if (diags.has_errors()) {
      std::fputs(diags.errors_text().c_str(), stderr);
      std::fputc('\n', stderr);
      status = 1;
      continue;
    }
    std::fputs(out.c_str(), stdout);
  }
  return status;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// Total input elements of a workload, to order workloads small to large.
std::int64_t workload_size(const kb::Definition& d, const kb::Workload& w) {
  std::int64_t total = 0;
  for (const auto& t : d.inputs)
    if (auto n = kb::element_count(t, d, &w)) total += *n;
  return total;
}

std::string axes_text(const kb::Workload& w) {
  std::string s;
  for (const auto& [k, v] : w.axes) s += fmt::format("{}{}={}", s.empty() ? "" : " ", k, v);
  return s.empty() ? "-" : s;
}

int cmd_bench(const std::vector<std::string>& args) {
  std::vector<std::string> paths, only_defs, only_solutions;
  std::string out_dir = "kb-results", device_arg, reference = "native", tolerance_file;
  kb::BenchOptions opt;
  bool resume = false, smallest = false, list = false;
  std::vector<std::string> plugin_paths;
  kb::plugin::Options plugin_options;
  std::optional<double> atol, rtol, ratio;
  long max_workloads = -1;
  long shard_k = 1, shard_n = 1;  // --shard K/N
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
      only_defs = split_list(*v);
    } else if (a == "--solutions") {
      if (!(v = need(i, a))) return 2;
      only_solutions = split_list(*v);
    } else if (a == "--device") {
      if (!(v = need(i, a))) return 2;
      device_arg = *v;
      if (device_arg != "cpu" && !kb::cuda::parse_cuda_device(device_arg)) {
        fmt::print(stderr, "kb bench: --device is cpu, cuda or cuda:N (N a device ordinal, see kb devices), got \"{}\"\n",
                   device_arg);
        return 2;
      }
    } else if (a == "--trials") {
      if (!(v = need(i, a)) || !number(a, *v, opt.trials) || opt.trials < 1) return 2;
    } else if (a == "--seed") {
      if (!(v = need(i, a)) || !number(a, *v, opt.seed)) return 2;
    } else if (a == "--out") {
      if (!(v = need(i, a))) return 2;
      out_dir = *v;
    } else if (a == "--reference") {
      if (!(v = need(i, a))) return 2;
      reference = *v;
      if (reference != "native" && reference != "torch") {
        fmt::print(stderr, "kb bench: --reference is native or torch, got \"{}\"\n", reference);
        return 2;
      }
      opt.reference = reference == "torch" ? kb::ReferenceSource::torch : kb::ReferenceSource::native;
    } else if (a == "--sampling-draws") {
      if (!(v = need(i, a)) || !number(a, *v, opt.sampling.draws)) return 2;
      if (opt.sampling.draws < kb::minimum_sampling_draws(opt.sampling)) {
        fmt::print(stderr, "kb bench: --sampling-draws {} is too few for a meaningful TVD test (at least {})\n",
                   opt.sampling.draws, kb::minimum_sampling_draws(opt.sampling));
        return 2;
      }
    } else if (a == "--tolerances") {
      if (!(v = need(i, a))) return 2;
      tolerance_file = *v;
    } else if (a == "--atol") {
      if (!(v = need(i, a)) || !number(a, *v, atol)) return 2;
    } else if (a == "--rtol") {
      if (!(v = need(i, a)) || !number(a, *v, rtol)) return 2;
    } else if (a == "--matched-ratio") {
      if (!(v = need(i, a)) || !number(a, *v, ratio)) return 2;
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
      shard_k = *k;
      shard_n = *n;
    } else if (a == "--resume") {
      resume = true;
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
      // Through the environment: kb's timer reads it once (lib/cuda/timing.hpp
      // L2Flush), and it reaches the worker processes that time plugins.
      setenv("KB_L2_FLUSH", v->c_str(), 1);
    } else if (a == "--list") {
      list = true;
    } else if (a == "--plugin") {
      if (!(v = need(i, a))) return 2;
      plugin_paths.push_back(*v);
    } else if (a == "--timeout") {
      std::optional<double> t;
      if (!(v = need(i, a)) || !number(a, *v, t)) return 2;
      if (!(*t > 0)) {
        fmt::print(stderr, "kb bench: --timeout must be positive, got \"{}\"\n", *v);
        return 2;
      }
      plugin_options.timeout_s = *t;
    } else if (a == "--cache") {
      if (!(v = need(i, a))) return 2;
      plugin_options.cache_dir = *v;
    } else if (a.size() > 1 && a[0] == '-') {
      fmt::print(stderr, "kb bench: unknown option {} (see kb bench --help)\n", a);
      return 2;
    } else {
      paths.push_back(a);
    }
  }
  if (opt.reference == kb::ReferenceSource::torch && !list) {
    auto tv = kb::torch_version(opt.torch);
    if (!tv) {
      fmt::print(stderr, "kb bench: --reference torch: {}\n", tv.error().message);
      return 1;
    }
    fmt::print(stderr, "kb bench: reference: the definitions' PyTorch code (torch {}, CPU)\n", *tv);
  }
  if (const char* flush = std::getenv("KB_L2_FLUSH"); flush && !kb::cuda::parse_l2_flush(flush)) {
    fmt::print(stderr, "kb bench: the environment's KB_L2_FLUSH is \"{}\"; it must be clean or write\n", flush);
    return 2;
  }
  if (paths.empty()) paths.push_back(KB_BUNDLED_DATASET);
  if (!tolerance_file.empty()) {
    auto p = kb::TolerancePolicy::load(tolerance_file);
    if (!p) {
      fmt::print(stderr, "kb bench: {}\n", p.error().message);
      return 2;
    }
    opt.tolerances = std::move(*p);
  }
  opt.tolerances.atol = atol;
  opt.tolerances.rtol = rtol;
  opt.tolerances.required_matched_ratio = ratio;

  // Where solutions run: a CUDA device if one is usable, unless told otherwise.
  auto cuda_count = kb::cuda::device_count();
  kb::Device device = cuda_count ? kb::Device::cuda : kb::Device::cpu;
  if (device_arg == "cpu") device = kb::Device::cpu;
  if (device_arg != "" && device_arg != "cpu") {
    if (!cuda_count) {
      fmt::print(stderr, "kb bench: --device {}: {}\n", device_arg, cuda_count.error().message);
      return 1;
    }
    device = kb::Device::cuda;
    // cuda:N: everything (kb's solutions, the oracles, the timer, the workers
    // of outside solutions) runs on device N.
    if (const int ordinal = *kb::cuda::parse_cuda_device(device_arg); ordinal >= 0) {
      if (auto st = kb::cuda::select_device(ordinal); !st) {
        fmt::print(stderr, "kb bench: --device {}: {}\n", device_arg, st.error().message);
        return 1;
      }
    }
  }
  if (device == kb::Device::cuda) {
    if (auto current = kb::cuda::current_device()) plugin_options.cuda_device = *current;
  }

  kb::Registry registry = kb::builtin_registry();

  kb::Diagnostics diags;
  kb::LoadOptions lo;
  auto datasets = kb::load_paths(paths, lo, diags);
  int status = 0;
  // --shard K/N: the selected definition names, sorted, every N-th from the K-th (a name in several datasets
  // stays in one shard: its trace file is one).
  std::set<std::string> in_shard;
  std::size_t selected_names = 0;
  {
    std::set<std::string> names;
    for (const auto& ds : datasets)
      for (const auto& e : ds.definitions)
        if (only_defs.empty() || std::find(only_defs.begin(), only_defs.end(), e.definition.name) != only_defs.end())
          names.insert(e.definition.name);
    selected_names = names.size();
    long i = 0;
    for (const auto& name : names)
      if (i++ % shard_n == shard_k - 1) in_shard.insert(name);
  }
  auto shard_has = [&](const std::string& name) { return shard_n == 1 || in_shard.count(name) > 0; };
  for (const auto& x : diags.items())
    if (x.severity == kb::Severity::error) {
      fmt::print(stderr, "{}\n", x.to_string());
      status = 1;
    }

  // Outside solutions: --plugin libraries, then the datasets' Solution JSON
  // (built into the cache). They run in worker processes (lib/plugin).
  std::vector<std::string> not_runnable;  // Solution JSON kb cannot run, with why
  {
    auto add_outside = [&](const std::vector<kb::Implementation>& impls, const std::string& from) {
      for (const auto& impl : impls) {
        if (registry.find(impl.name)) {
          fmt::print(stderr, "kb bench: {}: solution {} is already defined; this one is ignored\n", from, impl.name);
          status = 1;
          continue;
        }
        registry.add(impl);
      }
    };
    for (const auto& path : plugin_paths) {
      auto p = kb::plugin::load(path, plugin_options);
      if (!p) {
        fmt::print(stderr, "kb bench: --plugin {}\n", p.error().message);
        return 1;
      }
      add_outside(kb::plugin::implementations(*p), path);
    }
    auto wanted = [](const std::vector<std::string>& only, const std::string& name) {
      return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
    };
    for (const auto& ds : datasets)
      for (const auto& e : ds.solutions) {
        const kb::Solution& s = e.solution;
        if (!wanted(only_solutions, s.name) || !wanted(only_defs, s.definition) || !shard_has(s.definition)) continue;
        if (auto why = kb::plugin::unsupported_language(s.spec.language); !why.empty()) {
          not_runnable.push_back(fmt::format("{} ({}): {}", s.name, e.file, why));
          continue;
        }
        const kb::DefinitionEntry* de = ds.find_definition(s.definition);
        if (!de) {
          not_runnable.push_back(fmt::format("{} ({}): no definition {} in its dataset", s.name, e.file, s.definition));
          continue;
        }
        if (list) {
          fmt::print("{} (Solution JSON, {}, by {}): {}\n  handles: {}\n", s.name, s.spec.language, s.author, e.file,
                     s.definition);
          continue;
        }
        if (isatty(STDERR_FILENO)) fmt::print(stderr, "\rbuilding {} ...\x1b[K", s.name);
        auto p = kb::plugin::load_solution(s, de->definition, plugin_options);
        if (isatty(STDERR_FILENO)) fmt::print(stderr, "\r\x1b[K");
        if (!p) {
          if (p.error().code == kb::Code::unsupported) {
            not_runnable.push_back(fmt::format("{} ({}): {}", s.name, e.file, p.error().message));
          } else {
            fmt::print(stderr, "kb bench: {}: {}\n", e.file, p.error().message);
            status = 1;
          }
          continue;
        }
        add_outside(kb::plugin::implementations(*p), e.file);
      }
  }

  if (list) {
    for (const auto& n : not_runnable) fmt::print("not runnable: {}\n", n);
    for (const auto& impl : registry.all()) {
      std::vector<std::string> defs;
      for (const auto& ds : datasets)
        for (const auto& e : ds.definitions)
          if (impl.supports(e.definition).empty()) defs.push_back(e.definition.name);
      fmt::print("{} ({}, by {}): {}\n  handles: {}\n", impl.name, kb::device_name(impl.device), impl.author,
                 impl.description, defs.empty() ? "nothing in these datasets" : fmt::format("{}", fmt::join(defs, ", ")));
    }
    return 0;
  }

  kb::TraceWriter writer(out_dir);
  std::set<std::tuple<std::string, std::string, std::string>> done;
  if (resume) {
    auto r = writer.recorded();
    if (!r) {
      fmt::print(stderr, "kb bench: {}\n", r.error().message);
      return 1;
    }
    done = std::move(*r);
  }

  struct Job {
    const kb::Definition* def;
    const kb::Workload* wl;
    const kb::Implementation* impl;
    std::optional<std::string> dataset_root;
  };
  std::vector<Job> jobs;
  const kb::Implementation oracle_solution = kb::reference_implementation();
  std::vector<std::string> skipped;
  std::size_t already = 0;
  for (const auto& ds : datasets) {
    for (const auto& e : ds.definitions) {
      const kb::Definition& d = e.definition;
      if (!only_defs.empty() && std::find(only_defs.begin(), only_defs.end(), d.name) == only_defs.end()) continue;
      if (!shard_has(d.name)) continue;
      auto has_oracle = kb::find_oracle(d);
      if (!has_oracle && (opt.reference == kb::ReferenceSource::native || d.op_type == "sampling")) {
        skipped.push_back(fmt::format("{}: {}{}", d.name, has_oracle.error().message,
                                      opt.reference == kb::ReferenceSource::native && d.op_type != "sampling"
                                          ? " (--reference torch can judge it against its PyTorch reference)"
                                          : ""));
        continue;
      }
      std::vector<const kb::Workload*> wls;
      for (const auto& t : ds.workloads)
        if (t.valid && t.trace.definition == d.name) wls.push_back(&t.trace.workload);
      std::stable_sort(wls.begin(), wls.end(),
                       [&](auto* a, auto* b) { return workload_size(d, *a) < workload_size(d, *b); });
      if (smallest && wls.size() > 1) wls.resize(1);
      if (max_workloads > 0 && static_cast<long>(wls.size()) > max_workloads) wls.resize(static_cast<std::size_t>(max_workloads));
      if (wls.empty()) {
        skipped.push_back(fmt::format("{}: no workloads", d.name));
        continue;
      }
      bool any = false;
      std::vector<const kb::Implementation*> candidates;
      for (const auto& impl : registry.all()) candidates.push_back(&impl);
      // Against torch, kb's oracle is a solution like any other.
      if (opt.reference == kb::ReferenceSource::torch && has_oracle) candidates.push_back(&oracle_solution);
      for (const auto* impl_p : candidates) {
        const kb::Implementation& impl = *impl_p;
        if (!only_solutions.empty() &&
            std::find(only_solutions.begin(), only_solutions.end(), impl.name) == only_solutions.end())
          continue;
        if (!impl.supports(d).empty()) continue;
        if (impl.device != device) {
          skipped.push_back(fmt::format("{} on {}: needs {}{}", impl.name, d.name, kb::device_name(impl.device),
                                        impl.device == kb::Device::cuda && !cuda_count
                                            ? fmt::format(" ({})", cuda_count.error().message)
                                            : ""));
          continue;
        }
        any = true;
        for (const auto* w : wls) {
          if (done.count({d.name, w->uuid, impl.name})) {
            ++already;
            continue;
          }
          jobs.push_back({&d, w, &impl, ds.root.empty() ? std::nullopt : std::optional(ds.root)});
        }
      }
      if (!any) skipped.push_back(fmt::format("{}: no {} solution handles it", d.name, kb::device_name(device)));
    }
  }

  bool tty = isatty(STDERR_FILENO);
  if (shard_n > 1)
    fmt::print("shard {}/{}: {} of the {} selected definitions\n", shard_k, shard_n, in_shard.size(), selected_names);
  fmt::print("{:<34} {:<24} {:<24} {:<20} {:>9} {:>9} {:>11} {:>8}\n", "definition", "axes", "solution", "status",
             "max_abs", "max_rel", "latency_ms", "speedup");
  std::size_t passed = 0, failed = 0, errors = 0;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const auto& job = jobs[j];
    if (tty) fmt::print(stderr, "\r[{}/{}] {} {} ...\x1b[K", j + 1, jobs.size(), job.def->name, job.impl->name);
    kb::BenchOptions o = opt;
    o.dataset_root = job.dataset_root;
    auto r = kb::plugin::evaluate(*job.def, *job.wl, *job.impl, o);
    if (tty) fmt::print(stderr, "\r\x1b[K");
    if (!r) {
      if (r.error().code == kb::Code::unsupported) {
        skipped.push_back(fmt::format("{} on {} {}: {}", job.impl->name, job.def->name, axes_text(*job.wl),
                                      r.error().message));
        continue;
      }
      ++errors;
      fmt::print(stderr, "kb bench: {} workload {}: cannot evaluate: {}\n", job.def->name, job.wl->uuid, r.error().message);
      continue;
    }
    kb::Trace t;
    t.definition = job.def->name;
    t.workload = *job.wl;
    t.solution = job.impl->name;
    t.evaluation = r->evaluation;
    if (auto st = writer.append(job.impl->author, *job.def, t); !st.ok()) {
      fmt::print(stderr, "kb bench: {}\n", st.error().message);
      return 1;
    }
    const auto& ev = r->evaluation;
    bool ok = ev.status == kb::EvalStatus::passed;
    (ok ? passed : failed)++;
    auto num = [](double v) { return fmt::format("{:.3g}", v); };
    fmt::print("{:<34} {:<24} {:<24} {:<20} {:>9} {:>9} {:>11} {:>8}\n", job.def->name, axes_text(*job.wl),
               job.impl->name, kb::eval_status_name(ev.status), ev.correctness ? num(ev.correctness->max_absolute_error) : "-",
               ev.correctness ? num(ev.correctness->max_relative_error) : "-",
               ev.performance && opt.time ? fmt::format("{:.4f}", ev.performance->latency_ms) : "-",
               ev.performance && opt.time ? fmt::format("{:.2f}x", ev.performance->speedup_factor) : "-");
    // Failures say why; a pass whose speed beats the measured ceilings says so too.
    if (!ok || r->summary.find("IMPLAUSIBLE") != std::string::npos) fmt::print("    {}\n", r->summary);
    std::fflush(stdout);
  }
  for (const auto& s : skipped) fmt::print("skipped: {}\n", s);
  for (const auto& s : not_runnable) fmt::print("not run (unsupported): {}\n", s);
  fmt::print("{} evaluations on {}: {} passed, {} failed, {} could not run{}{}; traces in {}/traces\n", jobs.size(),
             kb::device_name(device), passed, failed, errors,
             already ? fmt::format(", {} already recorded (--resume)", already) : "",
             not_runnable.empty() ? "" : fmt::format(", {} solution{} in languages kb cannot run", not_runnable.size(),
                                                     not_runnable.size() == 1 ? "" : "s"),
             out_dir);
  if (failed || errors) status = 1;
  return status;
}

int cmd_devices(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (is_help(a)) {
      std::fputs(kDevicesUsage, stdout);
      return 0;
    }
    fmt::print(stderr, "kb devices: unexpected argument {}\n", a);
    return 2;
  }
  auto n = kb::cuda::device_count();
  if (!n) {
    fmt::print(stderr, "kb devices: {}\n", n.error().message);
    return 1;
  }
  for (int i = 0; i < *n; ++i) {
    auto info = kb::cuda::device_info(i);
    if (!info) {
      fmt::print(stderr, "kb devices: {}\n", info.error().message);
      return 1;
    }
    // The PCI bus id and nvidia-smi's index name the physical GPU behind the ordinal (which depends on
    // CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER).
    const int smi = kb::cuda::nvml_index(i);
    fmt::print("{}: {} (sm_{}{}, {} SMs, {:.1f} GiB, L2 {:.0f} MiB, PCI {}{})\n", i, info->name, info->compute_major,
               info->compute_minor, info->sm_count, info->memory_bytes / double(1 << 30), info->l2_bytes / double(1 << 20),
               info->pci_bus_id.empty() ? "?" : info->pci_bus_id, smi >= 0 ? fmt::format(", nvidia-smi {}", smi) : "");
  }
  for (const auto& [k, v] : kb::cuda::library_versions()) fmt::print("{} {}\n", k, v);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::string cmd = args.front();
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (is_help(cmd)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (cmd == "--version" || cmd == "version") {
    fmt::print("kb {} (CUDA {})\n", KB_VERSION_STRING, kb::cuda::built_with_cuda() ? "on" : "off");
    return 0;
  }
  try {
    if (cmd == "validate") return cmd_validate(rest);
    if (cmd == "bench") return cmd_bench(rest);
    if (cmd == "show") return cmd_show(rest);
    if (cmd == "devices") return cmd_devices(rest);
    if (cmd == "format") return cmd_format(rest);
    if (cmd == "dispatch") return cmd_dispatch(rest);
    if (cmd == "backendbench") return kb::backendbench::run_parse_command(rest, stdout, stderr);
  } catch (const std::exception& e) {
    fmt::print(stderr, "kb {}: internal error: {}\n", cmd, e.what());
    return 3;
  }
  fmt::print(stderr, "kb: unknown command \"{}\" (see kb --help)\n", cmd);
  return 2;
}
