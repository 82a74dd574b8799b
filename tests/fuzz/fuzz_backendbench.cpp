// libFuzzer target for lib/backendbench: any text must parse or be refused
// line by line with a located error, and every line that parses must
// round-trip: print -> parse gives an equal AST, and printing is idempotent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "backendbench/trace.hpp"

namespace bb = kb::backendbench;

namespace {

void check_code(kb::Code c) {
  if (c != kb::Code::parse_error && c != kb::Code::limit_exceeded && c != kb::Code::invalid_data) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const bb::ParseReport rep = bb::parse_text(text, "fuzz");
  if (rep.arg_lines_parsed > rep.arg_lines_total) std::abort();
  if (rep.trace.arg_line_count() != rep.arg_lines_parsed) std::abort();
  for (const bb::LineError& e : rep.errors) {
    check_code(e.code);
    if (e.message.empty() || e.line == 0 || e.column == 0) std::abort();
  }
  for (const bb::Operator& op : rep.trace.operators) {
    if (op.name.empty() || op.spelling.empty()) std::abort();
    for (const bb::ArgLine& l : op.lines) {
      const std::string printed = bb::print_args(l.args);
      auto again = bb::parse_args(printed);
      if (!again.ok()) std::abort();
      if (!(*again == l.args)) std::abort();
      if (bb::print_args(*again) != printed) std::abort();
      // The printed line parses in a trace as well.
      const std::string line = bb::print_operator_line(op) + "\n" + bb::print_line(l) + "\n";
      const bb::ParseReport one = bb::parse_text(line, "again");
      if (!one.ok() || one.trace.operators.size() != 1 || one.trace.operators[0].lines.size() != 1) std::abort();
      if (!(one.trace.operators[0].lines[0].args == l.args) || one.trace.operators[0].lines[0].count != l.count)
        std::abort();
    }
  }
  // The argument text alone (no "cnt:" prefix) goes through parse_args too.
  auto direct = bb::parse_args(text);
  if (direct.ok()) {
    const std::string printed = bb::print_args(*direct);
    auto again = bb::parse_args(printed);
    if (!again.ok() || !(*again == *direct) || bb::print_args(*again) != printed) std::abort();
  } else {
    check_code(direct.error().code);
  }
  return 0;
}
