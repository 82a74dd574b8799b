// libFuzzer target for Solution JSON on its way to a build: any bytes read as
// a Solution, or are refused with a message; for one that reads, the include
// check (plugin::refused_include) runs over every source and the generated
// entry point (plugin::generate_entry_source) is made against a fixed small
// definition. Nothing may crash, and the generated entry point includes only
// kb's headers and the entry file: no text of the solution adds an #include.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "plugin/build.hpp"
#include "schema/io.hpp"

namespace {

constexpr std::string_view kDefinition = R"({
  "name": "fuzz_rmsnorm", "op_type": "rmsnorm",
  "axes": {"batch_size": {"type": "var"}, "hidden_size": {"type": "const", "value": 64}},
  "inputs": {"hidden_states": {"shape": ["batch_size", "hidden_size"], "dtype": "float32"},
             "weight": {"shape": ["hidden_size"], "dtype": "float32"},
             "eps": {"shape": null, "dtype": "float32"}},
  "outputs": {"output": {"shape": ["batch_size", "hidden_size"], "dtype": "float32"}},
  "reference": "def run(hidden_states, weight, eps):\n    return hidden_states\n"
})";

const kb::Definition& definition() {
  static const kb::Definition d = [] {
    auto r = kb::read_definition(kDefinition, "fuzz-definition");
    if (!r.ok()) std::abort();
    return std::move(*r);
  }();
  return d;
}

bool is_c_identifier(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

// Lines of `text` that start a preprocessor directive `word` (after blanks).
std::size_t directives(std::string_view text, std::string_view word) {
  std::size_t n = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    std::size_t i = line.find_first_not_of(" \t");
    if (i != std::string_view::npos && line[i] == '#') {
      std::size_t j = line.find_first_not_of(" \t", i + 1);
      if (j != std::string_view::npos && line.substr(j, word.size()) == word) ++n;
    }
    pos = end + 1;
  }
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kb::Diagnostics diags;
  auto s = kb::read_solution(text, "fuzz", &diags);
  if (!s.ok()) {
    if (s.error().message.empty()) std::abort();
    return 0;
  }
  for (const auto& src : s->sources) {
    const std::string why = kb::plugin::refused_include(src.path, src.content);
    // A refusal names the file it is in.
    if (!why.empty() && why.rfind(src.path, 0) != 0 && why.find(src.path) == std::string::npos) std::abort();
  }
  const std::string entry = kb::plugin::generate_entry_source(*s, definition());
  if (entry.empty()) std::abort();
  // build_solution refuses a symbol that is no identifier before generating;
  // for the others, the generated file's directives are kb's own: seven
  // standard headers and the entry file, whatever the names and description say.
  const std::string& ep = s->spec.entry_point;
  const std::size_t sep = ep.rfind("::");
  if (sep != std::string::npos && is_c_identifier(std::string_view(ep).substr(sep + 2))) {
    if (directives(entry, "include") != 8) std::abort();
    if (directives(entry, "define") != 0 || directives(entry, "pragma") != 0) std::abort();
  }
  return 0;
}
