#include "backendbench/command.hpp"

#include <fmt/core.h>

#include "backendbench/trace.hpp"

namespace kb::backendbench {

const char* const kParseUsage = R"USAGE(usage: kb backendbench parse FILE
Parse a BackendBench / TritonBench operator trace file ("Operator: NAME" lines,
each followed by "cnt: N, ((args...), {kwargs})" lines). Prints every line that
does not parse as FILE:LINE:COL: message, then "parsed N of M lines".
Exit status: 0 when every line parsed, 1 otherwise, 2 on bad usage.
)USAGE";

namespace {
bool is_help(const std::string& a) { return a == "--help" || a == "-h" || a == "help"; }
}  // namespace

int run_parse_command(const std::vector<std::string>& args, std::FILE* out, std::FILE* err) {
  if (args.empty()) {
    std::fputs(kParseUsage, err);
    return 2;
  }
  if (is_help(args[0])) {
    std::fputs(kParseUsage, out);
    return 0;
  }
  if (args[0] != "parse") {
    fmt::print(err, "kb backendbench: unknown subcommand \"{}\" (see kb backendbench --help)\n", args[0]);
    return 2;
  }
  std::vector<std::string> files;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (is_help(a)) {
      std::fputs(kParseUsage, out);
      return 0;
    }
    if (a.size() > 1 && a[0] == '-') {
      fmt::print(err, "kb backendbench parse: unknown option \"{}\"\n", a);
      std::fputs(kParseUsage, err);
      return 2;
    }
    files.push_back(a);
  }
  if (files.size() != 1) {
    fmt::print(err, "kb backendbench parse: expected exactly one FILE, got {}\n", files.size());
    std::fputs(kParseUsage, err);
    return 2;
  }
  auto rep = parse_file_report(files[0]);
  if (!rep) {
    fmt::print(err, "kb backendbench parse: {}\n", rep.error().message);
    return 1;
  }
  for (const LineError& e : rep->errors) fmt::print(err, "{}\n", rep->format_error(e));
  fmt::print(out, "parsed {} of {} lines\n", rep->arg_lines_parsed, rep->arg_lines_total);
  std::fflush(out);
  return rep->ok() ? 0 : 1;
}

}  // namespace kb::backendbench
