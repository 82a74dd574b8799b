#include "json/json.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "common/limits.hpp"

namespace kb::json {

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
    return make_error(code, fmt::format("{}: invalid JSON: {}", origin, why));
  }
  return doc;
}

Result<std::string> read_text_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return make_error(Code::io_error, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
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
