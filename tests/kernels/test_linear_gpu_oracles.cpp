// The gdn, mamba_ssu and dsa_paged GPU oracles (kernels/<op>/gpu_oracle.cu)
// judged against the CPU oracles through kb's harness (the CPU oracle as the
// reference, the DSA indexer by its selection judge) on the shipped
// definitions, shrunk where the full constants make the CPU side slow, with
// random workloads whose index structures kb builds: prefill with several
// sequences, mtp from a pool, padded and full sparse rows, sequences longer
// and shorter than top-k. find_gpu_oracle() hands these oracles to the judge
// of large workloads, so this is what makes them trusted. Skips (exit 77)
// without a usable CUDA device.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "cuda/device.hpp"
#include "harness/harness.hpp"
#include "oracle/gpu_oracle.hpp"
#include "schema/io.hpp"

namespace kb::kernels {
Status gdn_gpu_oracle(const GpuOracleCall& c);
Status mamba_ssu_gpu_oracle(const GpuOracleCall& c);
Status dsa_paged_gpu_oracle(const GpuOracleCall& c);
}  // namespace kb::kernels

namespace {

void set_const(kb::Definition& d, const std::string& axis, std::int64_t v) {
  for (auto& a : d.axes)
    if (a.name == axis) a.value = v;
}

kb::Workload workload(const kb::Definition& d, const std::map<std::string, std::int64_t>& vars, double scalar,
                      bool omit_state = false) {
  kb::Workload w;
  w.uuid = "gpu-oracle-" + d.name;
  for (const auto& [k, v] : vars) w.axes.emplace_back(k, v);
  for (const auto& t : d.inputs) {
    if (t.optional && (omit_state || t.name == "intermediate_states_buffer")) continue;
    kb::InputSpec s;
    if (t.is_scalar()) {
      s.kind = kb::InputKind::scalar;
      s.value = scalar;
    }
    w.inputs.emplace_back(t.name, s);
  }
  return w;
}

}  // namespace

int main() {
  auto n = kb::cuda::device_count();
  if (!n) {
    std::printf("skipped: no CUDA device (%s)\n", n.error().message.c_str());
    return 77;
  }
  const char* shared_env = std::getenv("KB_SHARED_DIR");
  const std::string defs = std::string(shared_env ? shared_env : "../shared") + "/flashinfer-trace/definitions/";
  int failures = 0;
  auto judge = [&](const kb::Definition& d, kb::GpuOracleFn fn, const kb::Workload& w, const char* label) {
    kb::Implementation impl;
    impl.name = "gpu_oracle";
    impl.author = "test";
    impl.device = kb::Device::cuda;
    impl.supports = [](const kb::Definition&) { return std::string(); };
    impl.run_cuda = [fn](const kb::CudaCall& call) {
      return fn(kb::GpuOracleCall{call.definition, call.axes, call.inputs, call.outputs, call.stream});
    };
    kb::BenchOptions opt;
    opt.trials = 2;
    opt.time = false;
    opt.cpu_oracle_only = true;
    auto r = kb::evaluate(d, w, impl, opt);
    bool ok = r && r->evaluation.status == kb::EvalStatus::passed;
    std::printf("%s %s %s: %s\n", ok ? "ok  " : "FAIL", d.name.c_str(), label,
                r ? (ok ? "PASSED against the CPU oracle" : r->summary.c_str()) : r.error().message.c_str());
    failures += !ok;
  };
  auto load = [&](const std::string& rel) {
    auto d = kb::read_definition_file(defs + rel);
    if (!d) {
      std::printf("FAIL %s: %s\n", rel.c_str(), d.error().message.c_str());
      ++failures;
    }
    return d;
  };

  for (const char* name : {"gdn/gdn_decode_qk4_v8_d128_k_last.json", "gdn/gdn_decode_qk16_v32_d128_k_last.json"}) {
    if (auto d = load(name)) {
      judge(*d, kb::kernels::gdn_gpu_oracle, workload(*d, {{"batch_size", 3}}, 0.0), "batch 3");
      judge(*d, kb::kernels::gdn_gpu_oracle, workload(*d, {{"batch_size", 2}}, 0.2, true), "batch 2, no state");
    }
  }
  for (const char* name : {"gdn/gdn_mtp_qk4_v8_d128_k_last.json", "gdn/gdn_mtp_qk16_v32_d128_k_last.json"})
    if (auto d = load(name))
      judge(*d, kb::kernels::gdn_gpu_oracle, workload(*d, {{"batch_size", 3}, {"seq_len", 4}, {"pool_size", 5}}, 0.0),
            "3 x 4 tokens, pool 5");
  for (const char* name : {"gdn/gdn_prefill_qk8_v16_d128_k_last.json", "gdn/gdn_prefill_qk16_v32_d128_k_last.json"})
    if (auto d = load(name)) {
      judge(*d, kb::kernels::gdn_gpu_oracle,
            workload(*d, {{"total_seq_len", 90}, {"num_seqs", 4}, {"len_cu_seqlens", 5}}, 0.0), "4 sequences, 90 tokens");
      judge(*d, kb::kernels::gdn_gpu_oracle,
            workload(*d, {{"total_seq_len", 40}, {"num_seqs", 2}, {"len_cu_seqlens", 3}}, 0.3, true), "no state");
    }
  if (auto d = load("mamba_ssu/mamba_ssu_decode_h128_d64_s128_ng8.json")) {
    judge(*d, kb::kernels::mamba_ssu_gpu_oracle, workload(*d, {{"batch_size", 3}, {"state_cache_size", 5}}, 0.0),
          "batch 3, cache 5");
    set_const(*d, "nheads", 12);
    set_const(*d, "ngroups", 3);
    set_const(*d, "head_dim", 5);
    set_const(*d, "dstate", 7);
    judge(*d, kb::kernels::mamba_ssu_gpu_oracle, workload(*d, {{"batch_size", 9}, {"state_cache_size", 9}}, 0.0),
          "shrunk, batch 9");
  }
  for (const auto& [name, ps] : {std::pair{"dsa_paged/dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps1.json", 1},
                                 std::pair{"dsa_paged/dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64.json", 64}})
    if (auto d = load(name)) {
      judge(*d, kb::kernels::dsa_paged_gpu_oracle, workload(*d, {{"num_tokens", 3}, {"num_pages", 3000 / ps}}, 0.0721),
            "full rows");
      judge(*d, kb::kernels::dsa_paged_gpu_oracle, workload(*d, {{"num_tokens", 2}, {"num_pages", 700 / ps}}, 0.0721),
            "padded rows");
    }
  if (auto d = load("dsa_paged/dsa_topk_indexer_fp8_h64_d128_topk2048_ps64.json")) {
    judge(*d, kb::kernels::dsa_paged_gpu_oracle,
          workload(*d, {{"batch_size", 3}, {"max_num_pages", 64}, {"num_pages", 80}}, 0.0), "up to 4096 tokens");
    judge(*d, kb::kernels::dsa_paged_gpu_oracle,
          workload(*d, {{"batch_size", 2}, {"max_num_pages", 33}, {"num_pages", 40}}, 0.0), "around top-k");
  }
  std::printf("%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
