// Random inputs generated on the device (lib/inputs/device_fill.cu) against
// the host generator (kb::fill_random, kb::materialize), byte for byte:
//  1. every dtype kb generates, at sizes that cross the host's chunks and the
//     device's grid stride, under two seeds;
//  2. shipped definitions (a gqa_paged decode, an rmsnorm, a gemm from
//     KB_SHARED_DIR): each deferred input of a materialize() generated on the
//     device against a plain materialize()'s host bytes;
//  3. the modified-input check on the device (device_count_changed): 0 on a
//     generated buffer, the exact count after a solution-like write;
//  4. evaluate_cuda end to end with kb_cuda_rmsnorm: passes against the GPU
//     oracle (inputs never generated on the host) and the CPU oracle, and a
//     solution that writes into a generated input fails with the count.
// One line per case. Exit codes: 0 all passed, 1 a failure, 77 skipped (no
// CUDA device: meson reports SKIP).
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "harness/gpu_eval.hpp"
#include "harness/implementation.hpp"
#include "inputs/device_fill.hpp"
#include "inputs/inputs.hpp"
#include "oracle/gpu_oracle.hpp"
#include "schema/io.hpp"

namespace fs = std::filesystem;

namespace {

int g_failures = 0;

void report(bool ok, const std::string& line) {
  std::printf("%s %s\n", ok ? "PASSED" : "FAIL", line.c_str());
  std::fflush(stdout);
  if (!ok) ++g_failures;
}

// Device bytes of the recipe, downloaded; empty on a CUDA error (reported).
std::vector<std::uint8_t> generate_on_device(const kb::RandomRecipe& r, std::size_t bytes, const std::string& what) {
  std::vector<std::uint8_t> out(bytes);
  if (bytes == 0) return out;
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    report(false, what + ": cudaMalloc of " + std::to_string(bytes) + " bytes");
    return {};
  }
  cudaMemset(p, 0xA5, bytes);  // nothing left unwritten passes by accident
  auto st = kb::device_fill(p, r, nullptr);
  const cudaError_t e = cudaMemcpy(out.data(), p, bytes, cudaMemcpyDeviceToHost);
  cudaFree(p);
  if (!st.ok() || e != cudaSuccess) {
    report(false, what + ": " + (st.ok() ? std::string(cudaGetErrorString(e)) : st.error().message));
    return {};
  }
  return out;
}

// "identical" or where and how the bytes differ.
std::string compare(const std::uint8_t* host, const std::uint8_t* dev, std::size_t bytes, std::size_t width,
                    bool* same) {
  std::size_t first = bytes, units = 0;
  for (std::size_t u = 0; u < bytes / width; ++u)
    if (std::memcmp(host + u * width, dev + u * width, width) != 0) {
      if (first == bytes) first = u;
      ++units;
    }
  *same = units == 0;
  if (*same) return std::to_string(bytes) + " bytes identical";
  char buf[160];
  std::uint64_t h = 0, d = 0;
  std::memcpy(&h, host + first * width, width);
  std::memcpy(&d, dev + first * width, width);
  std::snprintf(buf, sizeof buf, "%zu of %zu storage units differ, first at %zu: host 0x%llx, device 0x%llx", units,
                bytes / width, first, static_cast<unsigned long long>(h), static_cast<unsigned long long>(d));
  return buf;
}

void check_dtypes() {
  constexpr kb::DType all[] = {kb::DType::float32, kb::DType::float16, kb::DType::bfloat16, kb::DType::float8_e4m3fn,
                               kb::DType::float8_e5m2, kb::DType::float4_e2m1, kb::DType::int64, kb::DType::int32,
                               kb::DType::int16, kb::DType::int8, kb::DType::bool_};
  // One element (two for float4), a few blocks, and past 3 host chunks of 1M
  // units with a ragged tail; two seeds and names.
  const std::int64_t sizes[] = {1, 4098, (3 << 20) + 10};
  const std::pair<std::uint64_t, const char*> streams[] = {{0x6b62, "k_cache"}, {7, "hidden_states"}};
  for (kb::DType t : all)
    for (auto n : sizes)
      for (auto [seed, name] : streams) {
        const std::int64_t numel = t == kb::DType::float4_e2m1 && n % 2 ? n + 1 : n;
        const kb::RandomRecipe r{kb::random::stream_key(seed, name), t, numel};
        char what[128];
        std::snprintf(what, sizeof what, "dtype %s numel %lld seed %llu %s", std::string(kb::dtype_name(t)).c_str(),
                      static_cast<long long>(numel), static_cast<unsigned long long>(seed), name);
        auto host = kb::Tensor::allocate(t, {numel});
        if (!host) {
          report(false, std::string(what) + ": " + host.error().message);
          continue;
        }
        kb::fill_random(*host, r.key);
        auto dev = generate_on_device(r, host->nbytes(), what);
        if (dev.size() != host->nbytes()) continue;
        bool same = false;
        const std::size_t width = host->nbytes() / static_cast<std::size_t>(kb::random::units(t, numel));
        std::string detail = compare(reinterpret_cast<const std::uint8_t*>(host->bytes()), dev.data(), dev.size(),
                                     width, &same);
        report(same, std::string(what) + ": " + detail);
      }
}

// Workload `index` of the shipped JSONL (one trace line each).
std::optional<kb::Workload> shipped_workload(const fs::path& file, std::size_t index) {
  std::ifstream f(file);
  std::string line;
  for (std::size_t i = 0; std::getline(f, line); ++i)
    if (i == index) {
      auto t = kb::read_trace(line, file.string());
      if (!t) return std::nullopt;
      return t->workload;
    }
  return std::nullopt;
}

struct Shipped {
  const char* op;
  const char* name;
  std::size_t workload;
};

void check_definitions(const fs::path& root) {
  const Shipped cases[] = {
      {"gqa_paged", "gqa_paged_decode_h32_kv8_d128_ps1", 0},   // 9316 pages
      {"gqa_paged", "gqa_paged_decode_h32_kv8_d128_ps1", 20},  // batch 16, 81390 pages: 2 x 167 MB caches
      {"rmsnorm", "rmsnorm_h4096", 4},                         // 14418 rows
      {"gemm", "gemm_n4096_k4096", 40},                        // M 8192
  };
  for (const Shipped& c : cases) {
    const std::string label = std::string(c.name) + " workload " + std::to_string(c.workload);
    auto d = kb::read_definition_file((root / "definitions" / c.op / (std::string(c.name) + ".json")).string());
    auto w = shipped_workload(root / "workloads" / c.op / (std::string(c.name) + ".jsonl"), c.workload);
    if (!d || !w) {
      report(false, label + ": definition or workload not readable under " + root.string());
      continue;
    }
    kb::MaterializeOptions plain{0x6b62 + 1, root.string()};  // trial 1's seed
    kb::MaterializeOptions deferring = plain;
    deferring.defer_random_floats = true;
    auto host = kb::materialize(*d, *w, plain);
    auto lazy = kb::materialize(*d, *w, deferring);
    if (!host || !lazy) {
      report(false, label + ": materialize: " + (host ? lazy.error().message : host.error().message));
      continue;
    }
    int deferred = 0;
    for (std::size_t i = 0; i < d->inputs.size(); ++i) {
      const kb::Tensor& h = host->tensors[i];
      std::string shape;
      for (auto e : h.shape()) shape += (shape.empty() ? "" : "x") + std::to_string(e);
      const std::string what = label + " input " + d->inputs[i].name + " [" + shape + "] " +
                               std::string(kb::dtype_name(h.dtype()));
      if (!lazy->deferred[i]) {
        // Made on the host either way: the same bytes with and without deferral.
        if (!h.empty_storage())
          report(std::memcmp(h.bytes(), lazy->tensors[i].bytes(), h.nbytes()) == 0, what + ": made on the host, same bytes");
        continue;
      }
      ++deferred;
      auto dev = generate_on_device(*lazy->deferred[i], h.nbytes(), what);
      if (dev.size() != h.nbytes()) continue;
      bool same = false;
      const std::size_t width = h.nbytes() / static_cast<std::size_t>(kb::random::units(h.dtype(), h.numel()));
      std::string detail = compare(reinterpret_cast<const std::uint8_t*>(h.bytes()), dev.data(), dev.size(), width, &same);
      report(same, what + ": device against host: " + detail);
    }
    report(deferred > 0, label + ": " + std::to_string(deferred) + " inputs generated on the device");
  }
}

void check_changed_count() {
  const kb::RandomRecipe r{kb::random::stream_key(3, "x"), kb::DType::bfloat16, (1 << 22) + 3};
  const std::size_t bytes = static_cast<std::size_t>(r.numel) * 2;
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    report(false, "device_count_changed: cudaMalloc");
    return;
  }
  auto st = kb::device_fill(p, r, nullptr);
  auto none = kb::device_count_changed(p, r, nullptr);
  report(st.ok() && none && *none == 0, "device_count_changed bf16 numel " + std::to_string(r.numel) +
                                            ": as generated, " + (none ? std::to_string(*none) : none.error().message) +
                                            " changed (expected 0)");
  // Three elements overwritten (one of them the last), as a solution writing its input would.
  auto* b = static_cast<std::uint8_t*>(p);
  cudaMemset(b, 0x11, 2);
  cudaMemset(b + 2 * 1000001, 0x22, 2);
  cudaMemset(b + bytes - 2, 0x33, 2);
  auto three = kb::device_count_changed(p, r, nullptr);
  report(three && *three == 3, "device_count_changed bf16 after 3 writes: " +
                                   (three ? std::to_string(*three) : three.error().message) + " changed (expected 3)");
  // float32: -0 written over a generated +0 would compare equal as floats; as bits it is a change.
  const kb::RandomRecipe f{kb::random::stream_key(3, "y"), kb::DType::float32, 1000};
  if (!kb::device_fill(p, f, nullptr).ok()) report(false, "device_fill float32");
  float v = 0;
  cudaMemcpy(&v, static_cast<float*>(p) + 10, 4, cudaMemcpyDeviceToHost);
  v = -v;
  cudaMemcpy(static_cast<float*>(p) + 10, &v, 4, cudaMemcpyHostToDevice);
  auto one = kb::device_count_changed(p, f, nullptr);
  report(one && *one == 1, "device_count_changed float32 after a sign flip: " +
                               (one ? std::to_string(*one) : one.error().message) + " changed (expected 1)");
  cudaFree(p);
}

void check_evaluate(const fs::path& root) {
  auto d = kb::read_definition_file((root / "definitions" / "rmsnorm" / "rmsnorm_h4096.json").string());
  const kb::Implementation* impl = kb::builtin_registry().find("kb_cuda_rmsnorm");
  if (!d || !impl) {
    report(false, "evaluate_cuda: rmsnorm_h4096 or kb_cuda_rmsnorm missing");
    return;
  }
  report(kb::find_gpu_oracle(*d) != nullptr, "evaluate_cuda: rmsnorm_h4096 has a GPU oracle");
  // A solution that also writes one element of its first input (hidden_states).
  kb::Implementation writes = *impl;
  writes.name = "writes_its_input";
  writes.run_cuda = [inner = impl->run_cuda](const kb::CudaCall& c) {
    kb::Status st = inner(c);
    cudaMemsetAsync(static_cast<std::uint8_t*>(c.inputs[0].tensor->data) + 2 * 77, 0x7F, 2,
                    static_cast<cudaStream_t>(c.stream));
    return st;
  };
  for (std::size_t index : {std::size_t{4}, std::size_t{0}}) {  // 14418 rows (GPU oracle), 7 rows (CPU oracle)
    auto w = shipped_workload(root / "workloads" / "rmsnorm" / "rmsnorm_h4096.jsonl", index);
    if (!w) {
      report(false, "evaluate_cuda: rmsnorm_h4096 workload " + std::to_string(index) + " not readable");
      continue;
    }
    kb::BenchOptions opt;
    opt.trials = 2;
    opt.time = false;
    opt.dataset_root = root.string();
    const std::string label = "evaluate_cuda rmsnorm_h4096 batch_size " + std::to_string(*w->find_axis("batch_size"));
    const auto t0 = std::chrono::steady_clock::now();
    auto good = kb::evaluate_cuda(*d, *w, *impl, opt);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!good) {
      report(false, label + ": " + good.error().message);
      continue;
    }
    const std::string& log = good->evaluation.log;
    const char* ref = log.find("reference: kb GPU oracle") != std::string::npos ? "GPU oracle" : "CPU oracle";
    report(good->evaluation.status == kb::EvalStatus::passed,
           label + ": kb_cuda_rmsnorm " + std::string(kb::eval_status_name(good->evaluation.status)) + " against the " +
               ref + " in " + std::to_string(s) + " s (" + good->summary + ")");
    auto bad = kb::evaluate_cuda(*d, *w, writes, opt);
    const bool caught = bad && bad->evaluation.status == kb::EvalStatus::runtime_error &&
                        bad->summary.find("modified input \"hidden_states\" (1 of ") != std::string::npos;
    report(caught, label + ": a solution writing one element of hidden_states: " +
                       (bad ? std::string(kb::eval_status_name(bad->evaluation.status)) + ": " + bad->summary
                            : bad.error().message));
  }
}

}  // namespace

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("skipped: no CUDA device\n");
    return 77;
  }
  const char* shared = std::getenv("KB_SHARED_DIR");
  const fs::path root = fs::path(shared && *shared ? shared : "../shared") / "flashinfer-trace";
  const auto t0 = std::chrono::steady_clock::now();
  check_dtypes();
  check_changed_count();
  if (fs::exists(root / "definitions")) {
    check_definitions(root);
    check_evaluate(root);
  } else {
    report(false, "no shipped definitions under " + root.string() + " (set KB_SHARED_DIR)");
  }
  std::printf("%s: %d failure(s) in %.1f s\n", g_failures ? "FAIL" : "PASSED", g_failures,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return g_failures ? 1 : 0;
}
