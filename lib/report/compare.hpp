// Two trace sets side by side: per (definition, workload, solution), the old and new latency
// and whether the difference is more than noise. The rule is nvbench's compare script's: with
// d = (new - old) / old and the relative spreads of both measurements (rel_noise, else half the
// min..max range over the median: relative_spread), the noise is the smaller of the two spreads
// (the one recorded when only one is); |d| <= noise is within noise, otherwise faster (d < 0) or
// slower. Neither spread recorded: no_spread (nvbench's unknown).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "report/traces.hpp"

namespace kb::report {

enum class Change {
  faster,         // both timed, new faster by more than the noise
  slower,         // both timed, new slower by more than the noise
  within_noise,   // both timed, |difference| <= noise
  no_spread,      // both timed, neither measurement records a spread
  now_failing,    // PASSED before, another status now
  now_passing,    // another status before, PASSED now
  still_failing,  // neither PASSED
  untimed,        // both PASSED, one or both without a latency (kb bench --no-time)
  only_old,       // in the old set only
  only_new,       // in the new set only
};
inline constexpr std::size_t kChangeCount = 10;
std::string_view change_name(Change c) noexcept;  // "faster", "slower", "within noise", ...
std::string_view change_key(Change c) noexcept;   // "faster", "slower", "within_noise", ... (JSON)

struct CompareSide {
  std::string status;                // "PASSED", "INCORRECT_NUMERICAL", ...; "" when absent
  std::optional<double> latency_ms;  // PASSED and timed
  std::optional<double> spread;      // relative_spread of its measurement
  std::string origin;                // file:line
};

struct CompareRow {
  std::string definition;
  std::string workload;  // the workload's uuid
  std::vector<std::pair<std::string, std::int64_t>> axes;
  std::string solution;
  CompareSide old_side, new_side;
  std::optional<double> difference;  // (new - old) / old, both timed
  std::optional<double> noise;       // the threshold the difference was held against
  Change change = Change::within_noise;
};

struct Comparison {
  std::vector<std::string> old_devices, new_devices;  // environment.hardware seen, sorted
  std::vector<CompareRow> rows;  // sorted by definition, solution, then workload axes
  std::array<std::size_t, kChangeCount> counts{};  // rows per Change, in enum order
  // The geometric mean of new / old over the rows timed on both sides (0 when none).
  double geomean_ratio = 0;
  std::size_t timed_pairs = 0;
  // Lines that repeat a (definition, workload, solution) within one set: the later line is used.
  std::size_t old_repeats = 0, new_repeats = 0;
};

Comparison compare(const TraceSet& old_set, const TraceSet& new_set);

// The class of one pair of timed measurements by the rule above.
Change classify(double old_ms, std::optional<double> old_spread, double new_ms, std::optional<double> new_spread,
                std::optional<double>* noise = nullptr);

std::string to_json(const Comparison& c, bool pretty = true);

}  // namespace kb::report
