// Helpers shared by the GPU attention tests (test_cuda_attention.cpp: paged
// decode; test_cuda_prefill.cpp: causal prefill): command-line state,
// sharding across processes, CUDA error checks, definition and workload
// loading; DeviceBuffer (device_buffer.hpp). Each test's own checks stay in
// its file.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "harness/implementation.hpp"
#include "oracle/gpu_oracle.hpp"
#include "schema/io.hpp"
#include "tensor/tensor.hpp"

namespace kb_gpu_test {

namespace fs = std::filesystem;

inline int g_failures = 0;
inline int g_passes = 0;
inline bool g_dry = false;              // --dry-run: no GPU, oracle only
inline std::string g_filter;            // --filter SUBSTRING
inline long g_max_workloads = -1;       // --max-workloads N
inline long g_shard = 0, g_shards = 1;  // --shard K/N: this process runs items K, K + N, ...
inline bool g_gpu_oracle = false;       // --gpu-oracle: judge kb's attention GPU oracle, not the solutions
inline long g_item = -1;                // running index over edge cases and shipped workloads

// True when the next item belongs to this shard.
inline bool mine() {
  ++g_item;
  return g_item % g_shards == g_shard;
}

// kb's attention GPU oracle (kernels/attention/gpu_oracle.cpp) as
// an Implementation, so that --gpu-oracle judges it on every case.
inline const kb::Implementation& gpu_oracle_impl(const kb::Definition& d) {
  static std::map<std::string, kb::Implementation> impls;
  auto [it, fresh] = impls.try_emplace(d.op_type);
  if (fresh) {
    kb::GpuOracleFn fn = kb::find_gpu_oracle(d);
    if (!fn) throw std::runtime_error("no GPU oracle for " + d.op_type);
    kb::Implementation& impl = it->second;
    impl.name = "gpu_oracle_" + d.op_type;
    impl.author = "kb";
    impl.device = kb::Device::cuda;
    impl.supports = [](const kb::Definition&) { return std::string(); };
    impl.run_cuda = [fn](const kb::CudaCall& call) {
      return fn(kb::GpuOracleCall{call.definition, call.axes, call.inputs, call.outputs, call.stream});
    };
  }
  return it->second;
}

inline bool selected(const std::string& label) { return g_filter.empty() || label.find(g_filter) != std::string::npos; }

struct SkipTest {
  std::string reason;
};

inline std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline kb::Definition load_definition(const fs::path& p) {
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

inline std::vector<kb::Workload> shipped_workloads(const fs::path& file) {
  std::vector<kb::Workload> out;
  std::ifstream in(file);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto t = kb::read_trace(line, file.string() + ":" + std::to_string(n));
    if (!t) throw std::runtime_error("cannot read workload: " + t.error().message);
    out.push_back(t->workload);
  }
  return out;
}

inline void store_int32(kb::Tensor& t, const std::vector<std::int64_t>& v) {
  if (t.dtype() != kb::DType::int32 || t.numel() != static_cast<std::int64_t>(v.size()))
    throw std::runtime_error("index tensor shape/dtype mismatch");
  for (std::size_t i = 0; i < v.size(); ++i) t.data<std::int32_t>()[i] = static_cast<std::int32_t>(v[i]);
}

inline std::vector<std::int64_t> random_lengths(std::size_t n, std::int64_t lo, std::int64_t hi, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> u(lo, hi);
  std::vector<std::int64_t> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

}  // namespace kb_gpu_test
