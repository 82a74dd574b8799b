// kb_cpu_gdn: the gated delta rule on the CPU by the chunked (WY / UT
// transform) formulation, float32 throughout; decode, mtp and prefill are
// all runs of chunks (of up to kChunk tokens) over one sequence's state.
//
// Within a chunk, with log-decays L_t = sum_{i<=t} log g_i (log g is
// -exp(A_log) * softplus(a + dt_bias), so no exp underflows before the
// differences are taken) and S0 the state entering the chunk ([V, K]):
//   S_t = exp(L_t) S0 + sum_{i<=t} exp(L_t - L_i) w_i k_i^T
// where w_i = beta_i (v_i - g_i S_{i-1} k_i) is the value written at step i.
// Substituting S_{t-1} gives the lower-triangular system
//   w_t + beta_t sum_{i<t} exp(L_t - L_i) (k_t . k_i) w_i = beta_t (v_t - exp(L_t) S0 k_t),
// solved by forward substitution; then
//   o_t   = scale (exp(L_t) S0 q_t + sum_{i<=t} exp(L_t - L_i) (k_i . q_t) w_i)
//   S_end = exp(L_C) S0 + sum_i exp(L_C - L_i) w_i k_i^T.
// Independent of the oracle, which runs the token recurrence in double.
#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "harness/implementation.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels {
namespace {

constexpr std::int64_t kChunk = 16;

const Tensor* arg(const ImplementationCall& c, std::string_view name) {
  auto i = input_index(c.definition, name);
  return i ? c.inputs[*i].tensor : nullptr;
}

struct Sizes {
  std::int64_t hq, hk, hv, dk, dv;
};

// Runs tokens [first, first + len) of one sequence, updating S ([HV][V][K]).
void run_sequence(const Sizes& z, float scale, const std::vector<float>& q, const std::vector<float>& k,
                  const std::vector<float>& v, const std::vector<float>& logg, const std::vector<float>& beta,
                  std::int64_t first, std::int64_t len, std::vector<float>& S, std::vector<float>& out) {
  std::vector<float> L(kChunk), kk(kChunk * kChunk), kq(kChunk * kChunk), w(kChunk * z.dv), s0k(z.dv), s0q(z.dv);
  for (std::int64_t h = 0; h < z.hv; ++h) {
    float* Sh = &S[h * z.dv * z.dk];
    const std::int64_t qh = h / (z.hv / z.hq), kh = h / (z.hv / z.hk);
    for (std::int64_t c0 = 0; c0 < len; c0 += kChunk) {
      const std::int64_t C = std::min(kChunk, len - c0);
      auto tok = [&](std::int64_t t) { return first + c0 + t; };
      auto kv = [&](std::int64_t t) { return &k[(tok(t) * z.hk + kh) * z.dk]; };
      auto qv = [&](std::int64_t t) { return &q[(tok(t) * z.hq + qh) * z.dk]; };
      float acc = 0;
      for (std::int64_t t = 0; t < C; ++t) L[t] = acc += logg[tok(t) * z.hv + h];
      for (std::int64_t t = 0; t < C; ++t)
        for (std::int64_t i = 0; i <= t; ++i) {
          float dk = 0, dq = 0;
          for (std::int64_t e = 0; e < z.dk; ++e) {
            dk += kv(t)[e] * kv(i)[e];
            dq += kv(i)[e] * qv(t)[e];
          }
          kk[t * kChunk + i] = dk;
          kq[t * kChunk + i] = dq;
        }
      // Forward substitution for w, and the outputs, token by token.
      for (std::int64_t t = 0; t < C; ++t) {
        const float b = beta[tok(t) * z.hv + h], decay = std::exp(L[t]);
        const float* vt = &v[(tok(t) * z.hv + h) * z.dv];
        for (std::int64_t j = 0; j < z.dv; ++j) {
          float sk = 0, sq = 0;
          const float* row = Sh + j * z.dk;
          for (std::int64_t e = 0; e < z.dk; ++e) {
            sk += row[e] * kv(t)[e];
            sq += row[e] * qv(t)[e];
          }
          s0k[j] = sk;
          s0q[j] = sq;
        }
        float* wt = &w[t * z.dv];
        for (std::int64_t j = 0; j < z.dv; ++j) wt[j] = b * (vt[j] - decay * s0k[j]);
        for (std::int64_t i = 0; i < t; ++i) {
          const float a = b * std::exp(L[t] - L[i]) * kk[t * kChunk + i];
          for (std::int64_t j = 0; j < z.dv; ++j) wt[j] -= a * w[i * z.dv + j];
        }
        float* ot = &out[(tok(t) * z.hv + h) * z.dv];
        for (std::int64_t j = 0; j < z.dv; ++j) ot[j] = decay * s0q[j];
        for (std::int64_t i = 0; i <= t; ++i) {
          const float a = std::exp(L[t] - L[i]) * kq[t * kChunk + i];
          for (std::int64_t j = 0; j < z.dv; ++j) ot[j] += a * w[i * z.dv + j];
        }
        for (std::int64_t j = 0; j < z.dv; ++j) ot[j] *= scale;
      }
      // The state leaving the chunk.
      const float end = std::exp(L[C - 1]);
      for (std::int64_t j = 0; j < z.dv; ++j) {
        float* row = Sh + j * z.dk;
        for (std::int64_t e = 0; e < z.dk; ++e) row[e] *= end;
      }
      for (std::int64_t i = 0; i < C; ++i) {
        const float a = std::exp(L[C - 1] - L[i]);
        for (std::int64_t j = 0; j < z.dv; ++j) {
          const float wj = a * w[i * z.dv + j];
          float* row = Sh + j * z.dk;
          for (std::int64_t e = 0; e < z.dk; ++e) row[e] += wj * kv(i)[e];
        }
      }
    }
  }
}

Status run(const ImplementationCall& c) {
  const Definition& d = c.definition;
  const bool prefill = input_index(d, "cu_seqlens").has_value();
  const bool mtp = input_index(d, "initial_state_indices").has_value();
  const Tensor *q = arg(c, "q"), *k = arg(c, "k"), *v = arg(c, "v"), *a = arg(c, "a"), *b = arg(c, "b"),
               *a_log = arg(c, "A_log"), *dt_bias = arg(c, "dt_bias");
  const Tensor* state = arg(c, mtp ? "initial_state" : "state");
  const std::size_t r = prefill ? 3 : 4;
  Sizes z{q->dim(r - 2), k->dim(r - 2), v->dim(r - 2), q->dim(r - 1), v->dim(r - 1)};
  if (z.hv % z.hq || z.hv % z.hk)
    return make_error(Code::invalid_argument, fmt::format("{}: value heads must be a multiple of q/k heads", d.name));
  const std::int64_t tokens = prefill ? q->dim(0) : q->dim(0) * q->dim(1), per = z.hv * z.dv * z.dk;

  const auto qf = to_float(*q), kf = to_float(*k), vf = to_float(*v), af = to_float(*a), bf = to_float(*b),
             alf = to_float(*a_log), dbf = to_float(*dt_bias);
  std::vector<float> logg(static_cast<std::size_t>(tokens * z.hv)), beta(logg.size());
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < z.hv; ++h) {
      const float x = af[t * z.hv + h] + dbf[h];
      const float sp = x > 20.0f ? x : std::log1p(std::exp(x));
      logg[t * z.hv + h] = -std::exp(alf[h]) * sp;
      beta[t * z.hv + h] = 1.0f / (1.0f + std::exp(-bf[t * z.hv + h]));
    }
  float scale = 0;
  if (auto s = scalar_as_double(c.inputs[*input_index(d, "scale")])) scale = static_cast<float>(*s);
  if (scale == 0.0f) scale = 1.0f / std::sqrt(static_cast<float>(z.dk));

  const std::vector<float> init = state ? to_float(*state) : std::vector<float>();
  std::vector<float> out(static_cast<std::size_t>(tokens * z.hv * z.dv), 0.0f), S(static_cast<std::size_t>(per));
  Tensor& state_out = c.outputs[*output_index(d, mtp ? "final_state" : "new_state")];
  std::vector<float> new_state(static_cast<std::size_t>(state_out.numel()), 0.0f);
  auto load = [&](std::int64_t row) {
    if (state) std::copy_n(init.begin() + row * per, per, S.begin());
    else std::fill(S.begin(), S.end(), 0.0f);
  };
  if (prefill) {
    const Tensor& cu = *arg(c, "cu_seqlens");
    for (std::int64_t n = 0; n + 1 < cu.numel(); ++n) {
      const auto lo = static_cast<std::int64_t>(element_as_double(cu, n)), hi = static_cast<std::int64_t>(element_as_double(cu, n + 1));
      if (hi <= lo) continue;
      if (lo < 0 || hi > tokens) return make_error(Code::invalid_argument, d.name + ": cu_seqlens outside the tokens");
      load(n);
      run_sequence(z, scale, qf, kf, vf, logg, beta, lo, hi - lo, S, out);
      std::copy(S.begin(), S.end(), new_state.begin() + n * per);
    }
  } else {
    const std::int64_t B = q->dim(0), T = q->dim(1);
    const Tensor* idx = mtp ? arg(c, "initial_state_indices") : nullptr;
    for (std::int64_t s = 0; s < B; ++s) {
      const std::int64_t row = idx ? static_cast<std::int64_t>(element_as_double(*idx, s)) : s;
      if (row < 0 || (state && row >= state->dim(0)))
        return make_error(Code::invalid_argument, d.name + ": state index outside the pool");
      load(row);
      run_sequence(z, scale, qf, kf, vf, logg, beta, s * T, T, S, out);
      if (!mtp) std::copy(S.begin(), S.end(), new_state.begin() + s * per);
    }
    if (mtp) new_state = init;  // the pool comes back as given
  }
  KB_TRY(store_float(out, c.outputs[*output_index(d, "output")]));
  return store_float(new_state, state_out);
}

}  // namespace

void add_gdn_cpu(Registry& r) {
  Implementation impl;
  impl.name = "kb_cpu_gdn";
  impl.author = "kb";
  impl.device = Device::cpu;
  impl.description = "gated delta rule (decode, mtp, prefill; k-last) by the chunked WY form on the CPU, fp32";
  impl.supports = [](const Definition& d) -> std::string {
    if (d.op_type != "gdn") return "not a gdn definition";
    if (auto o = find_oracle(d); !o) return o.error().message;  // the forms and layout the oracle accepts
    return {};
  };
  impl.run = run;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
