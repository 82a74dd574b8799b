// Near matches of a name that matched nothing, so that an error about a typo
// can say what was probably meant.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kb {

// The names in `known` close to `name`, closest first, at most `limit`: one is
// a prefix of the other (and at least 3 bytes long), or they are at most 3
// single-byte edits (insert, delete, replace) apart.
std::vector<std::string> near_matches(std::string_view name, const std::vector<std::string>& known,
                                      std::size_t limit = 5);

// For an error message: "; did you mean a, b?" when there are near matches;
// otherwise "; known: x, y, z" (the first 20 names, then "and N more"); "" when
// `known` is empty.
std::string suggestion_text(std::string_view name, const std::vector<std::string>& known);

}  // namespace kb
