#include "common/printable.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace kb {
namespace {

// Length of the well-formed UTF-8 sequence at text[i] and its code point, or 0
// (not UTF-8: an overlong form, a surrogate, past U+10FFFF, or cut short).
std::size_t decode_utf8(std::string_view text, std::size_t i, char32_t& cp) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  std::size_t len = 0;
  char32_t min = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) len = 2, cp = b0 & 0x1F, min = 0x80;
  else if (b0 >= 0xE0 && b0 <= 0xEF) len = 3, cp = b0 & 0x0F, min = 0x800;
  else if (b0 >= 0xF0 && b0 <= 0xF4) len = 4, cp = b0 & 0x07, min = 0x10000;
  else return 0;
  if (text.size() - i < len) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

// C1 controls and the characters that change the direction of the text around them.
bool is_escaped_code_point(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F ||
         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

std::string escape_controls(std::string_view text, Lines lines) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {
      const bool kept = b >= 0x20 ? b != 0x7F : lines == Lines::many && (b == '\n' || b == '\t');
      if (kept) out += static_cast<char>(b);
      else out += fmt::format("\\x{:02x}", b);
      ++i;
      continue;
    }
    char32_t cp = 0;
    const std::size_t len = decode_utf8(text, i, cp);
    if (len == 0) {
      out += fmt::format("\\x{:02x}", b);
      ++i;
    } else if (is_escaped_code_point(cp)) {
      out += fmt::format("\\u{{{:x}}}", static_cast<std::uint32_t>(cp));
      i += len;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

std::string cut_text(std::string_view text, std::size_t keep) {
  if (text.size() <= keep) return std::string(text);
  std::size_t cut = keep;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return fmt::format("{}...({} bytes)", text.substr(0, cut), text.size());
}

std::string printable(std::string_view text, Lines lines) {
  const std::size_t max = lines == Lines::one ? kMessageMaxBytes : 16 * kMessageMaxBytes;
  std::string words;
  words.reserve(std::min(text.size(), max + kMessageWordKeep + 32));
  // Words are copied (cut where long) until the cap is passed, so the memory
  // used is bounded by the cap, not by the text.
  for (std::size_t i = 0; i < text.size() && words.size() <= max;) {
    const char c = text[i];
    if (c == ' ' || c == '\n') {
      words += c;
      ++i;
      continue;
    }
    std::size_t end = text.find_first_of(" \n", i);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(i, end - i);
    if (word.size() <= kMessageWordMax) {
      words.append(word);
    } else if (auto q0 = word.find('"'), q1 = word.rfind('"'); q0 < q1 && q0 <= kMessageWordKeep) {
      // A quoted name: cut inside the quotes, so the size is the name's.
      words.append(word.substr(0, q0 + 1));
      words += cut_text(word.substr(q0 + 1, q1 - q0 - 1), kMessageWordKeep);
      words += cut_text(word.substr(q1), kMessageWordKeep);
    } else {
      // Punctuation that ends the word (a path's ':') stays after the cut.
      std::size_t body = word.size();
      while (body > 0 && word.size() - body < 4 && std::string_view(":,;.)]").find(word[body - 1]) != std::string_view::npos)
        --body;
      words += cut_text(word.substr(0, body), kMessageWordKeep);
      words.append(word.substr(body));
    }
    i = end;
  }
  if (words.size() > max) {
    std::size_t cut = max;
    while (cut > 0 && (static_cast<unsigned char>(words[cut]) & 0xC0) == 0x80) --cut;
    words = fmt::format("{}...({} bytes)", std::string_view(words).substr(0, cut), text.size());
  }
  return escape_controls(words, lines);
}

}  // namespace kb
