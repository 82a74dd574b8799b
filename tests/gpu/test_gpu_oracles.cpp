// The GPU oracles (plain fp32 CUDA kernels used for workloads too large for
// the CPU) judged against the CPU oracles on small, awkward shapes through
// kb's own harness: gemm, rmsnorm and silu_and_mul on kb's bundled
// definitions; rope (NeoX, GPT-J, math in bf16) on FlashInfer-Bench's; the attention ones (decode and causal prefill, paged at page
// sizes 1 and 64, and ragged; GQA and MLA; head groups 4 to 16; sequences
// longer than the oracle's key tiles and row blocks) on FlashInfer-Bench's
// definitions in KB_SHARED_DIR, with the index tensors the workload
// materializer builds.
// Skips (exit 77) without a usable CUDA device.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
  // Attention: every var axis given (the materializer builds valid indptr /
  // indices / last-page lengths from them); sm_scale 1 / sqrt(the qk dim).
  struct AttentionCase {
    const char* file;  // under KB_SHARED_DIR/flashinfer-trace/definitions
    double qk_dim;
    std::vector<std::pair<std::string, std::int64_t>> axes;
  };
  const char* shared_env = std::getenv("KB_SHARED_DIR");
  const std::string shared = shared_env ? shared_env : root + "/../shared";
  // The attention and rope cases read the shared FlashInfer-Bench definitions; without them those cases are
  // skipped, visibly, and the bundled ones (kernels/) still run.
  const bool have_shared = std::filesystem::is_directory(shared + "/flashinfer-trace/definitions");
  if (!have_shared)
    std::printf("skipped: the attention and rope cases (no %s/flashinfer-trace/definitions; set KB_SHARED_DIR)\n",
                shared.c_str());
  auto paged = [](std::int64_t batch, std::int64_t pages, std::int64_t used, std::int64_t total_q) {
    std::vector<std::pair<std::string, std::int64_t>> a = {
        {"batch_size", batch}, {"num_pages", pages}, {"len_indptr", batch + 1}, {"num_kv_indices", used}};
    if (total_q > 0) a.emplace_back("total_q", total_q);
    return a;
  };
  const AttentionCase attention[] = {
      {"gqa_paged/gqa_paged_decode_h32_kv8_d128_ps1.json", 128, paged(3, 400, 301, 0)},
      {"gqa_paged/gqa_paged_decode_h32_kv8_d128_ps64.json", 128, paged(5, 40, 17, 0)},
      {"gqa_paged/gqa_paged_prefill_causal_h32_kv8_d128_ps1.json", 128, paged(2, 300, 211, 37)},
      {"gqa_paged/gqa_paged_prefill_causal_h32_kv8_d128_ps64.json", 128, paged(3, 30, 11, 70)},
      {"mla_paged/mla_paged_decode_h16_ckv512_kpe64_ps1.json", 192, paged(3, 300, 257, 0)},
      {"mla_paged/mla_paged_decode_h16_ckv512_kpe64_ps64.json", 192, paged(2, 20, 9, 0)},
      {"mla_paged/mla_paged_prefill_causal_h16_ckv512_kpe64_ps64.json", 192, paged(2, 20, 7, 33)},
      {"gqa_ragged/gqa_ragged_prefill_causal_h32_kv8_d128.json", 128,
       {{"len_indptr", 4}, {"total_q", 61}, {"total_kv", 150}}},
      {"mla_ragged/mla_ragged_prefill_causal_h16_qk192_vo128.json", 192,
       {{"len_indptr", 3}, {"total_q", 40}, {"total_kv", 97}}},
      // Several sequences of unequal length, each longer than one 64-key tile
      // and one 64-row block; head groups of 6 (blocks cut inside a token's
      // heads), 8 and 16; MLA's 512 value columns (two slices); rows that see
      // no key where a sequence has more queries than keys.
      {"gqa_ragged/gqa_ragged_prefill_causal_h6_kv1_d128.json", 128,
       {{"len_indptr", 4}, {"total_q", 301}, {"total_kv", 905}}},
      {"gqa_ragged/gqa_ragged_prefill_causal_h16_kv2_d128.json", 128,
       {{"len_indptr", 5}, {"total_q", 397}, {"total_kv", 1201}}},
      {"gqa_ragged/gqa_ragged_prefill_causal_h5_kv1_d128.json", 128,
       {{"len_indptr", 4}, {"total_q", 250}, {"total_kv", 200}}},
      {"gqa_paged/gqa_paged_prefill_causal_h16_kv2_d128_ps1.json", 128, paged(3, 1500, 1100, 333)},
      {"gqa_paged/gqa_paged_prefill_causal_h6_kv1_d128_ps64.json", 128, paged(4, 40, 25, 290)},
      {"gqa_paged/gqa_paged_decode_h32_kv4_d128_ps64.json", 128, paged(5, 60, 41, 0)},
      {"mla_paged/mla_paged_prefill_causal_h16_ckv512_kpe64_ps1.json", 192, paged(3, 900, 601, 150)},
      {"mla_paged/mla_paged_prefill_causal_h16_ckv512_kpe64_ps64.json", 192, paged(4, 30, 13, 170)},
      {"mla_paged/mla_paged_decode_h16_ckv512_kpe64_ps64.json", 192, paged(3, 40, 25, 0)},
      {"mla_ragged/mla_ragged_prefill_causal_h16_qk192_vo128.json", 192,
       {{"len_indptr", 4}, {"total_q", 211}, {"total_kv", 640}}},
  };

  int failures = 0, checks = 0;
  auto judge = [&](const kb::Definition& d, kb::GpuOracleFn fn, const kb::Workload& w, const std::string& label) {
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
    opt.cpu_oracle_only = true;  // these shapes are small; this keeps the judge the CPU oracle if one grows
    auto r = kb::evaluate(d, w, impl, opt);
    ++checks;
    bool ok = r && r->evaluation.status == kb::EvalStatus::passed;
    std::string numbers;
    if (r && r->evaluation.correctness)
      numbers = " (max abs error " + std::to_string(r->evaluation.correctness->max_absolute_error) +
                ", max rel error " + std::to_string(r->evaluation.correctness->max_relative_error) + ")";
    std::printf("%s %s %s: %s%s\n", ok ? "ok  " : "FAIL", d.name.c_str(), label.c_str(),
                r ? (ok ? "PASSED against the CPU oracle" : r->summary.c_str()) : r.error().message.c_str(),
                numbers.c_str());
    failures += !ok;
  };

  // The definition in `path` and its GPU oracle; nullopt (a failure counted) when either is missing.
  auto load = [&](const std::string& path)
      -> std::optional<std::pair<kb::Definition, kb::GpuOracleFn>> {
    auto d = kb::read_definition_file(path);
    if (!d) {
      std::printf("FAIL %s: %s\n", path.c_str(), d.error().message.c_str());
      ++failures;
      return std::nullopt;
    }
    kb::GpuOracleFn fn = kb::find_gpu_oracle(*d);
    if (!fn) {
      std::printf("FAIL %s: no GPU oracle\n", d->name.c_str());
      ++failures;
      return std::nullopt;
    }
    return std::pair{std::move(*d), fn};
  };

  for (const auto& c : attention) {
    if (!have_shared) break;
    auto loaded = load(shared + "/flashinfer-trace/definitions/" + c.file);
    if (!loaded) continue;
    const auto& [def, fn] = *loaded;
    kb::Workload w;
    w.uuid = "gpu-oracle-check";
    std::string label;
    for (const auto& [axis, value] : c.axes) {
      if (!def.find_axis(axis)) continue;  // page size 1 prefill has no batch_size (no kv_last_page_len)
      w.axes.emplace_back(axis, value);
      label += (label.empty() ? "" : " ") + axis + "=" + std::to_string(value);
    }
    for (const auto& t : def.inputs) {
      kb::InputSpec s;
      if (t.name == "sm_scale") {
        s.kind = kb::InputKind::scalar;
        s.value = 1.0 / std::sqrt(c.qk_dim);
      }
      w.inputs.emplace_back(t.name, s);
    }
    judge(def, fn, w, label);
  }

  for (const auto& c : cases) {
    auto loaded = load(root + "/" + c.file);
    if (!loaded) continue;
    const auto& [def, fn] = *loaded;
    for (std::int64_t v : c.values) {
      kb::Workload w;
      w.uuid = "gpu-oracle-check";
      w.axes = {{c.axis, v}};
      for (const auto& t : def.inputs) w.inputs.emplace_back(t.name, kb::InputSpec{});
      judge(def, fn, w, std::string(c.axis) + "=" + std::to_string(v));
    }
  }
  // rope: the shipped NeoX definition (fp32 math), the same with the math in
  // bf16 (no upcast), and a GPT-J (interleaved pairs) variant of it; odd
  // token and head counts, int64 positions anywhere in a 4096-row cache.
  if (auto loaded = have_shared ? load(shared + "/flashinfer-trace/definitions/rope/rope_with_cos_sin_cache_neox_style_d128_rd64.json")
                                : std::nullopt) {
    auto replace_all = [](std::string& s, const std::string& from, const std::string& to) {
      for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
    };
    const kb::Definition& neox = loaded->first;
    kb::Definition bf16_math = neox, gptj = neox;
    bf16_math.name += "_bf16_math";
    replace_all(bf16_math.reference, "q.to(torch.float32)", "q");
    replace_all(bf16_math.reference, "k.to(torch.float32)", "k");
    gptj.name = "rope_with_cos_sin_cache_gptj_style_d128_rd64";
    replace_all(gptj.reference, "neox", "gptj");
    replace_all(gptj.reference, "NeoX", "GPT-J");
    replace_all(gptj.reference, "torch.chunk(x, 2, dim=-1)", "x[..., ::2], x[..., 1::2]");
    const std::int64_t shapes[][3] = {{1, 1, 1}, {7, 8, 2}, {33, 5, 3}};
    const kb::Definition* variants[] = {&neox, &bf16_math, &gptj};
    for (const kb::Definition* def : variants) {
      kb::GpuOracleFn fn = kb::find_gpu_oracle(*def);
      if (!fn) {
        std::printf("FAIL %s: no GPU oracle\n", def->name.c_str());
        ++failures;
        continue;
      }
      for (const auto& sh : shapes) {
        kb::Workload w;
        w.uuid = "gpu-oracle-check";
        w.axes = {{"num_tokens", sh[0]}, {"num_qo_heads", sh[1]}, {"num_kv_heads", sh[2]}, {"max_seq_len", 4096}};
        for (const auto& t : def->inputs) w.inputs.emplace_back(t.name, kb::InputSpec{});
        judge(*def, fn, w, "tokens=" + std::to_string(sh[0]) + " heads=" + std::to_string(sh[1]) + "/" +
                               std::to_string(sh[2]));
      }
    }
  }

  std::printf("%d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
