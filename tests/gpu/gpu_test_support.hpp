// What the GPU tests of kb's CUDA solutions share: CUDA errors as exceptions,
// definitions read from files, a const axis set to another value (a shipped
// definition at other sizes), an environment variable with a fallback.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "schema/io.hpp"

namespace kb_gpu_test {

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

inline kb::Definition load_definition(const std::filesystem::path& p) {
  auto d = kb::read_definition_file(p.string());
  if (!d) throw std::runtime_error("cannot read definition " + p.string() + ": " + d.error().message);
  return *d;
}

inline void set_const(kb::Definition& d, const std::string& axis, std::int64_t v) {
  for (auto& a : d.axes)
    if (a.name == axis && a.kind == kb::AxisKind::const_) {
      a.value = v;
      return;
    }
  throw std::runtime_error(d.name + ": no const axis " + axis);
}

inline std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

}  // namespace kb_gpu_test
