// kb_cpu_mamba_ssu: Mamba2's selective state update on the CPU, float32,
// state dimension outermost: for each (element, head) the decay exp(A dt_f)
// and the input dt_f x B are applied column by column of the [head_dim,
// dstate] state while the output accumulates across columns. The state
// cache is worked on in float32 and each updated slot rounded back to the
// cache dtype at once, so a slot named twice sees its first update as the
// cache holds it. Independent of the oracle (double, head_dim outermost).
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "harness/implementation.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels {
namespace {

Status run(const ImplementationCall& c) {
  const Definition& d = c.definition;
  auto in = [&](const char* n) { return c.inputs[*input_index(d, n)].tensor; };
  const Tensor &state = *in("state"), &x = *in("x"), &dt = *in("dt"), &A = *in("A"), &Bm = *in("B"),
               &Cm = *in("C"), &D = *in("D"), &bias = *in("dt_bias"), &slots = *in("state_batch_indices");
  const std::int64_t batch = x.dim(0), H = x.dim(1), P = x.dim(2), G = Bm.dim(1), N = Bm.dim(2), cache = state.dim(0);
  if (G <= 0 || H % G) return make_error(Code::invalid_argument, d.name + ": heads must be a multiple of groups");
  const auto xf = to_float(x), dtf = to_float(dt), Af = to_float(A), Bf = to_float(Bm), Cf = to_float(Cm),
             Df = to_float(D), biasf = to_float(bias);
  std::vector<float> S = to_float(state);
  Tensor& new_state = c.outputs[*output_index(d, "new_state")];
  std::vector<float> y(static_cast<std::size_t>(batch * H * P), 0.0f), dtv(P), acc(P), col(P);
  const std::int64_t slot_elems = H * P * N;
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto slot = static_cast<std::int64_t>(element_as_double(slots, b));
    if (slot < 0) continue;
    if (slot >= cache) return make_error(Code::invalid_argument, fmt::format("{}: slot {} outside the cache", d.name, slot));
    float* s = &S[slot * slot_elems];
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t g = h / (H / G);
      const float* xb = &xf[(b * H + h) * P];
      for (std::int64_t p = 0; p < P; ++p) {
        const float u = dtf[(b * H + h) * P + p] + biasf[h * P + p];
        dtv[p] = u > 20.0f ? u : std::log1p(std::exp(u));
        acc[p] = 0.0f;
      }
      for (std::int64_t n = 0; n < N; ++n) {
        const float bn = Bf[(b * G + g) * N + n], cn = Cf[(b * G + g) * N + n];
        for (std::int64_t p = 0; p < P; ++p) {
          const std::int64_t e = (h * P + p) * N + n;
          const float v = s[e] * std::exp(Af[e] * dtv[p]) + dtv[p] * xb[p] * bn;
          s[e] = v;
          acc[p] += v * cn;
        }
      }
      for (std::int64_t p = 0; p < P; ++p) y[(b * H + h) * P + p] = acc[p] + xb[p] * Df[h * P + p];
    }
    // Round the slot to the cache dtype now: a later element naming it reads that.
    std::vector<float> slot_vals(s, s + slot_elems);
    KB_TRY(store_float_range(slot_vals, new_state, slot * slot_elems));
    for (std::int64_t e = 0; e < slot_elems; ++e)
      s[e] = static_cast<float>(element_as_double(new_state, slot * slot_elems + e));
  }
  // Slots never named keep the input's bits.
  std::vector<bool> touched(static_cast<std::size_t>(cache), false);
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto slot = static_cast<std::int64_t>(element_as_double(slots, b));
    if (slot >= 0) touched[static_cast<std::size_t>(slot)] = true;
  }
  const std::size_t slot_bytes = state.nbytes() / static_cast<std::size_t>(std::max<std::int64_t>(cache, 1));
  for (std::int64_t i = 0; i < cache; ++i)
    if (!touched[static_cast<std::size_t>(i)])
      std::memcpy(new_state.bytes() + i * slot_bytes, state.bytes() + i * slot_bytes, slot_bytes);
  return store_float(y, c.outputs[*output_index(d, "output")]);
}

}  // namespace

void add_mamba_ssu_cpu(Registry& r) {
  Implementation impl;
  impl.name = "kb_cpu_mamba_ssu";
  impl.author = "kb";
  impl.device = Device::cpu;
  impl.description = "Mamba2 selective state update on the CPU, fp32, state dimension outermost";
  impl.supports = [](const Definition& d) -> std::string {
    if (d.op_type != "mamba_ssu") return "not a mamba_ssu definition";
    if (auto o = find_oracle(d); !o) return o.error().message;
    return {};
  };
  impl.run = run;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
