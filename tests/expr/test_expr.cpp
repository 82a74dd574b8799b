// Tests of lib/expr: parsing, Python semantics, diagnostics and limits.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <map>
#include <ostream>
#include <stdexcept>
#include <string>

#include "common/limits.hpp"
#include "expr/expr.hpp"

namespace kb::expr {
// Printers so doctest shows values and verdicts in failure messages.
std::ostream& operator<<(std::ostream& os, const Value& v) {
  const char* kind = v.is_integer() ? "int " : v.is_floating() ? "float " : "bool ";
  return os << kind << v.to_string();
}
std::ostream& operator<<(std::ostream& os, Verdict v) { return os << verdict_name(v); }
}  // namespace kb::expr

namespace {

using namespace kb::expr;
using kb::Code;

constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();

Expression parsed(std::string_view text) {
  auto r = parse(text);
  REQUIRE_MESSAGE(r.ok(), "parse failed: ", std::string(text), " -> ", (r.ok() ? "" : r.error().message));
  return std::move(r).value();
}

const MapEnvironment& empty_env() {
  static const MapEnvironment env;
  return env;
}

Outcome run(std::string_view text, const Environment& env = empty_env()) { return evaluate(parsed(text), env); }

// The value of an expression that must evaluate (holds or violated).
Value value_of(std::string_view text, const Environment& env = empty_env()) {
  Outcome o = run(text, env);
  REQUIRE_MESSAGE(o.verdict != Verdict::unchecked, std::string(text), ": ", o.detail);
  REQUIRE(o.value.has_value());
  return *o.value;
}

kb::Error parse_failure(std::string_view text) {
  auto r = parse(text);
  REQUIRE_MESSAGE(!r.ok(), "parse unexpectedly succeeded: ", std::string(text));
  return r.error();
}

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string repeat(std::string_view s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// Environment for the real constraints of the FlashInfer-Bench definitions.
MapEnvironment real_env() {
  MapEnvironment env;
  auto axis = [&](const char* name, std::int64_t v) { env.set_scalar(name, Value::integer(v)); };
  axis("page_size", 16);
  axis("intermediate_size", 2048);
  axis("len_cu_seqlens", 5);
  axis("num_seqs", 4);
  axis("len_indptr", 4);
  axis("batch_size", 3);
  axis("nheads", 32);
  axis("ngroups", 8);
  axis("num_kv_indices", 12);
  axis("num_v_heads", 32);
  axis("num_q_heads", 16);
  axis("seq_len", 7);
  axis("topk", 64);
  axis("max_num_pages", 4);
  axis("total_kv", 12);
  env.set_tensor("ckv_cache", {100, 16, 512});
  env.set_tensor("gemm1_weights", {8, 4096, 7168});
  env.set_tensor("sparse_indices", {3, 64});
  env.set_tensor("kv_indptr", {4}, std::vector<std::int64_t>{0, 3, 7, 12});
  return env;
}

}  // namespace

TEST_CASE("every constraint of the real data holds and can be violated") {
  struct Case {
    const char* text;
    const char* scalars;  // space separated, first use first
    const char* tensors;
    const char* break_axis;  // set to break_value to violate it
    std::int64_t break_value;
    const char* violated_detail;
  };
  const Case cases[] = {
      {"ckv_cache.shape[1] == page_size", "page_size", "ckv_cache", "page_size", 8,
       "ckv_cache.shape[1] == page_size: 16 == 8 is false (ckv_cache.shape[1] = 16, page_size = 8)"},
      {"gemm1_weights.shape[1] == 2 * intermediate_size", "intermediate_size", "gemm1_weights",
       "intermediate_size", 2000,
       "gemm1_weights.shape[1] == 2 * intermediate_size: 4096 == 4000 is false "
       "(gemm1_weights.shape[1] = 4096, intermediate_size = 2000)"},
      {"len_cu_seqlens == num_seqs + 1", "len_cu_seqlens num_seqs", "", "num_seqs", 5,
       "len_cu_seqlens == num_seqs + 1: 5 == 6 is false (len_cu_seqlens = 5, num_seqs = 5)"},
      {"len_indptr == batch_size + 1", "len_indptr batch_size", "", "len_indptr", 5,
       "len_indptr == batch_size + 1: 5 == 4 is false (len_indptr = 5, batch_size = 3)"},
      {"nheads % ngroups == 0", "nheads ngroups", "", "ngroups", 5,
       "nheads % ngroups == 0: 2 == 0 is false (nheads = 32, ngroups = 5)"},
      {"num_kv_indices == kv_indptr[-1].item()", "num_kv_indices", "kv_indptr", "num_kv_indices", 11,
       "num_kv_indices == kv_indptr[-1].item(): 11 == 12 is false "
       "(num_kv_indices = 11, kv_indptr[-1].item() = 12)"},
      {"num_v_heads >= num_q_heads", "num_v_heads num_q_heads", "", "num_q_heads", 33,
       "num_v_heads >= num_q_heads: 32 >= 33 is false (num_v_heads = 32, num_q_heads = 33)"},
      {"seq_len > 1", "seq_len", "", "seq_len", 1, "seq_len > 1: 1 > 1 is false (seq_len = 1)"},
      {"sparse_indices.shape[-1] == topk", "topk", "sparse_indices", "topk", 32,
       "sparse_indices.shape[-1] == topk: 64 == 32 is false (sparse_indices.shape[-1] = 64, topk = 32)"},
      {"topk <= max_num_pages * page_size", "topk max_num_pages page_size", "", "topk", 65,
       "topk <= max_num_pages * page_size: 65 <= 64 is false (topk = 65, max_num_pages = 4, page_size = 16)"},
      {"total_kv == kv_indptr[-1].item()", "total_kv", "kv_indptr", "total_kv", 13,
       "total_kv == kv_indptr[-1].item(): 13 == 12 is false (total_kv = 13, kv_indptr[-1].item() = 12)"},
  };
  auto join = [](const std::vector<std::string>& names) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : " ") + n;
    return s;
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    Expression e = parsed(c.text);
    CHECK(e.text() == c.text);
    CHECK(join(e.scalar_names()) == c.scalars);
    CHECK(join(e.tensor_names()) == c.tensors);
    CHECK(e.needs_tensors() == (std::string(c.tensors) != ""));

    MapEnvironment env = real_env();
    Outcome ok = evaluate(e, env);
    CHECK(ok.verdict == Verdict::holds);
    CHECK(ok.detail == "");

    env.set_scalar(c.break_axis, Value::integer(c.break_value));
    Outcome bad = evaluate(e, env);
    CHECK(bad.verdict == Verdict::violated);
    CHECK(bad.detail == c.violated_detail);
  }
}

TEST_CASE("real constraints are unchecked when the tensor is missing") {
  MapEnvironment env = real_env();
  env.set_tensor("kv_indptr", {4});  // shape only, no contents
  Outcome o = evaluate(parsed("total_kv == kv_indptr[-1].item()"), env);
  CHECK(o.verdict == Verdict::unchecked);
  CHECK(o.detail == "contents of tensor kv_indptr are not available");

  o = evaluate(parsed("sparse_indices.shape[-1] == topk"), empty_env());
  CHECK(o.verdict == Verdict::unchecked);
  CHECK(o.detail == "tensor sparse_indices is not available");

  env.set_tensor("kv_indptr", {0}, std::vector<std::int64_t>{});
  o = evaluate(parsed("num_kv_indices == kv_indptr[-1].item()"), env);
  CHECK(o.verdict == Verdict::unchecked);
  CHECK(o.detail == "kv_indptr[-1].item(): index -1 is out of range for dimension 0 of shape [0]");
}

TEST_CASE("integer arithmetic follows Python") {
  CHECK(value_of("-7 // 2") == Value::integer(-4));
  CHECK(value_of("7 // -2") == Value::integer(-4));
  CHECK(value_of("-7 // -2") == Value::integer(3));
  CHECK(value_of("7 // 2") == Value::integer(3));
  CHECK(value_of("-8 // 2") == Value::integer(-4));
  CHECK(value_of("-7 % 2") == Value::integer(1));
  CHECK(value_of("7 % -2") == Value::integer(-1));
  CHECK(value_of("-7 % -2") == Value::integer(-1));
  CHECK(value_of("-8 % 2") == Value::integer(0));
  CHECK(value_of("7 / 2") == Value::floating(3.5));
  CHECK(value_of("6 / 2") == Value::floating(3.0));  // true division is always float
  CHECK(value_of("2 + 3") == Value::integer(5));
  CHECK(value_of("2 - 3") == Value::integer(-1));
  CHECK(value_of("2 * 3") == Value::integer(6));
  CHECK(value_of("True + True") == Value::integer(2));  // bool is an int
  CHECK(value_of("-True") == Value::integer(-1));
  CHECK(value_of("+True") == Value::integer(1));
  CHECK(value_of("7 == 7") == Value::boolean(true));
  CHECK(value_of("-7 // 2 == -4").truthy());
  CHECK(value_of("-7 % 2 == 1").truthy());
  CHECK(value_of("7 % -2 == -1").truthy());
  CHECK(value_of("7 / 2 == 3.5").truthy());
}

TEST_CASE("float arithmetic follows Python") {
  CHECK(value_of("1 + 2.0") == Value::floating(3.0));  // int op float -> float
  CHECK(value_of("2.5 * 2") == Value::floating(5.0));
  CHECK(value_of("7.0 // 2") == Value::floating(3.0));
  CHECK(value_of("-7.0 // 2") == Value::floating(-4.0));
  CHECK(value_of("-7.5 % 2") == Value::floating(0.5));
  CHECK(value_of("7 % -2.0") == Value::floating(-1.0));
  CHECK(value_of("6.0 % -3") == Value::floating(-0.0));  // zero takes the divisor's sign
  CHECK(value_of("1e-5") == Value::floating(1e-5));
  CHECK(value_of("2.5E+3") == Value::floating(2500.0));
  CHECK(value_of(".5") == Value::floating(0.5));
  CHECK(value_of("5.") == Value::floating(5.0));
  CHECK(value_of("1e999") == Value::floating(std::numeric_limits<double>::infinity()));
  CHECK(value_of("1e-999") == Value::floating(0.0));
  CHECK(value_of("0.000001e-400") == Value::floating(0.0));
  CHECK(value_of("1e999 > 1e308").truthy());
  CHECK(std::isnan(value_of("1e999 - 1e999").f));
  // NaN is truthy but equal to nothing, as in Python.
  CHECK(run("1e999 - 1e999").verdict == Verdict::holds);
  CHECK(run("(1e999 - 1e999) == (1e999 - 1e999)").verdict == Verdict::violated);
  CHECK(run("(1e999 - 1e999) != 1").verdict == Verdict::holds);
}

TEST_CASE("int and float compare exactly, as in Python") {
  CHECK(run("1 == 1.0").verdict == Verdict::holds);
  CHECK(run("True == 1").verdict == Verdict::holds);
  CHECK(run("False == 0.0").verdict == Verdict::holds);
  CHECK(run("9007199254740993 == 9007199254740992.0").verdict == Verdict::violated);
  CHECK(run("9007199254740993 > 9007199254740992.0").verdict == Verdict::holds);
  CHECK(run("9007199254740992 == 9007199254740992.0").verdict == Verdict::holds);
  CHECK(run("9223372036854775807 < 9223372036854775808.0").verdict == Verdict::holds);
  CHECK(run("-3 < -2.5").verdict == Verdict::holds);
  CHECK(run("-2 > -2.5").verdict == Verdict::holds);
  CHECK(run("2 < 2.5 < 3").verdict == Verdict::holds);
  CHECK(run("1e999 > 9223372036854775807").verdict == Verdict::holds);
  CHECK(run("-1e999 < -9223372036854775807").verdict == Verdict::holds);
}

TEST_CASE("precedence and associativity follow Python") {
  CHECK(value_of("2 + 3 * 4") == Value::integer(14));
  CHECK(value_of("(2 + 3) * 4") == Value::integer(20));
  CHECK(value_of("2 - 3 - 4") == Value::integer(-5));
  CHECK(value_of("100 // 10 // 3") == Value::integer(3));
  CHECK(value_of("2 * 3 % 4") == Value::integer(2));
  CHECK(value_of("-3 % 5") == Value::integer(2));  // unary minus binds tighter than %
  CHECK(value_of("- -3") == Value::integer(3));
  CHECK(value_of("1 - -1") == Value::integer(2));
  CHECK(value_of("-2 * 3") == Value::integer(-6));
  CHECK(parsed("a + b * c - d").structure() == "((a + (b * c)) - d)");
  CHECK(parsed("not a == b").structure() == "(not (a == b))");
  CHECK(parsed("a or b and not c").structure() == "(a or (b and (not c)))");
  CHECK(parsed("-x.shape[0] + 1 < n").structure() == "(((-x.shape[0]) + 1) < n)");
  CHECK(parsed("a < b <= c").structure() == "(a < b <= c)");
  CHECK(parsed("m[i - 1][-1].item()").structure() == "m[(i - 1)][(-1)]");
  CHECK(value_of("True or False and False") == Value::boolean(true));
  CHECK(value_of("not 1 + 1 == 3") == Value::boolean(true));
}

TEST_CASE("not binds looser than comparison") {
  MapEnvironment env;
  env.set_scalar("a", Value::integer(1));
  env.set_scalar("b", Value::integer(2));
  CHECK(run("not a == b", env).verdict == Verdict::holds);
  CHECK(run("not a != b", env).verdict == Verdict::violated);
  CHECK(run("(not a) == b", env).verdict == Verdict::violated);  // False == 2
  CHECK(run("not not a", env).verdict == Verdict::holds);
  CHECK(value_of("not not a", env) == Value::boolean(true));
}

TEST_CASE("comparison chains follow Python") {
  CHECK(run("1 < 2 < 3").verdict == Verdict::holds);
  CHECK(run("1 < 3 < 2").verdict == Verdict::violated);
  CHECK(run("3 > 2 == 2").verdict == Verdict::holds);
  CHECK(run("1 < 2 > 0").verdict == Verdict::holds);  // not (1 < 2) > 0
  CHECK(run("(1 < 2) > 0").verdict == Verdict::holds);
  CHECK(run("0 < 2 > 1 != 5 >= 5 <= 6").verdict == Verdict::holds);
  CHECK(run("3 == 3 == 3").verdict == Verdict::holds);
  CHECK(run("(3 == 3) == 3").verdict == Verdict::violated);  // True == 3
  // A chain stops at its first false link, so later names are never needed.
  CHECK(run("2 < 1 < unknown_axis").verdict == Verdict::violated);

  MapEnvironment env;
  env.set_scalar("a", Value::integer(5));
  Outcome o = run("1 < a <= 2", env);
  CHECK(o.verdict == Verdict::violated);
  CHECK(o.detail == "1 < a <= 2: 5 <= 2 is false (a = 5)");
}

TEST_CASE("and / or return an operand and short-circuit") {
  CHECK(value_of("0 or 5") == Value::integer(5));
  CHECK(value_of("3 and 0") == Value::integer(0));
  CHECK(value_of("1 and 2") == Value::integer(2));
  CHECK(value_of("0.0 or False") == Value::boolean(false));
  CHECK(run("False and 1 / 0").verdict == Verdict::violated);
  CHECK(run("True or 1 // 0").verdict == Verdict::holds);
  CHECK(run("True and 1 // 0").verdict == Verdict::unchecked);
  CHECK(run("False or missing").verdict == Verdict::unchecked);

  // The Environment is not even asked about operands that are skipped.
  struct Counting : Environment {
    mutable std::map<std::string, int> asked;
    std::optional<Value> scalar(std::string_view name) const override {
      ++asked[std::string(name)];
      return Value::integer(1);
    }
    std::optional<std::vector<std::int64_t>> shape(std::string_view tensor) const override {
      ++asked[std::string(tensor)];
      return std::nullopt;
    }
    std::optional<std::int64_t> element(std::string_view, std::span<const std::int64_t>) const override {
      return std::nullopt;
    }
  } counting;
  CHECK(run("x > 0 or y.shape[0] > 0", counting).verdict == Verdict::holds);
  CHECK(counting.asked.count("x") == 1);
  CHECK(counting.asked.count("y") == 0);
}

TEST_CASE("top-level values use Python truthiness") {
  CHECK(run("3").verdict == Verdict::holds);
  CHECK(run("-1").verdict == Verdict::holds);
  CHECK(run("0").verdict == Verdict::violated);
  CHECK(run("0.0").verdict == Verdict::violated);
  CHECK(run("0.5").verdict == Verdict::holds);
  CHECK(run("True").verdict == Verdict::holds);
  CHECK(run("False").verdict == Verdict::violated);
  CHECK(run("2 - 2").detail == "2 - 2: evaluated to 0");
}

TEST_CASE("violation details show the failing comparison and the values read") {
  MapEnvironment env;
  env.set_scalar("a", Value::integer(1));
  env.set_scalar("b", Value::integer(-1));
  env.set_scalar("r", Value::floating(0.25));

  Outcome o = run("a > 0 and b > 0", env);
  CHECK(o.verdict == Verdict::violated);
  CHECK(o.detail == "b > 0: -1 > 0 is false (a = 1, b = -1)");

  o = run("not a == a", env);
  CHECK(o.verdict == Verdict::violated);
  CHECK(o.detail == "not a == a: evaluated to False (a = 1)");

  // A comparison under 'not' is not the reason; the value is.
  o = run("(a == 2 or b == -1) and not (b == -1)", env);
  CHECK(o.verdict == Verdict::violated);
  CHECK(o.detail == "(a == 2 or b == -1) and not (b == -1): evaluated to False (a = 1, b = -1)");

  o = run("r * 4 > 1", env);
  CHECK(o.detail == "r * 4 > 1: 1.0 > 1 is false (r = 0.25)");
  CHECK(o.value == Value::boolean(false));
}

TEST_CASE("tensor indexing, .item(), len() and shapes") {
  MapEnvironment env;
  env.set_tensor("v", {4}, std::vector<std::int64_t>{10, 20, 30, 40});
  env.set_tensor("m", {2, 3}, std::vector<std::int64_t>{1, 2, 3, 4, 5, 6});
  env.set_tensor("s", {}, std::vector<std::int64_t>{7});  // 0-d
  env.set_scalar("i", Value::integer(2));

  CHECK(value_of("v[0]", env) == Value::integer(10));
  CHECK(value_of("v[3].item()", env) == Value::integer(40));
  CHECK(value_of("v[-1]", env) == Value::integer(40));
  CHECK(value_of("v[-4]", env) == Value::integer(10));
  CHECK(value_of("v[i]", env) == Value::integer(30));
  CHECK(value_of("v[len(v) - 1]", env) == Value::integer(40));
  CHECK(value_of("v[True]", env) == Value::integer(20));
  CHECK(value_of("m[1][2]", env) == Value::integer(6));
  CHECK(value_of("m[1, 0]", env) == Value::integer(4));
  CHECK(value_of("m[-1][-3].item()", env) == Value::integer(4));
  CHECK(value_of("m[0][-1]", env) == Value::integer(3));
  CHECK(value_of("len(v)", env) == Value::integer(4));
  CHECK(value_of("len(m)", env) == Value::integer(2));
  CHECK(value_of("m.shape[1]", env) == Value::integer(3));
  CHECK(value_of("m.shape[-1]", env) == Value::integer(3));
  CHECK(value_of("m.shape[-2]", env) == Value::integer(2));
  CHECK(value_of("m.shape[i - 1]", env) == Value::integer(3));
  CHECK(value_of("v[v[0] // 10]", env) == Value::integer(20));
  CHECK(run("v[-1].item() == 40 and v[0] < v[1]", env).verdict == Verdict::holds);

  struct Bad {
    const char* text;
    const char* detail;
  };
  const Bad bad[] = {
      {"v[4]", "v[4]: index 4 is out of range for dimension 0 of shape [4]"},
      {"v[-5]", "v[-5]: index -5 is out of range for dimension 0 of shape [4]"},
      {"m[0][3]", "m[0][3]: index 3 is out of range for dimension 1 of shape [2, 3]"},
      {"m[0]", "m[0]: m has shape [2, 3]; index all 2 dimensions to get a number"},
      {"m[0][0][0]", "m[0][0][0]: too many indices for tensor m of shape [2, 3]"},
      {"s[0]", "s[0]: too many indices for tensor s of shape []"},
      {"m.shape[2]", "m.shape[2]: index 2 is out of range for shape [2, 3]"},
      {"m.shape[-3]", "m.shape[-3]: index -3 is out of range for shape [2, 3]"},
      {"s.shape[0]", "s.shape[0]: index 0 is out of range for shape []"},
      {"len(s)", "len(s): len() of a 0-d tensor"},
      {"v[1.0]", "1.0: index must be an integer, not float (1.0)"},
      {"m.shape[0.5 * 2]", "0.5 * 2: shape index must be an integer, not float (1.0)"},
      {"v[-9223372036854775807 - 1]",
       "v[-9223372036854775807 - 1]: index -9223372036854775808 is out of range for dimension 0 of shape [4]"},
      {"w[0]", "tensor w is not available"},
      {"len(w)", "tensor w is not available"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.text);
    Outcome o = run(b.text, env);
    CHECK(o.verdict == Verdict::unchecked);
    CHECK(o.detail == b.detail);
    CHECK_FALSE(o.value.has_value());
  }
}

TEST_CASE("integer overflow is unchecked, never wrapped") {
  struct Case {
    const char* text;
    const char* detail;
  };
  const Case cases[] = {
      {"9223372036854775807 + 1 > 0", "9223372036854775807 + 1: integer overflow (9223372036854775807 + 1)"},
      {"-9223372036854775807 - 1 - 1", "-9223372036854775807 - 1 - 1: integer overflow (-9223372036854775808 - 1)"},
      {"3037000500 * 3037000500", "3037000500 * 3037000500: integer overflow (3037000500 * 3037000500)"},
      {"(-9223372036854775807 - 1) // -1",
       "(-9223372036854775807 - 1) // -1: integer overflow (-9223372036854775808 // -1)"},
      {"-(-9223372036854775807 - 1)", "-(-9223372036854775807 - 1): integer overflow (-(-9223372036854775808))"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    Outcome o = run(c.text);
    CHECK(o.verdict == Verdict::unchecked);
    CHECK(o.detail == c.detail);
  }
  CHECK(run("9223372036854775807 + 1").verdict == Verdict::unchecked);
  // The largest values themselves are fine, and % by -1 of the minimum is 0.
  CHECK(value_of("9223372036854775807 - 1 + 1") == Value::integer(int64_max));
  CHECK(value_of("(-9223372036854775807 - 1) % -1") == Value::integer(0));
  CHECK(value_of("9223372036854775807 * 1.0 > 0") == Value::boolean(true));  // float does not overflow

  MapEnvironment env;
  env.set_scalar("big", Value::integer(int64_max));
  Outcome o = run("big + 1 > big", env);
  CHECK(o.verdict == Verdict::unchecked);
  CHECK(contains(o.detail, "integer overflow"));
}

TEST_CASE("division by zero is unchecked") {
  for (const char* text : {"1 / 0", "1 // 0", "1 % 0", "1.0 / 0", "1 / 0.0", "1.5 // 0.0", "1 % 0.0", "1 % False"}) {
    CAPTURE(text);
    Outcome o = run(text);
    CHECK(o.verdict == Verdict::unchecked);
    CHECK(contains(o.detail, "division by zero"));
  }
  CHECK(run("n // (m - m) == 1").detail == "n is not available");  // left operand first
  MapEnvironment env;
  env.set_scalar("n", Value::integer(6));
  env.set_scalar("m", Value::integer(3));
  CHECK(run("n // (m - m) == 1", env).detail == "n // (m - m): division by zero (6 // 0)");
}

TEST_CASE("unknown names are unchecked and named") {
  Outcome o = run("batch_size + 1 > 0");
  CHECK(o.verdict == Verdict::unchecked);
  CHECK(o.detail == "batch_size is not available");
  o = run("x.shape[0] == 1");
  CHECK(o.verdict == Verdict::unchecked);
  CHECK(o.detail == "tensor x is not available");
}

TEST_CASE("an Environment that throws gives unchecked") {
  struct Throwing : Environment {
    std::optional<Value> scalar(std::string_view) const override { throw std::runtime_error("boom"); }
    std::optional<std::vector<std::int64_t>> shape(std::string_view) const override { return std::nullopt; }
    std::optional<std::int64_t> element(std::string_view, std::span<const std::int64_t>) const override {
      return std::nullopt;
    }
  } throwing;
  Outcome o = run("a > 1", throwing);
  CHECK(o.verdict == Verdict::unchecked);
  CHECK(o.detail == "the Environment threw an exception");
}

TEST_CASE("scalar and tensor names are classified") {
  Expression e = parsed("a + b.shape[0] + len(c) + d[0][a].item() + a + e - b.shape[1]");
  CHECK(e.scalar_names() == std::vector<std::string>{"a", "e"});
  CHECK(e.tensor_names() == std::vector<std::string>{"b", "c", "d"});
  CHECK(e.needs_tensors());
  CHECK(e.needs_tensor_data());

  Expression shapes_only = parsed("x.shape[0] == n and len(y) > 0");
  CHECK(shapes_only.scalar_names() == std::vector<std::string>{"n"});
  CHECK(shapes_only.tensor_names() == std::vector<std::string>{"x", "y"});
  CHECK(shapes_only.needs_tensors());
  CHECK_FALSE(shapes_only.needs_tensor_data());

  Expression axes = parsed("a < b and True");
  CHECK(axes.scalar_names() == std::vector<std::string>{"a", "b"});
  CHECK(axes.tensor_names().empty());
  CHECK_FALSE(axes.needs_tensors());

  Expression both = parsed("x == x.shape[0]");  // the same name used both ways
  CHECK(both.scalar_names() == std::vector<std::string>{"x"});
  CHECK(both.tensor_names() == std::vector<std::string>{"x"});

  // len without a call is an ordinary name.
  CHECK(parsed("len + 1").scalar_names() == std::vector<std::string>{"len"});
}

TEST_CASE("parse errors name the column") {
  struct Case {
    std::string text;
    const char* message;
  };
  const Case cases[] = {
      {"(a + b", "column 7: expected ')' but found end of expression"},
      {"ckv_cache.shape[1 == page_size", "column 31: expected ']' but found end of expression"},
      {"a +", "column 4: expected an expression but found end of expression"},
      {"", "column 1: expected an expression but found end of expression"},
      {"   ", "column 4: expected an expression but found end of expression"},
      {"a b", "column 3: expected an operator or end of expression but found 'b'"},
      {"a == = b", "column 6: operator '=' is not supported"},
      {"a = b", "column 3: operator '=' is not supported"},
      {"2 ** 3", "column 3: operator '**' is not supported"},
      {"a & b", "column 3: operator '&' is not supported"},
      {"x $ y", "column 3: unexpected character '$'"},
      {"a == \xc3\xa9", "column 6: unexpected byte 0xc3"},
      {std::string("a\0b", 3), "column 2: unexpected byte 0x00"},
      {"foo(x)", "column 1: unknown function 'foo' (only len() is supported)"},
      {"x.size(0)", "column 3: unknown attribute 'size' (only .shape[i] is supported)"},
      {"x.item()", "column 3: .item() needs an indexed element, as in x[0].item()"},
      {"x[0].shape[0]", "column 6: expected 'item' after '.' (only .item() applies to an element) but found 'shape'"},
      {"x.shape", "column 8: expected '[' after .shape but found end of expression"},
      {"x.shape[0][1]", "column 11: only a tensor name can be indexed"},
      {"(a)[0]", "column 4: only a tensor name can be indexed"},
      {"(a)(0)", "column 4: only len() can be called"},
      {"x[0].item().item()", "column 12: only a tensor name can have an attribute (.shape, or .item() after indexing)"},
      {"x[0].item(", "column 11: expected ')' but found end of expression"},
      {"x[]", "column 3: expected an expression but found ']'"},
      {"x[0", "column 4: expected ']' or ',' but found end of expression"},
      {"len(1)", "column 5: expected a tensor name inside len() but found '1'"},
      {"len(x", "column 6: expected ')' but found end of expression"},
      {"x is None", "column 3: keyword 'is' is not supported"},
      {"a == not b", "column 6: expected an expression but found 'not'"},
      {"a and", "column 6: expected an expression but found end of expression"},
      {"99999999999999999999 > 0", "column 1: integer literal 99999999999999999999 does not fit in 64 bits"},
      {"1abc", "column 1: invalid number literal '1abc'"},
      {"0x10", "column 1: invalid number literal '0x10'"},
      {"1e", "column 1: invalid number literal '1e'"},
      {"1.2.3", "column 1: invalid number literal '1.2.3'"},
      {"007", "column 1: leading zeros are not allowed in integer literal '007'"},
      {"a )", "column 3: expected an operator or end of expression but found ')'"},
      {"a == a_very_long_identifier_name_indeed b",
       "column 41: expected an operator or end of expression but found 'b'"},
      {"a a_very_long_identifier_name_indeed", "column 3: expected an operator or end of expression but found "
                                               "'a_very_long_identifier_n...'"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    kb::Error e = parse_failure(c.text);
    CHECK(e.code == Code::parse_error);
    CHECK(e.message == c.message);
  }
  // An earlier syntax error wins over a later bad character.
  CHECK(parse_failure("a ) $").message == "column 3: expected an operator or end of expression but found ')'");
}

TEST_CASE("accepted literal spellings and whitespace") {
  CHECK(value_of("0") == Value::integer(0));
  CHECK(value_of("00") == Value::integer(0));
  CHECK(value_of("0.5") == Value::floating(0.5));
  CHECK(value_of("1.e2") == Value::floating(100.0));
  CHECK(value_of("9223372036854775807") == Value::integer(int64_max));
  CHECK(value_of("  1\t==\n1.0\r ") == Value::boolean(true));
  CHECK(parsed(" a  ==  b ").text() == " a  ==  b ");
}

TEST_CASE("length and nesting limits") {
  using kb::limits::max_expression_chars;
  using kb::limits::max_expression_depth;

  // Exactly at the length limit is fine; one more byte is refused.
  std::string at_limit = "1" + std::string(max_expression_chars - 1, ' ');
  CHECK(parse(at_limit).ok());
  auto too_long = parse(at_limit + " ");
  REQUIRE_FALSE(too_long.ok());
  CHECK(too_long.error().code == Code::limit_exceeded);

  // Hostile nesting is refused with limit_exceeded, never a stack overflow.
  const int n = static_cast<int>(max_expression_depth);
  const std::string hostile[] = {
      std::string(10000, '('),
      repeat("(", 100) + "1" + repeat(")", 100),
      repeat("(", n) + "1" + repeat(")", n),
      repeat("not ", 1000),
      repeat("not ", 100) + "x",
      std::string(4000, '-') + "1",
      repeat("-", 100) + "1",
      repeat("+-", 50) + "1",
      repeat("v[", 100) + "0" + repeat("]", 100),
      repeat("v.shape[", 70) + "0" + repeat("]", 70),
      repeat("(not -", 40) + "1" + repeat(")", 40),
  };
  for (const std::string& h : hostile) {
    CAPTURE(h.substr(0, 40));
    auto r = parse(h);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Code::limit_exceeded);
  }
  auto deep = parse(repeat("(", n) + "1" + repeat(")", n));
  CHECK(deep.error().message ==
        "column " + std::to_string(n + 1) + ": expression is nested deeper than " + std::to_string(n) + " levels");

  // The whole expression counts as the first level: max - 1 parentheses fit.
  CHECK(run(repeat("(", n - 1) + "1" + repeat(")", n - 1)).verdict == Verdict::holds);
  CHECK(value_of(repeat("-", n - 1) + "1") == Value::integer(-1));
  CHECK(value_of(repeat("not ", n - 1) + "0") == Value::boolean(true));

  // Long flat chains are not nesting: they parse and evaluate iteratively.
  std::string sum = "1" + repeat(" + 1", 1000);
  CHECK(value_of(sum) == Value::integer(1001));
  std::string cmp = "0" + repeat(" < 1", 1) + repeat(" <= 1", 800);
  CHECK(run(cmp).verdict == Verdict::holds);
  std::string ors = "0" + repeat(" or 0", 800) + " or 1";
  CHECK(run(ors).verdict == Verdict::holds);
}

TEST_CASE("every single byte and byte pair is handled") {
  // Parse must answer parse_error or succeed, and evaluation must not crash.
  int other_codes = 0;
  int parsed_ok = 0;
  auto probe = [&](const std::string& s) {
    auto r = parse(s);
    if (r.ok()) {
      ++parsed_ok;
      (void)evaluate(*r, empty_env());
    } else if (r.error().code != Code::parse_error) {
      ++other_codes;
    }
  };
  for (int a = 0; a < 256; ++a) {
    probe(std::string(1, static_cast<char>(a)));
    for (int b = 0; b < 256; ++b) probe(std::string{static_cast<char>(a), static_cast<char>(b)});
  }
  CHECK(other_codes == 0);
  CHECK(parsed_ok > 100);  // digits, names, "-1", "1.", ...
}

TEST_CASE("Value formatting matches Python repr") {
  CHECK(Value::integer(-42).to_string() == "-42");
  CHECK(Value::boolean(true).to_string() == "True");
  CHECK(Value::boolean(false).to_string() == "False");
  CHECK(Value::floating(3.5).to_string() == "3.5");
  CHECK(Value::floating(2.0).to_string() == "2.0");
  CHECK(Value::floating(-0.0).to_string() == "-0.0");
  CHECK(Value::floating(0.0).to_string() == "0.0");
  CHECK(Value::floating(1e-5).to_string() == "1e-05");
  CHECK(Value::floating(0.0001).to_string() == "0.0001");
  CHECK(Value::floating(100000.0).to_string() == "100000.0");
  CHECK(Value::floating(1e16).to_string() == "1e+16");
  CHECK(Value::floating(1e15).to_string() == "1000000000000000.0");
  CHECK(Value::floating(123456789012345678.0).to_string() == "1.2345678901234568e+17");
  CHECK(Value::floating(0.1 + 0.2).to_string() == "0.30000000000000004");
  CHECK(Value::floating(-2.5e-300).to_string() == "-2.5e-300");
  CHECK(Value::floating(std::numeric_limits<double>::infinity()).to_string() == "inf");
  CHECK(Value::floating(-std::numeric_limits<double>::infinity()).to_string() == "-inf");
  CHECK(Value::floating(std::nan("")).to_string() == "nan");
}

TEST_CASE("expressions are values: default, copy and move") {
  Expression none;
  CHECK(none.text() == "");
  CHECK(none.scalar_names().empty());
  CHECK_FALSE(none.needs_tensors());
  CHECK(none.structure() == "");
  Outcome o = evaluate(none, empty_env());
  CHECK(o.verdict == Verdict::unchecked);
  CHECK(o.detail == "empty expression");

  Expression copy;
  {
    Expression original = parsed("a + 1 == 3");
    copy = original;
    Expression moved = std::move(original);
    CHECK(moved.text() == "a + 1 == 3");
  }
  MapEnvironment env;
  env.set_scalar("a", Value::integer(2));
  CHECK(copy.text() == "a + 1 == 3");
  CHECK(evaluate(copy, env).verdict == Verdict::holds);
}

TEST_CASE("MapEnvironment refuses inconsistent tensors instead of reading past them") {
  MapEnvironment env;
  env.set_tensor("short", {4}, std::vector<std::int64_t>{1, 2});  // fewer elements than the shape says
  CHECK(run("short[1] == 2", env).verdict == Verdict::holds);
  Outcome o = run("short[3] == 2", env);
  CHECK(o.verdict == Verdict::unchecked);
  CHECK(o.detail == "contents of tensor short are not available");
  CHECK(verdict_name(Verdict::holds) == std::string("holds"));
  CHECK(verdict_name(Verdict::violated) == std::string("violated"));
  CHECK(verdict_name(Verdict::unchecked) == std::string("unchecked"));
}
