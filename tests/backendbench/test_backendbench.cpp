// Tests of lib/backendbench: the trace grammar, its errors, the writer, and the
// real TritonBench trace file from the shared folder. The `kb backendbench`
// command is tested by tests/cli.
#include <doctest/doctest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "backendbench/trace.hpp"
#include "common/limits.hpp"
#include "backendbench/run.hpp"

namespace bb = kb::backendbench;
using bb::Kind;

namespace {

bb::Value value(const std::string& text) {
  auto r = bb::parse_value(text);
  INFO(text);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : r.error().message));
  CHECK(bb::print_value(*r) == text);
  auto again = bb::parse_value(bb::print_value(*r));
  REQUIRE(again.ok());
  CHECK(*again == *r);
  return *r;
}

bb::Args args(const std::string& text) {
  auto r = bb::parse_args(text);
  INFO(text);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : r.error().message));
  CHECK(bb::print_args(*r) == text);
  auto again = bb::parse_args(bb::print_args(*r));
  REQUIRE(again.ok());
  CHECK(*again == *r);
  return *r;
}

std::string value_error(const std::string& text) {
  auto r = bb::parse_value(text);
  INFO(text);
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}

std::string args_error(const std::string& text) {
  auto r = bb::parse_args(text);
  INFO(text);
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}

// The one error of a one-line trace, formatted.
std::string line_error(const std::string& line) {
  const std::string text = "Operator: aten.x.default\n" + line + "\n";
  bb::ParseReport rep = bb::parse_text(text, "t.txt");
  INFO(line);
  REQUIRE(rep.errors.size() == 1);
  return rep.format_error(rep.errors[0]);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string shared_file() {
  const char* dir = std::getenv("KB_SHARED_DIR");
  return std::string(dir ? dir : "../shared") + "/backendbench/tritonbench-op-traces.txt";
}

}  // namespace

TEST_CASE("tensors: shape, dtype, positional and keyword strides") {
  bb::Value t = value("T([1, 512, 768], f16)");
  CHECK(t.kind == Kind::tensor);
  CHECK(t.shape == std::vector<std::int64_t>{1, 512, 768});
  CHECK(t.dtype == bb::Dtype::f16);
  CHECK_FALSE(t.has_strides());
  CHECK(t.numel() == 512 * 768);

  bb::Value s = value("T([10, 20], f16, [40, 2])");
  CHECK(s.has_strides());
  CHECK_FALSE(s.stride_keyword);
  CHECK(s.strides == std::vector<std::int64_t>{40, 2});

  bb::Value k = value("T([768, 2048], f16, stride=(1, 768))");
  CHECK(k.stride_keyword);
  CHECK(k.strides == std::vector<std::int64_t>{1, 768});
  CHECK(k.children[2].kind == Kind::tuple);

  bb::Value one = value("T([4], f32, stride=(4,))");
  CHECK(one.strides == std::vector<std::int64_t>{4});
  CHECK(one.children[2].trailing_comma);

  bb::Value zero_d = value("T([], f32)");
  CHECK(zero_d.shape.empty());
  CHECK(zero_d.numel() == 1);
  CHECK(value("T([0, 5], i64)").numel() == 0);
  CHECK(value("T([4, 4], f16, stride=(0, 0))").strides == std::vector<std::int64_t>{0, 0});
  CHECK(value("T([2, 3], f32, stride=(1, 2))").strides == std::vector<std::int64_t>{1, 2});
  CHECK(value("T([2], torch.float16)").dtype == bb::Dtype::f16);

  // Different stride spellings are different ASTs.
  CHECK_FALSE(value("T([2], f16, [1])") == value("T([2], f16, stride=(1,))"));
}

TEST_CASE("dtype abbreviations and torch names") {
  const char* names[] = {"bf16", "f64", "f32", "f16", "c32", "c64", "c128", "i8", "i16", "i32", "i64", "b8", "u8"};
  for (const char* n : names) {
    bb::Value t = value(std::string("T([2], ") + n + ")");
    CHECK(std::string(bb::dtype_abbrev(t.dtype)) == n);
    bb::Value d = value(n);
    CHECK(d.kind == Kind::dtype);
    CHECK(d.dtype == t.dtype);
  }
  CHECK(value("torch.float16").dtype == bb::Dtype::f16);
  CHECK(value("torch.bfloat16").dtype == bb::Dtype::bf16);
  CHECK(value("torch.bool").dtype == bb::Dtype::b8);
  CHECK(value("torch.uint8").dtype == bb::Dtype::u8);
  CHECK(value("torch.int64").dtype == bb::Dtype::i64);
  bb::Value quoted = value("'torch.float16'");
  CHECK(quoted.kind == Kind::string);
  CHECK(bb::dtype_from_name(quoted.str_value) == bb::Dtype::f16);
  CHECK(bb::dtype_size(bb::Dtype::c128) == 16);
  CHECK(bb::dtype_size(bb::Dtype::bf16) == 2);
}

TEST_CASE("integers keep their text, any length") {
  bb::Value v = value("42");
  CHECK(v.kind == Kind::integer);
  CHECK(v.int_value == 42);
  CHECK(value("-7").int_value == -7);
  CHECK(value("0").int_value == 0);
  CHECK(value("9223372036854775807").int_value == INT64_MAX);
  CHECK(value("-9223372036854775808").int_value == INT64_MIN);
  CHECK_FALSE(value("9223372036854775808").int_value.has_value());
  const std::string huge(5000, '9');
  bb::Value h = value(huge);
  CHECK(h.kind == Kind::integer);
  CHECK(h.text == huge);
  CHECK_FALSE(h.int_value.has_value());
}

TEST_CASE("floats keep their spelling") {
  CHECK(value("1e-05").float_value == doctest::Approx(1e-05));
  CHECK(value("-65504.0").float_value == -65504.0);
  CHECK(value("0.125").float_value == 0.125);
  CHECK(value("1E+300").kind == Kind::floating);
  CHECK(std::isinf(value("-inf").float_value));
  CHECK(value("-inf").float_value < 0);
  CHECK(std::isinf(value("inf").float_value));
  CHECK(std::isnan(value("nan").float_value));
  CHECK(value("1e999").float_value == HUGE_VAL);
  CHECK(value("1e-999").float_value == 0.0);
  CHECK(value("1." + std::string(3000, '5')).kind == Kind::floating);
  // 1.0 and 1.00 are different spellings.
  CHECK_FALSE(value("1.0") == value("1.00"));
  // nan equals nan in the AST (compared by text).
  CHECK(value("nan") == value("nan"));
}

TEST_CASE("booleans, None, names, layouts, devices") {
  CHECK(value("True").kind == Kind::boolean);
  CHECK(value("False").kind == Kind::boolean);
  CHECK(value("None").kind == Kind::none);
  CHECK(value("torch.strided").kind == Kind::layout);
  CHECK(value("torch.sparse_coo").kind == Kind::layout);
  CHECK(value("torch.channels_last").kind == Kind::torch_name);
  bb::Value d = value("torch.device('cpu')");
  CHECK(d.kind == Kind::device);
  REQUIRE(d.children.size() == 1);
  CHECK(d.children[0].str_value == "cpu");
  CHECK(value("torch.device('cuda', 0)").children.size() == 2);
  bb::Value q = value("\"torch.device('cpu')\"");
  CHECK(q.kind == Kind::string);
  CHECK(q.str_value == "torch.device('cpu')");
}

TEST_CASE("strings in either quote, with escapes") {
  bb::Value s = value("'cuda'");
  CHECK(s.str_value == "cuda");
  CHECK(value("\"cuda\"").str_value == "cuda");
  CHECK_FALSE(value("'cuda'") == value("\"cuda\""));
  CHECK(value(R"('it\'s')").str_value == "it's");
  CHECK(value(R"("a\"b")").str_value == "a\"b");
  CHECK(value(R"('a\\b\n\t\x41\q')").str_value == "a\\b\n\tA\\q");
  CHECK(value("''").str_value.empty());
}

TEST_CASE("lists and tuples, nested, with tensors") {
  bb::Value l = value("[1, 2, 3]");
  CHECK(l.kind == Kind::list);
  CHECK(l.children.size() == 3);
  CHECK(value("[]").children.empty());
  CHECK(value("()").kind == Kind::tuple);
  CHECK(value("(1,)").children.size() == 1);
  CHECK(value("[1,]").trailing_comma);
  CHECK(value("(1, 2,)").trailing_comma);
  bb::Value n = value("[[1, 2], (3, [T([2], f16), None]), [True, 1e-05, 'x']]");
  CHECK(n.children[1].children[1].children[0].kind == Kind::tensor);
  bb::Value ts = value("[T([5, 5], f32), T([3, 3], i64), 42]");
  CHECK(ts.children[1].dtype == bb::Dtype::i64);
}

TEST_CASE("argument lines") {
  bb::Args a = args("((T([1, 512, 768], f16), T([1, 512, 768], f16)), {})");
  CHECK(a.positional.size() == 2);
  CHECK(a.kwargs.empty());
  bb::Args one = args("((T([64, 256], f16),), {})");
  CHECK(one.positional.size() == 1);
  CHECK(args("((), {})").positional.empty());
  bb::Args kw = args("((T([128, 256], f16), [1024, 249, 249]), {'dtype': torch.float16, 'device': 'cuda'})");
  REQUIRE(kw.kwarg("dtype") != nullptr);
  CHECK(kw.kwarg("dtype")->dtype == bb::Dtype::f16);
  CHECK(kw.kwarg("device")->str_value == "cuda");
  CHECK(kw.kwarg("layout") == nullptr);
  args("(([T([5, 5], f32), T([3, 3], i64), 42],), {'weight': T([3, 3], f32)})");
  args("((1, 1, [965, 192], T([1, 54704], i64), T([54704, 192], f16)), "
       "{'dtype': f16, 'layout': torch.sparse_coo, 'device': 'cuda', 'pin_memory': None})");
  args("((T([], f32),), {'dtype': f16, 'device': \"torch.device('cpu')\"})");
  args("((T([2], f16),), {\"keepdim\": True,})");
  // Extra spaces are accepted and printed canonically.
  auto loose = bb::parse_args(" ( ( T( [ 1 ,2 ] , f16 , stride = ( 2 , 1 ) ) , ) , { 'a' : 1 } ) ");
  REQUIRE(loose.ok());
  CHECK(bb::print_args(*loose) == "((T([1, 2], f16, stride=(2, 1)),), {'a': 1})");
  CHECK(bb::parse_args(bb::print_args(*loose)).value() == *loose);
}

TEST_CASE("errors name the column") {
  CHECK(args_error("((1, 2), {}") == "12: expected ')', found end of line");
  CHECK(args_error("((1 2), {})") == "5: expected ',' or ')', found '2'");
  CHECK(args_error("((1), {})") == "2: a 1-tuple needs a trailing comma: (x,)");
  CHECK(args_error("[1]") == "1: expected '(', found '['");
  CHECK(args_error("((), [])") == "6: expected '{' opening the keyword arguments, found '['");
  CHECK(args_error("((), {dtype: 1})") == "7: expected a quoted keyword name, found 'd'");
  CHECK(args_error("((), {'a b': 1})") == "7: keyword name 'a b' is not an identifier");
  CHECK(args_error("((), {'a': 1, 'a': 2})") == "15: duplicate keyword 'a'");
  CHECK(args_error("((), {}) x") == "10: unexpected 'x' after the arguments");
  CHECK(value_error("'abc") == "1: unterminated string");
  CHECK(value_error("foo") == "1: unknown name 'foo'");
  CHECK(value_error("T([2], f17)") == "8: expected a dtype (bf16 f64 f32 f16 c32 c64 c128 i8 i16 i32 i64 b8 u8), found 'f'");
  CHECK(value_error("T(2, f16)") == "3: expected '[' opening the shape of T(...), found '2'");
  CHECK(value_error("T([2, -1], f16)") == "7: negative dim -1");
  CHECK(value_error("T([2.5], f16)") == "4: expected an integer dim, found a float");
  CHECK(value_error("T([99999999999999999999], f16)") == "4: dim 99999999999999999999 does not fit int64");
  CHECK(value_error("T([2199023255553], f16)") == "4: dim 2199023255553 exceeds 2^40");
  CHECK(value_error("T([1048576, 1048577], f16)") == "3: tensor has more than 2^40 elements");
  CHECK(value_error("T([2, 3], f16, [1])") == "16: 1 strides for a tensor of rank 2");
  CHECK(value_error("T([2], f16, [-1])") == "14: negative stride -1");
  CHECK(value_error("T([3], f16, [1099511627776])") == "13: strides span more than 2^40 elements");
  CHECK(value_error("T([2], f16, strides=(1,))") == "13: expected strides ('[...]' or 'stride=(...)'), found 's'");
  CHECK(value_error("T([2], f16, stride=(1))") == "20: a 1-tuple needs a trailing comma: (x,)");
  CHECK(value_error("T([1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1], f16)") == "3: rank 17 exceeds 16");
  CHECK(value_error("12abc") == "3: unexpected 'a' after a number");
  CHECK(value_error("-") == "2: expected a digit, found end of line");
  CHECK(value_error("1e+") == "4: expected the digits of an exponent, found end of line");
  CHECK(value_error("[1, 2") == "6: expected ',' or ']', found end of line");
  CHECK(value_error("{}") == "1: expected a value, found '{'");
  CHECK(value_error("\x01") == "1: expected a value, found byte 0x01");
}

TEST_CASE("nesting is limited to 64") {
  auto nest = [](std::size_t n) { return std::string(n, '[') + std::string(n, ']'); };
  CHECK(bb::parse_value(nest(64)).ok());
  auto deep = bb::parse_value(nest(65));
  REQUIRE_FALSE(deep.ok());
  CHECK(deep.error().code == kb::Code::limit_exceeded);
  CHECK(deep.error().message == "65: nesting deeper than 64");
  // Far deeper input is refused, not a stack overflow.
  CHECK_FALSE(bb::parse_value(std::string(1000000, '(')).ok());
  CHECK_FALSE(bb::parse_args("((" + std::string(100000, '[')).ok());
}

namespace {

// Peak resident memory of this process so far, in bytes.
std::int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<std::int64_t>(u.ru_maxrss) * 1024;
}

// "cnt: 1, (([0,0,...],), {})" with `n` zeros.
std::string long_list_line(std::size_t n) {
  std::string line = "cnt: 1, (([";
  line.reserve(line.size() + 2 * n + 16);
  for (std::size_t i = 0; i < n; ++i) line += "0,";
  line += "],), {})";
  return line;
}

}  // namespace

TEST_CASE("a list past the element bound is refused at its place, in bounded memory") {
  static_assert(kb::limits::max_backendbench_list_elements == 1'000'000);
  // 5M elements (10 MB of text, under the line bound): parsed whole it would hold about 1.6 GB.
  const std::string text = "Operator: aten.x.default\n" + long_list_line(5'000'000) + "\n";
  const std::int64_t before = peak_rss_bytes();
  bb::ParseReport rep = bb::parse_text(text, "long.txt");
  const std::int64_t grown = peak_rss_bytes() - before;
  REQUIRE(rep.errors.size() == 1);
  CHECK(rep.errors[0].code == kb::Code::limit_exceeded);
  // The 1,000,001st element starts at column 12 + 2 * 1,000,000.
  CHECK(rep.format_error(rep.errors[0]) == "long.txt:2:2000012: list of more than 1000000 elements");
  CHECK(rep.arg_lines_parsed == 0);
  INFO("peak memory grew by " << grown << " bytes");
  CHECK(grown < (std::int64_t{1} << 30));

  // Exactly at the bound: parsed.
  bb::ParseReport at = bb::parse_text("Operator: aten.x.default\n" + long_list_line(1'000'000) + "\n", "at.txt");
  CHECK(at.ok());
  REQUIRE(at.trace.operators.size() == 1);
  CHECK(at.trace.operators[0].lines[0].args.positional[0].children.size() == 1'000'000);

  // Lists each under the bound but more values than a line may hold; a tuple past the bound.
  std::string many = "cnt: 1, ((";
  for (int k = 0; k < 3; ++k) {
    many += '[';
    for (int i = 0; i < 900'000; ++i) many += "0,";
    many += "], ";
  }
  many += "), {})";
  const std::string err = line_error(many);
  CHECK(err.find("t.txt:2:") == 0);
  CHECK(err.find(": more than 2000000 values on one line") != std::string::npos);
  std::string tuple = "cnt: 1, ((";
  for (int i = 0; i < 1'000'001; ++i) tuple += "1,";
  tuple += "), {})";
  CHECK(line_error(tuple) == "t.txt:2:2000011: tuple of more than 1000000 elements");
}

TEST_CASE("a line past the length bound is refused before parsing") {
  static_assert(kb::limits::max_backendbench_line_bytes == std::size_t{16} << 20);
  // 24 MiB of one list: refused at the bound's column without parsing a value.
  std::string line = "cnt: 1, (([";
  line.append((std::size_t{24} << 20) - line.size(), '1');
  line += "],), {})";
  const std::string text = "Operator: aten.x.default\n" + line + "\nOperator: aten.y.default\ncnt: 2, ((1,), {})\n";
  const std::int64_t before = peak_rss_bytes();
  bb::ParseReport rep = bb::parse_text(text, "wide.txt");
  CHECK(peak_rss_bytes() - before < (std::int64_t{64} << 20));
  REQUIRE(rep.errors.size() == 1);
  CHECK(rep.errors[0].code == kb::Code::limit_exceeded);
  CHECK(rep.format_error(rep.errors[0]) ==
        "wide.txt:2:16777217: line of " + std::to_string(line.size()) + " bytes is longer than the limit of 16777216 bytes");
  // The lines after it are still read.
  CHECK(rep.arg_lines_parsed == 1);
  REQUIRE(rep.trace.operators.size() == 2);
  CHECK(rep.trace.operators[1].lines.size() == 1);
}

TEST_CASE("trace text: operators, counts, blank lines, SymInt") {
  const std::string text =
      "Operator: aten.add.Tensor\n"
      "cnt: 156, ((T([1, 512, 768], f16), T([1, 512, 768], f16)), {})\n"
      "\n"
      "cnt: 0, ((T([10, 10], f16), T([10, 10], f16)), {})\n"
      "Operator: aten.sum.SymInt\r\n"
      "cnt: 18446744073709551615, ((T([8, 8], f16), [1], True), {})\n";
  bb::ParseReport rep = bb::parse_text(text, "mem");
  CHECK(rep.ok());
  CHECK(rep.arg_lines_total == 3);
  CHECK(rep.arg_lines_parsed == 3);
  REQUIRE(rep.trace.operators.size() == 2);
  CHECK(rep.trace.operators[0].name == "aten.add.Tensor");
  CHECK(rep.trace.operators[0].lines.size() == 2);
  CHECK(rep.trace.operators[0].lines[0].count == 156);
  CHECK(rep.trace.operators[0].lines[1].count == 0);
  CHECK(rep.trace.operators[0].lines[1].line == 4);
  CHECK(rep.trace.operators[1].name == "aten.sum.dim_IntList");
  CHECK(rep.trace.operators[1].spelling == "aten.sum.SymInt");
  CHECK(bb::print_operator_line(rep.trace.operators[1]) == "Operator: aten.sum.SymInt");
  CHECK(rep.trace.operators[1].lines[0].count == UINT64_MAX);
  CHECK(rep.trace.arg_line_count() == 3);
  CHECK(bb::print_trace(rep.trace) ==
        "Operator: aten.add.Tensor\n"
        "cnt: 156, ((T([1, 512, 768], f16), T([1, 512, 768], f16)), {})\n"
        "cnt: 0, ((T([10, 10], f16), T([10, 10], f16)), {})\n"
        "Operator: aten.sum.SymInt\n"
        "cnt: 18446744073709551615, ((T([8, 8], f16), [1], True), {})\n");
  CHECK(bb::parse_text("", "e").ok());
}

TEST_CASE("trace text: line errors") {
  CHECK(line_error("cnt: 1, ((T([2], f16),), {}") == "t.txt:2:28: expected ')', found end of line");
  CHECK(line_error("cnt: x, ((), {})") == "t.txt:2:6: expected a count (digits) after 'cnt:'");
  CHECK(line_error("cnt: -1, ((), {})") == "t.txt:2:6: expected a count (digits) after 'cnt:'");
  CHECK(line_error("cnt: 99999999999999999999, ((), {})") == "t.txt:2:6: count does not fit 64 bits");
  CHECK(line_error("cnt: 1 ((), {})") == "t.txt:2:8: expected ',' after the count, found '('");
  CHECK(line_error("count: 1, ((), {})") == "t.txt:2:1: expected 'Operator:' or 'cnt:'");
  CHECK(line_error("cnt: 1, ((), {}) trailing") == "t.txt:2:18: unexpected 't' after the arguments");
  CHECK(line_error("Operator: a b") == "t.txt:2:13: unexpected text after the operator name");

  bb::ParseReport orphan = bb::parse_text("cnt: 1, ((), {})\n", "o");
  REQUIRE(orphan.errors.size() == 1);
  CHECK(orphan.format_error(orphan.errors[0]) == "o:1:1: cnt: line before any Operator: line");
  CHECK(orphan.arg_lines_total == 1);
  CHECK(orphan.arg_lines_parsed == 0);

  bb::ParseReport mixed = bb::parse_text(
      "Operator:\ncnt: 1, ((), {})\nOperator: aten.x\ncnt: 2, ((), {})\ncnt: 3, ((]), {})\n", "m");
  REQUIRE(mixed.errors.size() == 3);
  CHECK(mixed.format_error(mixed.errors[0]) == "m:1:10: expected an operator name after 'Operator:'");
  CHECK(mixed.format_error(mixed.errors[1]) == "m:2:1: cnt: line under the invalid Operator: line 1");
  CHECK(mixed.format_error(mixed.errors[2]) == "m:5:11: expected a value, found ']'");
  CHECK(mixed.arg_lines_total == 3);
  CHECK(mixed.arg_lines_parsed == 1);
}

TEST_CASE("parse_file: missing file, first error") {
  auto missing = bb::parse_file("/nonexistent/trace.txt");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == kb::Code::io_error);

  const std::string path = "test_backendbench_tmp.txt";
  {
    std::ofstream o(path);
    o << "Operator: aten.x\ncnt: 1, ((1,), {})\ncnt: 1, ((1), {})\ncnt: 2, (\n";
  }
  auto bad = bb::parse_file(path);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == path + ":3:10: a 1-tuple needs a trailing comma: (x,) (and 1 more errors)");
  std::remove(path.c_str());
}

TEST_CASE("the real TritonBench trace file parses and round-trips") {
  const std::string path = shared_file();
  const std::string text = read_all(path);
  REQUIRE_MESSAGE(!text.empty(), "cannot read " << path << " (set KB_SHARED_DIR)");
  bb::ParseReport rep = bb::parse_text(text, path);
  for (std::size_t i = 0; i < rep.errors.size() && i < 10; ++i) FAIL_CHECK(rep.format_error(rep.errors[i]));
  CHECK(rep.errors.empty());
  CHECK(rep.arg_lines_total == 12740);
  CHECK(rep.arg_lines_parsed == 12740);
  CHECK(rep.trace.operators.size() == 169);
  CHECK(rep.trace.arg_line_count() == 12740);

  // Every line prints back as it was written, and reparses to an equal AST.
  std::vector<std::string_view> lines;
  for (std::size_t s = 0; s < text.size();) {
    std::size_t e = text.find('\n', s);
    if (e == std::string::npos) e = text.size();
    lines.push_back(std::string_view(text).substr(s, e - s));
    s = e + 1;
  }
  std::size_t same = 0, reparsed = 0, tensors_with_strides = 0;
  for (const bb::Operator& op : rep.trace.operators) {
    if (op.line - 1 < lines.size() && bb::print_operator_line(op) == lines[op.line - 1]) ++same;
    for (const bb::ArgLine& l : op.lines) {
      const std::string printed = bb::print_line(l);
      if (printed == lines[l.line - 1]) ++same;
      else if (same < 5) FAIL_CHECK(printed << "\n  !=\n" << lines[l.line - 1]);
      auto again = bb::parse_args(bb::print_args(l.args));
      if (again.ok() && *again == l.args) ++reparsed;
      for (const bb::Value& v : l.args.positional) tensors_with_strides += v.has_strides();
    }
  }
  CHECK(same == 12740 + 169);
  CHECK(reparsed == 12740);
  CHECK(tensors_with_strides > 0);
  // The whole file prints back byte for byte.
  CHECK(bb::print_trace(rep.trace) == text);

  // Spot checks of what the file holds.
  bool saw_symint = false;
  for (const bb::Operator& op : rep.trace.operators)
    if (op.spelling == "aten.sum.SymInt") saw_symint = op.name == "aten.sum.dim_IntList";
  CHECK(saw_symint);

  auto whole = bb::parse_file(path);
  REQUIRE(whole.ok());
  CHECK(whole->arg_line_count() == 12740);
}

TEST_CASE("saved lines: write, read back, refuse bad files") {
  bb::RunReport rep;
  bb::LineOutcome a;
  a.op = "aten.add.Tensor";
  a.index = 3;
  a.source_line = 17;
  a.passed = true;
  a.kb_ms = 0.0125;
  a.baseline_ms = 0.02;
  a.by_reference = true;
  bb::LineOutcome b;
  b.op = "aten.mm.default";
  b.index = 0;
  b.source_line = 900;
  b.problem = "INCORRECT_NUMERICAL: output 0: element 5 is 1, expected \"2\"\n";
  bb::LineOutcome c = b;
  c.index = 1;
  c.problem = "not run: --time-limit reached";
  rep.lines = {a, b, c};
  const std::string path = "test_saved_lines.json";
  REQUIRE(bb::write_saved_lines(rep, "NVIDIA H100 \"80GB\"", path));
  auto back = bb::read_saved_lines(path);
  REQUIRE(back);
  CHECK(back->size() == 2);  // the line not run is left for a resumed run
  const bb::LineOutcome& ra = back->at({"aten.add.Tensor", 3});
  CHECK(ra.source_line == 17);
  CHECK(ra.passed);
  CHECK(ra.kb_ms == 0.0125);
  REQUIRE(ra.baseline_ms);
  CHECK(*ra.baseline_ms == 0.02);
  CHECK(ra.by_reference);
  const bb::LineOutcome& rb = back->at({"aten.mm.default", 0});
  CHECK_FALSE(rb.passed);
  CHECK_FALSE(rb.baseline_ms);
  CHECK(rb.problem == b.problem);
  CHECK(back->count({"aten.mm.default", 1}) == 0);

  std::ofstream(path) << R"({"format": "kb-backendbench-lines-1", "lines": [{"op": "aten.add.Tensor", "index": -1}]})";
  auto bad = bb::read_saved_lines(path);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find(path + ": lines[0]") != std::string::npos);
  std::ofstream(path) << R"({"format": "other", "lines": []})";
  CHECK_FALSE(bb::read_saved_lines(path));
  std::remove(path.c_str());
  CHECK_FALSE(bb::read_saved_lines(path));  // missing file
}
