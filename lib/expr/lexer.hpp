// Internal: splits expression text into tokens. The text is taken as bytes;
// only ASCII is meaningful, anything else becomes an error token.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kb::expr::detail {

enum class Tok : std::uint8_t {
  end,
  integer,
  floating,
  name,
  kw_and, kw_or, kw_not, kw_true, kw_false,
  kw_reserved,  // other Python keywords (None, in, is, if, ...): never valid here
  lparen, rparen, lbracket, rbracket, dot, comma,
  plus, minus, star, slash, dslash, percent,
  eq, ne, lt, le, gt, ge,
  unsupported,  // a Python operator kb does not support (**, &, <<, =, ...)
  error,        // lexical error; message holds the reason
};

struct Token {
  Tok kind = Tok::end;
  std::uint32_t begin = 0;  // byte offset; column = begin + 1
  std::uint32_t end = 0;
  std::int64_t int_value = 0;
  double float_value = 0.0;
  std::string message;  // error tokens only
};

// Tokens of text, always ending in exactly one end or error token (the
// lexer stops at the first error). text.size() must fit in 32 bits.
std::vector<Token> tokenize(std::string_view text);

// A short, printable description of a token for error messages:
// "end of expression", "'foo'", "'=='", "byte 0xc3".
std::string describe(const Token& t, std::string_view text);

}  // namespace kb::expr::detail
