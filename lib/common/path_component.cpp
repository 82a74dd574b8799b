#include "common/path_component.hpp"

#include <fmt/format.h>

namespace kb {

std::string path_component_problem(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name == "." || name == "..") return fmt::format("is \"{}\", which names a directory", name);
  if (name.size() > max_path_component_bytes)
    return fmt::format("is {} bytes long (at most {})", name.size(), max_path_component_bytes);
  for (char c : name) {
    auto u = static_cast<unsigned char>(c);
    if (c == '/' || c == '\\') return fmt::format("contains '{}'", c);
    if (u < 0x20 || u == 0x7f) return fmt::format("contains control character 0x{:02x}", u);
  }
  return {};
}

std::string quote_name(std::string_view name) {
  constexpr std::size_t shown = 64;
  std::string out = "\"";
  for (std::size_t i = 0; i < name.size() && i < shown; ++i) {
    auto u = static_cast<unsigned char>(name[i]);
    if (u < 0x20 || u == 0x7f) out += fmt::format("\\x{:02x}", u);
    else if (name[i] == '"' || name[i] == '\\') out += fmt::format("\\{}", name[i]);
    else out += name[i];
  }
  out += name.size() > shown ? "\"..." : "\"";
  return out;
}

}  // namespace kb
