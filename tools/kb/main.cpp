// The `kb` command: a thin shell over lib/. Each subcommand parses its own
// flags, prints to stdout (results) and stderr (problems), and exits 0 only
// on success.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cuda/device.hpp"
#include "dataset/dataset.hpp"
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
  validate [PATH...]   check definitions, workloads, solutions and traces
  show NAME|FILE       print a definition in human form
  format FILE...       rewrite definitions, solutions and trace lines as kb writes them
  devices              list the CUDA devices kb can use

options:
  -h, --help           help for kb or for a command (kb validate --help)
  --version            print kb's version

With no PATH, `kb validate` checks kb's bundled dataset ()" KB_BUNDLED_DATASET R"().
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

Lists the CUDA devices kb can use, or says why there are none (exit 1).
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
  std::error_code ec;
  if (std::filesystem::is_regular_file(target, ec)) {
    kb::Diagnostics diags;
    auto d = kb::read_definition_file(target, &diags);
    if (!d) {
      for (const auto& x : diags.items())
        if (x.severity == kb::Severity::error) fmt::print(stderr, "{}\n", x.to_string());
      return 1;
    }
    print_definition(*d, target);
    return 0;
  }
  // Search a dataset root, or the bundled kernels/<op_type>/definitions tree,
  // for <NAME>.json holding that definition.
  kb::Diagnostics diags;
  std::vector<std::string> files;
  for (auto it = std::filesystem::recursive_directory_iterator(dataset, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    if (it->path().extension() == ".json" && it->path().stem() == target) files.push_back(it->path().string());
  for (const auto& f : files) {
    auto d = kb::read_definition_file(f, &diags);
    if (d && d->name == target) {
      print_definition(*d, f);
      return 0;
    }
  }
  fmt::print(stderr, "kb show: no definition \"{}\" under {}\n", target, dataset);
  return 1;
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
    fmt::print("{}: {} (sm_{}{}, {} SMs, {:.1f} GiB, L2 {:.0f} MiB)\n", i, info->name, info->compute_major,
               info->compute_minor, info->sm_count, info->memory_bytes / double(1 << 30), info->l2_bytes / double(1 << 20));
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
    if (cmd == "show") return cmd_show(rest);
    if (cmd == "devices") return cmd_devices(rest);
    if (cmd == "format") return cmd_format(rest);
  } catch (const std::exception& e) {
    fmt::print(stderr, "kb {}: internal error: {}\n", cmd, e.what());
    return 3;
  }
  fmt::print(stderr, "kb: unknown command \"{}\" (see kb --help)\n", cmd);
  return 2;
}
