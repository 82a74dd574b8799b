// libFuzzer target for the FlashInfer Trace readers: any bytes must read as a
// definition / trace / solution or be refused with a message; whatever reads
// must write back to JSON that reads again to an equal object.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "schema/io.hpp"

namespace {

template <class T, class ReadFn>
void roundtrip(std::string_view text, ReadFn read) {
  kb::Diagnostics diags;
  auto first = read(text, "fuzz", &diags);
  if (first.ok() == diags.has_errors()) std::abort();  // Result and diagnostics must agree
  if (!first.ok()) {
    if (first.error().message.empty()) std::abort();
    return;
  }
  auto text2 = kb::to_json(*first);
  auto second = read(text2, "fuzz-rt", nullptr);
  if (!second.ok() || kb::to_json(*second) != text2) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  roundtrip<kb::Definition>(text, [](auto t, auto o, auto d) { return kb::read_definition(t, o, d); });
  roundtrip<kb::Trace>(text, [](auto t, auto o, auto d) { return kb::read_trace(t, o, d); });
  roundtrip<kb::Solution>(text, [](auto t, auto o, auto d) { return kb::read_solution(t, o, d); });
  return 0;
}
