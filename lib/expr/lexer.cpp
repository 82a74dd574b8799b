#include "expr/lexer.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>

namespace kb::expr::detail {
namespace {

// Locale-independent classification (the <cctype> functions depend on the
// locale and are undefined for negative chars).
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_alnum(char c) { return is_alpha(c) || is_digit(c); }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string hex_byte(unsigned char c) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s = "byte 0x";
  s += digits[c >> 4];
  s += digits[c & 15];
  return s;
}

Tok keyword(std::string_view word) {
  if (word == "and") return Tok::kw_and;
  if (word == "or") return Tok::kw_or;
  if (word == "not") return Tok::kw_not;
  if (word == "True") return Tok::kw_true;
  if (word == "False") return Tok::kw_false;
  // Python keywords that cannot be identifiers; refusing them gives a clearer
  // message than a confusing syntax error later.
  static constexpr std::string_view reserved[] = {
      "None", "in", "is", "if", "else", "lambda", "for", "while", "def", "class", "return",
      "import", "from", "as", "with", "yield", "await", "async", "del", "pass", "break",
      "continue", "global", "nonlocal", "raise", "try", "except", "finally", "assert", "elif"};
  for (std::string_view r : reserved) {
    if (word == r) return Tok::kw_reserved;
  }
  return Tok::name;
}

class Lexer {
 public:
  explicit Lexer(std::string_view text) : s_(text) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    for (;;) {
      Token t = next();
      const Tok kind = t.kind;
      out.push_back(std::move(t));
      if (kind == Tok::end || kind == Tok::error) return out;
    }
  }

 private:
  char at(std::size_t i) const { return i < s_.size() ? s_[i] : '\0'; }

  Token make(Tok kind, std::size_t begin, std::size_t end) const {
    Token t;
    t.kind = kind;
    t.begin = static_cast<std::uint32_t>(begin);
    t.end = static_cast<std::uint32_t>(end);
    return t;
  }

  Token error(std::size_t begin, std::size_t end, std::string message) const {
    Token t = make(Tok::error, begin, end);
    t.message = std::move(message);
    return t;
  }

  Token next() {
    while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
    const std::size_t b = pos_;
    if (pos_ >= s_.size()) return make(Tok::end, b, b);
    const char c = s_[pos_];
    if (is_digit(c) || (c == '.' && is_digit(at(pos_ + 1)))) return number();
    if (is_alpha(c)) {
      while (pos_ < s_.size() && is_alnum(s_[pos_])) ++pos_;
      return make(keyword(s_.substr(b, pos_ - b)), b, pos_);
    }
    // Two-character operators first.
    const char d = at(pos_ + 1);
    auto two = [&](Tok k) { pos_ += 2; return make(k, b, pos_); };
    auto one = [&](Tok k) { pos_ += 1; return make(k, b, pos_); };
    switch (c) {
      case '(': return one(Tok::lparen);
      case ')': return one(Tok::rparen);
      case '[': return one(Tok::lbracket);
      case ']': return one(Tok::rbracket);
      case '.': return one(Tok::dot);
      case ',': return one(Tok::comma);
      case '+': return d == '=' ? two(Tok::unsupported) : one(Tok::plus);
      case '-': return d == '=' || d == '>' ? two(Tok::unsupported) : one(Tok::minus);
      case '*': return d == '*' || d == '=' ? two(Tok::unsupported) : one(Tok::star);
      case '/':
        if (d == '/') return at(pos_ + 2) == '=' ? (pos_ += 3, make(Tok::unsupported, b, pos_)) : two(Tok::dslash);
        return d == '=' ? two(Tok::unsupported) : one(Tok::slash);
      case '%': return d == '=' ? two(Tok::unsupported) : one(Tok::percent);
      case '=': return d == '=' ? two(Tok::eq) : one(Tok::unsupported);
      case '!': return d == '=' ? two(Tok::ne) : one(Tok::unsupported);
      case '<':
        if (d == '=') return two(Tok::le);
        return d == '<' ? two(Tok::unsupported) : one(Tok::lt);
      case '>':
        if (d == '=') return two(Tok::ge);
        return d == '>' ? two(Tok::unsupported) : one(Tok::gt);
      case '&': case '|': case '^': case '~': case '@': case ':': case ';':
        return one(Tok::unsupported);
      default: break;
    }
    const auto uc = static_cast<unsigned char>(c);
    if (uc >= 0x21 && uc < 0x7f) return error(b, b + 1, std::string("unexpected character '") + c + "'");
    return error(b, b + 1, "unexpected " + hex_byte(uc));
  }

  // Python decimal literals: 12, 1.5, .5, 5., 1e-5, 2.5E+3. Hex/octal/binary
  // and digit underscores are not supported.
  Token number() {
    const std::size_t b = pos_;
    bool is_float = false;
    std::size_t int_digits = 0;  // significant digits before the point
    bool leading_zero_seen = false;
    while (is_digit(at(pos_))) {
      if (int_digits > 0 || s_[pos_] != '0') ++int_digits;
      else leading_zero_seen = true;
      ++pos_;
    }
    std::size_t frac_leading_zeros = 0;  // zeros right after the point (for underflow)
    bool frac_nonzero = false;
    if (at(pos_) == '.') {
      is_float = true;
      ++pos_;
      while (is_digit(at(pos_))) {
        if (s_[pos_] != '0') frac_nonzero = true;
        else if (!frac_nonzero) ++frac_leading_zeros;
        ++pos_;
      }
    }
    std::int64_t exponent = 0;
    if (at(pos_) == 'e' || at(pos_) == 'E') {
      std::size_t p = pos_ + 1;
      bool negative = false;
      if (at(p) == '+' || at(p) == '-') negative = at(p++) == '-';
      if (!is_digit(at(p))) {
        while (pos_ < s_.size() && is_alnum(s_[pos_])) ++pos_;
        return error(b, pos_, "invalid number literal '" + std::string(s_.substr(b, pos_ - b)) + "'");
      }
      while (is_digit(at(p))) {
        if (exponent < 100000) exponent = exponent * 10 + (at(p) - '0');  // saturate
        ++p;
      }
      if (negative) exponent = -exponent;
      is_float = true;
      pos_ = p;
    }
    // "1abc", "0x10", "1_000", "1.2.3": refuse the whole run, as Python does.
    if (is_alnum(at(pos_)) || (at(pos_) == '.' && is_digit(at(pos_ + 1)))) {
      while (pos_ < s_.size() && (is_alnum(s_[pos_]) || s_[pos_] == '.')) ++pos_;
      return error(b, pos_, "invalid number literal '" + std::string(s_.substr(b, pos_ - b)) + "'");
    }
    const std::string_view lit = s_.substr(b, pos_ - b);
    if (!is_float) {
      if (leading_zero_seen && int_digits > 0) {
        return error(b, pos_, "leading zeros are not allowed in integer literal '" + std::string(lit) + "'");
      }
      Token t = make(Tok::integer, b, pos_);
      auto [p, ec] = std::from_chars(lit.data(), lit.data() + lit.size(), t.int_value);
      if (ec != std::errc() || p != lit.data() + lit.size()) {
        return error(b, pos_, "integer literal " + std::string(lit) + " does not fit in 64 bits");
      }
      return t;
    }
    Token t = make(Tok::floating, b, pos_);
    auto [p, ec] = std::from_chars(lit.data(), lit.data() + lit.size(), t.float_value,
                                   std::chars_format::general);
    if (ec == std::errc::result_out_of_range) {
      // Python gives inf for overflow and 0.0 for underflow. Which one it is
      // follows from the decimal magnitude: digits before the point plus the
      // exponent (out-of-range values are hundreds of decades from 1).
      const std::int64_t magnitude =
          int_digits > 0 ? static_cast<std::int64_t>(int_digits) + exponent
                         : exponent - static_cast<std::int64_t>(frac_leading_zeros);
      t.float_value = magnitude > 0 ? std::numeric_limits<double>::infinity() : 0.0;
    } else if (ec != std::errc() || p != lit.data() + lit.size()) {
      return error(b, pos_, "invalid number literal '" + std::string(lit) + "'");
    }
    return t;
  }

  std::string_view s_;
  std::size_t pos_ = 0;
};

}  // namespace

std::vector<Token> tokenize(std::string_view text) { return Lexer(text).run(); }

std::string describe(const Token& t, std::string_view text) {
  if (t.kind == Tok::end) return "end of expression";
  std::string_view s = text.substr(t.begin, t.end - t.begin);
  if (s.size() == 1 && (static_cast<unsigned char>(s[0]) < 0x20 || static_cast<unsigned char>(s[0]) >= 0x7f)) {
    return hex_byte(static_cast<unsigned char>(s[0]));
  }
  if (s.size() > 27) return "'" + std::string(s.substr(0, 24)) + "...'";
  return "'" + std::string(s) + "'";
}

}  // namespace kb::expr::detail
