// kb_cuda_moe (kernels/moe/cuda/) judged against the CPU oracle through kb's harness, with the
// tolerance the judge applies to each definition (atol = rtol = 1e-2; matched ratio 0.95 for the
// fp8 block forms, 1 for the others):
//   - kb's bundled MoE definitions (DeepSeek grouped routing with a local expert slice, top-k +
//     softmax, sigmoid top-1 with per-expert scales, packed pre-routed ids) at 1, 7 and 33 tokens;
//   - synthetic definitions made from those (and from shipped bf16 / float32-weight definitions)
//     over ranges: 8..64 experts, top-k 1..8, 1..8 groups, local slices, H and I multiples of 128
//     from 256 to 2048, 1..300 tokens;
//   - every shipped FlashInfer-Bench MoE definition (KB_SHARED_DIR) at 2 tokens whose inputs fit
//     this test's budget (their weights do not depend on the tokens); the larger ones are listed
//     as not run, with their size.
// One line per case. Skips (exit 77) without a usable CUDA device.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "cuda/device.hpp"
#include "harness/harness.hpp"
#include "harness/implementation.hpp"
#include "schema/io.hpp"

namespace {

struct Shape {
  std::int64_t experts, local, offset, top_k, n_group, topk_group, hidden, inter, tokens;
};

// `d` with its const axes and reference constants set to `s`.
kb::Definition reshaped(const kb::Definition& base, const Shape& s) {
  kb::Definition d = base;
  d.name = base.name.substr(0, base.name.find("_topk")) + "_synthetic_e" + std::to_string(s.experts) + "_k" +
           std::to_string(s.top_k) + "_h" + std::to_string(s.hidden) + "_i" + std::to_string(s.inter);
  const bool slice = base.find_axis("num_local_experts") != nullptr;
  std::map<std::string, std::int64_t> v = {{"num_experts", s.experts},
                                           {"num_local_experts", s.local},
                                           {"hidden_size", s.hidden},
                                           {"intermediate_size", s.inter},
                                           {"gemm1_out_size", 2 * s.inter},
                                           {"top_k", s.top_k},
                                           {"num_hidden_blocks", s.hidden / 128},
                                           {"num_intermediate_blocks", s.inter / 128},
                                           {"num_gemm1_out_blocks", 2 * s.inter / 128}};
  if (!slice) v["num_experts"] = s.local;  // the weights hold every expert
  for (auto& a : d.axes)
    if (a.kind == kb::AxisKind::const_ && v.count(a.name)) a.value = v[a.name];
  auto set = [&](const char* name, std::int64_t value) {
    std::regex re(std::string("(\\n[ \\t]*") + name + "[ \\t]*=[ \\t]*)[0-9]+");
    d.reference = std::regex_replace(d.reference, re, "$01" + std::to_string(value));
  };
  set("TOP_K", s.top_k);
  set("N_GROUP", s.n_group);
  set("TOPK_GROUP", s.topk_group);
  return d;
}

struct Case {
  kb::Definition d;
  std::vector<std::int64_t> tokens;
  std::int64_t offset = 0;
};

}  // namespace

int main() {
  auto n = kb::cuda::device_count();
  if (!n) {
    std::printf("skipped: no CUDA device (%s)\n", n.error().message.c_str());
    return 77;
  }
  const kb::Implementation* impl = kb::builtin_registry().find("kb_cuda_moe");
  if (!impl) {
    std::printf("FAIL kb_cuda_moe is not registered\n");
    return 1;
  }
  const char* src = std::getenv("KB_SOURCE_DIR");
  const std::string root = src ? src : ".";
  const char* shared_env = std::getenv("KB_SHARED_DIR");
  const std::string shared = (shared_env ? std::string(shared_env) : root + "/../shared") + "/flashinfer-trace/definitions/moe";

  int failures = 0, checks = 0;
  std::vector<Case> cases;
  std::map<std::string, kb::Definition> bundled;  // by name prefix
  for (const auto& e : std::filesystem::directory_iterator(root + "/kernels/moe/definitions")) {
    auto d = kb::read_definition_file(e.path().string());
    if (!d) {
      std::printf("FAIL %s: %s\n", e.path().string().c_str(), d.error().message.c_str());
      ++failures;
      continue;
    }
    cases.push_back({*d, {1, 7, 33}, 8});
    bundled.emplace(d->name.substr(0, d->name.find("_topk")), *d);
  }
  auto shipped = [&](const std::string& name) -> std::optional<kb::Definition> {
    auto d = kb::read_definition_file(shared + "/" + name + ".json");
    if (!d) return std::nullopt;
    return *d;
  };

  // Synthetic shapes: {experts, local, offset, top_k, n_group, topk_group, H, I, tokens}.
  struct Synthetic {
    std::string base;
    Shape s;
  };
  const std::vector<Synthetic> synthetic = {
      {"moe_fp8_block_scale_ds_routing", {64, 32, 16, 8, 8, 4, 512, 256, 300}},
      {"moe_fp8_block_scale_ds_routing", {8, 8, 0, 1, 1, 1, 256, 384, 1}},
      {"moe_fp8_block_scale_ds_routing", {48, 16, 32, 6, 4, 2, 1024, 128, 17}},
      {"moe_fp8_block_scale_ds_routing", {32, 32, 0, 8, 2, 1, 2048, 256, 5}},
      {"moe_fp8_block_scale_renorm", {32, 32, 0, 5, 1, 1, 384, 640, 100}},
      {"moe_fp8_block_scale_renorm", {16, 16, 0, 8, 1, 1, 2048, 256, 9}},
      {"moe_fp8_block_scale_renorm", {24, 24, 0, 2, 1, 1, 256, 2048, 41}},
      {"moe_fp8_per_expert_scale", {24, 24, 0, 3, 1, 1, 640, 2048, 50}},
      {"moe_fp8_per_expert_scale", {8, 8, 0, 1, 1, 1, 256, 256, 300}},
      {"moe_routed", {64, 64, 0, 8, 1, 1, 256, 1024, 120}},
      {"moe_routed", {12, 12, 0, 2, 1, 1, 1280, 128, 3}},
  };
  for (const auto& syn : synthetic) {
    auto it = bundled.find(syn.base);
    if (it == bundled.end()) {
      std::printf("FAIL no bundled definition %s* to make synthetic cases from\n", syn.base.c_str());
      ++failures;
      continue;
    }
    cases.push_back({reshaped(it->second, syn.s), {syn.s.tokens}, syn.s.offset});
  }
  // bf16 activations with float32 weights (the trtllm "fp4" forms): renormalized top-k and
  // sigmoid top-1 with the weight on the input.
  const std::vector<std::pair<std::string, Shape>> plain = {
      {"trtllm_fp4_block_scale_moe_topk8_e128_h2048_i768", {32, 32, 0, 4, 1, 1, 512, 384, 64}},
      {"trtllm_fp4_block_scale_moe_topk8_e128_h2048_i768", {8, 8, 0, 7, 1, 1, 256, 256, 200}},
      {"trtllm_fp4_block_scale_moe_topk1_e16_h5120_i8192", {16, 16, 0, 1, 1, 1, 768, 512, 40}},
      {"trtllm_fp4_block_scale_routed_moe_topk8_e128_h2048_i768", {40, 40, 0, 6, 1, 1, 384, 1024, 33}},
  };
  for (const auto& [name, s] : plain) {
    auto d = shipped(name);
    if (!d) {
      std::printf("skip %s synthetic: not found under %s\n", name.c_str(), shared.c_str());
      continue;
    }
    cases.push_back({reshaped(*d, s), {s.tokens}, 0});
  }
  // Shipped definitions at 2 tokens, within the input budget.
  constexpr double kBudgetBytes = 1.7e9;
  if (std::filesystem::is_directory(shared)) {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(shared))
      if (e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      auto d = kb::read_definition_file(f.string());
      if (!d) {
        std::printf("FAIL %s: %s\n", f.string().c_str(), d.error().message.c_str());
        ++failures;
        continue;
      }
      double bytes = 0;
      for (const auto& in : d->inputs) {
        if (in.is_scalar() || !in.shape) continue;
        double elems = 1;
        for (const auto& a : *in.shape) {
          const kb::Axis* ax = d->find_axis(a);
          elems *= ax && ax->kind == kb::AxisKind::const_ ? static_cast<double>(ax->value) : 2.0;
        }
        bytes += elems * kb::dtype_bits(in.dtype) / 8;
      }
      if (bytes > kBudgetBytes) {
        std::printf("not run %s: %.1f GB of inputs, over this test's %.1f GB budget\n", d->name.c_str(), bytes / 1e9,
                    kBudgetBytes / 1e9);
        continue;
      }
      std::int64_t offset = 0;
      const kb::Axis* local = d->find_axis("num_local_experts");
      const kb::Axis* all = d->find_axis("num_experts");
      if (local && all && all->value >= 2 * local->value) offset = local->value;  // the second slice
      cases.push_back({*d, {2}, offset});
    }
  } else {
    std::printf("skip shipped definitions: %s not found\n", shared.c_str());
  }

  for (const auto& c : cases) {
    const std::string why = impl->supports(c.d);
    if (!why.empty()) {
      std::printf("FAIL %s: kb_cuda_moe refuses it: %s\n", c.d.name.c_str(), why.c_str());
      ++failures;
      continue;
    }
    for (std::int64_t t : c.tokens) {
      kb::Workload w;
      w.uuid = "cuda-moe-check";
      w.axes = {{"seq_len", t}};
      for (const auto& in : c.d.inputs) {
        kb::InputSpec s;
        if (in.is_scalar()) {
          s.kind = kb::InputKind::scalar;
          s.value = in.name == "local_expert_offset" ? kb::ScalarValue{c.offset} : kb::ScalarValue{2.5};
        }
        w.inputs.emplace_back(in.name, s);
      }
      kb::BenchOptions opt;
      opt.trials = 1;
      opt.time = false;
      opt.cpu_oracle_only = true;
      auto r = kb::evaluate(c.d, w, *impl, opt);
      ++checks;
      const bool ok = r && r->evaluation.status == kb::EvalStatus::passed;
      std::string numbers;
      if (r && r->evaluation.correctness) {
        const auto& cr = *r->evaluation.correctness;
        char buf[256];
        std::snprintf(buf, sizeof buf, " max_abs=%.3g max_rel=%.3g%s%s", cr.max_absolute_error, cr.max_relative_error,
                      cr.extra ? " " : "", cr.extra ? cr.extra->c_str() : "");
        numbers = buf;
      }
      std::printf("%s %s seq_len=%lld: %s%s\n", ok ? "PASSED" : "FAIL  ", c.d.name.c_str(), static_cast<long long>(t),
                  r ? (ok ? "against the CPU oracle" : r->summary.c_str()) : r.error().message.c_str(), numbers.c_str());
      std::fflush(stdout);
      failures += !ok;
    }
  }
  std::printf("%d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
