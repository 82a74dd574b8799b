// The KB_* switches kb's CUDA launchers read, each to measure two code paths
// side by side in one run (KB_PREFILL_PERSIST=0, KB_GEMV_SPLIT=wave, ...):
// env_is(name, value) is true when the variable is set to exactly `value`.
// Launchers keep the answer in a function-local static (read once).
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

// KB_CUBLASLT_LOG=1: kb's cuBLASLt plans (cublaslt_autotune.hpp) and
// kb_cuda_gemm's races (kernels/gemm/cuda/race.hpp) print their notes to stderr.
inline bool cublaslt_log_enabled() { return env_is("KB_CUBLASLT_LOG", "1"); }

}  // namespace kb::kernels
