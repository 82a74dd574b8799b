// kb_cpu_moe: every MoE form (kernels/moe/form.hpp) on the CPU, token by
// token: route the token, then run each chosen local expert on it alone
// (each weight row dequantized as it is read: converted, times its block
// scales; GEMM1, SwiGLU, GEMM2)
// with float32 accumulation in eight lanes. Independent of the oracle, which
// groups tokens per expert and accumulates in double; only the reading of the
// definition (form.cpp) is shared.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>
#include <vector>

#include "form.hpp"
#include "harness/implementation.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels {
namespace {

using moe::Form;
using moe::Routing;
using moe::Weights;

float value_at(const Tensor& t, std::int64_t i) {
  switch (t.dtype()) {
    case DType::float32: return t.data<float>()[i];
    case DType::bfloat16: return bf16_to_float(t.data<std::uint16_t>()[i]);
    case DType::float16: return half_to_float(t.data<std::uint16_t>()[i]);
    case DType::float8_e4m3fn: return fp8_e4m3fn_to_float(t.data<std::uint8_t>()[i]);
    case DType::float8_e5m2: return fp8_e5m2_to_float(t.data<std::uint8_t>()[i]);
    default: return static_cast<float>(element_as_double(t, i));
  }
}

// A weight row's n values times their block scales: element j by scales[first + j / block].
void scale_blocks(float* row, std::int64_t n, std::int64_t block, const Tensor& scales, std::int64_t first) {
  for (std::int64_t j0 = 0; j0 < n; j0 += block) {
    const float s = value_at(scales, first + j0 / block);
    for (std::int64_t j = j0; j < std::min(n, j0 + block); ++j) row[j] *= s;
  }
}

float dot(const float* a, const float* b, std::int64_t n) {
  float lane[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) lane[l] += a[i + l] * b[i + l];
  float s = 0;
  for (; i < n; ++i) s += a[i] * b[i];
  for (float v : lane) s += v;
  return s;
}

// Indices of the k largest of v restricted to `allowed` (ties: lower index first).
std::vector<std::int64_t> best(const std::vector<float>& v, const std::vector<bool>& allowed, std::int64_t k) {
  std::vector<std::int64_t> out;
  std::vector<bool> taken(v.size(), false);
  for (std::int64_t round = 0; round < k; ++round) {
    std::int64_t pick = -1;
    for (std::size_t e = 0; e < v.size(); ++e)
      if (allowed[e] && !taken[e] && (pick < 0 || v[e] > v[static_cast<std::size_t>(pick)])) pick = static_cast<std::int64_t>(e);
    if (pick < 0) break;
    taken[static_cast<std::size_t>(pick)] = true;
    out.push_back(pick);
  }
  return out;
}

Status run(const ImplementationCall& c) {
  const Definition& d = c.definition;
  auto form = moe::read_form(d);
  if (!form) return form.error();
  const Form& f = *form;
  auto sizes = moe::read_sizes(d, f, c.inputs);
  if (!sizes) return sizes.error();
  const std::int64_t T = sizes->tokens, H = sizes->hidden, I = sizes->inter, E = sizes->routed_experts;
  const std::int64_t EL = sizes->local_experts, K = f.top_k, B = f.block;
  const auto& in = c.inputs;
  auto t_of = [&](std::optional<std::size_t> i) -> const Tensor& { return *in[*i].tensor; };
  const Tensor& x = t_of(f.hidden);
  const Tensor& w13 = t_of(f.w13);
  const Tensor& w2 = t_of(f.w2);
  const bool blocks = f.weights == Weights::fp8_block;

  std::vector<float> out(static_cast<std::size_t>(T * H), 0.0f);
  std::vector<float> xt(static_cast<std::size_t>(H)), xin(static_cast<std::size_t>(H)), row(static_cast<std::size_t>(std::max(H, I)));
  std::vector<float> h1(static_cast<std::size_t>(2 * I)), act(static_cast<std::size_t>(I));
  for (std::int64_t t = 0; t < T; ++t) {
    // This token's experts (global ids) and weights.
    std::vector<std::int64_t> ids;
    std::vector<float> wts;
    if (f.routing == Routing::packed) {
      for (std::int64_t k = 0; k < K; ++k) {
        const std::uint32_t packed = static_cast<std::uint32_t>(t_of(f.topk_ids).data<std::int32_t>()[t * K + k]);
        ids.push_back(static_cast<std::int16_t>(static_cast<std::uint16_t>(packed >> 16)));
        wts.push_back(bf16_to_float(static_cast<std::uint16_t>(packed & 0xFFFFu)));
      }
    } else {
      std::vector<float> logit(static_cast<std::size_t>(E));
      for (std::int64_t e = 0; e < E; ++e) logit[static_cast<std::size_t>(e)] = value_at(t_of(f.logits), t * E + e);
      std::vector<bool> all(static_cast<std::size_t>(E), true);
      if (f.routing == Routing::renormalize) {
        ids = best(logit, all, K);
        float top = logit[static_cast<std::size_t>(ids[0])], z = 0;
        for (auto e : ids) z += std::exp(logit[static_cast<std::size_t>(e)] - top);
        for (auto e : ids) wts.push_back(std::exp(logit[static_cast<std::size_t>(e)] - top) / z);
      } else {
        std::vector<float> s(static_cast<std::size_t>(E)), sb(static_cast<std::size_t>(E));
        for (std::int64_t e = 0; e < E; ++e) s[static_cast<std::size_t>(e)] = 1.0f / (1.0f + std::exp(-logit[static_cast<std::size_t>(e)]));
        if (f.routing == Routing::sigmoid_top_k) {
          ids = best(s, all, K);
          for (auto e : ids) wts.push_back(s[static_cast<std::size_t>(e)]);
        } else {
          for (std::int64_t e = 0; e < E; ++e) sb[static_cast<std::size_t>(e)] = s[static_cast<std::size_t>(e)] + value_at(t_of(f.bias), e);
          std::vector<bool> allowed(static_cast<std::size_t>(E), f.n_group == 1);
          if (f.n_group > 1) {
            const std::int64_t gs = E / f.n_group;
            std::vector<float> score(static_cast<std::size_t>(f.n_group));
            for (std::int64_t g = 0; g < f.n_group; ++g) {
              std::vector<bool> in_group(static_cast<std::size_t>(E), false);
              for (std::int64_t e = g * gs; e < (g + 1) * gs; ++e) in_group[static_cast<std::size_t>(e)] = true;
              auto two = best(sb, in_group, 2);
              score[static_cast<std::size_t>(g)] = sb[static_cast<std::size_t>(two[0])] + sb[static_cast<std::size_t>(two[1])];
            }
            for (auto g : best(score, std::vector<bool>(static_cast<std::size_t>(f.n_group), true), f.topk_group))
              for (std::int64_t e = g * gs; e < (g + 1) * gs; ++e) allowed[static_cast<std::size_t>(e)] = true;
          }
          ids = best(sb, allowed, K);
          float sum = 0;
          for (auto e : ids) sum += s[static_cast<std::size_t>(e)];
          sum = f.clamp_weight_sum ? std::max(sum, 1e-20f) : sum + 1e-20f;
          for (auto e : ids) wts.push_back(s[static_cast<std::size_t>(e)] / sum * static_cast<float>(sizes->scaling_factor));
        }
      }
    }
    for (std::int64_t h = 0; h < H; ++h) {
      xt[static_cast<std::size_t>(h)] = value_at(x, t * H + h);
      if (blocks) xt[static_cast<std::size_t>(h)] *= value_at(t_of(f.hidden_scale), (h / B) * T + t);
    }
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const std::int64_t e = ids[k] - sizes->local_offset;
      if (e < 0 || e >= EL) continue;
      for (std::int64_t h = 0; h < H; ++h) xin[static_cast<std::size_t>(h)] = f.weight_on_input ? xt[static_cast<std::size_t>(h)] * wts[k] : xt[static_cast<std::size_t>(h)];
      for (std::int64_t r = 0; r < 2 * I; ++r) {
        to_float_range(w13, (e * 2 * I + r) * H, std::span(row.data(), static_cast<std::size_t>(H)));
        if (blocks) scale_blocks(row.data(), H, B, t_of(f.w13_scale), (e * (2 * I / B) + r / B) * (H / B));
        h1[static_cast<std::size_t>(r)] = dot(xin.data(), row.data(), H);
      }
      const bool scaled = f.weights == Weights::per_expert;
      const float su = scaled ? value_at(t_of(f.up_scale), e) : 1.0f, sg = scaled ? value_at(t_of(f.gate_scale), e) : 1.0f;
      const float so = scaled ? value_at(t_of(f.out_scale), e) : 1.0f;
      for (std::int64_t i = 0; i < I; ++i) {
        float g = h1[static_cast<std::size_t>(I + i)] * sg;
        act[static_cast<std::size_t>(i)] = g / (1.0f + std::exp(-g)) * (h1[static_cast<std::size_t>(i)] * su);
      }
      const float wo = f.weight_on_input ? 1.0f : wts[k];
      for (std::int64_t h = 0; h < H; ++h) {
        to_float_range(w2, (e * H + h) * I, std::span(row.data(), static_cast<std::size_t>(I)));
        if (blocks) scale_blocks(row.data(), I, B, t_of(f.w2_scale), (e * (H / B) + h / B) * (I / B));
        out[static_cast<std::size_t>(t * H + h)] += dot(act.data(), row.data(), I) * so * wo;
      }
    }
  }
  return store_float(out, c.outputs[0]);
}

}  // namespace

void add_moe_cpu(Registry& r) {
  Implementation impl;
  impl.name = "kb_cpu_moe";
  impl.author = "kb";
  impl.device = Device::cpu;
  impl.description = "MoE (every routing and weight form) on the CPU, token by token, fp32 accumulation";
  impl.supports = [](const Definition& d) -> std::string {
    auto f = moe::read_form(d);
    return f ? std::string() : f.error().message;
  };
  impl.run = run;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
