#include "form.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <initializer_list>

namespace kb::kernels::moe {
namespace {

// The reference without spaces, tabs and carriage returns, for pattern checks.
std::string squeezed(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != ' ' && c != '\t' && c != '\r') out.push_back(c);
  return out;
}

bool has(const std::string& r, std::string_view what) { return r.find(what) != std::string::npos; }

bool has_all(const std::string& r, std::initializer_list<std::string_view> parts) {
  for (auto p : parts)
    if (!has(r, p)) return false;
  return true;
}

// A reference constant that must be a positive integer.
Result<std::optional<std::int64_t>> int_constant(const Definition& d, std::string_view name) {
  auto v = reference_constant(d, name);
  if (!v) return std::optional<std::int64_t>();
  if (!(*v >= 1) || *v != std::floor(*v) || *v > 1e9)
    return make_error(Code::unsupported, fmt::format("moe: the reference's {} = {} is not a positive integer", name, *v));
  return std::optional<std::int64_t>(static_cast<std::int64_t>(*v));
}

bool float_dtype(DType t) { return t == DType::float32 || t == DType::float16 || t == DType::bfloat16; }

std::optional<double> scalar_number(const InputView& v) {
  if (!v.scalar) return std::nullopt;
  return std::visit([](auto x) { return static_cast<double>(x); }, *v.scalar);
}

}  // namespace

Result<Form> read_form(const Definition& d) {
  auto fail = [&](std::string why) -> Result<Form> { return make_error(Code::unsupported, "moe: " + why); };
  if (d.op_type != "moe") return fail(fmt::format("op_type {} is not moe", d.op_type));
  if (d.outputs.size() != 1 || d.outputs[0].is_scalar() || d.outputs[0].rank() != 2 || !float_dtype(d.outputs[0].dtype))
    return fail("expects one float output [seq_len, hidden_size]");
  const std::string r = squeezed(d.reference);
  Form f;
  f.logits = input_index(d, "routing_logits");
  f.bias = input_index(d, "routing_bias");
  f.topk_ids = input_index(d, "topk_ids");
  f.hidden = input_index(d, "hidden_states");
  f.hidden_scale = input_index(d, "hidden_states_scale");
  f.w13 = input_index(d, "gemm1_weights");
  f.w13_scale = input_index(d, "gemm1_weights_scale");
  f.w2 = input_index(d, "gemm2_weights");
  f.w2_scale = input_index(d, "gemm2_weights_scale");
  f.up_scale = input_index(d, "output1_scales_scalar");
  f.gate_scale = input_index(d, "output1_scales_gate_scalar");
  f.out_scale = input_index(d, "output2_scales_scalar");
  f.local_offset = input_index(d, "local_expert_offset");
  f.scaling_factor = input_index(d, "routed_scaling_factor");
  if (!f.hidden || !f.w13 || !f.w2) return fail("expects inputs hidden_states, gemm1_weights and gemm2_weights");

  // SwiGLU with the first half of GEMM1 as the multiplier and silu of the second half.
  bool swiglu = (has_all(r, {"up,gate=g1[:,:I],g1[:,I:]", "silu(gate)*up"})) ||
                (has_all(r, {"act=g1[:,:I]", "gate=g1[:,I:]", "silu(gate)*act"})) ||
                (has_all(r, {"X1=G1[:,:I]", "X2=G1[:,I:]", "silu_X2=X2/(1.0+torch.exp(-X2))", "C=silu_X2*X1"}));
  if (!swiglu) return fail("the reference's activation is not recognisably silu(g1[:, I:]) * g1[:, :I]");

  // Routing.
  if (f.topk_ids) {
    if (!has_all(r, {">>16", "&0xFFFF", "view(torch.bfloat16)"}))
      return fail("topk_ids is not unpacked as expert = id >> 16, weight = bfloat16 bits id & 0xFFFF");
    f.routing = Routing::packed;
  } else if (!f.logits) {
    return fail("expects routing_logits or topk_ids");
  } else if (has(r, "s_with_bias=s+bias")) {
    if (!f.bias || !f.scaling_factor) return fail("DeepSeek routing needs routing_bias and routed_scaling_factor");
    if (!has_all(r, {"weights=s*M", "*routed_scaling_factor"}))
      return fail("DeepSeek routing: the weights are not recognisably s * mask normalized and scaled");
    f.routing = Routing::deepseek;
    auto ng = int_constant(d, "N_GROUP");
    auto kg = int_constant(d, "TOPK_GROUP");
    if (!ng) return ng.error();
    if (!kg) return kg.error();
    if (ng->has_value() != kg->has_value()) return fail("the reference sets only one of N_GROUP and TOPK_GROUP");
    if (ng->has_value()) {
      f.n_group = **ng;
      f.topk_group = **kg;
      if (f.topk_group > f.n_group) return fail("TOPK_GROUP exceeds N_GROUP");
      if (!has_all(r, {"topk(s_wb_grouped,k=2", "group_scores=top2_vals.sum("}))
        return fail("group scores are not recognisably the sum of each group's two best");
    } else if (has(r, "group_mask")) {
      return fail("the reference selects groups but sets no N_GROUP / TOPK_GROUP constants");
    }
    if (has(r, ".clamp(min=1e-20)")) f.clamp_weight_sum = true;
    else if (!has(r, "+1e-20")) return fail("DeepSeek routing: the weight sum's guard is neither + 1e-20 nor clamp(min=1e-20)");
  } else if (has(r, "torch.softmax(topk_logits")) {
    f.routing = Routing::renormalize;
  } else if (has_all(r, {"torch.sigmoid(routing_logits.to(torch.float32))", "topk_weights,topk_idx=torch.topk(scores"})) {
    f.routing = Routing::sigmoid_top_k;
  } else {
    return fail("the routing is none of DeepSeek, top-k + softmax, sigmoid top-k or pre-routed topk_ids");
  }

  // Where the routing weight applies.
  if (has(r, "[tok_idx]*w")) f.weight_on_input = true;
  else if (!(has(r, "o*w_tok") || has(r, "O*w_tok") || has(r, ".t())*w")))
    return fail("the reference applies the routing weight neither to the expert's input nor to its output");

  // Weights and their scales.
  if (f.hidden_scale || f.w13_scale || f.w2_scale) {
    if (!f.hidden_scale || !f.w13_scale || !f.w2_scale)
      return fail("block scales need hidden_states_scale, gemm1_weights_scale and gemm2_weights_scale together");
    auto b = int_constant(d, "BLOCK");
    if (!b) return b.error();
    if (!b->has_value()) return fail("block-scaled weights but the reference sets no BLOCK constant");
    f.block = **b;
    f.weights = Weights::fp8_block;
  } else if (f.up_scale || f.gate_scale || f.out_scale) {
    if (!f.up_scale || !f.gate_scale || !f.out_scale)
      return fail("per-expert scales need output1_scales_scalar, output1_scales_gate_scalar and output2_scales_scalar");
    if (!has_all(r, {"*output1_scales_scalar[e]", "*output1_scales_gate_scalar[e]", "*output2_scales_scalar[e]"}))
      return fail("the per-expert scales are not applied as act * s1[e], gate * s1_gate[e], o * s2[e]");
    f.weights = Weights::per_expert;
  }

  // TOP_K: the reference's constant and the top_k axis, either; where both are given they must
  // agree (top_k need not size any tensor, so a definition whose axis was changed without its
  // reference would otherwise be computed with the other value).
  auto k = int_constant(d, "TOP_K");
  if (!k) return k.error();
  const Axis* axis = d.find_axis("top_k");
  if (axis && axis->kind != AxisKind::const_) axis = nullptr;
  if (axis && axis->value < 1) return fail(fmt::format("the const axis top_k = {} is not positive", axis->value));
  if (k->has_value() && axis && **k != axis->value)
    return fail(fmt::format("the reference's TOP_K = {} and the const axis top_k = {} disagree", **k, axis->value));
  if (k->has_value()) f.top_k = **k;
  else if (axis) f.top_k = axis->value;
  else return fail("the reference sets no TOP_K constant and the definition no const top_k axis");
  return f;
}

Result<Sizes> read_sizes(const Definition& d, const Form& f, std::span<const Arg> in) {
  std::vector<InputView> views(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    views[i].scalar = in[i].scalar;
    if (const Tensor* t = in[i].tensor) {
      views[i].is_tensor = true;
      views[i].dtype = t->dtype();
      views[i].shape = t->shape();
    }
  }
  return read_sizes(d, f, views);
}

Result<Sizes> read_sizes(const Definition& d, const Form& f, std::span<const InputView> in) {
  auto fail = [&](std::string why) -> Result<Sizes> {
    return make_error(Code::invalid_argument, fmt::format("{}: moe: {}", d.name, why));
  };
  if (in.size() != d.inputs.size()) return fail("wrong number of inputs");
  auto tensor = [&](std::optional<std::size_t> i) -> const InputView* { return i && in[*i].is_tensor ? &in[*i] : nullptr; };
  auto shape_is = [](const InputView* t, std::initializer_list<std::int64_t> s) {
    return t && t->shape == std::vector<std::int64_t>(s);
  };
  const InputView* x = tensor(f.hidden);
  const InputView* w13 = tensor(f.w13);
  const InputView* w2 = tensor(f.w2);
  if (!x || !w13 || !w2 || x->shape.size() != 2 || w13->shape.size() != 3 || w2->shape.size() != 3)
    return fail("hidden_states [T, H], gemm1_weights [E, 2I, H] and gemm2_weights [E, H, I] must be tensors");
  Sizes s;
  s.tokens = x->shape[0];
  s.hidden = x->shape[1];
  s.local_experts = w13->shape[0];
  s.inter = w2->shape[2];
  if (w13->shape[1] != 2 * s.inter || w13->shape[2] != s.hidden || !shape_is(w2, {s.local_experts, s.hidden, s.inter}))
    return fail(fmt::format("gemm1_weights [{}] and gemm2_weights [{}] do not fit hidden_states [{}]",
                            fmt::join(w13->shape, ", "), fmt::join(w2->shape, ", "), fmt::join(x->shape, ", ")));
  for (const InputView* t : {x, w13, w2})
    if (!float_dtype(t->dtype) && t->dtype != DType::float8_e4m3fn && t->dtype != DType::float8_e5m2)
      return fail(fmt::format("{} activations or weights are not supported", dtype_name(t->dtype)));

  if (f.routing == Routing::packed) {
    const InputView* ids = tensor(f.topk_ids);
    if (!ids || ids->dtype != DType::int32 || !shape_is(ids, {s.tokens, f.top_k}))
      return fail(fmt::format("topk_ids must be int32 [{}, {}]", s.tokens, f.top_k));
    s.routed_experts = s.local_experts;
  } else {
    const InputView* logits = tensor(f.logits);
    if (!logits || logits->shape.size() != 2 || logits->shape[0] != s.tokens || !float_dtype(logits->dtype))
      return fail(fmt::format("routing_logits must be a float tensor [{}, num_experts]", s.tokens));
    s.routed_experts = logits->shape[1];
    if (f.top_k > s.routed_experts) return fail(fmt::format("top_k {} exceeds {} experts", f.top_k, s.routed_experts));
  }
  if (f.routing == Routing::deepseek) {
    const InputView* bias = tensor(f.bias);
    if (!bias || !shape_is(bias, {s.routed_experts}) || !float_dtype(bias->dtype))
      return fail(fmt::format("routing_bias must hold {} floats", s.routed_experts));
    if (s.routed_experts % f.n_group != 0) return fail(fmt::format("{} experts do not split into {} groups", s.routed_experts, f.n_group));
    std::int64_t group = s.routed_experts / f.n_group;
    if (f.n_group > 1 && group < 2) return fail("groups are scored by their two best experts: each needs at least 2");
    if (f.topk_group * group < f.top_k)
      return fail(fmt::format("{} kept groups of {} experts cannot hold top_k {}", f.topk_group, group, f.top_k));
    auto rsf = f.scaling_factor ? scalar_number(in[*f.scaling_factor]) : std::nullopt;
    if (!rsf) return fail("routed_scaling_factor must be a scalar");
    s.scaling_factor = *rsf;
  } else if (s.routed_experts != s.local_experts && !f.local_offset) {
    return fail(fmt::format("routing picks among {} experts but the weights hold {}", s.routed_experts, s.local_experts));
  }
  if (f.local_offset) {
    auto off = scalar_number(in[*f.local_offset]);
    if (!off || *off != std::floor(*off)) return fail("local_expert_offset must be an integer scalar");
    s.local_offset = static_cast<std::int64_t>(*off);
  }

  if (f.weights == Weights::fp8_block) {
    const std::int64_t b = f.block;
    if (s.hidden % b || s.inter % b)
      return fail(fmt::format("hidden {} and intermediate {} must be multiples of BLOCK {}", s.hidden, s.inter, b));
    const std::int64_t hb = s.hidden / b, ib = s.inter / b;
    if (!shape_is(tensor(f.hidden_scale), {hb, s.tokens}) ||
        !shape_is(tensor(f.w13_scale), {s.local_experts, 2 * ib, hb}) ||
        !shape_is(tensor(f.w2_scale), {s.local_experts, hb, ib}))
      return fail(fmt::format("block scales must be [{}, {}], [{}, {}, {}] and [{}, {}, {}]", hb, s.tokens,
                              s.local_experts, 2 * ib, hb, s.local_experts, hb, ib));
    for (auto i : {f.hidden_scale, f.w13_scale, f.w2_scale})
      if (!float_dtype(tensor(i)->dtype)) return fail("block scales must be float tensors");
  } else if (f.weights == Weights::per_expert) {
    for (auto i : {f.up_scale, f.gate_scale, f.out_scale})
      if (!shape_is(tensor(i), {s.local_experts}) || !float_dtype(tensor(i)->dtype))
        return fail(fmt::format("per-expert scales must be float [{}]", s.local_experts));
  }
  return s;
}

}  // namespace kb::kernels::moe
