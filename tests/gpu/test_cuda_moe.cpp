// kb_cuda_moe (kernels/moe/cuda/) judged against the CPU oracle through kb's harness, with the
// tolerance the judge applies to each definition (atol = rtol = 1e-2; matched ratio 1), except
// that where the judge's low-bit rule (harness/judge.hpp: fp8 block forms, fp8 inputs, fp4 tags)
// accepts 95% of the elements, this test asks for 99.9%:
//   - kb's bundled MoE definitions (DeepSeek grouped routing with a local expert slice, top-k +
//     softmax, sigmoid top-1 with per-expert scales, packed pre-routed ids) at 1, 7 and 33 tokens;
//   - synthetic definitions made from those (and from shipped bf16 / float32-weight definitions)
//     over ranges: 8..64 experts, top-k 1..8, 1..8 groups, local slices, H and I multiples of 128
//     from 256 to 2048, 1..600 tokens;
//   - decode: every form at 1, 2, 7 and 64 tokens, top-k 1..8 over the forms, with as many experts
//     as keep the row-streaming path's rule (moe_few_rows) at 64 tokens, K past the staged slab;
//   - skewed routing: logits (or pre-routed ids) that send every token to the same top_k experts
//     while the rule expects few rows an expert, so 4-row tiles and many tiles an expert run;
//   - the rule's edge: 4 rows expected an expert (rows path) and 5 (tensor-core path);
//   - every shipped FlashInfer-Bench MoE definition (KB_SHARED_DIR) at 2 tokens whose inputs fit
//     this test's budget (their weights do not depend on the tokens); the larger ones are listed
//     as not run, with their size.
// One line per case, naming the GEMM path the rule picks. Skips (exit 77) without a usable CUDA
// device.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "cuda/device.hpp"
#include "harness/harness.hpp"
#include "harness/implementation.hpp"
#include "moe/cuda/moe_cuda.hpp"
#include "moe/form.hpp"
#include "safetensors/safetensors.hpp"
#include "schema/io.hpp"
#include "tensor/convert.hpp"

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
  bool skew = false;  // routing inputs from skewed_routing()
};

std::int64_t axis_value(const kb::Definition& d, const char* name, std::int64_t none) {
  const kb::Axis* a = d.find_axis(name);
  return a && a->kind == kb::AxisKind::const_ ? a->value : none;
}

// The GEMM path kb_cuda_moe's rules pick for `tokens` on a device of `sms` SMs, `hopper` an sm_90
// (the harness's tensors are 16-byte aligned and every H and I here a multiple of 16 elements):
// "rows", "tensor-core" (mma.sync) or "wgmma" (GEMM1 on fp8 wgmma; GEMM2 on bf16 wgmma where its own
// rule holds too, as for every fp8 block-scale shape here).
std::string path_of(const kb::Definition& d, std::int64_t tokens, int sms, bool hopper) {
  auto f = kb::kernels::moe::read_form(d);
  if (!f) return "unknown";
  const std::int64_t local = axis_value(d, "num_local_experts", axis_value(d, "num_experts", 0));
  const std::int64_t routed = f->routing == kb::kernels::moe::Routing::packed ? local : axis_value(d, "num_experts", local);
  if (kb::kernels::moe_few_rows(tokens * f->top_k, local, routed)) return "rows";
  kb::kernels::MoeLaunch m;
  m.tokens = tokens;
  m.top_k = f->top_k;
  m.local_experts = local;
  m.routed_experts = routed;
  m.hidden = axis_value(d, "hidden_size", 0);
  m.inter = axis_value(d, "intermediate_size", 0);
  const bool fp8_block = f->weights == kb::kernels::moe::Weights::fp8_block;
  m.block = fp8_block ? f->block : 0;
  m.fp8_gemm1 = fp8_block && m.hidden % 32 == 0;  // the block forms' hidden_states and W13 are e4m3
  m.hopper = hopper;
  m.sm_count = sms;
  return kb::kernels::moe_gemm1_on_wgmma(m) ? "wgmma" : "tensor-core";
}

// Routing inputs that send every token to experts offset .. offset + top_k - 1 (the local slice's
// first ones): logits 3 - j/4 for the j-th of them and -3 elsewhere (bias zero), or pre-routed ids
// of experts 0 .. top_k - 1 with weights 1 / (j + 2). Written to `dir`/skew.safetensors; the
// inputs' specs name it.
std::optional<std::string> skewed_routing(const kb::Definition& d, std::int64_t tokens, std::int64_t offset,
                                          const std::filesystem::path& dir,
                                          std::map<std::string, kb::InputSpec>* specs) {
  auto f = kb::kernels::moe::read_form(d);
  if (!f) return f.error().message;
  const std::int64_t k = f->top_k;
  std::vector<std::vector<std::byte>> blobs;
  std::vector<std::vector<std::int64_t>> shapes;
  std::vector<std::pair<std::string, kb::DType>> names;
  auto floats = [&](const std::vector<float>& v, kb::DType t) {
    std::vector<std::byte> b;
    if (t == kb::DType::bfloat16) {
      b.resize(v.size() * 2);
      for (std::size_t i = 0; i < v.size(); ++i) {
        const std::uint16_t h = kb::float_to_bf16(v[i]);
        std::memcpy(b.data() + 2 * i, &h, 2);
      }
    } else {
      b.resize(v.size() * 4);
      std::memcpy(b.data(), v.data(), b.size());
    }
    return b;
  };
  for (const auto& in : d.inputs) {
    if (in.name == "routing_logits") {
      const std::int64_t experts = axis_value(d, "num_experts", 0);
      if (in.dtype != kb::DType::float32 && in.dtype != kb::DType::bfloat16) return "routing_logits is not float32 or bfloat16";
      std::vector<float> v(static_cast<std::size_t>(tokens * experts), -3.0f);
      for (std::int64_t t = 0; t < tokens; ++t)
        for (std::int64_t j = 0; j < k; ++j) v[static_cast<std::size_t>(t * experts + offset + j)] = 3.0f - 0.25f * j;
      blobs.push_back(floats(v, in.dtype));
      shapes.push_back({tokens, experts});
      names.emplace_back(in.name, in.dtype);
    } else if (in.name == "routing_bias") {
      const std::int64_t experts = axis_value(d, "num_experts", 0);
      if (in.dtype != kb::DType::float32 && in.dtype != kb::DType::bfloat16) return "routing_bias is not float32 or bfloat16";
      blobs.push_back(floats(std::vector<float>(static_cast<std::size_t>(experts), 0.0f), in.dtype));
      shapes.push_back({experts});
      names.emplace_back(in.name, in.dtype);
    } else if (in.name == "topk_ids") {
      std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens * k));
      for (std::int64_t t = 0; t < tokens; ++t)
        for (std::int64_t j = 0; j < k; ++j)
          ids[static_cast<std::size_t>(t * k + j)] = static_cast<std::int32_t>(
              (static_cast<std::uint32_t>(j) << 16) | kb::float_to_bf16(1.0f / static_cast<float>(j + 2)));
      std::vector<std::byte> b(ids.size() * 4);
      std::memcpy(b.data(), ids.data(), b.size());
      blobs.push_back(std::move(b));
      shapes.push_back({tokens, k});
      names.emplace_back(in.name, kb::DType::int32);
    }
  }
  if (names.empty()) return "no routing input to skew";
  std::vector<kb::safetensors::TensorView> views;
  for (std::size_t i = 0; i < names.size(); ++i)
    views.push_back({names[i].first, names[i].second, shapes[i], blobs[i]});
  std::filesystem::create_directories(dir);
  if (auto st = kb::safetensors::write_file((dir / "skew.safetensors").string(), views); !st) return st.error().message;
  for (const auto& [name, dtype] : names) {
    kb::InputSpec s;
    s.kind = kb::InputKind::safetensors;
    s.path = "skew.safetensors";
    s.tensor_key = name;
    (*specs)[name] = s;
  }
  return std::nullopt;
}

}  // namespace

int main() {
  auto n = kb::cuda::device_count();
  if (!n) {
    std::printf("skipped: no CUDA device (%s)\n", n.error().message.c_str());
    return 77;
  }
  auto dev = kb::cuda::current_device_info();
  if (!dev) {
    std::printf("FAIL reading the device: %s\n", dev.error().message.c_str());
    return 1;
  }
  const bool hopper = dev->compute_major == 9 && dev->compute_minor == 0;
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
      // Both GEMMs on wgmma (sm_90): experts with more than one 128-row block; I = 3 x 128.
      {"moe_fp8_block_scale_renorm", {8, 8, 0, 2, 1, 1, 256, 1024, 600}},
      {"moe_fp8_block_scale_ds_routing", {16, 16, 0, 4, 4, 2, 384, 384, 500}},
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
  // Decode over every form (top-k 1..8), skewed routing and the rule's edge. Shapes keep the
  // row-streaming rule at 64 tokens (tokens x top_k x local / routed <= 4 x the chosen experts);
  // H = 2560 passes the 4-row tiles' staged slab (2048 elements), H = 8448 the 1-row tiles' (8192).
  struct Decode {
    std::string base;
    Shape s;
    std::vector<std::int64_t> tokens;
    bool skew;
  };
  const std::vector<std::int64_t> decode = {1, 2, 7, 64};
  const std::vector<Decode> decode_cases = {
      {"moe_fp8_block_scale_ds_routing", {128, 64, 64, 8, 4, 2, 768, 256, 0}, decode, false},
      {"moe_fp8_block_scale_ds_routing", {48, 48, 0, 3, 8, 4, 2560, 128, 0}, decode, false},
      {"moe_fp8_block_scale_renorm", {32, 32, 0, 1, 1, 1, 1024, 384, 0}, decode, false},
      {"moe_fp8_block_scale_renorm", {96, 96, 0, 6, 1, 1, 384, 256, 0}, decode, false},
      {"moe_fp8_block_scale_renorm", {16, 16, 0, 2, 1, 1, 8448, 128, 0}, {1, 2}, false},
      {"moe_fp8_per_expert_scale", {64, 64, 0, 2, 1, 1, 512, 512, 0}, decode, false},
      {"moe_fp8_per_expert_scale", {80, 80, 0, 5, 1, 1, 256, 768, 0}, decode, false},
      {"moe_routed", {64, 64, 0, 4, 1, 1, 384, 128, 0}, decode, false},
      {"moe_routed", {128, 128, 0, 7, 1, 1, 256, 128, 0}, decode, false},
      // Every token on the same experts: 64 (or 7) rows an expert where the rule expects 1 or 2.
      {"moe_fp8_block_scale_renorm", {128, 128, 0, 4, 1, 1, 512, 256, 0}, {64}, true},
      {"moe_fp8_block_scale_ds_routing", {128, 64, 64, 4, 4, 2, 2560, 128, 0}, {64}, true},
      {"moe_fp8_per_expert_scale", {64, 64, 0, 1, 1, 1, 256, 256, 0}, {7}, true},
      {"moe_routed", {64, 64, 0, 4, 1, 1, 256, 256, 0}, {64}, true},
      // The rule's edge at 64 tokens on 64 experts: top-4 (4 rows an expert: rows path), top-5
      // (5: tensor-core path).
      {"moe_fp8_block_scale_renorm", {64, 64, 0, 4, 1, 1, 256, 256, 0}, {64}, false},
      {"moe_fp8_block_scale_renorm", {64, 64, 0, 5, 1, 1, 256, 256, 0}, {64}, false},
  };
  for (const auto& dc : decode_cases) {
    auto it = bundled.find(dc.base);
    if (it == bundled.end()) {
      std::printf("FAIL no bundled definition %s* to make decode cases from\n", dc.base.c_str());
      ++failures;
      continue;
    }
    Case c{reshaped(it->second, dc.s), dc.tokens, dc.s.offset, dc.skew};
    if (dc.skew) c.d.name += "_skewed";
    cases.push_back(std::move(c));
  }
  // bf16 activations with float32 weights (the trtllm "fp4" forms): renormalized top-k and
  // sigmoid top-1 with the weight on the input.
  const std::vector<std::pair<std::string, Shape>> plain = {
      {"trtllm_fp4_block_scale_moe_topk8_e128_h2048_i768", {32, 32, 0, 4, 1, 1, 512, 384, 64}},
      {"trtllm_fp4_block_scale_moe_topk8_e128_h2048_i768", {8, 8, 0, 7, 1, 1, 256, 256, 200}},
      {"trtllm_fp4_block_scale_moe_topk1_e16_h5120_i8192", {16, 16, 0, 1, 1, 1, 768, 512, 40}},
      {"trtllm_fp4_block_scale_routed_moe_topk8_e128_h2048_i768", {40, 40, 0, 6, 1, 1, 384, 1024, 33}},
      {"trtllm_fp4_block_scale_moe_topk8_e128_h2048_i768", {32, 32, 0, 2, 1, 1, 512, 256, 1}},
      {"trtllm_fp4_block_scale_moe_topk8_e128_h2048_i768", {32, 32, 0, 2, 1, 1, 512, 256, 64}},
      {"trtllm_fp4_block_scale_moe_topk1_e16_h5120_i8192", {16, 16, 0, 1, 1, 1, 512, 256, 7}},
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

  const std::filesystem::path skew_dir =
      std::filesystem::temp_directory_path() / ("kb_test_cuda_moe_" + std::to_string(static_cast<long long>(::getpid())));
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
      if (c.skew) {
        std::map<std::string, kb::InputSpec> specs;
        if (auto bad = skewed_routing(c.d, t, c.offset, skew_dir, &specs)) {
          std::printf("FAIL %s seq_len=%lld: skewed routing: %s\n", c.d.name.c_str(), static_cast<long long>(t), bad->c_str());
          ++failures;
          continue;
        }
        for (auto& [name, spec] : w.inputs)
          if (auto s = specs.find(name); s != specs.end()) spec = s->second;
        opt.dataset_root = skew_dir.string();
      }
      opt.trials = 1;
      opt.time = false;
      opt.cpu_oracle_only = true;
      // Where the judge's low-bit rule lets 5% of the elements out, kb's kernel is held to 0.1%, or
      // to 1.5% where GEMM1 runs on fp8 wgmma: Hopper's fp8 wgmma keeps about 14 bits of its sum
      // (DeepSeek-V3's report), so outputs that cancel to under ~1% of the typical magnitude miss
      // 1e-2 (0.8-1.1% of the elements on this test's shapes, H100).
      const std::string path = path_of(c.d, t, dev->sm_count, hopper);
      if (opt.tolerances.for_definition(c.d).required_matched_ratio < 1.0)
        opt.tolerances.required_matched_ratio = path == "wgmma" ? 0.985 : 0.999;
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
      std::printf("%s %s seq_len=%lld path=%s: %s%s\n", ok ? "PASSED" : "FAIL  ", c.d.name.c_str(), static_cast<long long>(t),
                  path.c_str(), r ? (ok ? "against the CPU oracle" : r->summary.c_str()) : r.error().message.c_str(),
                  numbers.c_str());
      std::fflush(stdout);
      failures += !ok;
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(skew_dir, ec);
  std::printf("%d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
