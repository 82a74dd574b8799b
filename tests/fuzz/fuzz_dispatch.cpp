// libFuzzer target for the dispatch table (lib/dispatch): any bytes, read as
// the lines of a trace file of one definition, must build a table or be
// refused with a message naming the line; a table must hold only what the
// rules allow (entries sorted, distinct, one solution each, a positive
// latency), and nearest() must answer for any call without reading past it.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "dispatch/dispatch_table.hpp"
#include "schema/io.hpp"

namespace {

// Two var axes so that distances sum; the seeds in corpus/dispatch use its name.
const char* kDef = R"({"name": "toy_mn", "op_type": "toy",
  "axes": {"m": {"type": "var"}, "n": {"type": "var"}, "k": {"type": "const", "value": 8}},
  "inputs": {"x": {"shape": ["m", "k"], "dtype": "float32"}, "w": {"shape": ["n", "k"], "dtype": "float32"}},
  "outputs": {"y": {"shape": ["m", "n"], "dtype": "float32"}},
  "reference": "def run(x, w):\n    return x @ w.T\n"})";

kb::Implementation impl(const char* name, kb::Device device) {
  kb::Implementation i;
  i.name = name;
  i.device = device;
  i.supports = [](const kb::Definition&) { return std::string(); };
  return i;
}

void check_entries(const kb::dispatch::Table& t, const std::vector<kb::dispatch::Entry>& entries) {
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    if (!e.impl || !(e.latency_ms > 0) || e.var_values.size() != t.var_axes.size()) std::abort();
    if (i > 0 && !(entries[i - 1].var_values < e.var_values)) std::abort();  // sorted, one entry per values
  }
  const std::int64_t calls[][3] = {{1, 1, 8}, {0, 4096, 8}, {-1, -1, 8}, {INT64_MAX, 3, 8}};
  for (const auto& c : calls) {
    const auto* e = kb::dispatch::nearest(t, entries, c, false);
    if (entries.empty() != (e == nullptr)) std::abort();
    const auto* exact = kb::dispatch::nearest(t, entries, c, true);
    if (exact && (exact->var_values[0] != c[0] || exact->var_values[1] != c[1])) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const kb::Definition def = *kb::read_definition(kDef, "fuzz");
  static const kb::Registry registry = [] {
    kb::Registry r;
    r.add(impl("cpu_a", kb::Device::cpu));
    r.add(impl("gpu_a", kb::Device::cuda));
    r.add(impl("gpu_b", kb::Device::cuda));
    return r;
  }();
  const kb::dispatch::TableOptions options;
  kb::dispatch::TableBuilder builder(def, options, registry);
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::size_t number = 1;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    auto st = builder.add_line(line, "fuzz.jsonl", number);
    if (!st.ok()) {
      if (st.error().message.find("fuzz.jsonl:" + std::to_string(number)) == std::string::npos) std::abort();
      return 0;
    }
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
    ++number;
  }
  const kb::dispatch::Table t = std::move(builder).finish();
  if (t.used > t.records) std::abort();
  check_entries(t, t.cpu);
  check_entries(t, t.cuda);
  return 0;
}
