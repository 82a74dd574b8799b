#include "json/json.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <unistd.h>

#include "common/limits.hpp"
#include "common/regular_file.hpp"

namespace kb::json {

namespace {

std::string show_byte(unsigned char c) {
  if (c >= 0x20 && c < 0x7f) return fmt::format("'{}'", static_cast<char>(c));
  return fmt::format("byte 0x{:02x}", c);
}

// Decodes one UTF-8 sequence at s[i]; returns its length, or 0 if invalid
// (bad lead byte, truncated, overlong, surrogate, above U+10FFFF).
std::size_t utf8_length(std::string_view s, std::size_t i) {
  auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  std::size_t len;
  std::uint32_t cp;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
  else return 0;
  if (i + len > s.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  static constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

}  // namespace

std::optional<std::string> find_syntax_error(std::string_view s) {
  std::size_t i = 0;
  std::vector<char> open;  // '{' or '[' of each enclosing container
  enum class Expect { value, first_value, key, first_key, colon, after_value, done } e = Expect::value;
  bool one_line = s.find('\n') == std::string_view::npos;
  auto at = [&](std::size_t pos, std::string what) {
    std::size_t line = 1, col = 1;
    for (std::size_t k = 0; k < pos && k < s.size(); ++k) {
      if (s[k] == '\n') ++line, col = 1;
      else ++col;
    }
    return one_line ? fmt::format("column {}: {}", col, what) : fmt::format("line {}, column {}: {}", line, col, what);
  };
  auto token = [&](std::size_t pos) {
    std::size_t end = pos;
    while (end < s.size() && end - pos < 20 && (std::isalnum(static_cast<unsigned char>(s[end])) || s[end] == '_')) ++end;
    return end > pos ? fmt::format("`{}`", s.substr(pos, end - pos)) : show_byte(static_cast<unsigned char>(s[pos]));
  };
  auto close = [&]() {
    open.pop_back();
    e = open.empty() ? Expect::done : Expect::after_value;
  };
  // Scans a string starting at s[i] == '"'; returns an error or nullopt.
  auto string = [&]() -> std::optional<std::string> {
    std::size_t start = i++;
    while (true) {
      if (i >= s.size()) return at(start, "unterminated string");
      auto c = static_cast<unsigned char>(s[i]);
      if (c == '"') {
        ++i;
        return std::nullopt;
      }
      if (c == '\\') {
        if (i + 1 >= s.size()) return at(start, "unterminated string");
        char x = s[i + 1];
        if (x == 'u') {
          for (std::size_t k = 2; k < 6; ++k)
            if (i + k >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + k])))
              return at(i, "\\u needs four hex digits");
          i += 6;
          continue;
        }
        if (std::string_view("\"\\/bfnrt").find(x) == std::string_view::npos)
          return at(i, fmt::format("invalid escape \\{} in a string", x));
        i += 2;
        continue;
      }
      if (c < 0x20) return at(i, fmt::format("control character {} in a string (must be escaped)", show_byte(c)));
      std::size_t len = utf8_length(s, i);
      if (len == 0) return at(i, "invalid UTF-8 in a string");
      i += len;
    }
  };
  auto number = [&]() -> std::optional<std::string> {
    std::size_t start = i;
    if (s[i] == '-') ++i;
    auto digits = [&]() {
      std::size_t d = i;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
      return i - d;
    };
    if (i < s.size() && s[i] == '0') ++i;
    else if (digits() == 0) return at(start, fmt::format("invalid number {}", token(start)));
    bool integer = true;
    if (i < s.size() && s[i] == '.') {
      ++i;
      integer = false;
      if (digits() == 0) return at(start, "invalid number: digits must follow '.'");
    }
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
      ++i;
      integer = false;
      if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
      if (digits() == 0) return at(start, "invalid number: digits must follow the exponent");
    }
    std::string text(s.substr(start, i - start));
    if (integer) {
      errno = 0;
      if (text[0] == '-') (void)std::strtoll(text.c_str(), nullptr, 10);
      else (void)std::strtoull(text.c_str(), nullptr, 10);
      if (errno == ERANGE) return at(start, fmt::format("integer {} is too large", text.size() > 40 ? text.substr(0, 40) + "..." : text));
    } else if (std::isinf(std::strtod(text.c_str(), nullptr))) {
      return at(start, fmt::format("number {} is out of range", text.size() > 40 ? text.substr(0, 40) + "..." : text));
    }
    if (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '.'))
      return at(start, fmt::format("invalid number {}", token(start)));
    return std::nullopt;
  };

  while (true) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
    if (i >= s.size()) {
      if (e == Expect::done) return std::nullopt;
      return at(i, open.empty() ? "unexpected end of document"
                                : fmt::format("unexpected end of document ({} bracket{} still open)", open.size(),
                                              open.size() == 1 ? "" : "s"));
    }
    auto c = static_cast<unsigned char>(s[i]);
    switch (e) {
      case Expect::done:
        return at(i, fmt::format("unexpected {} after the end of the document", token(i)));
      case Expect::colon:
        if (c != ':') return at(i, fmt::format("expected ':' after an object key, found {}", token(i)));
        ++i;
        e = Expect::value;
        continue;
      case Expect::after_value: {
        char closer = open.back() == '{' ? '}' : ']';
        if (c == ',') {
          ++i;
          e = open.back() == '{' ? Expect::key : Expect::value;
          continue;
        }
        if (c == static_cast<unsigned char>(closer)) {
          ++i;
          close();
          continue;
        }
        return at(i, fmt::format("expected ',' or '{}', found {}", closer, token(i)));
      }
      case Expect::first_key:
        if (c == '}') {
          ++i;
          close();
          continue;
        }
        [[fallthrough]];
      case Expect::key:
        if (c != '"')
          return at(i, fmt::format("expected a string key{}, found {}", e == Expect::key ? " after ','" : "", token(i)));
        if (auto err = string()) return err;
        e = Expect::colon;
        continue;
      case Expect::first_value:
        if (c == ']') {
          ++i;
          close();
          continue;
        }
        [[fallthrough]];
      case Expect::value:
        if (c == '{' || c == '[') {
          open.push_back(static_cast<char>(c));
          ++i;
          e = c == '{' ? Expect::first_key : Expect::first_value;
          continue;
        }
        if (c == '"') {
          if (auto err = string()) return err;
        } else if (c == '-' || std::isdigit(c)) {
          if (auto err = number()) return err;
        } else if (s.substr(i, 4) == "true" || s.substr(i, 4) == "null") {
          i += 4;
        } else if (s.substr(i, 5) == "false") {
          i += 5;
        } else {
          return at(i, fmt::format("expected a value, found {}", token(i)));
        }
        e = open.empty() ? Expect::done : Expect::after_value;
        continue;
    }
  }
}

Result<Document> parse(std::string_view text, std::string_view origin) {
  if (text.size() > limits::max_json_document_bytes)
    return make_error(Code::limit_exceeded,
                      fmt::format("{}: document of {} bytes exceeds the limit of {} bytes", origin,
                                  text.size(), limits::max_json_document_bytes));
  Document doc;
  doc.parser_ = std::make_unique<simdjson::dom::parser>();
  // Capacity is the document itself; depth bounded so hostile nesting is refused.
  if (doc.parser_->allocate(text.size() + 64, limits::max_json_depth) != simdjson::SUCCESS)
    return make_error(Code::out_of_memory, fmt::format("{}: cannot allocate the JSON parser", origin));
  simdjson::padded_string padded(text);
  // The DOM copies string values into the parser, so `padded` may go away.
  auto err = doc.parser_->parse(padded).get(doc.root_);
  if (err) {
    Code code = err == simdjson::DEPTH_ERROR ? Code::limit_exceeded : Code::parse_error;
    std::string why = err == simdjson::DEPTH_ERROR
                          ? fmt::format("nested deeper than {} levels", limits::max_json_depth)
                          : std::string(simdjson::error_message(err));
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) why = "empty document";
    else if (code == Code::parse_error)
      if (auto where = find_syntax_error(text)) why = *where;
    return make_error(code, fmt::format("{}: invalid JSON: {}", origin, why));
  }
  return doc;
}

Result<std::string> read_text_file(const std::string& path) {
  auto fd = open_regular_file(path);
  if (!fd) return fd.error();
  std::FILE* f = ::fdopen(*fd, "rb");
  if (!f) {
    int saved = errno;
    ::close(*fd);
    return make_error(Code::io_error, fmt::format("{}: cannot open: {}", path, std::strerror(saved)));
  }
  std::string out;
  char buf[1 << 16];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    if (out.size() + n > limits::max_json_file_bytes) {
      std::fclose(f);
      return make_error(Code::limit_exceeded, fmt::format("{}: file exceeds the limit of {} bytes", path,
                                                          limits::max_json_file_bytes));
    }
    out.append(buf, n);
  }
  bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) return make_error(Code::io_error, fmt::format("{}: read error", path));
  return out;
}

const char* type_name(const Element& e) {
  switch (e.type()) {
    case simdjson::dom::element_type::OBJECT: return "object";
    case simdjson::dom::element_type::ARRAY: return "array";
    case simdjson::dom::element_type::STRING: return "string";
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64: return "integer";
    case simdjson::dom::element_type::DOUBLE: return "number";
    case simdjson::dom::element_type::BOOL: return "boolean";
    case simdjson::dom::element_type::NULL_VALUE: return "null";
  }
  return "value";
}

std::string minified(const Element& e) { return simdjson::minify(e); }

std::string brief(const Element& e) {
  std::string s = minified(e);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string member_path(std::string_view base, std::string_view key) {
  bool plain = !key.empty() && !std::isdigit(static_cast<unsigned char>(key[0]));
  for (unsigned char c : key)
    if (!(std::isalnum(c) || c == '_')) plain = false;
  if (plain) return base.empty() ? std::string(key) : fmt::format("{}.{}", base, key);
  return fmt::format("{}[{}]", base, quote(key));
}

std::string index_path(std::string_view base, std::size_t i) { return fmt::format("{}[{}]", base, i); }

std::string describe(const Element& e) {
  if (e.is_null() || e.is_bool()) return brief(e);
  return fmt::format("{} {}", type_name(e), brief(e));
}

std::string quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

std::string format_double(double v) {
  // JSON has no inf/nan; Python's json writes these names, which kb refuses to
  // read, so writers must not produce them: callers validate finiteness first.
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  std::string s = fmt::format("{}", v);  // shortest round-trip form
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

void Writer::newline() {
  if (!pretty_) return;
  out_ += '\n';
  out_.append(stack_.size() * 2, ' ');
}

void Writer::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!stack_.empty()) {
    if (stack_.back().count++ > 0) out_ += ',';
    newline();
  }
}

Writer& Writer::begin_object() {
  before_value();
  out_ += '{';
  stack_.push_back({true, 0});
  return *this;
}
Writer& Writer::end_object() {
  bool empty = stack_.back().count == 0;
  stack_.pop_back();
  if (!empty) newline();
  out_ += '}';
  return *this;
}
Writer& Writer::begin_array() {
  before_value();
  out_ += '[';
  stack_.push_back({false, 0});
  return *this;
}
Writer& Writer::end_array() {
  bool empty = stack_.back().count == 0;
  stack_.pop_back();
  if (!empty) newline();
  out_ += ']';
  return *this;
}
Writer& Writer::key(std::string_view k) {
  before_value();
  out_ += quote(k);
  out_ += pretty_ ? ": " : ":";
  after_key_ = true;
  return *this;
}
Writer& Writer::string(std::string_view s) {
  before_value();
  out_ += quote(s);
  return *this;
}
Writer& Writer::integer(std::int64_t v) {
  before_value();
  out_ += fmt::format("{}", v);
  return *this;
}
Writer& Writer::number(double v) {
  before_value();
  out_ += format_double(v);
  return *this;
}
Writer& Writer::boolean(bool v) {
  before_value();
  out_ += v ? "true" : "false";
  return *this;
}
Writer& Writer::null() {
  before_value();
  out_ += "null";
  return *this;
}
Writer& Writer::raw(std::string_view json) {
  before_value();
  out_ += json;
  return *this;
}

}  // namespace kb::json
