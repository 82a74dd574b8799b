// Input text quoted in messages, made safe for a terminal and bounded in size.
// Every message kb shows that may carry input text passes through here: the
// readers' Diagnostics, the log sink, the C ABI's last error and the kb
// command's printing of errors.
//
// Escaped: C0 controls (ESC, NUL, CR, ... ; '\n' and '\t' too unless the text
// is multi-line), DEL, C1 controls, the Unicode bidirectional controls
// (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) and bytes that are not
// UTF-8, as \xNN (single bytes) or \u{...} (code points). A terminal then shows
// the escape, and no input can move the cursor, change colours or reorder text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kb {

inline constexpr std::size_t kMessageWordKeep = 120;   // bytes kept of an over-long word
inline constexpr std::size_t kMessageWordMax = 256;    // a word longer than this is cut
inline constexpr std::size_t kMessageMaxBytes = 4096;  // a message longer than this is cut

enum class Lines { one, many };

// `text` with every control character escaped (see above). Lines::many keeps
// '\n' and '\t' (logs, captured output).
std::string escape_controls(std::string_view text, Lines lines = Lines::one);

// `text` itself when at most `keep` bytes, else its first `keep` bytes (never
// splitting a UTF-8 character) followed by "...(N bytes)", N being text's size.
std::string cut_text(std::string_view text, std::size_t keep);

// A message as kb shows it: each run of non-blank characters longer than
// kMessageWordMax bytes (a name, a path, a value) cut to kMessageWordKeep with
// cut_text, the whole cut at kMessageMaxBytes, then controls escaped.
std::string printable(std::string_view text, Lines lines = Lines::one);

}  // namespace kb
