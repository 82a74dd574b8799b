// CPU oracle for op_type "moe": every form of kernels/moe/form.hpp, faithful
// to each definition's PyTorch reference.
//
// Precision. Routing follows the reference's float32 steps (sigmoid, s + bias,
// group scores, the masked top-k) because choosing experts is discrete: a
// different rounding there could pick a different expert. Ties pick the lower
// expert index. Dequantization is the reference's single float32 multiply
// (fp8 value * its block's scale, hidden_states likewise). From there on
// everything is double: each product of two float32 values is exact in double
// and the sums over H and I (up to 7168 and 8192 terms) accumulate in double,
// so the result differs from the exact value of the reference's formula by far
// less than the reference's own float32 rounding; it is rounded once, to
// float32 and then to the output dtype.
//
// Work is grouped per local expert: each row of an expert's W13 and W2 is
// dequantized once and applied to every token routed there. Rows are split
// over threads; each output element has one fixed summation order whatever
// the thread count.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

#include "form.hpp"
#include "oracle/oracle.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels {
namespace {

using moe::Form;
using moe::Routing;
using moe::Sizes;
using moe::Weights;

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

float scalar_of(const Tensor& t, std::int64_t i) {
  float v;
  row_as_float(t, i, 1, &v);
  return v;
}

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

struct Choice {
  std::int64_t expert;  // global id
  double weight;
};

struct Routed {
  std::int64_t token;
  double weight;
};

// The top_k (expert, weight) pairs of token t.
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

// Runs body(begin, end) over [0, n) split across threads when the work is big.
template <class Body>
void parallel_rows(std::int64_t n, double work, Body body) {
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  std::int64_t threads = work < 4e6 ? 1 : std::min<std::int64_t>(hw, n);
  if (threads <= 1) {
    body(std::int64_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  std::int64_t launched = 0;
  auto range = [&](std::int64_t t) { body(n * t / threads, n * (t + 1) / threads); };
  try {
    for (; launched < threads; ++launched) pool.emplace_back(range, launched);
  } catch (const std::system_error&) {
    // No more threads: this one does the ranges not handed out.
  }
  for (std::int64_t t = launched; t < threads; ++t) range(t);
  for (auto& th : pool) th.join();
}

std::string supports(const Definition& d) {
  auto f = moe::read_form(d);
  return f ? std::string() : f.error().message;
}

Status run_checked(const OracleCall& call) {
  const Definition& d = call.definition;
  auto form = moe::read_form(d);
  if (!form) return make_error(Code::unsupported, d.name + ": " + form.error().message);
  const Form& f = *form;
  auto sizes = moe::read_sizes(d, f, call.inputs);
  if (!sizes) return sizes.error();
  const Sizes& s = *sizes;
  if (call.outputs.size() != 1 || call.outputs[0].shape() != std::vector<std::int64_t>{s.tokens, s.hidden})
    return make_error(Code::invalid_argument, fmt::format("{}: moe oracle: output must be [{}, {}]", d.name, s.tokens, s.hidden));
  const std::int64_t T = s.tokens, H = s.hidden, I = s.inter, B = f.block;
  const auto& in = call.inputs;
  const Tensor& x_t = *in[*f.hidden].tensor;
  const Tensor& w13 = *in[*f.w13].tensor;
  const Tensor& w2 = *in[*f.w2].tensor;

  // Activations in float32 as the reference has them (dequantized for fp8 blocks).
  std::vector<float> x(static_cast<std::size_t>(T * H));
  for (std::int64_t t = 0; t < T; ++t) row_as_float(x_t, t * H, H, x.data() + t * H);
  if (f.weights == Weights::fp8_block) {
    const Tensor& xs = *in[*f.hidden_scale].tensor;  // [H / B, T]
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t h = 0; h < H; ++h) x[static_cast<std::size_t>(t * H + h)] *= scalar_of(xs, (h / B) * T + t);
  }

  // Tokens routed to each local expert, with their weights.
  std::vector<std::vector<Routed>> routed(static_cast<std::size_t>(s.local_experts));
  for (std::int64_t t = 0; t < T; ++t)
    for (const Choice& c : route(f, s, in, t)) {
      std::int64_t le = c.expert - s.local_offset;
      if (le >= 0 && le < s.local_experts) routed[static_cast<std::size_t>(le)].push_back({t, c.weight});
    }

  std::vector<double> acc(static_cast<std::size_t>(T * H), 0.0);
  for (std::int64_t e = 0; e < s.local_experts; ++e) {
    const auto& tokens = routed[static_cast<std::size_t>(e)];
    if (tokens.empty()) continue;
    const auto n = static_cast<std::int64_t>(tokens.size());
    // Expert inputs: the token's activations, times its weight (in float32, as the reference) when it applies there.
    std::vector<double> xe(static_cast<std::size_t>(n * H));
    for (std::int64_t j = 0; j < n; ++j) {
      const float w = static_cast<float>(tokens[static_cast<std::size_t>(j)].weight);
      const float* row = x.data() + tokens[static_cast<std::size_t>(j)].token * H;
      for (std::int64_t h = 0; h < H; ++h)
        xe[static_cast<std::size_t>(j * H + h)] = f.weight_on_input ? static_cast<double>(row[h] * w) : row[h];
    }
    // GEMM1: g1 [n, 2I].
    std::vector<double> g1(static_cast<std::size_t>(n * 2 * I));
    parallel_rows(2 * I, static_cast<double>(n) * 2 * I * H, [&](std::int64_t r0, std::int64_t r1) {
      std::vector<float> wf(static_cast<std::size_t>(H));
      std::vector<double> wd(static_cast<std::size_t>(H));
      for (std::int64_t r = r0; r < r1; ++r) {
        row_as_float(w13, (e * 2 * I + r) * H, H, wf.data());
        if (f.weights == Weights::fp8_block) {
          const Tensor& sc = *in[*f.w13_scale].tensor;  // [E, 2I / B, H / B]
          const std::int64_t hb = H / B;
          for (std::int64_t h = 0; h < H; ++h) wf[static_cast<std::size_t>(h)] *= scalar_of(sc, (e * (2 * I / B) + r / B) * hb + h / B);
        }
        for (std::int64_t h = 0; h < H; ++h) wd[static_cast<std::size_t>(h)] = wf[static_cast<std::size_t>(h)];
        for (std::int64_t j = 0; j < n; ++j) {
          const double* a = xe.data() + j * H;
          double sum = 0;
          for (std::int64_t h = 0; h < H; ++h) sum += a[h] * wd[static_cast<std::size_t>(h)];
          g1[static_cast<std::size_t>(j * 2 * I + r)] = sum;
        }
      }
    });
    // SwiGLU: c = silu(gate) * up, gate the second half.
    double up_scale = 1, gate_scale = 1, out_scale = 1;
    if (f.weights == Weights::per_expert) {
      up_scale = scalar_of(*in[*f.up_scale].tensor, e);
      gate_scale = scalar_of(*in[*f.gate_scale].tensor, e);
      out_scale = scalar_of(*in[*f.out_scale].tensor, e);
    }
    std::vector<double> c(static_cast<std::size_t>(n * I));
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < I; ++i) {
        double up = g1[static_cast<std::size_t>(j * 2 * I + i)] * up_scale;
        double gate = g1[static_cast<std::size_t>(j * 2 * I + I + i)] * gate_scale;
        c[static_cast<std::size_t>(j * I + i)] = gate / (1.0 + std::exp(-gate)) * up;
      }
    // GEMM2 and the weighted sum into each token's row.
    parallel_rows(H, static_cast<double>(n) * H * I, [&](std::int64_t r0, std::int64_t r1) {
      std::vector<float> wf(static_cast<std::size_t>(I));
      std::vector<double> wd(static_cast<std::size_t>(I));
      for (std::int64_t r = r0; r < r1; ++r) {
        row_as_float(w2, (e * H + r) * I, I, wf.data());
        if (f.weights == Weights::fp8_block) {
          const Tensor& sc = *in[*f.w2_scale].tensor;  // [E, H / B, I / B]
          const std::int64_t ib = I / B;
          for (std::int64_t i = 0; i < I; ++i) wf[static_cast<std::size_t>(i)] *= scalar_of(sc, (e * (H / B) + r / B) * ib + i / B);
        }
        for (std::int64_t i = 0; i < I; ++i) wd[static_cast<std::size_t>(i)] = wf[static_cast<std::size_t>(i)];
        for (std::int64_t j = 0; j < n; ++j) {
          const double* a = c.data() + j * I;
          double sum = 0;
          for (std::int64_t i = 0; i < I; ++i) sum += a[i] * wd[static_cast<std::size_t>(i)];
          sum *= out_scale;
          const Routed& tok = tokens[static_cast<std::size_t>(j)];
          if (!f.weight_on_input) sum *= tok.weight;
          acc[static_cast<std::size_t>(tok.token * H + r)] += sum;
        }
      }
    });
  }
  std::vector<float> out(acc.size());
  for (std::size_t i = 0; i < acc.size(); ++i) out[i] = static_cast<float>(acc[i]);
  return store_float(out, call.outputs[0]);
}

Status run(const OracleCall& call) {
  try {
    return run_checked(call);
  } catch (const std::bad_alloc&) {
    return make_error(Code::out_of_memory, call.definition.name + ": moe oracle: out of memory");
  }
}

}  // namespace
extern const OracleEntry moe_oracle{"moe", "moe (routing, fp8 block / per-expert scales, SwiGLU experts)", supports, run};
}  // namespace kb::kernels
