// The MoE oracle (kernels/moe/oracle.cpp) and kb_cpu_moe (kernels/moe/cpu.cpp):
//  - every shipped MoE definition is read as a form the oracle computes;
//  - both reproduce tests/goldens/moe (tests/goldens/make/moe.py: each shipped definition's own
//    PyTorch reference, run on a scaled-down copy of the definition stored in the golden),
//    and the scaled copy is read as the same form as the shipped definition;
//  - both reproduce tests/goldens/moe/bundled, the references of kb's bundled MoE definitions
//    (kernels/moe/definitions) run as they are;
//  - oracle and kb_cpu_moe agree over a range of token counts, expert counts and sizes;
//  - definitions whose reference computes something else are refused, with the reason;
//  - the judge's matched-ratio rule (FlashInfer-Bench's LowBitEvaluator) passes at 0.96
//    matched and fails at 0.94 for a 0.95 requirement, which applies to the
//    moe_fp8_block_scale definitions;
//  - kb_cuda_moe's row-streaming schedule (kernels/moe/cuda/moe_schedule.hpp), a CPU rule: every
//    (tile, weight block) work item is handed out once and covers each routed row of each block
//    once, one expert's tiles of a block are consecutive items, the tile table's bound holds for
//    any routing, and the persistent grid is 4 CTAs an SM, never past the items.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "golden_inputs.hpp"
#include "harness/implementation.hpp"
#include "harness/judge.hpp"
#include "harness/measurement.hpp"
#include "inputs/inputs.hpp"
#include "json/json.hpp"
#include "moe/cuda/moe_schedule.hpp"
#include "moe/form.hpp"
#include "oracle/oracle.hpp"
#include "safetensors/safetensors.hpp"
#include "schema/io.hpp"
#include "tensor/convert.hpp"

namespace fs = std::filesystem;
namespace st = kb::safetensors;
using kb::DType;
using kb::Tensor;

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::vector<fs::path> files_in(const fs::path& dir, const std::string& ext) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file() && it->path().extension() == ext) out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

fs::path shipped_dir() { return fs::path(env_or("KB_SHARED_DIR", "../shared")) / "flashinfer-trace" / "definitions" / "moe"; }

fs::path bundled_dir() { return fs::path(env_or("KB_SOURCE_DIR", ".")) / "kernels" / "moe" / "definitions"; }

kb::Definition shipped(const std::string& name) {
  auto d = kb::read_definition_file((shipped_dir() / (name + ".json")).string());
  REQUIRE_MESSAGE(d.ok(), name);
  return std::move(d).value();
}

void same_form(const kb::kernels::moe::Form& a, const kb::kernels::moe::Form& b) {
  CHECK(a.routing == b.routing);
  CHECK(a.weights == b.weights);
  CHECK(a.weight_on_input == b.weight_on_input);
  CHECK(a.top_k == b.top_k);
  CHECK(a.n_group == b.n_group);
  CHECK(a.topk_group == b.topk_group);
  CHECK(a.clamp_weight_sum == b.clamp_weight_sum);
  CHECK(a.block == b.block);
}

// One call's inputs, owned.
struct Call {
  kb::AxisValues axes;
  std::vector<Tensor> tensors;
  std::vector<kb::Arg> args;
};

std::vector<std::int64_t> shape_of(const kb::TensorSpec& s, const kb::AxisValues& axes) {
  std::vector<std::int64_t> shape;
  for (const auto& n : *s.shape) shape.push_back(axes.get(n).value_or(-1));
  return shape;
}

Tensor run_oracle(const kb::Definition& d, Call& c) {
  auto out = Tensor::allocate(d.outputs[0].dtype, shape_of(d.outputs[0], c.axes));
  REQUIRE(out.ok());
  out->fill_bytes(0xFF);
  std::vector<Tensor> outs;
  outs.push_back(std::move(*out));
  auto oracle = kb::find_oracle(d);
  REQUIRE_MESSAGE(oracle.ok(), oracle.error().message);
  kb::OracleCall call{d, c.axes, c.args, outs, 0};
  auto st = (*oracle)->run(call);
  REQUIRE_MESSAGE(st.ok(), st.error().message);
  CHECK(outs[0].guards_intact());
  return std::move(outs[0]);
}

Tensor run_cpu(const kb::Definition& d, Call& c) {
  const kb::Implementation* impl = kb::builtin_registry().find("kb_cpu_moe");
  REQUIRE(impl);
  REQUIRE(impl->supports(d).empty());
  auto out = Tensor::allocate(d.outputs[0].dtype, shape_of(d.outputs[0], c.axes));
  REQUIRE(out.ok());
  out->fill_bytes(0xFF);
  std::vector<Tensor> outs;
  outs.push_back(std::move(*out));
  kb::ImplementationCall call{d, c.axes, c.args, outs, 0};
  auto st = impl->run(call);
  REQUIRE_MESSAGE(st.ok(), st.error().message);
  return std::move(outs[0]);
}

// Elements of x outside atol/rtol of y (FlashInfer-Bench's rule), with the worst error in `note`.
std::int64_t mismatches(const Tensor& x, const Tensor& y, double atol, double rtol, std::string& note) {
  REQUIRE(x.shape() == y.shape());
  std::int64_t bad = 0;
  double worst = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    double a = kb::element_as_double(x, i), b = kb::element_as_double(y, i);
    double abs = std::fabs(a - b);
    worst = std::max(worst, abs);
    bool fail = !std::isfinite(a) || !std::isfinite(b) || (abs > atol && abs / (std::fabs(b) + 1e-8) > rtol);
    if (fail && bad++ == 0) note = fmt::format("element {}: {} vs {}", i, a, b);
  }
  note += fmt::format(" (max abs diff {:.3g})", worst);
  return bad;
}

}  // namespace

TEST_CASE("every shipped MoE definition is read as a form the oracle computes") {
  auto files = files_in(shipped_dir(), ".json");
  REQUIRE_MESSAGE(files.size() == 17, "expected the 17 shipped MoE definitions under " << shipped_dir().string());
  int deepseek_grouped = 0, packed = 0, on_input = 0, blocks = 0, per_expert = 0;
  for (const auto& f : files) {
    auto d = kb::read_definition_file(f.string());
    REQUIRE_MESSAGE(d.ok(), f.string());
    INFO(d->name);
    auto form = kb::kernels::moe::read_form(*d);
    REQUIRE_MESSAGE(form.ok(), form.error().message);
    CHECK(kb::find_oracle(*d).ok());
    CHECK(kb::builtin_registry().find("kb_cpu_moe")->supports(*d).empty());
    deepseek_grouped += form->n_group > 1;
    packed += form->routing == kb::kernels::moe::Routing::packed;
    on_input += form->weight_on_input;
    blocks += form->weights == kb::kernels::moe::Weights::fp8_block;
    per_expert += form->weights == kb::kernels::moe::Weights::per_expert;
    // The name's top-k is the form's.
    CHECK(d->name.find(fmt::format("topk{}_", form->top_k)) != std::string::npos);
  }
  CHECK(deepseek_grouped == 1);  // ng8_kg4
  CHECK(packed == 5);
  CHECK(on_input == 6);  // the Llama-4 top-1 forms
  CHECK(blocks == 5);
  CHECK(per_expert == 3);
  auto ng8 = kb::kernels::moe::read_form(shipped("moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"));
  REQUIRE(ng8.ok());
  CHECK(ng8->n_group == 8);
  CHECK(ng8->topk_group == 4);
  CHECK(ng8->block == 128);
  CHECK_FALSE(ng8->clamp_weight_sum);
  auto ng1 = kb::kernels::moe::read_form(shipped("moe_fp8_block_scale_ds_routing_topk8_ng1_kg1_e384_h7168_i2048"));
  REQUIRE(ng1.ok());
  CHECK(ng1->n_group == 1);
  CHECK(ng1->clamp_weight_sum);
}

namespace {

// One golden: the definition (the scaled copy stored in the golden, or kb's bundled one), its
// inputs rebuilt, the oracle and kb_cpu_moe run and compared with the reference's output.
void check_golden(const fs::path& file, bool bundled) {
  INFO(file.filename().string());
  auto golden = st::read_file(file.string());
  REQUIRE_MESSAGE(golden.ok(), golden.error().message);
  const st::Header& h = golden->header;
  auto meta = [&](std::string_view key) -> std::string {
    for (const auto& [k, v] : h.metadata)
      if (k == key) return v;
    return {};
  };
  REQUIRE(meta("format") == "kb-golden-v1");
  kb::Result<kb::Definition> d = kb::make_error(kb::Code::not_found, "no definition");
  if (bundled) {
    // kb's own bundled definition, run as it is.
    d = kb::read_definition_file((bundled_dir() / (meta("definition") + ".json")).string());
    REQUIRE_MESSAGE(d.ok(), d.error().message);
    REQUIRE(file.stem().string() == d->name);
  } else {
    d = kb::read_definition(meta("definition_json"), file.string() + ": metadata definition_json");
    REQUIRE_MESSAGE(d.ok(), d.error().message);
    REQUIRE(d->name == meta("definition"));
    // The scaled copy is the shipped definition's form.
    const std::string from = meta("scaled_from");
    REQUIRE(file.stem().string() == from);
    auto a = kb::kernels::moe::read_form(shipped(from));
    auto b = kb::kernels::moe::read_form(*d);
    REQUIRE_MESSAGE(a.ok(), a.error().message);
    REQUIRE_MESSAGE(b.ok(), b.error().message);
    same_form(*a, *b);
  }

  auto axes_doc = kb::json::parse(meta("axes"), "axes");
  auto scalars_doc = kb::json::parse(meta("scalars"), "scalars");
  auto scales_doc = kb::json::parse(meta("scales"), "scales");
  REQUIRE((axes_doc.ok() && scalars_doc.ok() && scales_doc.ok()));
  Call c;
  for (const auto& ax : d->axes) {
    std::int64_t v = ax.value;
    if (ax.kind == kb::AxisKind::var) REQUIRE(axes_doc->root().at_key(ax.name).get_int64().get(v) == simdjson::SUCCESS);
    c.axes.values.emplace_back(ax.name, v);
  }
  std::string generated = "," + meta("generated") + ",";
  c.tensors.resize(d->inputs.size());
  c.args.resize(d->inputs.size());
  for (std::size_t i = 0; i < d->inputs.size(); ++i) {
    const kb::TensorSpec& s = d->inputs[i];
    if (s.is_scalar()) {
      kb::json::Element e;
      REQUIRE(scalars_doc->root().at_key(s.name).get(e) == simdjson::SUCCESS);
      std::int64_t iv;
      double dv;
      if (e.get_int64().get(iv) == simdjson::SUCCESS) c.args[i].scalar = kb::ScalarValue{iv};
      else if (e.get_double().get(dv) == simdjson::SUCCESS) c.args[i].scalar = kb::ScalarValue{dv};
      else FAIL("scalar " << s.name);
      continue;
    }
    auto shape = shape_of(s, c.axes);
    if (generated.find("," + s.name + ",") != std::string::npos) {
      double scale = 1.0;
      if (scales_doc->root().at_key(s.name).get_double().get(scale) != simdjson::SUCCESS) scale = 1.0;
      auto t = kb::golden::generated(d->name, s.name, s.dtype, shape, static_cast<float>(scale));
      REQUIRE(t.ok());
      c.tensors[i] = std::move(*t);
    } else {
      const st::TensorInfo* info = h.find("in." + s.name);
      REQUIRE_MESSAGE(info, "in." << s.name);
      REQUIRE(info->dtype == s.dtype);
      REQUIRE(info->shape == shape);
      auto t = Tensor::allocate(s.dtype, shape);
      REQUIRE(t.ok());
      auto bytes = golden->bytes(*info);
      REQUIRE(bytes.size() == t->nbytes());
      std::memcpy(t->bytes(), bytes.data(), bytes.size());
      c.tensors[i] = std::move(*t);
    }
    c.args[i].tensor = &c.tensors[i];
  }
  const st::TensorInfo* info = h.find("out.output");
  REQUIRE(info);
  auto expected = Tensor::allocate(info->dtype, info->shape);
  REQUIRE(expected.ok());
  auto bytes = golden->bytes(*info);
  std::memcpy(expected->bytes(), bytes.data(), bytes.size());

  // The oracle must match every element (atol = rtol = 1e-2, bfloat16 output); kb_cpu_moe
  // accumulates in float32 and is held to the same.
  Tensor got = run_oracle(*d, c);
  std::string note;
  CHECK_MESSAGE(mismatches(got, *expected, 1e-2, 1e-2, note) == 0, "oracle: " << note);
  MESSAGE(file.filename().string() << ": oracle" << note);
  Tensor cpu = run_cpu(*d, c);
  std::string cpu_note;
  CHECK_MESSAGE(mismatches(cpu, *expected, 1e-2, 1e-2, cpu_note) == 0, "kb_cpu_moe: " << cpu_note);
}

fs::path goldens_dir() { return fs::path(env_or("KB_GOLDENS_DIR", "tests/goldens")) / "moe"; }

}  // namespace

TEST_CASE("the MoE oracle and kb_cpu_moe reproduce the PyTorch goldens of every shipped form") {
  auto files = files_in(goldens_dir(), ".safetensors");
  REQUIRE_MESSAGE(files.size() == 17, "expected a golden per shipped MoE definition in " << goldens_dir().string()
                                          << " (python3 tests/goldens/make/moe.py DEFINITIONS_DIR tests/goldens/moe)");
  for (const auto& file : files) check_golden(file, false);
}

TEST_CASE("the MoE oracle and kb_cpu_moe reproduce the PyTorch goldens of kb's bundled MoE definitions") {
  auto files = files_in(goldens_dir() / "bundled", ".safetensors");
  auto defs = files_in(bundled_dir(), ".json");
  REQUIRE(!defs.empty());
  REQUIRE_MESSAGE(files.size() == defs.size(), "expected a golden per definition of " << bundled_dir().string());
  for (const auto& file : files) check_golden(file, true);
}

namespace {

// A copy of `d` with its const axes set from `sizes` (kb takes sizes from the tensors; the
// reference's own H / I / E constants only matter to PyTorch).
kb::Definition resized(kb::Definition d, const std::vector<std::pair<std::string, std::int64_t>>& sizes) {
  for (auto& a : d.axes)
    for (const auto& [n, v] : sizes)
      if (a.name == n) a.value = v;
  return d;
}

// Random inputs for every form: floats uniform in [-1, 1] (scales in [0.25, 1.25]), distinct
// logits per token, valid packed topk_ids with some ids outside the local experts (which the
// reference skips), the given offset and scaling factor.
Call random_call(const kb::Definition& d, std::int64_t tokens, std::int64_t offset, std::mt19937& rng) {
  Call c;
  for (const auto& a : d.axes) c.axes.values.emplace_back(a.name, a.kind == kb::AxisKind::var ? tokens : a.value);
  c.tensors.resize(d.inputs.size());
  c.args.resize(d.inputs.size());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (std::size_t i = 0; i < d.inputs.size(); ++i) {
    const kb::TensorSpec& s = d.inputs[i];
    if (s.is_scalar()) {
      if (s.name == "local_expert_offset") c.args[i].scalar = kb::ScalarValue{offset};
      else c.args[i].scalar = kb::ScalarValue{2.5};
      continue;
    }
    auto t = Tensor::allocate(s.dtype, shape_of(s, c.axes));
    REQUIRE(t.ok());
    std::vector<float> v(static_cast<std::size_t>(t->numel()));
    if (s.name == "routing_logits") {
      const std::int64_t E = t->dim(1);
      for (std::int64_t r = 0; r < t->dim(0); ++r) {
        std::vector<int> p(static_cast<std::size_t>(E));
        for (int e = 0; e < E; ++e) p[static_cast<std::size_t>(e)] = e;
        std::shuffle(p.begin(), p.end(), rng);
        for (std::int64_t e = 0; e < E; ++e) v[static_cast<std::size_t>(r * E + e)] = (static_cast<float>(p[static_cast<std::size_t>(e)]) - E / 2.0f) / 8.0f;
      }
    } else if (s.name == "routing_bias") {
      for (auto& x : v) x = u(rng) * 0.05f;
    } else if (s.name.find("scale") != std::string::npos) {
      for (auto& x : v) x = 0.75f + 0.5f * u(rng);
    } else if (s.name != "topk_ids") {
      for (auto& x : v) x = u(rng);
    }
    if (s.name == "topk_ids") {
      const std::int64_t K = t->dim(1), E = d.find_axis("num_experts")->value;
      for (std::int64_t r = 0; r < t->dim(0); ++r) {
        std::vector<int> p(static_cast<std::size_t>(E + 2));
        for (int e = 0; e < E + 2; ++e) p[static_cast<std::size_t>(e)] = e == E ? -1 : e;  // -1 and E: not an expert
        std::shuffle(p.begin(), p.end(), rng);
        if (r == 0)  // token 0 reaches at least one expert
          std::iter_swap(p.begin(), std::find_if(p.begin(), p.end(), [&](int e) { return e >= 0 && e < E; }));
        for (std::int64_t k = 0; k < K; ++k) {
          std::uint16_t w = kb::float_to_bf16(0.1f + 0.4f * (u(rng) + 1.0f));
          t->data<std::int32_t>()[r * K + k] =
              static_cast<std::int32_t>((static_cast<std::uint32_t>(p[static_cast<std::size_t>(k)]) << 16) | w);
        }
      }
    } else {
      REQUIRE(kb::store_float(v, *t).ok());
    }
    c.tensors[i] = std::move(*t);
    c.args[i].tensor = &c.tensors[i];
  }
  return c;
}

const char* kEveryForm[] = {
    "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048",  // grouped DeepSeek, fp8 blocks, local slice
    "moe_fp8_block_scale_ds_routing_topk8_ng1_kg1_e48_h7168_i2048",  // DeepSeek without groups
    "moe_fp8_block_scale_renorm_topk8_e128_h2048_i768",              // top-k + softmax, fp8 blocks
    "trtllm_fp4_block_scale_moe_topk1_e16_h5120_i8192",              // sigmoid top-1, weight on the input
    "trtllm_fp4_block_scale_moe_topk10_e128_h2048_i512",             // top-k + softmax, float weights
    "trtllm_fp4_block_scale_routed_moe_topk8_e128_h2048_i768",       // packed ids, weight on the output
    "trtllm_fp4_block_scale_routed_moe_topk1_e16_h5120_i8192",       // packed ids, weight on the input
    "trtllm_fp8_per_tensor_scale_moe_topk8_e128_h2048_i768",         // per-expert scales
    "trtllm_fp8_per_tensor_scale_moe_topk1_e16_h5120_i8192",         // per-expert scales, weight on the input
};

}  // namespace

TEST_CASE("the MoE oracle and kb_cpu_moe agree over tokens, experts and sizes") {
  std::mt19937 rng(7);
  int runs = 0;
  for (const char* name : kEveryForm) {
    const kb::Definition base = shipped(name);
    auto form = kb::kernels::moe::read_form(base);
    REQUIRE(form.ok());
    const bool blocks = form->weights == kb::kernels::moe::Weights::fp8_block;
    const std::int64_t K = form->top_k;
    struct Shape {
      std::int64_t tokens, hidden, inter, experts, local;
    };
    std::vector<Shape> shapes;
    if (form->routing == kb::kernels::moe::Routing::deepseek) {
      const std::int64_t g = form->n_group;
      shapes = {{1, 128, 128, std::max<std::int64_t>(g * 2, 16), 16}, {6, 384, 256, std::max<std::int64_t>(g * 4, 24), 8}};
    } else if (blocks) {
      shapes = {{1, 128, 128, K, K}, {6, 384, 256, 2 * K + 3, 2 * K + 3}};
    } else {
      shapes = {{1, 8, 1, K, K}, {6, 40, 24, 2 * K + 3, 2 * K + 3}, {3, 136, 72, K + 1, K + 1}};
    }
    for (const Shape& z : shapes) {
      const std::int64_t B = blocks ? form->block : 1;
      std::vector<std::pair<std::string, std::int64_t>> sizes = {
          {"hidden_size", z.hidden}, {"intermediate_size", z.inter}, {"gemm1_out_size", 2 * z.inter},
          {"num_hidden_blocks", z.hidden / B}, {"num_intermediate_blocks", z.inter / B},
          {"num_gemm1_out_blocks", 2 * z.inter / B}};
      if (base.find_axis("num_local_experts") && base.find_axis("num_experts")) {
        sizes.push_back({"num_experts", z.experts});
        sizes.push_back({"num_local_experts", std::min(z.local, z.experts)});
      } else {
        sizes.push_back({"num_experts", z.experts});
        sizes.push_back({"num_local_experts", z.experts});
      }
      kb::Definition d = resized(base, sizes);
      const std::int64_t offset = (z.experts - std::min(z.local, z.experts)) / 2;
      INFO(name, " tokens ", z.tokens, " hidden ", z.hidden, " inter ", z.inter, " experts ", z.experts);
      Call c = random_call(d, z.tokens, offset, rng);
      Tensor a = run_oracle(d, c);
      Tensor b = run_cpu(d, c);
      std::string note;
      CHECK_MESSAGE(mismatches(b, a, 1e-2, 1e-2, note) == 0, note);
      // Not all zero: some token reached a local expert.
      bool nonzero = false;
      for (std::int64_t i = 0; i < a.numel(); ++i) nonzero |= kb::element_as_double(a, i) != 0;
      CHECK(nonzero);
      ++runs;
    }
  }
  CHECK(runs == 24);
}

TEST_CASE("MoE definitions that compute something else are refused, naming the part") {
  const kb::Definition base = shipped("trtllm_fp8_per_tensor_scale_moe_topk8_e128_h2048_i768");
  auto refused = [&](const std::string& from, const std::string& to, const std::string& why) {
    kb::Definition d = base;
    auto at = d.reference.find(from);
    REQUIRE_MESSAGE(at != std::string::npos, from);
    d.reference.replace(at, from.size(), to);
    auto o = kb::find_oracle(d);
    REQUIRE_FALSE(o.ok());
    CHECK_MESSAGE(o.error().message.find(why) != std::string::npos, o.error().message);
    CHECK_FALSE(kb::builtin_registry().find("kb_cpu_moe")->supports(d).empty());
  };
  refused("torch.nn.functional.silu(gate) * act", "torch.nn.functional.gelu(gate) * act", "activation");
  refused("torch.softmax(topk_logits, dim=-1)", "torch.sigmoid(topk_logits)", "routing");
  refused("gate = g1[:, I:]", "gate = g1[:, :I]", "activation");
  refused("* output2_scales_scalar[e]", "+ output2_scales_scalar[e]", "per-expert scales");
  refused("TOP_K = 8", "TOP_K = 8.5", "TOP_K");
  refused("TOP_K = 8", "TOP_K = 4", "the reference's TOP_K = 4 and the const axis top_k = 8 disagree");
  // Shapes that do not fit are an error of the call, not a wrong answer.
  std::mt19937 rng(1);
  kb::Definition d = resized(base, {{"hidden_size", 16}, {"intermediate_size", 8}, {"gemm1_out_size", 16}, {"num_experts", 9}});
  Call c = random_call(d, 2, 0, rng);
  auto w2 = Tensor::allocate(DType::float8_e4m3fn, {9, 16, 7});
  REQUIRE(w2.ok());
  c.tensors[*kb::input_index(d, "gemm2_weights")] = std::move(*w2);
  c.args[*kb::input_index(d, "gemm2_weights")].tensor = &c.tensors[*kb::input_index(d, "gemm2_weights")];
  auto out = Tensor::allocate(DType::bfloat16, {2, 16});
  REQUIRE(out.ok());
  std::vector<Tensor> outs;
  outs.push_back(std::move(*out));
  kb::OracleCall call{d, c.axes, c.args, outs, 0};
  auto st = (*kb::find_oracle(d))->run(call);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("gemm2_weights") != std::string::npos);
}

TEST_CASE("judge: a 0.95 matched ratio passes at 0.96 matched and fails at 0.94; the moe_fp8_block_scale rule") {
  auto expected = Tensor::allocate(DType::bfloat16, {100});
  REQUIRE(expected.ok());
  std::vector<float> ones(100, 1.0f);
  REQUIRE(kb::store_float(ones, *expected).ok());
  auto with_wrong = [&](int wrong) {
    auto got = expected->clone();
    std::vector<float> v(100, 1.0f);
    for (int i = 0; i < wrong; ++i) v[static_cast<std::size_t>(i * 7 % 100)] = 1.5f;
    REQUIRE(kb::store_float(v, got).ok());
    return got;
  };
  kb::Tolerance tol{1e-2, 1e-2, 0.95};
  kb::Comparison pass = kb::compare(with_wrong(4), *expected, tol);
  CHECK(pass.verdict == kb::Comparison::Verdict::match);
  CHECK(pass.mismatched == 4);
  CHECK(pass.matched_ratio() == doctest::Approx(0.96));
  kb::Comparison fail = kb::compare(with_wrong(6), *expected, tol);
  CHECK(fail.verdict == kb::Comparison::Verdict::wrong_values);
  CHECK(fail.matched_ratio() == doctest::Approx(0.94));
  CHECK(fail.detail.find("matched 0.9400 < 0.95") != std::string::npos);
  // The trace records the lowest matched ratio where the rule asks for one.
  CHECK(kb::write_judge_counts(kb::JudgeCounts::elementwise(6, 100, 1, kb::recorded_matched_ratio(tol, 0.94))) ==
        R"({"mismatched":6,"total":100,"matched_ratio":0.94,"trials_run":1})");
  CHECK_FALSE(kb::recorded_matched_ratio(kb::Tolerance{}, 1.0).has_value());

  // FlashInfer-Bench applies 0.95 to definitions named moe_fp8_block_scale*; by name alone the
  // rest of moe needs every element; a config's name_contains section says the same for other names.
  kb::TolerancePolicy p;
  CHECK(p.for_definition("moe", "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048").required_matched_ratio == 0.95);
  CHECK(p.for_definition("moe", "trtllm_fp8_per_tensor_scale_moe_topk8_e128_h2048_i768").required_matched_ratio == 1.0);
  CHECK(p.for_definition("gemm", "gemm_n128_k2048").required_matched_ratio == 1.0);
  // The definition's low-bit inputs or quantization tag give it the low-bit ratio too; the DSA
  // indexer keeps its own judge's rule, and a definition of float32/bf16 values needs every element.
  auto def = [](std::string op, std::string name, kb::DType dt, std::vector<std::string> tags) {
    kb::Definition d;
    d.op_type = std::move(op);
    d.name = std::move(name);
    kb::TensorSpec x;
    x.name = "x";
    x.shape = std::vector<std::string>{"n"};
    x.dtype = dt;
    d.inputs.push_back(x);
    d.tags = std::move(tags);
    return d;
  };
  CHECK(p.for_definition(def("moe", "trtllm_fp8_per_tensor_scale_moe_topk8_e128_h2048_i768", kb::DType::float8_e4m3fn, {}))
            .required_matched_ratio == 0.95);
  CHECK(p.for_definition(def("moe", "trtllm_fp4_block_scale_moe_topk1_e16_h5120_i8192", kb::DType::float32,
                             {"quantization:float4_e2m1fn_mxfp4"}))
            .required_matched_ratio == 0.95);
  CHECK(p.for_definition(def("moe", "moe_routed_topk4_e16_h256_i128", kb::DType::float32, {"model:x"}))
            .required_matched_ratio == 1.0);
  CHECK(p.for_definition(def("dsa_paged", "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64", kb::DType::float8_e4m3fn, {}))
            .required_matched_ratio == 1.0);
  CHECK(p.for_definition(def("gemm", "gemm_n128_k2048", kb::DType::bfloat16, {})).required_matched_ratio == 1.0);
  const fs::path cfg = fs::temp_directory_path() / fmt::format("kb_moe_tol_{}.json", std::random_device{}());
  {
    std::ofstream f(cfg);
    f << R"({"name_contains": {"fp4_block_scale": {"required_matched_ratio": 0.9, "atol": 0.05}},
             "definition": {"trtllm_fp4_block_scale_moe_topk1_e16_h5120_i8192": {"atol": 0.2}}})";
  }
  auto loaded = kb::TolerancePolicy::load(cfg.string());
  fs::remove(cfg);
  REQUIRE_MESSAGE(loaded.ok(), loaded.error().message);
  kb::Tolerance t = loaded->for_definition("moe", "trtllm_fp4_block_scale_routed_moe_topk8_e64_h4096_i1536");
  CHECK(t.required_matched_ratio == 0.9);
  CHECK(t.atol == 0.05);
  t = loaded->for_definition("moe", "trtllm_fp4_block_scale_moe_topk1_e16_h5120_i8192");
  CHECK(t.atol == 0.2);  // definition over name_contains
  CHECK(t.required_matched_ratio == 0.9);
  CHECK(loaded->for_definition("moe", "moe_fp8_block_scale_x").required_matched_ratio == 0.95);  // built-in kept
  // A file's name_contains section overrides the low-bit rule of a definition's tags.
  CHECK(loaded->for_definition(def("moe", "trtllm_fp4_block_scale_moe_topk8_e128_h2048_i768", kb::DType::float32,
                                   {"quantization:float4_e2m1fn_mxfp4"}))
            .required_matched_ratio == 0.9);
}

TEST_CASE("kb builds valid packed topk_ids for a pre-routed MoE workload") {
  auto d = kb::read_definition_file((bundled_dir() / "moe_routed_topk4_e16_h256_i128.json").string());
  REQUIRE_MESSAGE(d.ok(), d.error().message);
  kb::Workload w;
  w.uuid = "topk-ids";
  w.axes.emplace_back("seq_len", 50);
  for (const auto& t : d->inputs) w.inputs.emplace_back(t.name, kb::InputSpec{});
  auto m = kb::materialize(*d, w, {});
  REQUIRE_MESSAGE(m.ok(), m.error().message);
  const Tensor& ids = m->tensors[*kb::input_index(*d, "topk_ids")];
  REQUIRE(ids.shape() == std::vector<std::int64_t>{50, 4});
  std::vector<int> seen(16, 0);
  for (std::int64_t r = 0; r < 50; ++r) {
    std::vector<int> row;
    double sum = 0;
    for (std::int64_t k = 0; k < 4; ++k) {
      const auto v = static_cast<std::uint32_t>(ids.data<std::int32_t>()[r * 4 + k]);
      const int e = static_cast<int>(v >> 16);
      const float wt = kb::bf16_to_float(static_cast<std::uint16_t>(v & 0xFFFFu));
      CHECK((e >= 0 && e < 16));
      CHECK(wt > 0.0f);
      sum += wt;
      row.push_back(e);
      if (e >= 0 && e < 16) ++seen[static_cast<std::size_t>(e)];
    }
    std::sort(row.begin(), row.end());
    CHECK(std::adjacent_find(row.begin(), row.end()) == row.end());  // distinct experts
    CHECK(sum == doctest::Approx(1.0).epsilon(0.02));
  }
  CHECK(std::count(seen.begin(), seen.end(), 0) == 0);  // 200 picks reach every one of 16 experts
  bool noted = false;
  for (const auto& n : m->notes) noted |= n.rfind("built topk_ids: 4 distinct experts of 16", 0) == 0;
  CHECK(noted);
}

namespace {

namespace sched = kb::kernels::moe_schedule;

// The tile table plan_kernel writes, built on the CPU: per tile {expert, its first tile, its
// first pair row, its rows} (moe.cu's tile_expert), experts in order.
struct TileRec {
  int e, t0, row0, n;
};
std::vector<TileRec> tile_table(const std::vector<int>& counts) {
  std::vector<TileRec> out;
  int row0 = 0;
  for (int e = 0; e < static_cast<int>(counts.size()); ++e) {
    const int t0 = static_cast<int>(out.size());
    for (int j = 0; j < sched::tiles_of(counts[e], sched::kStreamRowTile); ++j) out.push_back({e, t0, row0, counts[e]});
    row0 += counts[e];
  }
  return out;
}

// Walks every item of a streaming GEMM over `counts` and `blocks` weight blocks as stream_kernel
// does; checks coverage and order.
void check_schedule(const std::vector<int>& counts, int blocks) {
  const std::vector<TileRec> tiles = tile_table(counts);
  int rows_total = 0;
  for (int n : counts) rows_total += n;
  // covered[row * blocks + block]: times the (pair row, weight block) was computed.
  std::vector<int> covered(static_cast<std::size_t>(rows_total) * static_cast<std::size_t>(blocks), 0);
  const long long items = sched::stream_items(static_cast<long long>(tiles.size()), blocks);
  int prev_e = -1, prev_block = -1, prev_r0 = -1, run = 0;
  for (long long q = 0; q < items; ++q) {
    const TileRec& rec = tiles[static_cast<std::size_t>(q / blocks)];
    const sched::StreamWork w = sched::stream_work(q, blocks, rec.t0, rec.row0, rec.n);
    REQUIRE((w.block >= 0 && w.block < blocks));
    REQUIRE((w.rows >= 1 && w.rows <= sched::kStreamRowTile));
    REQUIRE((w.r0 >= rec.row0 && w.r0 + w.rows <= rec.row0 + rec.n));
    for (int r = w.r0; r < w.r0 + w.rows; ++r) ++covered[static_cast<std::size_t>(r) * blocks + w.block];
    // Experts in order; inside one, a block's tiles consecutive and in row order, blocks ascending.
    CHECK(rec.e >= prev_e);
    const int nt = sched::tiles_of(rec.n, sched::kStreamRowTile);
    if (rec.e == prev_e && w.block == prev_block) {
      CHECK(w.r0 == prev_r0 + sched::kStreamRowTile);
      ++run;
    } else {
      if (rec.e == prev_e) CHECK(w.block == prev_block + 1);
      if (prev_e >= 0) CHECK(run == sched::tiles_of(counts[static_cast<std::size_t>(prev_e)], sched::kStreamRowTile));
      CHECK(w.r0 == rec.row0);
      run = 1;
    }
    CHECK(nt >= 1);
    prev_e = rec.e;
    prev_block = w.block;
    prev_r0 = w.r0;
  }
  CHECK(std::all_of(covered.begin(), covered.end(), [](int c) { return c == 1; }));
}

}  // namespace

TEST_CASE("kb_cuda_moe's streaming schedule hands out every (tile, weight block) once, a block's tiles together") {
  for (int blocks : {1, 3, 256, 448}) {
    CAPTURE(blocks);
    check_schedule({1}, blocks);
    check_schedule({0, 0, 7, 0}, blocks);
    check_schedule({1, 0, 5, 16, 0, 3, 4, 8, 9, 2}, blocks);
    check_schedule({64, 1, 0, 0, 13}, blocks);  // one crowded expert
  }
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    std::vector<int> counts(1 + rng() % 40);
    for (int& c : counts) c = rng() % 3 == 0 ? 0 : static_cast<int>(rng() % 30);
    CAPTURE(round);
    check_schedule(counts, 1 + static_cast<int>(rng() % 50));
  }
}

TEST_CASE("kb_cuda_moe's tile table bound holds for any routing") {
  // Every expert gets one row: as many tiles as pairs.
  CHECK(sched::max_tiles(8, 384, 4) >= 8);
  CHECK(sched::max_tiles(8, 384, 4) == 2 + 8);
  // All pairs on one expert, or spread so that each expert's last tile is short.
  std::mt19937 rng(11);
  for (int round = 0; round < 200; ++round) {
    const int experts = 1 + static_cast<int>(rng() % 64), tile = round % 2 ? 4 : 32;
    std::vector<int> counts(static_cast<std::size_t>(experts), 0);
    const int pairs = static_cast<int>(rng() % 600);
    const int spread = 1 + static_cast<int>(rng() % experts);
    for (int p = 0; p < pairs; ++p) ++counts[static_cast<std::size_t>(p % spread)];
    long long tiles = 0;
    for (int n : counts) tiles += sched::tiles_of(n, tile);
    CAPTURE(round);
    CHECK(tiles <= sched::max_tiles(pairs, experts, tile));
  }
}

TEST_CASE("kb_cuda_moe's streaming grid: 4 CTAs an SM, never more than the items") {
  CHECK(sched::stream_grid(2048, 132) == 528);
  CHECK(sched::stream_grid(100, 132) == 100);
  CHECK(sched::stream_grid(0, 132) == 1);
  CHECK(sched::stream_grid(5000, 0) == 5000);  // unknown SM count: one CTA an item
  CHECK(sched::stream_items(40, 448) == 17920);
}
