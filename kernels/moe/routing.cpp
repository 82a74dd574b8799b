// The routing of the MoE oracle (CPU and GPU) and of the cost model (lib/oracle's
// moe_expert_choices): kernels/moe/form.hpp's route(), following the reference's float32 steps;
// ties pick the lower expert index.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include <fmt/format.h>

#include "form.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels::moe {

// Elements [begin, begin + n) of a float or fp8 tensor as float32.
void row_as_float(const Tensor& t, std::int64_t begin, std::int64_t n, float* out) {
  switch (t.dtype()) {
    case DType::float32: std::memcpy(out, t.data<float>() + begin, static_cast<std::size_t>(n) * 4); return;
    case DType::bfloat16: {
      const std::uint16_t* p = t.data<std::uint16_t>() + begin;
      for (std::int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(p[i]);
      return;
    }
    case DType::float16: {
      const std::uint16_t* p = t.data<std::uint16_t>() + begin;
      for (std::int64_t i = 0; i < n; ++i) out[i] = half_to_float(p[i]);
      return;
    }
    case DType::float8_e4m3fn: {
      static const auto table = [] {
        std::vector<float> v(256);
        for (int i = 0; i < 256; ++i) v[static_cast<std::size_t>(i)] = fp8_e4m3fn_to_float(static_cast<std::uint8_t>(i));
        return v;
      }();
      const std::uint8_t* p = t.data<std::uint8_t>() + begin;
      for (std::int64_t i = 0; i < n; ++i) out[i] = table[p[i]];
      return;
    }
    default:
      for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(element_as_double(t, begin + i));
  }
}

namespace {

// The k best of `score` among `candidates` (higher first, the lower index on ties).
std::vector<std::int64_t> top_k(const std::vector<float>& score, std::vector<std::int64_t> candidates, std::int64_t k) {
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](std::int64_t a, std::int64_t b) { return score[static_cast<std::size_t>(a)] > score[static_cast<std::size_t>(b)]; });
  candidates.resize(static_cast<std::size_t>(k));
  return candidates;
}

std::vector<std::int64_t> iota(std::int64_t n) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return v;
}

}  // namespace

std::vector<Choice> route(const Form& f, const Sizes& s, std::span<const Arg> in, std::int64_t t) {
  const std::int64_t E = s.routed_experts, K = f.top_k;
  std::vector<Choice> out;
  if (f.routing == Routing::packed) {
    const std::int32_t* ids = in[*f.topk_ids].tensor->data<std::int32_t>() + t * K;
    for (std::int64_t k = 0; k < K; ++k) {
      auto expert = static_cast<std::int16_t>(ids[k] >> 16);
      auto bits = static_cast<std::uint16_t>(static_cast<std::uint32_t>(ids[k]) & 0xFFFFu);
      out.push_back({expert, bf16_to_float(bits)});
    }
    return out;
  }
  std::vector<float> logits(static_cast<std::size_t>(E));
  row_as_float(*in[*f.logits].tensor, t * E, E, logits.data());
  if (f.routing == Routing::renormalize) {
    auto idx = top_k(logits, iota(E), K);
    double mx = logits[static_cast<std::size_t>(idx[0])], sum = 0;
    for (auto e : idx) sum += std::exp(static_cast<double>(logits[static_cast<std::size_t>(e)]) - mx);
    for (auto e : idx) out.push_back({e, std::exp(static_cast<double>(logits[static_cast<std::size_t>(e)]) - mx) / sum});
    return out;
  }
  std::vector<float> sig(static_cast<std::size_t>(E));
  for (std::int64_t e = 0; e < E; ++e) sig[static_cast<std::size_t>(e)] = 1.0f / (1.0f + std::exp(-logits[static_cast<std::size_t>(e)]));
  if (f.routing == Routing::sigmoid_top_k) {
    for (auto e : top_k(sig, iota(E), K)) out.push_back({e, sig[static_cast<std::size_t>(e)]});
    return out;
  }
  // DeepSeek: choose with s + bias, weigh with s.
  std::vector<float> biased(static_cast<std::size_t>(E));
  std::vector<float> bias(static_cast<std::size_t>(E));
  row_as_float(*in[*f.bias].tensor, 0, E, bias.data());
  for (std::int64_t e = 0; e < E; ++e) biased[static_cast<std::size_t>(e)] = sig[static_cast<std::size_t>(e)] + bias[static_cast<std::size_t>(e)];
  std::vector<std::int64_t> candidates;
  if (f.n_group == 1) {
    candidates = iota(E);
  } else {
    const std::int64_t group = E / f.n_group;
    std::vector<float> group_score(static_cast<std::size_t>(f.n_group));
    for (std::int64_t g = 0; g < f.n_group; ++g) {
      std::vector<float> v(biased.begin() + g * group, biased.begin() + (g + 1) * group);
      std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<float>());
      group_score[static_cast<std::size_t>(g)] = v[0] + v[1];
    }
    auto kept = top_k(group_score, iota(f.n_group), f.topk_group);
    std::sort(kept.begin(), kept.end());
    for (auto g : kept)
      for (std::int64_t e = g * group; e < (g + 1) * group; ++e) candidates.push_back(e);
  }
  auto idx = top_k(biased, candidates, K);
  double sum = 0;
  for (auto e : idx) sum += sig[static_cast<std::size_t>(e)];
  sum = f.clamp_weight_sum ? std::max(sum, 1e-20) : sum + 1e-20;
  for (auto e : idx) out.push_back({e, sig[static_cast<std::size_t>(e)] / sum * s.scaling_factor});
  return out;
}

}  // namespace kb::kernels::moe

namespace kb::kernels {

// lib/oracle's moe_expert_choices: the cost model's view of this routing.
Result<ExpertChoices> moe_expert_choices(const Definition& d, std::span<const Arg> inputs) {
  auto f = moe::read_form(d);
  if (!f) return f.error();
  if (f->routing == moe::Routing::packed)
    return make_error(Code::unsupported, d.name + ": moe: the routing is an input (topk_ids), not computed by the call");
  auto s = moe::read_sizes(d, *f, inputs);
  if (!s) return s.error();
  for (auto i : {f->logits, f->bias})
    if (i && (!inputs[*i].tensor || inputs[*i].tensor->empty_storage()))
      return make_error(Code::invalid_argument, fmt::format("{}: moe: input \"{}\" holds no values", d.name, d.inputs[*i].name));
  ExpertChoices c;
  c.tokens = s->tokens;
  c.top_k = f->top_k;
  c.local_offset = s->local_offset;
  c.local_experts = s->local_experts;
  c.experts.reserve(static_cast<std::size_t>(s->tokens * f->top_k));
  for (std::int64_t t = 0; t < s->tokens; ++t)
    for (const moe::Choice& ch : moe::route(*f, *s, inputs, t)) c.experts.push_back(ch.expert);
  return c;
}

}  // namespace kb::kernels
