// The GPU oracles (plain fp32 CUDA kernels used for workloads too large for
// the CPU) judged against the CPU oracles on small, awkward shapes through
// kb's own harness. Skips (exit 77) without a usable CUDA device.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cuda/device.hpp"
#include "harness/harness.hpp"
#include "oracle/gpu_oracle.hpp"
#include "schema/io.hpp"

int main() {
  auto n = kb::cuda::device_count();
  if (!n) {
    std::printf("skipped: no CUDA device (%s)\n", n.error().message.c_str());
    return 77;
  }
  const char* src = std::getenv("KB_SOURCE_DIR");
  std::string root = src ? src : ".";
  struct Case {
    const char* file;
    const char* axis;
    std::int64_t values[3];
  };
  const Case cases[] = {
      {"kernels/gemm/definitions/gemm_n128_k2048.json", "M", {1, 3, 17}},
      {"kernels/gemm/definitions/gemm_n256_k7168.json", "M", {2, 31, 65}},
      {"kernels/rmsnorm/definitions/rmsnorm_h4096.json", "batch_size", {1, 3, 97}},
      {"kernels/rmsnorm/definitions/fused_add_rmsnorm_h4096.json", "batch_size", {1, 17, 33}},
      {"kernels/silu_and_mul/definitions/silu_and_mul_i14336.json", "num_tokens", {1, 3, 17}},
  };
  int failures = 0, checks = 0;
  for (const auto& c : cases) {
    auto d = kb::read_definition_file(root + "/" + c.file);
    if (!d) {
      std::printf("FAIL %s: %s\n", c.file, d.error().message.c_str());
      ++failures;
      continue;
    }
    kb::GpuOracleFn fn = kb::find_gpu_oracle(*d);
    if (!fn) {
      std::printf("FAIL %s: no GPU oracle\n", d->name.c_str());
      ++failures;
      continue;
    }
    kb::Implementation impl;
    impl.name = "gpu_oracle";
    impl.author = "test";
    impl.device = kb::Device::cuda;
    impl.supports = [](const kb::Definition&) { return std::string(); };
    impl.run_cuda = [fn](const kb::CudaCall& call) {
      return fn(kb::GpuOracleCall{call.definition, call.axes, call.inputs, call.outputs, call.stream});
    };
    for (std::int64_t v : c.values) {
      kb::Workload w;
      w.uuid = "gpu-oracle-check";
      w.axes = {{c.axis, v}};
      for (const auto& t : d->inputs) w.inputs.emplace_back(t.name, kb::InputSpec{});
      kb::BenchOptions opt;
      opt.trials = 2;
      opt.time = false;
      auto r = kb::evaluate(*d, w, impl, opt);
      ++checks;
      bool ok = r && r->evaluation.status == kb::EvalStatus::passed;
      std::printf("%s %s %s=%lld: %s\n", ok ? "ok  " : "FAIL", d->name.c_str(), c.axis, static_cast<long long>(v),
                  r ? (ok ? "PASSED against the CPU oracle" : r->summary.c_str()) : r.error().message.c_str());
      failures += !ok;
    }
  }
  std::printf("%d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
