// libFuzzer target for lib/backendbench: any text must parse or be refused
// line by line with a located error, and every line that parses must
// round-trip: print -> parse gives an equal AST, and printing is idempotent.
//
// Inputs that start with byte 0xFF describe one long line compactly, so the
// parser's limits (limits::max_backendbench_list_elements elements in a list,
// limits::max_backendbench_line_bytes bytes in a line) are reached from seeds
// of a few bytes:
//   0xFF KIND COUNT CHECK PREFIX 0x00 ELEMENT 0x00 SUFFIX
//   KIND 'L': PREFIX, then COUNT copies of ELEMENT joined by ", ", then SUFFIX
//   KIND 'B': PREFIX, then ELEMENT repeated and cut so that the last line
//             (from PREFIX's last line break) is COUNT bytes long with SUFFIX,
//             then SUFFIX
//   COUNT byte c: 0x7E..0x82 means the limit + (c - 0x80) (elements for 'L',
//                 bytes for 'B') when CHECK is the sum of the bytes after it
//                 (mod 256); any other c, or a CHECK that does not match,
//                 means c itself. The check keeps most mutations of a limit
//                 seed small: a million values a run would starve the fuzzer.
// A list past its limit never parses; a line past its limit is refused as such.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "backendbench/trace.hpp"
#include "common/limits.hpp"

namespace bb = kb::backendbench;

namespace {

void check_code(kb::Code c) {
  if (c != kb::Code::parse_error && c != kb::Code::limit_exceeded && c != kb::Code::invalid_data) std::abort();
}

struct Expanded {
  std::string text;
  char kind = 0;
  std::size_t count = 0;
  bool one_line = false;      // no line break in ELEMENT or SUFFIX: the expansion is the text's last line
  std::size_t line = 0;       // that line's number
  bool plain_list = false;    // PREFIX ends in '[', ELEMENT is an integer literal, SUFFIX starts with ']'
};

std::optional<Expanded> expand(std::string_view in) {
  if (in.size() < 4 || static_cast<unsigned char>(in[0]) != 0xFF || (in[1] != 'L' && in[1] != 'B')) return std::nullopt;
  Expanded e;
  e.kind = in[1];
  const unsigned c = static_cast<unsigned char>(in[2]);
  std::string_view rest = in.substr(4);
  unsigned sum = 0;
  for (char ch : rest) sum += static_cast<unsigned char>(ch);
  const bool checked = (sum & 0xFF) == static_cast<unsigned char>(in[3]);
  const std::size_t limit =
      e.kind == 'L' ? kb::limits::max_backendbench_list_elements : kb::limits::max_backendbench_line_bytes;
  e.count = checked && c >= 0x7E && c <= 0x82 ? limit + c - 0x80 : c;
  const std::size_t a = rest.find('\0');
  const std::size_t b = a == std::string_view::npos ? a : rest.find('\0', a + 1);
  if (b == std::string_view::npos) return std::nullopt;
  const std::string_view prefix = rest.substr(0, a), element = rest.substr(a + 1, b - a - 1), suffix = rest.substr(b + 1);
  if (element.empty()) return std::nullopt;
  auto no_break = [](std::string_view t) { return t.find_first_of("\n\r") == std::string_view::npos; };
  e.one_line = no_break(element) && no_break(suffix);
  e.line = 1;
  for (char ch : prefix) e.line += ch == '\n';
  const std::size_t last_start = prefix.rfind('\n') == std::string_view::npos ? 0 : prefix.rfind('\n') + 1;
  bool digits = element.size() <= 9;
  for (char ch : element) digits = digits && ch >= '0' && ch <= '9';
  e.plain_list = !prefix.empty() && prefix.back() == '[' && digits && !suffix.empty() && suffix.front() == ']';
  e.text.reserve(e.kind == 'L' ? prefix.size() + e.count * (element.size() + 2) + suffix.size() : e.count);
  e.text.append(prefix);
  if (e.kind == 'L') {
    for (std::size_t i = 0; i < e.count; ++i) {
      if (i) e.text += ", ";
      e.text.append(element);
    }
  } else {
    const std::size_t want = last_start + e.count;  // text size before SUFFIX for a last line of COUNT bytes
    while (e.text.size() + suffix.size() < want) e.text.append(element);
    if (e.text.size() + suffix.size() > want)
      e.text.resize(std::max(prefix.size(), want > suffix.size() ? want - suffix.size() : 0));
  }
  e.text.append(suffix);
  return e;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::optional<Expanded> expanded = expand(std::string_view(reinterpret_cast<const char*>(data), size));
  const std::string_view text =
      expanded ? std::string_view(expanded->text) : std::string_view(reinterpret_cast<const char*>(data), size);
  const bb::ParseReport rep = bb::parse_text(text, "fuzz");
  if (expanded && expanded->one_line) {
    const std::size_t last = text.rfind('\n') == std::string_view::npos ? 0 : text.rfind('\n') + 1;
    const bool long_line = expanded->kind == 'B' && text.size() - last > kb::limits::max_backendbench_line_bytes;
    const bool long_list =
        expanded->kind == 'L' && expanded->plain_list && expanded->count > kb::limits::max_backendbench_list_elements;
    bool refused = false, refused_as_long = false;
    for (const bb::LineError& e : rep.errors)
      if (e.line == expanded->line) {
        refused = true;
        refused_as_long = e.code == kb::Code::limit_exceeded;
      }
    if (long_line && !refused_as_long) std::abort();
    if (long_list && !refused) std::abort();
  }
  if (rep.arg_lines_parsed > rep.arg_lines_total) std::abort();
  if (rep.trace.arg_line_count() != rep.arg_lines_parsed) std::abort();
  for (const bb::LineError& e : rep.errors) {
    check_code(e.code);
    if (e.message.empty() || e.line == 0 || e.column == 0) std::abort();
  }
  for (const bb::Operator& op : rep.trace.operators) {
    if (op.name.empty() || op.spelling.empty()) std::abort();
    // Lines at the limits round-trip as small ones do; printing and parsing a
    // million values three more times would only slow the fuzzer down.
    if (expanded) continue;
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
  if (expanded) return 0;
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
