#include "common/near_match.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>

namespace kb {
namespace {

constexpr std::size_t kMaxEdits = 3;

// Levenshtein distance, or kMaxEdits + 1 when it is larger (lengths further
// apart than that are not compared at all).
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::size_t la = a.size(), lb = b.size();
  if ((la > lb ? la - lb : lb - la) > kMaxEdits) return kMaxEdits + 1;
  std::vector<std::size_t> prev(lb + 1), cur(lb + 1);
  for (std::size_t j = 0; j <= lb; ++j) prev[j] = j;
  for (std::size_t i = 1; i <= la; ++i) {
    cur[0] = i;
    std::size_t row_min = cur[0];
    for (std::size_t j = 1; j <= lb; ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      row_min = std::min(row_min, cur[j]);
    }
    if (row_min > kMaxEdits) return kMaxEdits + 1;
    std::swap(prev, cur);
  }
  return std::min(prev[lb], kMaxEdits + 1);
}

}  // namespace

std::vector<std::string> near_matches(std::string_view name, const std::vector<std::string>& known,
                                      std::size_t limit) {
  std::vector<std::pair<std::size_t, std::string>> found;
  for (const auto& k : known) {
    if (k == name) continue;
    std::size_t d = edit_distance(name, k);
    std::string_view shorter = name.size() < k.size() ? name : std::string_view(k);
    std::string_view longer = name.size() < k.size() ? std::string_view(k) : name;
    bool prefix = shorter.size() >= 3 && longer.substr(0, shorter.size()) == shorter;
    // A prefix is exactly as many edits away as the lengths differ.
    if (d <= kMaxEdits || prefix) found.emplace_back(prefix ? longer.size() - shorter.size() : d, k);
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  std::vector<std::string> out;
  for (std::size_t i = 0; i < found.size() && out.size() < limit; ++i) out.push_back(found[i].second);
  return out;
}

std::string suggestion_text(std::string_view name, const std::vector<std::string>& known) {
  if (auto near = near_matches(name, known); !near.empty()) return fmt::format("; did you mean {}?", fmt::join(near, ", "));
  if (known.empty()) return {};
  if (known.size() <= 20) return fmt::format("; known: {}", fmt::join(known, ", "));
  // A long list is cut: the message stays one readable line.
  return fmt::format("; known: {}, and {} more", fmt::join(known.begin(), known.begin() + 20, ", "), known.size() - 20);
}

}  // namespace kb
