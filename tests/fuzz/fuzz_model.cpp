// libFuzzer target for the model-level readers (calling records, benchmark results, agent
// traces): any bytes must read or be refused with a message, the Result and the diagnostics must
// agree, and whatever reads must write back to JSON that reads again to an equal object and
// writes the same text (pretty and one-line).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "model/records.hpp"

namespace {

template <class ReadFn>
void roundtrip(std::string_view text, ReadFn read) {
  kb::Diagnostics diags;
  auto first = read(text, "fuzz", &diags);
  if (first.ok() == diags.has_errors()) std::abort();
  if (!first.ok()) {
    if (first.error().message.empty()) std::abort();
    return;
  }
  for (bool pretty : {true, false}) {
    auto text2 = kb::model::to_json(*first, pretty);
    auto second = read(text2, "fuzz-rt", nullptr);
    if (!second.ok() || !(*second == *first) || kb::model::to_json(*second, pretty) != text2) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)kb::model::sniff(text);
  (void)kb::model::Locator(text, "fuzz").at("kernels[0].count");
  roundtrip(text, [](auto t, auto o, auto d) { return kb::model::read_calling_record(t, o, d); });
  roundtrip(text, [](auto t, auto o, auto d) { return kb::model::read_benchmark_result(t, o, d); });
  roundtrip(text, [](auto t, auto o, auto d) { return kb::model::read_agent_trace(t, o, d); });
  return 0;
}
