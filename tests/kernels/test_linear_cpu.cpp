// kb's CPU solutions for gdn, mamba_ssu and dsa_paged (kernels/<op>/cpu.cpp)
// judged against the oracles by lib/harness's evaluate() on random workloads
// (kb-built index structures, the DSA indexer by its selection judge), on
// every shipped definition of those op types with its constants shrunk where
// the full ones would make the CPU run long, and on kb's bundled ones; plus
// deliberately broken variants that the judge must fail.
#include <doctest/doctest.h>

#include <map>

#include "harness/harness.hpp"
#include "harness/implementation.hpp"
#include "linear_test_util.hpp"

using namespace linear_test;

namespace {

kb::Workload random_workload(const kb::Definition& d, const std::map<std::string, std::int64_t>& vars,
                             std::optional<double> scalar = std::nullopt, std::vector<std::string> omit = {}) {
  kb::Workload w;
  w.uuid = "test-" + d.name;
  for (const auto& [k, v] : vars) w.axes.emplace_back(k, v);
  for (const auto& t : d.inputs) {
    if (std::find(omit.begin(), omit.end(), t.name) != omit.end()) continue;
    if (t.optional && t.name == "intermediate_states_buffer") continue;
    kb::InputSpec s;
    if (t.is_scalar()) {
      s.kind = kb::InputKind::scalar;
      s.value = scalar.value_or(0.0);
    }
    w.inputs.emplace_back(t.name, s);
  }
  return w;
}

kb::EvalStatus judge(const kb::Definition& d, const kb::Workload& w, const kb::Implementation& impl) {
  kb::BenchOptions o;
  o.trials = 2;
  o.time = false;
  auto r = kb::evaluate(d, w, impl, o);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  INFO(d.name << " " << impl.name << ": " << r->summary);
  return r->evaluation.status;
}

const kb::Implementation& solution(const char* name) {
  const kb::Implementation* impl = kb::builtin_registry().find(name);
  REQUIRE(impl != nullptr);
  return *impl;
}

struct Case {
  kb::Definition d;
  kb::Workload w;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  auto gdn = [&](const char* name, std::int64_t hq, std::int64_t hv, std::int64_t dsz) {
    auto d = shipped("gdn", name);
    set_const(d, "num_q_heads", hq);
    set_const(d, "num_k_heads", hq);
    set_const(d, "num_v_heads", hv);
    set_const(d, "head_size", dsz);
    return d;
  };
  // gdn: the shipped head counts at a smaller head size, and one full-size decode.
  for (const char* name : {"gdn_decode_qk4_v8_d128_k_last", "gdn_decode_qk16_v32_d128_k_last"}) {
    auto d = shipped("gdn", name);
    out.push_back({d, random_workload(d, {{"batch_size", 2}}, 0.0)});
  }
  {
    auto d = gdn("gdn_decode_qk16_v32_d128_k_last", 16, 32, 32);
    out.push_back({d, random_workload(d, {{"batch_size", 3}}, 0.0, {"state"})});
  }
  for (const char* name : {"gdn_mtp_qk4_v8_d128_k_last", "gdn_mtp_qk8_v16_d128_k_last", "gdn_mtp_qk16_v32_d128_k_last"}) {
    auto d = gdn(name, 2, 4, 32);
    out.push_back({d, random_workload(d, {{"batch_size", 3}, {"seq_len", 5}, {"pool_size", 4}}, 0.25)});
  }
  for (const char* name : {"gdn_prefill_qk8_v16_d128_k_last", "gdn_prefill_qk16_v32_d128_k_last"}) {
    auto d = gdn(name, 1, 3, 24);
    out.push_back({d, random_workload(d, {{"total_seq_len", 70}, {"num_seqs", 4}, {"len_cu_seqlens", 5}}, 0.0)});
    out.push_back({d, random_workload(d, {{"total_seq_len", 33}, {"num_seqs", 1}, {"len_cu_seqlens", 2}}, 0.3, {"state"})});
  }
  {  // mamba: the shipped definition, and a shrunk one
    auto d = shipped("mamba_ssu", "mamba_ssu_decode_h128_d64_s128_ng8");
    out.push_back({d, random_workload(d, {{"batch_size", 2}, {"state_cache_size", 3}})});
    set_const(d, "nheads", 12);
    set_const(d, "ngroups", 3);
    set_const(d, "head_dim", 5);
    set_const(d, "dstate", 7);
    out.push_back({d, random_workload(d, {{"batch_size", 9}, {"state_cache_size", 11}})});
  }
  // dsa: the shipped constants (top-k 2048) on a cache shorter than top-k and one longer.
  for (const char* name : {"dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps1", "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64"}) {
    auto d = shipped("dsa_paged", name);
    const std::int64_t ps = std::string(name).ends_with("ps1") ? 1 : 64;
    out.push_back({d, random_workload(d, {{"num_tokens", 2}, {"num_pages", 3000 / ps}}, 0.0721)});
    out.push_back({d, random_workload(d, {{"num_tokens", 1}, {"num_pages", 1000 / ps}}, 0.0721)});
  }
  {
    auto d = shipped("dsa_paged", "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64");
    out.push_back({d, random_workload(d, {{"batch_size", 2}, {"max_num_pages", 48}, {"num_pages", 60}})});
    set_const(d, "num_index_heads", 5);
    set_const(d, "index_head_dim", 24);
    set_const(d, "head_dim_with_scale", 28);
    set_const(d, "page_size", 8);
    set_const(d, "topk", 30);
    out.push_back({d, random_workload(d, {{"batch_size", 6}, {"max_num_pages", 9}, {"num_pages", 14}})});
  }
  return out;
}

const char* solution_for(const kb::Definition& d) {
  if (d.op_type == "gdn") return "kb_cpu_gdn";
  if (d.op_type == "mamba_ssu") return "kb_cpu_mamba_ssu";
  return "kb_cpu_dsa_paged";
}

TEST_CASE("gdn, mamba_ssu and dsa_paged CPU solutions pass on shipped and shrunk definitions") {
  for (const auto& c : cases()) {
    INFO(c.d.name);
    const auto& impl = solution(solution_for(c.d));
    CHECK(impl.supports(c.d).empty());
    CHECK(judge(c.d, c.w, impl) == kb::EvalStatus::passed);
  }
}

TEST_CASE("broken variants fail the judge") {
  for (const auto& c : cases()) {
    INFO(c.d.name);
    kb::Implementation broken = solution(solution_for(c.d));
    broken.name = "broken";
    auto inner = broken.run;
    const bool indexer = c.d.outputs.size() == 1;
    broken.run = [inner, indexer](const kb::ImplementationCall& call) -> kb::Status {
      KB_TRY(inner(call));
      kb::Tensor& t = call.outputs[0];
      if (indexer) {
        // Drop the top pick of every row that has one.
        const std::int64_t k = t.dim(1);
        for (std::int64_t r = 0; r < t.dim(0); ++r) t.data<std::int32_t>()[r * k] = -1;
        return kb::ok_status();
      }
      std::vector<float> v = kb::to_float(t);
      for (std::size_t i = 0; i < v.size(); i += 7) v[i] = v[i] * 1.5f + 0.25f;
      return kb::store_float(v, t);
    };
    CHECK(judge(c.d, c.w, broken) == kb::EvalStatus::incorrect_numerical);
  }
}

}  // namespace
