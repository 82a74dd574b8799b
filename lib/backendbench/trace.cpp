// Reader and writer of BackendBench / TritonBench operator traces (see trace.hpp).
#include "backendbench/trace.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "common/limits.hpp"

namespace kb::backendbench {

// ---------------------------------------------------------------- dtypes

namespace {

struct DtypeName {
  const char* name;
  Dtype dtype;
};

constexpr DtypeName kAbbrevs[] = {
    {"bf16", Dtype::bf16}, {"f64", Dtype::f64}, {"f32", Dtype::f32}, {"f16", Dtype::f16},
    {"c32", Dtype::c32},   {"c64", Dtype::c64}, {"c128", Dtype::c128}, {"i8", Dtype::i8},
    {"i16", Dtype::i16},   {"i32", Dtype::i32}, {"i64", Dtype::i64}, {"b8", Dtype::b8},
    {"u8", Dtype::u8},
};

// Names after "torch.".
constexpr DtypeName kTorchDtypes[] = {
    {"bfloat16", Dtype::bf16}, {"float64", Dtype::f64},     {"double", Dtype::f64},
    {"float32", Dtype::f32},   {"float", Dtype::f32},       {"float16", Dtype::f16},
    {"half", Dtype::f16},      {"complex32", Dtype::c32},   {"chalf", Dtype::c32},
    {"complex64", Dtype::c64}, {"cfloat", Dtype::c64},      {"complex128", Dtype::c128},
    {"cdouble", Dtype::c128},  {"int8", Dtype::i8},         {"int16", Dtype::i16},
    {"short", Dtype::i16},     {"int32", Dtype::i32},       {"int", Dtype::i32},
    {"int64", Dtype::i64},     {"long", Dtype::i64},        {"bool", Dtype::b8},
    {"uint8", Dtype::u8},
};

constexpr const char* kLayouts[] = {"strided", "sparse_coo", "sparse_csr", "sparse_csc",
                                    "sparse_bsr", "sparse_bsc", "_mkldnn", "jagged"};

}  // namespace

const char* dtype_abbrev(Dtype d) noexcept {
  for (const auto& a : kAbbrevs)
    if (a.dtype == d) return a.name;
  return "?";
}

std::optional<Dtype> dtype_from_name(std::string_view name) noexcept {
  for (const auto& a : kAbbrevs)
    if (name == a.name) return a.dtype;
  constexpr std::string_view torch = "torch.";
  if (name.substr(0, torch.size()) == torch) {
    const std::string_view rest = name.substr(torch.size());
    for (const auto& t : kTorchDtypes)
      if (rest == t.name) return t.dtype;
  }
  return std::nullopt;
}

std::size_t dtype_size(Dtype d) noexcept {
  switch (d) {
    case Dtype::b8: case Dtype::u8: case Dtype::i8: return 1;
    case Dtype::bf16: case Dtype::f16: case Dtype::i16: return 2;
    case Dtype::f32: case Dtype::i32: case Dtype::c32: return 4;
    case Dtype::f64: case Dtype::i64: case Dtype::c64: return 8;
    case Dtype::c128: return 16;
  }
  return 0;
}

const char* kind_name(Kind k) noexcept {
  switch (k) {
    case Kind::integer: return "integer";
    case Kind::floating: return "float";
    case Kind::boolean: return "bool";
    case Kind::none: return "None";
    case Kind::string: return "string";
    case Kind::dtype: return "dtype";
    case Kind::layout: return "layout";
    case Kind::torch_name: return "torch name";
    case Kind::device: return "device";
    case Kind::list: return "list";
    case Kind::tuple: return "tuple";
    case Kind::tensor: return "tensor";
  }
  return "?";
}

// ---------------------------------------------------------------- AST helpers

std::int64_t Value::numel() const noexcept {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;  // bounded by the parser (<= 2^40)
  return n;
}

bool operator==(const Value& a, const Value& b) noexcept {
  return a.kind == b.kind && a.text == b.text && a.trailing_comma == b.trailing_comma &&
         a.stride_keyword == b.stride_keyword && a.children == b.children;
}

bool operator==(const Args& a, const Args& b) noexcept {
  if (a.positional != b.positional || a.positional_trailing_comma != b.positional_trailing_comma ||
      a.kwargs_trailing_comma != b.kwargs_trailing_comma || a.kwargs.size() != b.kwargs.size())
    return false;
  for (std::size_t i = 0; i < a.kwargs.size(); ++i)
    if (!(a.kwargs[i].key == b.kwargs[i].key) || !(a.kwargs[i].value == b.kwargs[i].value)) return false;
  return true;
}

const Value* Args::kwarg(std::string_view name) const noexcept {
  for (const auto& k : kwargs)
    if (k.key.str_value == name) return &k.value;
  return nullptr;
}

std::size_t TraceFile::arg_line_count() const noexcept {
  std::size_t n = 0;
  for (const auto& op : operators) n += op.lines.size();
  return n;
}

std::string ParseReport::format_error(const LineError& e) const {
  std::string s = trace.origin;
  s += ':';
  s += std::to_string(e.line);
  s += ':';
  s += std::to_string(e.column);
  s += ": ";
  s += e.message;
  return s;
}

// ---------------------------------------------------------------- parser

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }

std::string show_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
  char buf[16];
  std::snprintf(buf, sizeof buf, "byte 0x%02x", u);
  return buf;
}

std::string clip(std::string_view s, std::size_t n = 40) {
  if (s.size() <= n) return std::string(s);
  return std::string(s.substr(0, n)) + "...";
}

struct Failure {
  std::size_t pos = 0;
  Code code = Code::parse_error;
  std::string message;
};

class Parser {
 public:
  explicit Parser(std::string_view s, std::size_t pos = 0) : s_(s), pos_(pos) {}

  std::size_t pos() const { return pos_; }
  const Failure& failure() const { return fail_; }

  void skip_ws() {
    while (pos_ < s_.size() && is_ws(s_[pos_])) ++pos_;
  }
  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }

  std::string found() const { return at_end() ? std::string("end of line") : show_char(s_[pos_]); }

  bool fail(std::size_t at, Code code, std::string message) {
    fail_ = Failure{at, code, std::move(message)};
    return false;
  }
  bool expected(std::string_view what) {
    return fail(pos_, Code::parse_error, "expected " + std::string(what) + ", found " + found());
  }
  bool expect(char c) {
    skip_ws();
    if (peek() != c) return expected(std::string("'") + c + "'");
    ++pos_;
    return true;
  }

  // ((args...), {kwargs})
  bool parse_args(Args& out) {
    skip_ws();
    if (!expect('(')) return false;
    skip_ws();
    if (peek() != '(') return expected("'(' opening the positional arguments");
    Value pos;
    pos.offset = pos_;
    ++pos_;
    if (!parse_seq(pos, ')', 2)) return false;
    if (pos.children.size() == 1 && !pos.trailing_comma)
      return fail(pos.offset, Code::parse_error, "a 1-tuple needs a trailing comma: (x,)");
    out.positional = std::move(pos.children);
    out.positional_trailing_comma = pos.trailing_comma;
    if (!expect(',')) return false;
    skip_ws();
    if (peek() != '{') return expected("'{' opening the keyword arguments");
    ++pos_;
    if (!parse_kwargs(out)) return false;
    return expect(')');
  }

  bool parse_value(Value& out, std::size_t depth) {
    skip_ws();
    if (at_end()) return expected("a value");
    if (!count_value()) return false;
    out.offset = pos_;
    const char c = s_[pos_];
    if (c == '(' || c == '[') {
      out.kind = c == '(' ? Kind::tuple : Kind::list;
      ++pos_;
      if (!parse_seq(out, c == '(' ? ')' : ']', depth)) return false;
      if (out.kind == Kind::tuple && out.children.size() == 1 && !out.trailing_comma)
        return fail(out.offset, Code::parse_error, "a 1-tuple needs a trailing comma: (x,)");
      return true;
    }
    if (c == '\'' || c == '"') return parse_string(out);
    if (c == '-' || is_digit(c)) return parse_number(out);
    if (is_ident_start(c)) return parse_name(out, depth);
    return expected("a value");
  }

 private:
  // Reads a dotted identifier (a.b.c) at pos_; empty if none.
  std::string_view read_name() {
    const std::size_t start = pos_;
    if (!is_ident_start(peek())) return {};
    while (true) {
      while (pos_ < s_.size() && is_ident_char(s_[pos_])) ++pos_;
      if (peek() == '.' && pos_ + 1 < s_.size() && is_ident_start(s_[pos_ + 1])) {
        ++pos_;
        continue;
      }
      break;
    }
    return s_.substr(start, pos_ - start);
  }

  // One more value on this line; refused past limits::max_backendbench_line_values.
  bool count_value() {
    if (values_ == limits::max_backendbench_line_values)
      return fail(pos_, Code::limit_exceeded,
                  "more than " + std::to_string(limits::max_backendbench_line_values) + " values on one line");
    ++values_;
    return true;
  }

  bool check_depth(std::size_t at, std::size_t depth) {
    if (depth > max_depth)
      return fail(at, Code::limit_exceeded, "nesting deeper than " + std::to_string(max_depth));
    return true;
  }

  // Items up to `close`; the opening bracket is consumed. Sets trailing_comma.
  bool parse_seq(Value& out, char close, std::size_t depth) {
    if (!check_depth(out.offset, depth)) return false;
    skip_ws();
    if (peek() == close) {
      ++pos_;
      return true;
    }
    while (true) {
      if (out.children.size() == limits::max_backendbench_list_elements) {
        skip_ws();
        return fail(pos_, Code::limit_exceeded,
                    std::string(close == ']' ? "list" : "tuple") + " of more than " +
                        std::to_string(limits::max_backendbench_list_elements) + " elements");
      }
      Value child;
      if (!parse_value(child, depth + 1)) return false;
      out.children.push_back(std::move(child));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        skip_ws();
        if (peek() == close) {
          ++pos_;
          out.trailing_comma = true;
          return true;
        }
        continue;
      }
      if (peek() == close) {
        ++pos_;
        return true;
      }
      return expected(std::string("',' or '") + close + "'");
    }
  }

  bool parse_kwargs(Args& out) {
    skip_ws();
    if (peek() == '}') {
      ++pos_;
      return true;
    }
    while (true) {
      skip_ws();
      Kwarg kw;
      if (peek() != '\'' && peek() != '"') return expected("a quoted keyword name");
      if (!count_value()) return false;
      kw.key.offset = pos_;
      if (!parse_string(kw.key)) return false;
      const std::string& name = kw.key.str_value;
      bool ident = !name.empty() && is_ident_start(name[0]);
      for (char ch : name) ident = ident && is_ident_char(ch);
      if (!ident)
        return fail(kw.key.offset, Code::parse_error, "keyword name " + clip(kw.key.text) + " is not an identifier");
      for (const auto& k : out.kwargs)
        if (k.key.str_value == name)
          return fail(kw.key.offset, Code::invalid_data, "duplicate keyword '" + name + "'");
      if (!expect(':')) return false;
      if (!parse_value(kw.value, 3)) return false;
      out.kwargs.push_back(std::move(kw));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        skip_ws();
        if (peek() == '}') {
          ++pos_;
          out.kwargs_trailing_comma = true;
          return true;
        }
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return true;
      }
      return expected("',' or '}'");
    }
  }

  bool parse_string(Value& out) {
    const std::size_t start = pos_;
    const char q = s_[pos_++];
    out.kind = Kind::string;
    std::string dec;
    while (true) {
      if (at_end()) return fail(start, Code::parse_error, "unterminated string");
      const char c = s_[pos_];
      if (c == q) {
        ++pos_;
        break;
      }
      if (c == '\n' || c == '\r') return fail(start, Code::parse_error, "unterminated string");
      if (c != '\\') {
        dec += c;
        ++pos_;
        continue;
      }
      if (pos_ + 1 >= s_.size()) return fail(start, Code::parse_error, "unterminated string");
      const char e = s_[pos_ + 1];
      pos_ += 2;
      switch (e) {
        case 'n': dec += '\n'; break;
        case 't': dec += '\t'; break;
        case 'r': dec += '\r'; break;
        case '0': dec += '\0'; break;
        case '\\': dec += '\\'; break;
        case '\'': dec += '\''; break;
        case '"': dec += '"'; break;
        case 'x': {
          auto hex = [](char h) -> int {
            if (h >= '0' && h <= '9') return h - '0';
            if (h >= 'a' && h <= 'f') return h - 'a' + 10;
            if (h >= 'A' && h <= 'F') return h - 'A' + 10;
            return -1;
          };
          if (pos_ + 1 < s_.size() && hex(s_[pos_]) >= 0 && hex(s_[pos_ + 1]) >= 0) {
            dec += static_cast<char>(hex(s_[pos_]) * 16 + hex(s_[pos_ + 1]));
            pos_ += 2;
          } else {
            dec += "\\x";
          }
          break;
        }
        case '\n': case '\r':
          return fail(start, Code::parse_error, "unterminated string");
        default:  // unknown escapes stay as written, as in Python
          dec += '\\';
          dec += e;
      }
    }
    out.text = std::string(s_.substr(start, pos_ - start));
    out.str_value = std::move(dec);
    return true;
  }

  bool parse_number(Value& out) {
    const std::size_t start = pos_;
    if (peek() == '-') ++pos_;
    const std::string_view rest = s_.substr(pos_);
    for (std::string_view word : {std::string_view("inf"), std::string_view("nan")}) {
      if (rest.substr(0, 3) == word && (rest.size() == 3 || !is_ident_char(rest[3]))) {
        pos_ += 3;
        out.kind = Kind::floating;
        out.text = std::string(s_.substr(start, pos_ - start));
        const bool neg = s_[start] == '-';
        out.float_value = word == "inf" ? (neg ? -HUGE_VAL : HUGE_VAL) : std::nan("");
        if (word == "nan" && neg) out.float_value = -out.float_value;
        return true;
      }
    }
    if (!is_digit(peek())) return expected("a digit");
    while (is_digit(peek())) ++pos_;
    bool is_float = false;
    if (peek() == '.') {
      is_float = true;
      ++pos_;
      while (is_digit(peek())) ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      is_float = true;
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!is_digit(peek())) return expected("the digits of an exponent");
      while (is_digit(peek())) ++pos_;
    }
    if (is_ident_char(peek()) || peek() == '.')
      return fail(pos_, Code::parse_error, "unexpected " + found() + " after a number");
    out.text = std::string(s_.substr(start, pos_ - start));
    const char* b = out.text.data();
    const char* e = b + out.text.size();
    if (is_float) {
      out.kind = Kind::floating;
      double v = 0;
      auto r = std::from_chars(b, e, v);
      if (r.ec == std::errc::result_out_of_range) {
        const bool tiny = out.text.find("e-") != std::string::npos || out.text.find("E-") != std::string::npos;
        v = tiny ? 0.0 : HUGE_VAL;
        if (out.text[0] == '-') v = -v;
      }
      out.float_value = v;
    } else {
      out.kind = Kind::integer;
      std::int64_t v = 0;
      auto r = std::from_chars(b, e, v);
      if (r.ec == std::errc() && r.ptr == e) out.int_value = v;
    }
    return true;
  }

  bool parse_name(Value& out, std::size_t depth) {
    const std::size_t start = pos_;
    const std::string_view name = read_name();
    if (name == "T") return parse_tensor(out, depth);
    if (name == "torch.device") return parse_device(out, depth);
    out.text = std::string(name);
    if (name == "True" || name == "False") {
      out.kind = Kind::boolean;
      return true;
    }
    if (name == "None") {
      out.kind = Kind::none;
      return true;
    }
    if (name == "inf" || name == "nan") {
      out.kind = Kind::floating;
      out.float_value = name == "inf" ? HUGE_VAL : std::nan("");
      return true;
    }
    if (auto d = dtype_from_name(name)) {
      out.kind = Kind::dtype;
      out.dtype = *d;
      return true;
    }
    constexpr std::string_view torch = "torch.";
    if (name.size() > torch.size() && name.substr(0, torch.size()) == torch) {
      const std::string_view rest = name.substr(torch.size());
      out.kind = Kind::torch_name;
      for (const char* l : kLayouts)
        if (rest == l) out.kind = Kind::layout;
      return true;
    }
    return fail(start, Code::parse_error, "unknown name '" + clip(name) + "'");
  }

  bool parse_device(Value& out, std::size_t depth) {
    out.kind = Kind::device;
    if (!expect('(')) return false;
    return parse_seq(out, ')', depth);
  }

  // Checks that `list` holds non-negative int64 integers; copies them to `dst`.
  bool int_items(const Value& list, std::vector<std::int64_t>& dst, const char* what) {
    for (const Value& v : list.children) {
      if (v.kind != Kind::integer)
        return fail(v.offset, Code::parse_error, std::string("expected an integer ") + what + ", found a " + kind_name(v.kind));
      if (!v.int_value)
        return fail(v.offset, Code::limit_exceeded, std::string(what) + " " + clip(v.text) + " does not fit int64");
      if (*v.int_value < 0)
        return fail(v.offset, Code::invalid_data, std::string("negative ") + what + " " + v.text);
      dst.push_back(*v.int_value);
    }
    return true;
  }

  bool parse_tensor(Value& out, std::size_t depth) {
    out.kind = Kind::tensor;
    if (!check_depth(out.offset, depth)) return false;
    if (!expect('(')) return false;
    skip_ws();
    if (peek() != '[') return expected("'[' opening the shape of T(...)");
    Value shape;
    shape.kind = Kind::list;
    shape.offset = pos_;
    ++pos_;
    if (!parse_seq(shape, ']', depth + 1)) return false;
    if (shape.children.size() > limits::max_tensor_rank)
      return fail(shape.offset, Code::limit_exceeded,
                  "rank " + std::to_string(shape.children.size()) + " exceeds " + std::to_string(limits::max_tensor_rank));
    if (!int_items(shape, out.shape, "dim")) return false;
    std::int64_t numel = 1;
    for (std::size_t i = 0; i < out.shape.size(); ++i) {
      const std::int64_t d = out.shape[i];
      if (d > limits::max_tensor_elements)
        return fail(shape.children[i].offset, Code::limit_exceeded, "dim " + std::to_string(d) + " exceeds 2^40");
      if (numel != 0 && d != 0 && numel > limits::max_tensor_elements / d)
        return fail(shape.offset, Code::limit_exceeded, "tensor has more than 2^40 elements");
      numel *= d;
    }
    if (!expect(',')) return false;
    skip_ws();
    Value dt;
    dt.offset = pos_;
    const std::string_view dname = read_name();
    auto d = dtype_from_name(dname);
    if (!d) {
      pos_ = dt.offset;
      return expected("a dtype (bf16 f64 f32 f16 c32 c64 c128 i8 i16 i32 i64 b8 u8)");
    }
    dt.kind = Kind::dtype;
    dt.text = std::string(dname);
    dt.dtype = *d;
    out.dtype = *d;
    out.children.push_back(std::move(shape));
    out.children.push_back(std::move(dt));
    skip_ws();
    if (peek() == ',') {
      ++pos_;
      skip_ws();
      const std::size_t at = pos_;
      if (is_ident_start(peek())) {
        const std::string_view kw = read_name();
        if (kw != "stride") {
          pos_ = at;
          return expected("strides ('[...]' or 'stride=(...)')");
        }
        out.stride_keyword = true;
        if (!expect('=')) return false;
        skip_ws();
      }
      if (peek() != '(' && peek() != '[') return expected(out.stride_keyword ? "'(' or '['" : "strides ('[...]' or 'stride=(...)')");
      Value st;
      st.offset = pos_;
      st.kind = peek() == '(' ? Kind::tuple : Kind::list;
      ++pos_;
      if (!parse_seq(st, st.kind == Kind::tuple ? ')' : ']', depth + 1)) return false;
      if (st.kind == Kind::tuple && st.children.size() == 1 && !st.trailing_comma)
        return fail(st.offset, Code::parse_error, "a 1-tuple needs a trailing comma: (x,)");
      if (st.children.size() != out.shape.size())
        return fail(st.offset, Code::invalid_data,
                    std::to_string(st.children.size()) + " strides for a tensor of rank " + std::to_string(out.shape.size()));
      if (!int_items(st, out.strides, "stride")) return false;
      // Buffer span 1 + sum((size - 1) * stride) must stay within 2^40 elements.
      if (numel != 0) {
        std::int64_t span = 1;
        for (std::size_t i = 0; i < out.shape.size(); ++i) {
          std::int64_t term = 0;
          if (__builtin_mul_overflow(out.shape[i] - 1, out.strides[i], &term) ||
              __builtin_add_overflow(span, term, &span) || span > limits::max_tensor_elements)
            return fail(st.offset, Code::limit_exceeded, "strides span more than 2^40 elements");
        }
      }
      out.children.push_back(std::move(st));
    }
    return expect(')');
  }

  std::string_view s_;
  std::size_t values_ = 0;  // values parsed on this line (count_value)
  std::size_t pos_ = 0;
  Failure fail_;
};

Error located_error(const Failure& f) {
  return make_error(f.code, std::to_string(f.pos + 1) + ": " + f.message);
}

// ---------------------------------------------------------------- printer

void print_to(std::string& o, const Value& v);

void print_items(std::string& o, const std::vector<Value>& items, bool trailing, bool force_single_comma) {
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) o += ", ";
    print_to(o, items[i]);
  }
  if (!items.empty() && (trailing || (force_single_comma && items.size() == 1))) o += ',';
}

void print_to(std::string& o, const Value& v) {
  switch (v.kind) {
    case Kind::list:
      o += '[';
      print_items(o, v.children, v.trailing_comma, false);
      o += ']';
      return;
    case Kind::tuple:
      o += '(';
      print_items(o, v.children, v.trailing_comma, true);
      o += ')';
      return;
    case Kind::device:
      o += "torch.device(";
      print_items(o, v.children, v.trailing_comma, false);
      o += ')';
      return;
    case Kind::tensor:
      o += "T(";
      if (v.children.size() >= 2) {
        print_to(o, v.children[0]);
        o += ", ";
        print_to(o, v.children[1]);
        if (v.children.size() >= 3) {
          o += ", ";
          if (v.stride_keyword) o += "stride=";
          print_to(o, v.children[2]);
        }
      }
      o += ')';
      return;
    default:
      o += v.text;
  }
}

}  // namespace

Result<Args> parse_args(std::string_view text) {
  Parser p(text);
  Args a;
  if (!p.parse_args(a)) return located_error(p.failure());
  p.skip_ws();
  if (!p.at_end()) {
    p.fail(p.pos(), Code::parse_error, "unexpected " + p.found() + " after the arguments");
    return located_error(p.failure());
  }
  return a;
}

Result<Value> parse_value(std::string_view text) {
  Parser p(text);
  Value v;
  if (!p.parse_value(v, 1)) return located_error(p.failure());
  p.skip_ws();
  if (!p.at_end()) {
    p.fail(p.pos(), Code::parse_error, "unexpected " + p.found() + " after the value");
    return located_error(p.failure());
  }
  return v;
}

std::string print_value(const Value& v) {
  std::string o;
  print_to(o, v);
  return o;
}

std::string print_args(const Args& args) {
  std::string o = "((";
  print_items(o, args.positional, args.positional_trailing_comma, true);
  o += "), {";
  for (std::size_t i = 0; i < args.kwargs.size(); ++i) {
    if (i) o += ", ";
    print_to(o, args.kwargs[i].key);
    o += ": ";
    print_to(o, args.kwargs[i].value);
  }
  if (!args.kwargs.empty() && args.kwargs_trailing_comma) o += ',';
  o += "})";
  return o;
}

std::string print_line(std::uint64_t count, const Args& args) {
  return "cnt: " + std::to_string(count) + ", " + print_args(args);
}

std::string print_line(const ArgLine& line) { return print_line(line.count, line.args); }

std::string print_operator_line(const Operator& op) { return "Operator: " + op.spelling; }

std::string print_trace(const TraceFile& trace) {
  std::string o;
  for (const auto& op : trace.operators) {
    o += print_operator_line(op);
    o += '\n';
    for (const auto& l : op.lines) {
      o += print_line(l);
      o += '\n';
    }
  }
  return o;
}

// ---------------------------------------------------------------- files

ParseReport parse_text(std::string_view text, std::string_view origin) {
  ParseReport rep;
  rep.trace.origin = std::string(origin);
  Operator* current = nullptr;
  std::size_t bad_operator_line = 0;  // last Operator: line that failed
  std::size_t line_no = 0;
  std::size_t start = 0;
  auto error = [&](std::size_t col0, Code code, std::string msg) {
    rep.errors.push_back(LineError{line_no, col0 + 1, code, std::move(msg)});
  };
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > limits::max_backendbench_line_bytes) {
      error(limits::max_backendbench_line_bytes, Code::limit_exceeded,
            "line of " + std::to_string(line.size()) + " bytes is longer than the limit of " +
                std::to_string(limits::max_backendbench_line_bytes) + " bytes");
      continue;
    }
    std::size_t i = 0;
    while (i < line.size() && is_ws(line[i])) ++i;
    if (i == line.size()) continue;  // blank
    const std::string_view body = line.substr(i);
    constexpr std::string_view op_tag = "Operator:";
    constexpr std::string_view cnt_tag = "cnt:";
    if (body.substr(0, op_tag.size()) == op_tag) {
      std::size_t p = i + op_tag.size();
      while (p < line.size() && is_ws(line[p])) ++p;
      const std::size_t name_start = p;
      while (p < line.size() && !is_ws(line[p])) ++p;
      const std::string_view name = line.substr(name_start, p - name_start);
      std::size_t q = p;
      while (q < line.size() && is_ws(line[q])) ++q;
      current = nullptr;
      if (name.empty()) {
        bad_operator_line = line_no;
        error(name_start, Code::parse_error, "expected an operator name after 'Operator:'");
        continue;
      }
      if (q != line.size()) {
        bad_operator_line = line_no;
        error(q, Code::parse_error, "unexpected text after the operator name");
        continue;
      }
      Operator op;
      op.spelling = std::string(name);
      op.name = name == "aten.sum.SymInt" ? std::string("aten.sum.dim_IntList") : op.spelling;
      op.line = line_no;
      rep.trace.operators.push_back(std::move(op));
      current = &rep.trace.operators.back();
      continue;
    }
    ++rep.arg_lines_total;
    if (body.substr(0, cnt_tag.size()) != cnt_tag) {
      error(i, Code::parse_error, "expected 'Operator:' or 'cnt:'");
      continue;
    }
    if (!current) {
      if (bad_operator_line)
        error(i, Code::parse_error, "cnt: line under the invalid Operator: line " + std::to_string(bad_operator_line));
      else
        error(i, Code::parse_error, "cnt: line before any Operator: line");
      continue;
    }
    std::size_t p = i + cnt_tag.size();
    while (p < line.size() && is_ws(line[p])) ++p;
    const std::size_t count_start = p;
    while (p < line.size() && is_digit(line[p])) ++p;
    if (p == count_start) {
      error(count_start, Code::parse_error, "expected a count (digits) after 'cnt:'");
      continue;
    }
    std::uint64_t count = 0;
    auto r = std::from_chars(line.data() + count_start, line.data() + p, count);
    if (r.ec != std::errc()) {
      error(count_start, Code::limit_exceeded, "count does not fit 64 bits");
      continue;
    }
    Parser parser(line, p);
    parser.skip_ws();
    if (parser.peek() != ',') {
      error(parser.pos(), Code::parse_error, "expected ',' after the count, found " + parser.found());
      continue;
    }
    parser.expect(',');
    ArgLine al;
    al.line = line_no;
    al.count = count;
    if (!parser.parse_args(al.args)) {
      const Failure& f = parser.failure();
      error(f.pos, f.code, f.message);
      continue;
    }
    parser.skip_ws();
    if (!parser.at_end()) {
      error(parser.pos(), Code::parse_error, "unexpected " + parser.found() + " after the arguments");
      continue;
    }
    current->lines.push_back(std::move(al));
    ++rep.arg_lines_parsed;
  }
  return rep;
}

namespace {

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(Code::io_error, path + ": cannot open");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) return make_error(Code::io_error, path + ": cannot read");
  if (static_cast<std::uint64_t>(size) > max_trace_file_bytes)
    return make_error(Code::limit_exceeded, path + ": larger than " + std::to_string(max_trace_file_bytes) + " bytes");
  in.seekg(0, std::ios::beg);
  std::string text(static_cast<std::size_t>(size), '\0');
  if (size > 0 && !in.read(text.data(), size)) return make_error(Code::io_error, path + ": cannot read");
  return text;
}

}  // namespace

Result<ParseReport> parse_file_report(const std::string& path) {
  auto text = read_file(path);
  if (!text) return std::move(text).error();
  return parse_text(*text, path);
}

Result<TraceFile> parse_file(const std::string& path) {
  auto rep = parse_file_report(path);
  if (!rep) return std::move(rep).error();
  if (!rep->errors.empty()) {
    const LineError& e = rep->errors.front();
    std::string msg = rep->format_error(e);
    if (rep->errors.size() > 1) msg += " (and " + std::to_string(rep->errors.size() - 1) + " more errors)";
    return make_error(e.code, std::move(msg));
  }
  return std::move(rep->trace);
}

}  // namespace kb::backendbench
