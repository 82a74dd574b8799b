// env_is / env_positive_int: environment reads left to the attention
// launchers until their switches are gone; every other setting is read
// through common/tuning.hpp. Delete this file with their last use.
#pragma once

#include <cstdlib>
#include <cstring>

namespace kb::kernels {

inline bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

// The variable as a positive integer, or 0 when unset or not one.
inline int env_positive_int(const char* name) {
  const char* v = std::getenv(name);
  const int n = v ? std::atoi(v) : 0;
  return n > 0 ? n : 0;
}

}  // namespace kb::kernels
