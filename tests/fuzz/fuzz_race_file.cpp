// libFuzzer target for KB_GEMM_RACE_FILE's lines (kernels/gemm/cuda/
// race_file.hpp): any bytes, read as a race file, must give entries or be
// refused with a message naming the file and a line of it; every entry must
// keep the rules (a known race, positive extents, a known dtype, misaligned
// bits 0-7, a scratch size only in small-M lines, a choice) and read back the same from the line kb would write for it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gemm/cuda/race_file.hpp"
#include "schema/dtype.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kb::kernels::gemm_cuda;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto entries = parse_race_file(text, "fuzz.jsonl");
  if (!entries) {
    if (entries.error().message.rfind("fuzz.jsonl:", 0) != 0) std::abort();
    return 0;
  }
  std::size_t previous_line = 0;
  for (const RaceFileEntry& e : *entries) {
    if (e.line <= previous_line) std::abort();  // in file order, one entry a line
    previous_line = e.line;
    if ((e.race != kRaceLongK && e.race != kRaceSmallM) || (e.race == kRaceLongK && e.key.scratch_bytes != 0))
      std::abort();
    if (e.key.M < 1 || e.key.N < 1 || e.key.K < 1 || e.key.misaligned > 7 || e.choice.empty() ||
        e.machine.device.empty() || e.machine.sms < 1)
      std::abort();
    if (!kb::dtype_from_name(kb::dtype_name(static_cast<kb::DType>(e.key.dtype)))) std::abort();
    auto again = parse_race_file_line(race_file_line(e), "fuzz.jsonl", e.line);
    if (!again || again->race != e.race || again->key.scratch_bytes != e.key.scratch_bytes ||
        !(again->machine == e.machine) || again->key.M != e.key.M || again->key.N != e.key.N ||
        again->key.K != e.key.K || again->key.dtype != e.key.dtype || again->key.misaligned != e.key.misaligned ||
        again->choice != e.choice)
      std::abort();
  }
  return 0;
}
