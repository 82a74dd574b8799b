// Messages made safe to print (common/printable.hpp) and bounded per file
// (json/diagnostics.hpp).
#include <doctest/doctest.h>

#include <string>

#include "common/printable.hpp"
#include "json/diagnostics.hpp"

using kb::Lines;

TEST_CASE("controls are escaped, other text is kept") {
  CHECK(kb::escape_controls("plain text, UTF-8: héllo ✓") == "plain text, UTF-8: héllo ✓");
  CHECK(kb::escape_controls("a\x1b[31mb") == "a\\x1b[31mb");
  CHECK(kb::escape_controls(std::string("nul\0x", 5)) == "nul\\x00x");
  CHECK(kb::escape_controls("del\x7f bel\x07 cr\r") == "del\\x7f bel\\x07 cr\\x0d");
  CHECK(kb::escape_controls("two\nlines\ttab") == "two\\x0alines\\x09tab");
  CHECK(kb::escape_controls("two\nlines\ttab", Lines::many) == "two\nlines\ttab");
  CHECK(kb::escape_controls("cr\r in many", Lines::many) == "cr\\x0d in many");
  // C1 controls (U+0080-U+009F, e.g. CSI U+009B) and bidirectional controls.
  CHECK(kb::escape_controls("c1 \xc2\x9b") == "c1 \\u{9b}");
  CHECK(kb::escape_controls("rlo \u202e lre \u202a pdi \u2069 lri \u2066 rlm \u200f alm \u061c") ==
        "rlo \\u{202e} lre \\u{202a} pdi \\u{2069} lri \\u{2066} rlm \\u{200f} alm \\u{61c}");
  // Neighbours of the escaped ranges stay.
  CHECK(kb::escape_controls("\u2029\u202f\u2065\u206a\u00a0") == "\u2029\u202f\u2065\u206a\u00a0");
  // Bytes that are not UTF-8: stray continuation, overlong, surrogate, cut short.
  CHECK(kb::escape_controls("\x80") == "\\x80");
  CHECK(kb::escape_controls("\xc0\xaf") == "\\xc0\\xaf");
  CHECK(kb::escape_controls("\xed\xa0\x80") == "\\xed\\xa0\\x80");
  CHECK(kb::escape_controls("cut \xe2\x80") == "cut \\xe2\\x80");
  CHECK(kb::escape_controls("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");
}

TEST_CASE("long text is cut with its size, never inside a character") {
  CHECK(kb::cut_text("short", 120) == "short");
  CHECK(kb::cut_text(std::string(200, 'a'), 120) == std::string(120, 'a') + "...(200 bytes)");
  std::string wide;
  for (int i = 0; i < 100; ++i) wide += "\u00e9";  // 2 bytes each
  CHECK(kb::cut_text(wide, 5) == "\u00e9\u00e9...(200 bytes)");
}

TEST_CASE("printable cuts long words and quoted names, bounds the whole, escapes") {
  const std::string name(1 << 20, 'N');
  const std::string m = kb::printable("definition \"" + name + "\" is unknown");
  CHECK(m == "definition \"" + std::string(120, 'N') + "...(1048576 bytes)\" is unknown");
  const std::string path = kb::printable("inputs." + name + ": bad");
  CHECK(path == "inputs." + std::string(113, 'N') + "...(1048583 bytes): bad");
  CHECK(kb::printable("a normal message with /some/path/file.json:12 in it") ==
        "a normal message with /some/path/file.json:12 in it");
  // Many short words: the whole is cut.
  std::string words;
  for (int i = 0; i < 100000; ++i) words += "word ";
  const std::string w = kb::printable(words);
  CHECK(w.size() < kb::kMessageMaxBytes + 64);
  CHECK(w.find("...(500000 bytes)") != std::string::npos);
  CHECK(kb::printable("\x1b]0;title\x07 \u202e") == "\\x1b]0;title\\x07 \\u{202e}");
}

TEST_CASE("Diagnostics keep at most kMaxPerFile problems of a file and count the rest") {
  kb::Diagnostics d;
  const std::size_t n = 1000;
  for (std::size_t i = 0; i < n; ++i) d.error("a.jsonl:" + std::to_string(i + 1), "x", "bad");
  for (std::size_t i = 0; i < 3; ++i) d.error("b.json", "y", "bad");
  for (std::size_t i = 0; i < 70; ++i) d.warning("a.jsonl:1", "z", "missing", "missing-blob");
  CHECK(d.error_count() == n + 3);
  CHECK(d.warning_count() == 70);
  // 50 errors and 50 warnings of a.jsonl, its count line (not counting the
  // categorized warnings: category_counts does), 3 errors of b.json.
  CHECK(d.items().size() == 50 + 50 + 1 + 3);
  const auto& line = d.items()[50];
  CHECK(line.to_string() == "... and 950 more problems in a.jsonl");
  CHECK(line.severity == kb::Severity::error);
  CHECK(d.category_counts("missing-blob").at("a.jsonl") == 70);
  // The first error after the cap reads as the count line.
  CHECK(d.error_after(60) == "... and 950 more problems in a.jsonl");
  CHECK(d.error_after(0) == "a.jsonl:1: x: bad");
  CHECK(d.error_after(n) == "b.json: y: bad");
}

TEST_CASE("Diagnostics store printable text") {
  kb::Diagnostics d;
  d.error("f\x1b.json", "inputs[\"\u202e\"]", "name \"a\x1b[2Jb\" is bad");
  CHECK(d.first_error() == "f\\x1b.json: inputs[\"\\u{202e}\"]: name \"a\\x1b[2Jb\" is bad");
  kb::Diagnostics w;
  for (int i = 0; i < 60; ++i) w.warning("w.json", "", "only warnings");
  CHECK(w.items().back().to_string() == "warning: ... and 10 more problems in w.json");
  CHECK(w.error_count() == 0);
}
