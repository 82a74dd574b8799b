// Reading JSON with simdjson (DOM) under kb's limits, and writing it with fmt.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace kb::json {

using Element = simdjson::dom::element;
using Object = simdjson::dom::object;
using Array = simdjson::dom::array;

// One parsed document; owns the parser that the elements point into.
class Document {
 public:
  Element root() const { return root_; }

 private:
  friend Result<Document> parse(std::string_view text, std::string_view origin);
  std::unique_ptr<simdjson::dom::parser> parser_;
  Element root_;
};

// Parses text (one JSON document). Refuses documents over
// limits::max_json_document_bytes or nested deeper than limits::max_json_depth.
// Errors: Code::parse_error / limit_exceeded, message "origin: invalid JSON: ...".
Result<Document> parse(std::string_view text, std::string_view origin);

// Where and why `text` is not JSON ("line 3, column 7: expected ',' or '}',
// found '\"'"; just "column N: ..." for one-line text), or nullopt when it
// is well-formed. Used to explain simdjson's failures.
std::optional<std::string> find_syntax_error(std::string_view text);

// Reads a whole file as text (refusing files over limits::max_json_file_bytes,
// and, without opening them, FIFOs, devices and sockets: see
// common/regular_file.hpp).
Result<std::string> read_text_file(const std::string& path);

// "object", "array", "string", "integer", "number", "boolean", "null".
const char* type_name(const Element& e);
// A short rendering of a value for messages (strings quoted, long text cut).
std::string brief(const Element& e);
// "null", "true", "string \"x\"", "array [1,2]": kind and value for messages.
std::string describe(const Element& e);
// Minified JSON text of an element (used to keep opaque objects verbatim).
std::string minified(const Element& e);

// JSON paths in messages: `base.key` for identifier-like keys, else
// `base["key"]` (quoted, escaped); `base[i]` for array elements.
std::string member_path(std::string_view base, std::string_view key);
std::string index_path(std::string_view base, std::size_t i);

// JSON string literal with quotes and escapes.
std::string quote(std::string_view s);
// Shortest text that reads back as the same double; always looks like a float
// ("1.0", not "1"), so integers and floats keep their JSON kinds.
std::string format_double(double v);

// Appends JSON to a string. Pretty mode indents by 2 like the shipped files.
class Writer {
 public:
  explicit Writer(bool pretty = false) : pretty_(pretty) {}

  Writer& begin_object();
  Writer& end_object();
  Writer& begin_array();
  Writer& end_array();
  Writer& key(std::string_view k);
  Writer& string(std::string_view s);
  Writer& integer(std::int64_t v);
  Writer& number(double v);
  Writer& boolean(bool v);
  Writer& null();
  Writer& raw(std::string_view json);  // pre-rendered JSON value

  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void before_value();
  void newline();
  std::string out_;
  bool pretty_;
  struct Level {
    bool is_object;
    int count;
  };
  std::vector<Level> stack_;
  bool after_key_ = false;
};

}  // namespace kb::json
