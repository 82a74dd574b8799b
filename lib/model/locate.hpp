// Lines of JSON values, so that a problem found by JSON path in a pretty-printed file can name
// its line too ("models/llama.json:14: kernels[3].count: ..."), as JSONL readers do.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

namespace kb::model {

class Locator {
 public:
  Locator() = default;
  // Indexes every value of `text` (already known to be well-formed JSON; a malformed tail is
  // indexed up to where it breaks) by its JSON path, spelled as json::member_path and
  // json::index_path spell it from the root "" ("kernels[3].count", "[0].conversation").
  Locator(std::string_view text, std::string origin);

  // The line (1-based) of the value at `path`, or of its nearest enclosing value that exists
  // (a missing field is reported at the object that lacks it); 0 when nothing is indexed.
  std::size_t line(std::string_view path) const;
  // "origin:line", or origin alone when no line is known.
  std::string at(std::string_view path) const;
  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
  std::map<std::string, std::size_t, std::less<>> lines_;
};

}  // namespace kb::model
