// CPU oracle for op_type "gdn": the gated delta rule with the k-last state
// layout (state[.., h, v, k]), in its three forms:
//
//   decode   q, k, v [B, T, H, D], state [B, HV, V, K] (optional: zeros),
//            outputs output [B, T, HV, V], new_state [B, HV, V, K]
//   mtp      the same tokens, the state taken from a pool:
//            initial_state [P, HV, V, K], initial_state_indices [B];
//            outputs output and final_state = initial_state unchanged (the
//            reference clones each pool row before updating it, so the pool
//            is returned as it came: FlashInfer's disable_state_update=True)
//   prefill  q, k, v [total, H, D] over variable-length sequences
//            (cu_seqlens [N + 1]), state [N, HV, V, K] (optional: zeros),
//            outputs output [total, HV, V], new_state [N, HV, V, K]; a
//            sequence of length 0 leaves its new_state row zero, as the
//            reference's `continue` does
//
// Per token t and value head h (query/key head h / (HV / HQ), h / (HV / HK)):
//   g    = exp(-exp(A_log[h]) * softplus(a[t, h] + dt_bias[h]))   softplus: torch's, threshold 20
//   beta = sigmoid(b[t, h])
//   S    = g * S                                   S: [V, K], state row
//   u    = S k                                     (old_v)
//   S   += (beta * (v - u)) k^T                    = S - k u^T + k (beta v + (1 - beta) u)^T
//   o    = scale * S q                             rounded to the output dtype
// scale = 1 / sqrt(K) when the scalar is absent or 0. The state is carried in
// double (the reference uses float32; the judge's tolerance covers it).
// Generic over every head count and head size; tokens are processed one by
// one, the recurrence itself being the specification.
#include <fmt/format.h>

#include <cmath>
#include <new>
#include <string>
#include <vector>

#include "oracle/oracle.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels {
namespace {

enum class Form { decode, mtp, prefill };

bool float_dtype(DType t) { return t == DType::float32 || t == DType::float16 || t == DType::bfloat16; }

std::optional<Form> form_of(const Definition& d) {
  if (input_index(d, "cu_seqlens")) return Form::prefill;
  if (input_index(d, "initial_state_indices")) return Form::mtp;
  if (input_index(d, "state")) return Form::decode;
  return std::nullopt;
}

std::string supports(const Definition& d) {
  if (d.op_type != "gdn") return fmt::format("op_type {} is not gdn", d.op_type);
  auto form = form_of(d);
  if (!form) return "gdn oracle expects a state (decode), initial_state_indices (mtp) or cu_seqlens (prefill) input";
  bool k_last = false;
  for (const auto& t : d.tags)
    if (t == "layout:k-last") k_last = true;
  if (!k_last && d.reference.find("k-last") == std::string::npos)
    return "gdn oracle computes the k-last state layout [.., V, K] only (no layout:k-last tag)";
  const int rank = *form == Form::prefill ? 3 : 4;
  for (const char* n : {"q", "k", "v"}) {
    auto i = input_index(d, n);
    if (!i || d.inputs[*i].is_scalar() || d.inputs[*i].rank() != static_cast<std::size_t>(rank) ||
        !float_dtype(d.inputs[*i].dtype))
      return fmt::format("gdn oracle expects a float input {} of rank {}", n, rank);
  }
  for (const char* n : {"A_log", "a", "dt_bias", "b"}) {
    auto i = input_index(d, n);
    if (!i || d.inputs[*i].is_scalar() || !float_dtype(d.inputs[*i].dtype))
      return fmt::format("gdn oracle expects a float tensor input {}", n);
  }
  auto s = input_index(d, "scale");
  if (!s || !d.inputs[*s].is_scalar()) return "gdn oracle expects a scalar input scale";
  const char* state_out = *form == Form::mtp ? "final_state" : "new_state";
  auto o = output_index(d, "output");
  auto so = output_index(d, state_out);
  if (!o || !so || d.outputs.size() != 2) return fmt::format("gdn oracle expects outputs output and {}", state_out);
  if (!float_dtype(d.outputs[*o].dtype) || !float_dtype(d.outputs[*so].dtype))
    return "gdn oracle writes float outputs only";
  return {};
}

Status bad(const OracleCall& c, std::string what) {
  return make_error(Code::invalid_argument, fmt::format("{}: gdn oracle: {}", c.definition.name, what));
}

const Tensor* tensor_arg(const OracleCall& c, std::string_view name) {
  auto i = input_index(c.definition, name);
  if (!i || *i >= c.inputs.size()) return nullptr;
  return c.inputs[*i].tensor;
}

// Per-head parameters and the sizes every form shares.
struct Heads {
  std::int64_t hq = 0, hk = 0, hv = 0, dk = 0, dv = 0;
  std::vector<float> a_log, dt_bias;
};

double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

// One token of one sequence: updates the [HV][V][K] double state in place and
// writes HV * V outputs (float, before rounding) to `out`.
void step(const Heads& hs, double scale, const float* q, const float* k, const float* v, const float* a,
          const float* b, std::vector<double>& state, float* out) {
  const std::int64_t qgroup = hs.hv / hs.hq, kgroup = hs.hv / hs.hk;
  std::vector<double> u(static_cast<std::size_t>(hs.dv));
  for (std::int64_t h = 0; h < hs.hv; ++h) {
    const float* qh = q + (h / qgroup) * hs.dk;
    const float* kh = k + (h / kgroup) * hs.dk;
    const float* vh = v + h * hs.dv;
    // x = a + dt_bias in float32, as the reference adds them.
    const float x = a[h] + hs.dt_bias[static_cast<std::size_t>(h)];
    const double g = std::exp(-std::exp(static_cast<double>(hs.a_log[static_cast<std::size_t>(h)])) * softplus(x));
    const double beta = 1.0 / (1.0 + std::exp(-static_cast<double>(b[h])));
    double* S = state.data() + h * hs.dv * hs.dk;
    for (std::int64_t i = 0; i < hs.dv; ++i) {
      double* row = S + i * hs.dk;
      double acc = 0;
      for (std::int64_t j = 0; j < hs.dk; ++j) {
        row[j] *= g;
        acc += row[j] * kh[j];
      }
      u[static_cast<std::size_t>(i)] = acc;
    }
    for (std::int64_t i = 0; i < hs.dv; ++i) {
      double* row = S + i * hs.dk;
      const double delta = beta * (static_cast<double>(vh[i]) - u[static_cast<std::size_t>(i)]);
      double o = 0;
      for (std::int64_t j = 0; j < hs.dk; ++j) {
        row[j] += delta * kh[j];
        o += row[j] * qh[j];
      }
      out[h * hs.dv + i] = static_cast<float>(scale * o);
    }
  }
}

Status run_checked(const OracleCall& c) {
  const Definition& d = c.definition;
  if (std::string why = supports(d); !why.empty()) return make_error(Code::unsupported, d.name + ": " + why);
  if (c.inputs.size() != d.inputs.size() || c.outputs.size() != d.outputs.size())
    return bad(c, "wrong number of arguments");
  const Form form = *form_of(d);
  const Tensor* q = tensor_arg(c, "q");
  const Tensor* k = tensor_arg(c, "k");
  const Tensor* v = tensor_arg(c, "v");
  const Tensor* a_log = tensor_arg(c, "A_log");
  const Tensor* a = tensor_arg(c, "a");
  const Tensor* dt_bias = tensor_arg(c, "dt_bias");
  const Tensor* b = tensor_arg(c, "b");
  if (!q || !k || !v || !a_log || !a || !dt_bias || !b) return bad(c, "q, k, v, A_log, a, dt_bias and b are required");
  const Tensor* state = tensor_arg(c, form == Form::mtp ? "initial_state" : "state");
  if (form == Form::mtp && !state) return bad(c, "initial_state is required");
  Tensor& out = c.outputs[*output_index(d, "output")];
  Tensor& state_out = c.outputs[*output_index(d, form == Form::mtp ? "final_state" : "new_state")];

  // Tokens as [sequences][tokens] over a flat token axis.
  const std::size_t rank = form == Form::prefill ? 3 : 4;
  if (q->rank() != rank || k->rank() != rank || v->rank() != rank) return bad(c, "q, k, v have the wrong rank");
  Heads hs;
  hs.hq = q->dim(rank - 2), hs.hk = k->dim(rank - 2), hs.hv = v->dim(rank - 2);
  hs.dk = q->dim(rank - 1), hs.dv = v->dim(rank - 1);
  if (k->dim(rank - 1) != hs.dk) return bad(c, "q and k head sizes differ");
  if (hs.hq <= 0 || hs.hk <= 0 || hs.hv % hs.hq != 0 || hs.hv % hs.hk != 0)
    return bad(c, fmt::format("value heads {} must be a multiple of query heads {} and key heads {}", hs.hv, hs.hq, hs.hk));
  const std::int64_t tokens = form == Form::prefill ? q->dim(0) : q->dim(0) * q->dim(1);
  for (const Tensor* t : {k, v})
    if (t->dim(0) != q->dim(0) || (rank == 4 && t->dim(1) != q->dim(1))) return bad(c, "q, k, v token axes differ");
  if (a->numel() != tokens * hs.hv || b->numel() != tokens * hs.hv) return bad(c, "a and b must hold one value per token and value head");
  if (a_log->numel() != hs.hv || dt_bias->numel() != hs.hv) return bad(c, "A_log and dt_bias must hold one value per value head");
  if (out.numel() != tokens * hs.hv * hs.dv) return bad(c, "output has the wrong size");
  const std::int64_t state_elems = hs.hv * hs.dv * hs.dk;

  // Sequences: (first token, length, state row read, state row written).
  struct Seq {
    std::int64_t first, len, read_row, write_row;
  };
  std::vector<Seq> seqs;
  std::int64_t state_rows = 0;
  if (form == Form::prefill) {
    const Tensor* cu = tensor_arg(c, "cu_seqlens");
    if (!cu || cu->rank() != 1 || cu->numel() < 1) return bad(c, "cu_seqlens must be a 1-D tensor of num_seqs + 1 values");
    const std::int64_t n = cu->numel() - 1;
    for (std::int64_t s = 0; s < n; ++s) {
      auto lo = static_cast<std::int64_t>(element_as_double(*cu, s));
      auto hi = static_cast<std::int64_t>(element_as_double(*cu, s + 1));
      if (hi > lo && (lo < 0 || hi > tokens))
        return bad(c, fmt::format("cu_seqlens[{}..{}] = {}..{} is outside the {} tokens", s, s + 1, lo, hi, tokens));
      seqs.push_back({lo, hi - lo, s, s});
    }
    state_rows = n;
  } else {
    const std::int64_t batch = q->dim(0), t_len = q->dim(1);
    if (form == Form::mtp) {
      const Tensor* idx = tensor_arg(c, "initial_state_indices");
      if (!idx || idx->numel() != batch) return bad(c, "initial_state_indices must hold one index per sequence");
      const std::int64_t pool = state->dim(0);
      for (std::int64_t s = 0; s < batch; ++s) {
        auto row = static_cast<std::int64_t>(element_as_double(*idx, s));
        if (row < 0 || row >= pool)
          return bad(c, fmt::format("initial_state_indices[{}] = {} is outside the pool of {}", s, row, pool));
        seqs.push_back({s * t_len, t_len, row, -1});
      }
      state_rows = pool;
    } else {
      for (std::int64_t s = 0; s < batch; ++s) seqs.push_back({s * t_len, t_len, s, s});
      state_rows = batch;
    }
  }
  if (state && (state->rank() != 4 || state->dim(0) != state_rows || state->numel() != state_rows * state_elems))
    return bad(c, fmt::format("the state must be [{}, {}, {}, {}]", state_rows, hs.hv, hs.dv, hs.dk));
  if (state_out.numel() != state_rows * state_elems) return bad(c, "the state output has the wrong size");

  const std::vector<float> qf = to_float(*q), kf = to_float(*k), vf = to_float(*v), af = to_float(*a),
                           bf = to_float(*b);
  hs.a_log = to_float(*a_log);
  hs.dt_bias = to_float(*dt_bias);
  std::vector<float> state_f = state ? to_float(*state) : std::vector<float>();

  double scale = 0;
  auto si = *input_index(d, "scale");
  if (auto s = scalar_as_double(c.inputs[si])) scale = *s;
  else if (c.inputs[si].tensor && c.inputs[si].tensor->numel() == 1) scale = element_as_double(*c.inputs[si].tensor, 0);
  // The reference scales by float32(scale); the default is 1 / sqrt(K) in Python floats.
  scale = scale == 0.0 ? 1.0 / std::sqrt(static_cast<double>(hs.dk)) : static_cast<double>(static_cast<float>(scale));

  std::vector<float> o(static_cast<std::size_t>(out.numel()), 0.0f);
  std::vector<float> new_state(static_cast<std::size_t>(state_rows * state_elems), 0.0f);
  if (form == Form::mtp) new_state = state_f;  // the pool comes back unchanged
  std::vector<double> S(static_cast<std::size_t>(state_elems));
  for (const Seq& s : seqs) {
    if (s.len <= 0) continue;  // new_state row stays zero
    for (std::int64_t i = 0; i < state_elems; ++i)
      S[static_cast<std::size_t>(i)] = state ? state_f[static_cast<std::size_t>(s.read_row * state_elems + i)] : 0.0;
    for (std::int64_t t = s.first; t < s.first + s.len; ++t)
      step(hs, scale, &qf[static_cast<std::size_t>(t * hs.hq * hs.dk)], &kf[static_cast<std::size_t>(t * hs.hk * hs.dk)],
           &vf[static_cast<std::size_t>(t * hs.hv * hs.dv)], &af[static_cast<std::size_t>(t * hs.hv)],
           &bf[static_cast<std::size_t>(t * hs.hv)], S, &o[static_cast<std::size_t>(t * hs.hv * hs.dv)]);
    if (s.write_row >= 0)
      for (std::int64_t i = 0; i < state_elems; ++i)
        new_state[static_cast<std::size_t>(s.write_row * state_elems + i)] = static_cast<float>(S[static_cast<std::size_t>(i)]);
  }
  KB_TRY(store_float(o, out));
  return store_float(new_state, state_out);
}

Status run(const OracleCall& call) {
  try {
    return run_checked(call);
  } catch (const std::bad_alloc&) {
    return make_error(Code::out_of_memory, call.definition.name + ": gdn oracle: out of memory");
  }
}

}  // namespace
extern const OracleEntry gdn_oracle{"gdn", "gdn decode/mtp/prefill (k-last)", supports, run};
}  // namespace kb::kernels
