#include "model/locate.hpp"

#include <fmt/format.h>

#include "common/limits.hpp"
#include "json/json.hpp"

namespace kb::model {
namespace {

// A minimal scanner over well-formed JSON that records the line where each value starts. It only
// needs to agree with simdjson on documents simdjson accepted; on anything else it stops early.
class Scanner {
 public:
  Scanner(std::string_view s, std::map<std::string, std::size_t, std::less<>>& out) : s_(s), out_(out) {}

  bool value(const std::string& path, std::size_t depth) {
    skip_space();
    if (i_ >= s_.size() || depth > limits::max_json_depth) return false;
    out_.emplace(path, line_);
    char c = s_[i_];
    if (c == '{') return object(path, depth);
    if (c == '[') return array(path, depth);
    if (c == '"') return string(nullptr);
    // number, true, false, null: up to the next delimiter
    while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != '}' && s_[i_] != ']' && !space(s_[i_])) ++i_;
    return true;
  }

 private:
  static bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
  void skip_space() {
    while (i_ < s_.size() && space(s_[i_])) {
      if (s_[i_] == '\n') ++line_;
      ++i_;
    }
  }
  bool expect(char c) {
    skip_space();
    if (i_ >= s_.size() || s_[i_] != c) return false;
    ++i_;
    return true;
  }

  static void put_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::uint32_t hex4() {
    std::uint32_t v = 0;
    for (int k = 0; k < 4 && i_ < s_.size(); ++k, ++i_) {
      char c = s_[i_];
      v = v * 16 + static_cast<std::uint32_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return v;
  }

  // A string at s_[i_] == '"'; its decoded text goes to `out` when not null.
  bool string(std::string* out) {
    ++i_;
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == '"') {
        ++i_;
        return true;
      }
      if (c != '\\') {
        if (out) *out += c;
        ++i_;
        continue;
      }
      if (i_ + 1 >= s_.size()) return false;
      char x = s_[i_ + 1];
      i_ += 2;
      if (x == 'u') {
        std::uint32_t cp = hex4();
        if (cp >= 0xD800 && cp < 0xDC00 && i_ + 1 < s_.size() && s_[i_] == '\\' && s_[i_ + 1] == 'u') {
          i_ += 2;
          std::uint32_t lo = hex4();
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (out) put_utf8(*out, cp);
        continue;
      }
      if (out) {
        switch (x) {
          case 'n': *out += '\n'; break;
          case 't': *out += '\t'; break;
          case 'r': *out += '\r'; break;
          case 'b': *out += '\b'; break;
          case 'f': *out += '\f'; break;
          default: *out += x; break;
        }
      }
    }
    return false;
  }

  bool object(const std::string& path, std::size_t depth) {
    ++i_;
    skip_space();
    if (i_ < s_.size() && s_[i_] == '}') {
      ++i_;
      return true;
    }
    while (true) {
      skip_space();
      if (i_ >= s_.size() || s_[i_] != '"') return false;
      std::string key;
      if (!string(&key) || !expect(':')) return false;
      if (!value(json::member_path(path, key), depth + 1)) return false;
      skip_space();
      if (i_ >= s_.size()) return false;
      if (s_[i_] == '}') {
        ++i_;
        return true;
      }
      if (s_[i_++] != ',') return false;
    }
  }

  bool array(const std::string& path, std::size_t depth) {
    ++i_;
    skip_space();
    if (i_ < s_.size() && s_[i_] == ']') {
      ++i_;
      return true;
    }
    for (std::size_t k = 0;; ++k) {
      if (!value(json::index_path(path, k), depth + 1)) return false;
      skip_space();
      if (i_ >= s_.size()) return false;
      if (s_[i_] == ']') {
        ++i_;
        return true;
      }
      if (s_[i_++] != ',') return false;
    }
  }

  std::string_view s_;
  std::map<std::string, std::size_t, std::less<>>& out_;
  std::size_t i_ = 0;
  std::size_t line_ = 1;
};

// The path of the value enclosing the one at `path` ("a.b[2]" -> "a.b", "a.b" -> "a", "a" -> "").
std::string_view parent(std::string_view path) {
  if (path.empty()) return path;
  if (path.back() == ']') {
    // `base["quoted key"]` or `base[3]`
    std::size_t open = path.size() >= 2 && path[path.size() - 2] == '"' ? path.rfind("[\"") : path.rfind('[');
    return open == std::string_view::npos ? std::string_view() : path.substr(0, open);
  }
  std::size_t cut = path.rfind('.');
  if (cut == std::string_view::npos) return {};
  return path.substr(0, cut);
}

}  // namespace

Locator::Locator(std::string_view text, std::string origin) : origin_(std::move(origin)) {
  Scanner(text, lines_).value("", 0);
}

std::size_t Locator::line(std::string_view path) const {
  while (true) {
    if (auto it = lines_.find(path); it != lines_.end()) return it->second;
    if (path.empty()) return 0;
    path = parent(path);
  }
}

std::string Locator::at(std::string_view path) const {
  std::size_t l = line(path);
  return l ? fmt::format("{}:{}", origin_, l) : origin_;
}

}  // namespace kb::model
