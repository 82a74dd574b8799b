// BackendBench / TritonBench operator traces: a reader and a writer.
//
// A trace file is a sequence of
//   Operator: aten.add.Tensor
//   cnt: 156, ((T([1, 512, 768], f16), T([1, 512, 768], f16)), {})
// lines. The part after "cnt: N, " is a Python literal ((args...), {kwargs}),
// read here into a small AST (Value). Every scalar keeps its spelling (number
// text, quote style, dtype spelling, stride form, trailing commas), and the
// printer writes a canonical spacing (", " between items, ": " in dicts, no
// space inside brackets), which is the spacing of the real traces: for those,
// print(parse(line)) == line. For any line, parse(print(parse(line))) ==
// parse(line) and print is idempotent.
//
// Hostile input is refused with an error naming line and column: nesting
// deeper than max_depth, tensors of rank > limits::max_tensor_rank, negative
// dims or strides, dims or element counts or buffer spans above
// limits::max_tensor_elements, dims that do not fit int64, lines longer than
// limits::max_backendbench_line_bytes (refused before parsing), lists or
// tuples of more than limits::max_backendbench_list_elements and lines of more
// than limits::max_backendbench_line_values values (parsing stops there, so a
// line's AST stays bounded whatever its text). Numbers of any length are kept
// as text. The parser recurses only to max_depth.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace kb::backendbench {

// Deepest nesting of ( [ T( torch.device( accepted (the top-level tuple counts).
inline constexpr std::size_t max_depth = 64;
// Largest trace file parse_file reads.
inline constexpr std::size_t max_trace_file_bytes = std::size_t{256} << 20;

enum class Dtype {
  bf16, f64, f32, f16, c32, c64, c128, i8, i16, i32, i64, b8, u8,
};

// Abbreviation as written in T(...): "f16", "bf16", ...
const char* dtype_abbrev(Dtype d) noexcept;
// Reads "f16" or "torch.float16" / "torch.half" / ... ; nullopt otherwise.
std::optional<Dtype> dtype_from_name(std::string_view name) noexcept;
// Bytes per element.
std::size_t dtype_size(Dtype d) noexcept;

enum class Kind {
  integer,    // text: "-12", any length; int_value when it fits int64
  floating,   // text: "1e-05", "-65504.0", "inf", "-inf", "nan"; float_value
  boolean,    // text: "True" / "False"
  none,       // text: "None"
  string,     // text: raw, with quotes and escapes ('cuda', "torch.device('cpu')"); str_value decoded
  dtype,      // text: "f16" or "torch.float16"; dtype
  layout,     // text: "torch.strided", "torch.sparse_coo", ...
  torch_name, // text: any other "torch.xxx" name (torch.channels_last, ...)
  device,     // torch.device(...): children are the call's arguments
  list,       // [...]: children
  tuple,      // (...): children
  tensor,     // T(shape, dtype[, strides]): children = {shape list, dtype[, strides list/tuple]}
};

const char* kind_name(Kind k) noexcept;

struct Value {
  Kind kind = Kind::none;
  std::string text;             // spelling of scalars (see Kind); empty for containers
  std::vector<Value> children;  // list / tuple / device / tensor parts
  bool trailing_comma = false;  // list / tuple / device: a comma before the closing bracket
  bool stride_keyword = false;  // tensor: strides written as stride=(...) rather than positionally

  // Derived from the above when parsed (not part of equality).
  std::optional<std::int64_t> int_value;  // integer that fits int64
  double float_value = 0.0;               // floating
  std::string str_value;                  // string, decoded
  Dtype dtype = Dtype::f32;               // dtype, tensor
  std::vector<std::int64_t> shape;        // tensor
  std::vector<std::int64_t> strides;      // tensor: empty when not written
  std::size_t offset = 0;                 // byte offset in the parsed text (not part of equality)

  bool has_strides() const noexcept { return kind == Kind::tensor && children.size() == 3; }
  // Elements of a tensor (product of shape; 1 for 0-D).
  std::int64_t numel() const noexcept;

  friend bool operator==(const Value& a, const Value& b) noexcept;
};

struct Kwarg {
  Value key;  // a string (its quote style is kept); key.str_value is the name
  Value value;
};

// The ((args...), {kwargs}) of one line.
struct Args {
  std::vector<Value> positional;
  bool positional_trailing_comma = false;  // always true for exactly one argument
  std::vector<Kwarg> kwargs;
  bool kwargs_trailing_comma = false;

  const Value* kwarg(std::string_view name) const noexcept;
  friend bool operator==(const Args& a, const Args& b) noexcept;
};

struct ArgLine {
  std::size_t line = 0;     // 1-based line number in the source
  std::uint64_t count = 0;  // the cnt: value
  Args args;
};

struct Operator {
  std::string name;      // canonical (aten.sum.SymInt is read as aten.sum.dim_IntList)
  std::string spelling;  // as written on the Operator: line
  std::size_t line = 0;
  std::vector<ArgLine> lines;
};

struct TraceFile {
  std::string origin;
  std::vector<Operator> operators;
  std::size_t arg_line_count() const noexcept;
};

struct LineError {
  std::size_t line = 0;    // 1-based
  std::size_t column = 0;  // 1-based byte column
  Code code = Code::parse_error;
  std::string message;     // without the location
};

struct ParseReport {
  TraceFile trace;               // every line that parsed
  std::vector<LineError> errors; // one per line that did not
  std::size_t arg_lines_total = 0;   // non-blank lines other than Operator: lines
  std::size_t arg_lines_parsed = 0;

  bool ok() const noexcept { return errors.empty(); }
  // "origin:LINE:COL: message"
  std::string format_error(const LineError& e) const;
};

// Parses a whole trace text. Never throws on bad input (only bad_alloc).
ParseReport parse_text(std::string_view text, std::string_view origin);
// Reads and parses a file; the first error (formatted file:line:col: ...) fails it.
Result<TraceFile> parse_file(const std::string& path);
// Reads a file and gives the per-line report (io_error / limit_exceeded if unreadable).
Result<ParseReport> parse_file_report(const std::string& path);

// Parses one "((args...), {kwargs})" text; errors read "COL: message" (1-based).
Result<Args> parse_args(std::string_view text);
// Parses one value ("T([2], f16)", "[1, 2]", ...); errors read "COL: message".
Result<Value> parse_value(std::string_view text);

std::string print_value(const Value& v);
std::string print_args(const Args& args);
// "cnt: N, ((...), {...})"
std::string print_line(const ArgLine& line);
std::string print_line(std::uint64_t count, const Args& args);
// "Operator: <spelling>"
std::string print_operator_line(const Operator& op);
// The whole file, one line per Operator / cnt line, each ending in '\n'.
std::string print_trace(const TraceFile& trace);

}  // namespace kb::backendbench
