// The state kb_cuda_gemm's races share (race.hpp). No CUDA here: built in
// every build, so that tests/kernels/test_launch_rules.cpp checks the locks.
#include "race.hpp"

#include <fmt/format.h>

#include <array>

#include "common/tuning.hpp"

namespace kb::kernels::gemm_cuda {

namespace {

struct RaceLog {
  std::array<std::mutex, 64> race;  // gemm_race_mutex(device): device % 64
  std::mutex cache;                 // gemm_race_cache_mutex(): the caches and `notes`
  std::vector<std::string> notes;
};

// Leaked on purpose, like cublaslt_gemm.cpp's state: no static destructor
// after the CUDA runtime has shut down.
RaceLog& race_log() {
  static RaceLog* s = new RaceLog;
  return *s;
}

}  // namespace

std::mutex& gemm_race_mutex(int device) {
  auto& race = race_log().race;
  return race[static_cast<unsigned>(device) % race.size()];
}

std::mutex& gemm_race_cache_mutex() { return race_log().cache; }

void add_gemm_race_note(std::string note) {
  if (log::enabled(log::LogLevel::info)) log::emit(log::LogLevel::info, "kb gemm race: " + note);
  std::lock_guard<std::mutex> lock(gemm_race_cache_mutex());
  race_log().notes.push_back(std::move(note));
}

std::string race_medians(const std::vector<double>& ms, const std::function<std::string(int)>& label) {
  std::string out;
  for (std::size_t c = 0; c < ms.size(); ++c)
    out += fmt::format("{}{} {}{}", c ? ", " : "", label(static_cast<int>(c)),
                       ms[c] < 0 ? std::string("failed") : fmt::format("{:.4f} us", ms[c] * 1e3), c == 0 ? " (rule)" : "");
  return out;
}

std::size_t gemm_race_count() {
  std::lock_guard<std::mutex> lock(gemm_race_cache_mutex());
  return race_log().notes.size();
}

std::vector<std::string> gemm_race_notes() {
  std::lock_guard<std::mutex> lock(gemm_race_cache_mutex());
  return race_log().notes;
}

}  // namespace kb::kernels::gemm_cuda
