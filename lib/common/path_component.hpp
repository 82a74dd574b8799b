// Names that become file names. A definition, solution, author or op_type name
// is one component of OUT/traces/<author>/<op_type>/<definition>.jsonl, so a
// name must not be able to reach outside OUT: no separator, no "." or "..", no
// control characters (NUL included), and no longer than a file name may be.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kb {

// Longest name kb turns into a file name (NAME_MAX on Linux).
inline constexpr std::size_t max_path_component_bytes = 255;

// Why `name` cannot be a single path component ("contains '/'", "is \"..\"",
// ...), or "" when it can.
std::string path_component_problem(std::string_view name);

// `name` quoted for a message: control characters escaped, cut after 64 bytes.
std::string quote_name(std::string_view name);

}  // namespace kb
