// Walking one parsed document: each expected kind read from an element, and
// every problem recorded in a Diagnostics list with its JSON path and the
// origin of that path (a file, or file:line where the reader locates lines).
// The readers of lib/schema and lib/model derive their walkers from it and add
// their own fields' rules.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "json/diagnostics.hpp"
#include "json/json.hpp"

namespace kb::json {

class Walker {
 public:
  // The origin a problem at a JSON path is reported with.
  using OriginAt = std::function<std::string(const std::string& path)>;

  Walker(OriginAt origin_at, Diagnostics& diags) : origin_at_(std::move(origin_at)), diags_(diags) {}

  void error(const std::string& path, std::string msg) {
    ++errors_;
    diags_.error(origin_at_(path), path, std::move(msg));
  }
  void warning(const std::string& path, std::string msg) { diags_.warning(origin_at_(path), path, std::move(msg)); }
  std::size_t errors() const { return errors_; }

  bool object(Element e, const std::string& path, Object& out) {
    if (e.get_object().get(out) == simdjson::SUCCESS) return true;
    error(path, fmt::format("expected an object, got {}", describe(e)));
    return false;
  }
  bool array(Element e, const std::string& path, Array& out, std::string_view what) {
    if (e.get_array().get(out) == simdjson::SUCCESS) return true;
    error(path, fmt::format("expected a list of {}, got {}", what, describe(e)));
    return false;
  }

  // Duplicate keys are errors (simdjson keeps both); unknown keys are warnings.
  void check_keys(Object o, const std::string& path, std::initializer_list<std::string_view> known) {
    std::set<std::string_view> seen;
    for (auto field : o) {
      if (!seen.insert(field.key).second) error(member_path(path, field.key), "duplicate key");
      bool is_known = false;
      for (auto k : known) is_known |= k == field.key;
      if (!is_known) warning(member_path(path, field.key), "unknown field (ignored)");
    }
  }

  // The members of o (at `path`) in document order, each key once: a repeated key is the
  // error `duplicate` ("duplicate axis") and its value is skipped. f(key, value, member path).
  // Returns whether every key was unique.
  template <class F>
  bool each_member(Object o, const std::string& path, std::string_view duplicate, F&& f) {
    std::set<std::string_view> seen;
    bool unique = true;
    for (auto field : o) {
      std::string fp = member_path(path, field.key);
      if (!seen.insert(field.key).second) {
        error(fp, std::string(duplicate));
        unique = false;
        continue;
      }
      f(field.key, field.value, fp);
    }
    return unique;
  }

  static bool lookup(Object o, std::string_view key, Element& out) {
    return o.at_key(key).get(out) == simdjson::SUCCESS;
  }

  std::optional<std::string> string(Element e, const std::string& path) {
    std::string_view s;
    if (e.get_string().get(s) == simdjson::SUCCESS) return std::string(s);
    error(path, fmt::format("expected a string, got {}", describe(e)));
    return std::nullopt;
  }

  // Absent: an error when `required`; `non_empty`: "" is an error.
  std::optional<std::string> string_field(Object o, std::string_view key, const std::string& path, bool required,
                                          bool non_empty = false) {
    Element e;
    if (!lookup(o, key, e)) {
      if (required) error(member_path(path, key), "required field is missing");
      return std::nullopt;
    }
    auto s = string(e, member_path(path, key));
    if (s && non_empty && s->empty()) {
      error(member_path(path, key), "must not be empty");
      return std::nullopt;
    }
    return s;
  }

  // An integer >= min; `what` names the expected value in messages ("a non-negative integer").
  std::optional<std::int64_t> integer(Element e, const std::string& path, std::int64_t min, std::string_view what) {
    std::int64_t v;
    if (e.type() == simdjson::dom::element_type::INT64 && e.get_int64().get(v) == simdjson::SUCCESS) {
      if (v >= min) return v;
      error(path, fmt::format("expected {}, got {}", what, v));
      return std::nullopt;
    }
    if (e.type() == simdjson::dom::element_type::UINT64) {
      error(path, fmt::format("integer {} is too large", brief(e)));
      return std::nullopt;
    }
    error(path, fmt::format("expected {}, got {}", what, describe(e)));
    return std::nullopt;
  }

  std::optional<double> number(Element e, const std::string& path) {
    double v;
    if (e.is_number() && e.get_double().get(v) == simdjson::SUCCESS) return v;
    error(path, fmt::format("expected a number, got {}", describe(e)));
    return std::nullopt;
  }

  std::optional<bool> bool_field(Object o, std::string_view key, const std::string& path, bool required) {
    Element e;
    if (!lookup(o, key, e)) {
      if (required) error(member_path(path, key), "required field is missing");
      return std::nullopt;
    }
    bool b;
    if (e.get_bool().get(b) == simdjson::SUCCESS) return b;
    error(member_path(path, key), fmt::format("expected true or false, got {}", describe(e)));
    return std::nullopt;
  }

 private:
  OriginAt origin_at_;
  Diagnostics& diags_;
  std::size_t errors_ = 0;
};

}  // namespace kb::json
