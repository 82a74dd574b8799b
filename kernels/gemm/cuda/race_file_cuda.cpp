// KB_GEMM_RACE_FILE for this process (race_file.hpp): the machine its lines
// name, asked of the CUDA device, and the find / keep calls both races (small
// M, long K) read and append through. The path itself is race_file.cpp's.
#include <fmt/format.h>

#include <map>
#include <mutex>
#include <utility>

#include "cuda/device.hpp"
#include "kb/kb.h"  // KB_VERSION_STRING
#include "race_file.hpp"

namespace kb::kernels::gemm_cuda {

namespace {

// What a race on `device` ran on: asked once per device (library_versions
// opens cuBLASLt to read its version).
Result<RaceMachine> this_machine(int device) {
  static auto* mutex = new std::mutex;  // leaked on purpose, like race.cpp's state
  static auto* known = new std::map<int, RaceMachine>;
  std::lock_guard<std::mutex> lock(*mutex);
  if (auto it = known->find(device); it != known->end()) return it->second;
  auto info = cuda::device_info(device);
  if (!info) return info.error();
  RaceMachine m;
  m.device = info->name;
  m.sms = info->sm_count;
  m.compute_capability = info->compute_major * 10 + info->compute_minor;
  for (const auto& [name, version] : cuda::library_versions())
    m.software += fmt::format("{}{} {}", m.software.empty() ? "" : ", ", name, version);
  m.kb = KB_VERSION_STRING;
  return known->emplace(device, std::move(m)).first->second;
}

}  // namespace

Result<std::optional<RaceFileEntry>> race_file_find(const std::string& path, std::string_view race,
                                                    const RaceKey& key) {
  if (path.empty()) return std::optional<RaceFileEntry>();
  auto machine = this_machine(key.device);
  if (!machine) return machine.error();
  return race_file_lookup(path, *machine, race, key);
}

Status race_file_keep(const std::string& path, std::string_view race, const RaceKey& key, std::string choice) {
  if (path.empty()) return ok_status();
  auto machine = this_machine(key.device);
  if (!machine) return machine.error();
  RaceFileEntry e;
  e.race = std::string(race);
  e.machine = *machine;
  e.key = key;
  e.choice = std::move(choice);
  return race_file_record(path, e);
}

}  // namespace kb::kernels::gemm_cuda
