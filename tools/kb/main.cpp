// The `kb` command: a thin shell over lib/. Each subcommand parses its own
// flags, prints to stdout (results) and stderr (problems), and exits 0 only
// on success.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include "commands.hpp"
#include "common/printable.hpp"
#include "common/tuning.hpp"
#include "cuda/device.hpp"
#include "cuda/nvml.hpp"
#include "dataset/dataset.hpp"
#include "dispatch/dispatch_table.hpp"
#include "expr/expr.hpp"
#include "harness/harness.hpp"
#include "json/json.hpp"
#include "schema/io.hpp"

#ifndef KB_VERSION_STRING
#define KB_VERSION_STRING "0.0.0"
#endif

namespace {

constexpr const char* kUsage = R"(usage: kb <command> [options] [args]

commands:
  bench [DATASET...]   judge and time solutions on every workload; write traces
  validate [PATH...]   check definitions, workloads, solutions and traces (and calling
                       records, benchmark results and agent traces)
  show [DATASET] NAME|FILE  print a definition in human form
  format [-i] FILE...  print definitions, solutions and trace lines as kb writes them
                       (-i: rewrite each FILE in place)
  devices              list the CUDA devices kb can use
  dispatch DEF TRACES  what kb_dispatch chooses per call from recorded traces
  estimate RECORD TRACES  a model step's time from a calling record and traces, baseline vs best
  export --benchmark-result TRACES  one Benchmark Result per definition and solution
  compare OLD NEW      two trace sets side by side: faster, slower or within noise
  report --out DIR TRACES  an offline HTML report (and markdown, CSV, JSON) of traces
  tuning               the tuning settings, their values and defaults (KB_* variables)
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

Kernel Calling Records, Benchmark Results and Agent traces (.json files outside
definitions/ and solutions/, recognized by their fields) are checked too; a
calling record's kernel ids and axes against the definitions of every PATH
given, so name a dataset beside it: kb validate ../shared/flashinfer-trace models/

Prints one line per problem, then
  validated N definitions, N workloads, N solutions, N traces: N errors
and exits 0 only when there are no errors.

options:
  --strict       missing safetensors blobs are errors, not warnings
  -v, --verbose  list every warning and every constraint kb could not evaluate
  -q, --quiet    print errors and the summary only
  -h, --help     this text
)";

constexpr const char* kShowUsage = R"(usage: kb show [DATASET] NAME|FILE
       kb show [--dataset DATASET] NAME|FILE

Prints a definition: axes (with a seed-001 axis's parent), signature,
constraints and tags. NAME is looked up in DATASET: a dataset directory (its
definitions/) or any folder of definitions (default: the bundled dataset); a
name found nowhere is an error that lists the near matches. FILE is a
definition .json.
)";

constexpr const char* kFormatUsage = R"(usage: kb format [-i] FILE...

Reads each FILE (a .json definition or solution, or .jsonl trace lines) and
prints it on stdout as kb writes it: the current FlashInfer Trace dialect
(seed-001 input is converted), canonical field order, one line per trace.
With -i, each FILE is rewritten in place instead (replaced whole, keeping its
permissions) and nothing is printed. Exit 1 if any input is invalid (its
problems are printed, nothing is printed or written for it).

options:
  -i, --in-place  rewrite each FILE instead of printing it
  -h, --help      this text
)";

constexpr const char* kDevicesUsage = R"(usage: kb devices

Lists the CUDA devices kb can use, or says why there are none (exit 1): for each,
the ordinal that kb bench --device cuda:N takes, its name and size, and the
physical GPU behind it (PCI bus id, nvidia-smi's index), which CUDA_VISIBLE_DEVICES
and CUDA_DEVICE_ORDER can renumber.
)";

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
  const std::map<std::string, std::size_t> missing_blobs = verbose ? std::map<std::string, std::size_t>{}
                                                                   : diags.category_counts("missing-blob");
  for (const auto& d : diags.items()) {
    if (d.severity == kb::Severity::error) {
      fmt::print(stderr, "{}\n", d.to_string());
      continue;
    }
    if (quiet) continue;
    if (!verbose && d.category == "missing-blob") continue;
    if (d.severity == kb::Severity::note && !verbose) continue;
    fmt::print(stderr, "{}\n", d.to_string());
  }
  for (const auto& [file, n] : missing_blobs)
    fmt::print(stderr, "{}: warning: {} safetensors input{} name blobs that are not present (kb will generate "
                       "valid values for them; --verbose lists each, --strict makes them errors)\n",
               file, n, n == 1 ? "" : "s");

  std::size_t errors = diags.error_count();
  // Calling records, benchmark results and agent traces are named only when some were met.
  std::string models;
  for (auto [n, what] : {std::pair{r.calling_records, "calling record"}, std::pair{r.benchmark_results, "benchmark result"},
                         std::pair{r.agent_traces, "agent trace"}})
    if (n) models += fmt::format(", {} {}{}", n, what, n == 1 ? "" : "s");
  fmt::print("validated {} definitions, {} workloads, {} solutions, {} traces{}: {} error{}\n", r.definitions,
             r.workloads, r.solutions, r.traces, models, errors, errors == 1 ? "" : "s");
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
  if (d.description) fmt::print("  {}\n", kb::printable(*d.description, kb::Lines::many));
  fmt::print("\naxes:\n");
  for (const auto& a : d.axes) {
    std::string kind = a.kind == kb::AxisKind::const_ ? fmt::format("= {}", a.value) : "var";
    // seed-001 nests a var axis in another (tokens within sequences): its parent is part of its meaning.
    if (a.parent) kind += fmt::format(" (parent {})", *a.parent);
    fmt::print("  {:<20} {:<10}{}\n", a.name, kind, a.description ? "  " + kb::printable(*a.description) : std::string());
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
      fmt::print("  {}{}\n", kb::printable(c), e && e->needs_tensors() ? "    (checked when tensors exist)" : "");
    }
  }
  if (!d.tags.empty()) fmt::print("\ntags: {}\n", kb::printable(fmt::format("{}", fmt::join(d.tags, " "))));
}

// A definition named by FILE (a .json) or NAME (looked up in `dataset`: a dataset root or any folder of
// definitions, such as the bundled kernels/ tree), with the file it came from; its problems are printed,
// prefixed by `command`.
std::optional<std::pair<kb::Definition, std::string>> find_definition(const char* command, const std::string& target,
                                                                      const std::string& dataset) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(target, ec) || std::filesystem::path(target).extension() == ".json") {
    kb::Diagnostics diags;
    auto d = kb::read_definition_file(target, &diags);
    if (!d) {
      if (diags.has_errors()) {
        for (const auto& x : diags.items())
          if (x.severity == kb::Severity::error) fmt::print(stderr, "{}\n", x.to_string());
      } else {
        fmt::print(stderr, "{}: {}\n", command, d.error().message);
      }
      return std::nullopt;
    }
    return std::pair{std::move(*d), target};
  }
  auto found = kb::find_definition_by_name(dataset, target);
  if (!found) {
    fmt::print(stderr, "{}: {}\n", command, found.error().message);
    return std::nullopt;
  }
  return std::pair{std::move(found->definition), found->file};
}

int cmd_show(const std::vector<std::string>& args) {
  std::string dataset = KB_BUNDLED_DATASET;
  std::vector<std::string> positional;
  bool dataset_flag = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (is_help(args[i])) {
      std::fputs(kShowUsage, stdout);
      return 0;
    } else if (args[i] == "--dataset") {
      if (i + 1 >= args.size()) {
        fmt::print(stderr, "kb show: --dataset needs a value (see kb show --help)\n");
        return 2;
      }
      dataset = args[++i];
      dataset_flag = true;
    } else if (args[i].size() > 1 && args[i][0] == '-') {
      fmt::print(stderr, "kb show: unknown option {} (see kb show --help)\n", args[i]);
      return 2;
    } else {
      positional.push_back(args[i]);
    }
  }
  std::error_code ec;
  if (positional.size() == 2 && !dataset_flag) {
    dataset = positional[0];
    positional.erase(positional.begin());
  } else if (positional.size() > 1) {
    fmt::print(stderr, "kb show: expected [DATASET] NAME|FILE, got {} arguments (see kb show --help)\n",
               positional.size() + (dataset_flag ? 1 : 0));
    return 2;
  }
  if (positional.empty()) {
    std::fputs(kShowUsage, stderr);
    return 2;
  }
  const std::string& target = positional.front();
  if (std::filesystem::is_directory(target, ec)) {
    fmt::print(stderr, "kb show: {} is a directory: name a definition in it too (kb show {} NAME)\n", target, target);
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
    fmt::print(stderr, "kb dispatch: {}\n", kb::printable(table.error().message));
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

// Replaces `given` with `text`: written beside it, flushed, given the file's permissions, then renamed
// over it, so that a failure leaves the original whole.
bool replace_file(const std::string& given, const std::string& text) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // A link stays a link: the file it points to is the one replaced.
  std::string file = given;
  if (fs::is_symlink(given, ec))
    if (auto target = fs::canonical(given, ec); !ec) file = target.string();
  ec.clear();
  const fs::perms perms = fs::status(file, ec).permissions();
  const std::string tmp = file + ".kb-format.tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    fmt::print(stderr, "kb format: {}: cannot write: {}\n", tmp, std::strerror(errno));
    return false;
  }
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fflush(f) == 0 && ok;
  ok = fsync(fileno(f)) == 0 && ok;
  ok = std::fclose(f) == 0 && ok;
  if (ok && !ec) fs::permissions(tmp, perms, fs::perm_options::replace, ec);
  if (!ok || std::rename(tmp.c_str(), file.c_str()) != 0) {
    fmt::print(stderr, "kb format: {}: cannot replace: {}\n", file, std::strerror(errno));
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

int cmd_format(const std::vector<std::string>& args) {
  bool in_place = false;
  std::vector<std::string> files;
  for (const auto& a : args) {
    if (is_help(a)) {
      std::fputs(kFormatUsage, stdout);
      return 0;
    } else if (a == "-i" || a == "--in-place") {
      in_place = true;
    } else if (a.size() > 1 && a[0] == '-') {
      fmt::print(stderr, "kb format: unknown option {} (see kb format --help)\n", a);
      return 2;
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) {
    std::fputs(kFormatUsage, stderr);
    return 2;
  }
  int status = 0;
  for (const auto& file : files) {
    kb::Diagnostics diags;
    auto text = kb::json::read_text_file(file);
    if (!text) {
      fmt::print(stderr, "{}\n", kb::printable(text.error().message));
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
    } else if (auto d = kb::read_definition(*text, file, &diags)) {
      out = kb::to_json(*d) + "\n";
      // The current dialect asks more than seed-001 did (an op_type): a definition that would not read
      // back as written is refused rather than printed or written.
      kb::Diagnostics again;
      if (!kb::read_definition(out, fmt::format("{} (in the current dialect)", file), &again))
        for (const auto& x : again.items())
          if (x.severity == kb::Severity::error) diags.add(x);
    }
    if (diags.has_errors()) {
      std::fputs(diags.errors_text().c_str(), stderr);
      std::fputc('\n', stderr);
      status = 1;
      continue;
    }
    if (!in_place) std::fputs(out.c_str(), stdout);
    else if (out != *text && !replace_file(file, out)) status = 1;
  }
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

// The library never prints: its diagnostics reach the command through this sink.
void print_diagnostic(kb::tuning::LogLevel level, const char* message, void*) {
  fmt::print(stderr, "kb: {}: {}\n", kb::log::level_name(level), message);
}

int cmd_tuning(const std::vector<std::string>& args) {
  if (!args.empty() && is_help(args.front())) {
    std::fputs("usage: kb tuning\n\nPrints kb's tuning settings: each one's environment variable, allowed values,\n"
               "default and what it changes. kb_context_options.tuning sets them per context.\n", stdout);
    return 0;
  }
  if (!args.empty()) {
    fmt::print(stderr, "kb tuning: takes no arguments\n");
    return 2;
  }
  std::fputs(kb::tuning::table().c_str(), stdout);
  return 0;
}

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  kb::log::set_process_sink(print_diagnostic, nullptr);
  if (auto settings = kb::tuning::from_environment()) {
    kb::tuning::set_process_default(*settings);
  } else {
    fmt::print(stderr, "kb: {}\n", settings.error().message);
    return 2;
  }
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
    if (cmd == "tuning") return cmd_tuning(rest);
    if (cmd == "backendbench") return cmd_backendbench(rest, stdout, stderr);
    if (cmd == "estimate") return cmd_estimate(rest);
    if (cmd == "export") return cmd_export(rest);
    if (cmd == "compare") return cmd_compare(rest);
    if (cmd == "report") return cmd_report(rest);
  } catch (const std::exception& e) {
    fmt::print(stderr, "kb {}: internal error: {}\n", cmd, e.what());
    return 3;
  }
  fmt::print(stderr, "kb: unknown command \"{}\" (see kb --help)\n", cmd);
  return 2;
}
