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

using moe::Choice;
using moe::Form;
using moe::Routing;
using moe::row_as_float;
using moe::Sizes;
using moe::Weights;

float scalar_of(const Tensor& t, std::int64_t i) {
  float v;
  row_as_float(t, i, 1, &v);
  return v;
}

struct Routed {
  std::int64_t token;
  double weight;
};

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
    for (const Choice& c : moe::route(f, s, in, t)) {
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
