// CPU oracle for op_type "rmsnorm": plain RMSNorm and fused_add_rmsnorm.
//
//   x       = float(hidden_states) [+ float(residual)]      (fp32 add, as the reference)
//   inv_rms = rsqrt(mean(x^2) + EPS)                          (sum of squares in fp64)
//   output  = (x * inv_rms) * float(weight)                   (fp32, rounded once to output dtype)
//
// EPS is the reference's own `EPS = ...` constant; the fused form returns only
// `output` (no residual write-back), as the FlashInfer-Bench definitions do.
// Any hidden size; the batch axis may be 0.
#include <fmt/format.h>

#include <cmath>
#include <new>
#include <string>
#include <vector>

#include "oracle/oracle.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels {
namespace {

bool float_dtype(DType t) { return t == DType::float32 || t == DType::float16 || t == DType::bfloat16; }

// Whitespace-free copy of the reference, for pattern checks.
std::string squeezed(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != ' ' && c != '\t') out.push_back(c);
  return out;
}

std::string supports(const Definition& d) {
  if (d.op_type != "rmsnorm") return fmt::format("op_type {} is not rmsnorm", d.op_type);
  auto hs = input_index(d, "hidden_states");
  auto w = input_index(d, "weight");
  auto res = input_index(d, "residual");
  std::size_t expected_inputs = 2 + (res ? 1 : 0);
  if (!hs || !w || d.inputs.size() != expected_inputs)
    return "rmsnorm oracle expects inputs hidden_states, [residual,] weight";
  if (d.outputs.size() != 1 || d.outputs[0].name != "output")
    return "rmsnorm oracle expects a single output named output (fused forms return only output)";
  const TensorSpec& h = d.inputs[*hs];
  const TensorSpec& wt = d.inputs[*w];
  const TensorSpec& out = d.outputs[0];
  if (h.is_scalar() || wt.is_scalar() || out.is_scalar() || h.rank() != 2 || wt.rank() != 1 || out.rank() != 2)
    return "rmsnorm oracle expects hidden_states [batch, hidden], weight [hidden], output [batch, hidden]";
  if ((*wt.shape)[0] != (*h.shape)[1] || *out.shape != *h.shape)
    return "rmsnorm oracle: weight must span hidden_states' last axis and output must have hidden_states' shape";
  if (res) {
    const TensorSpec& r = d.inputs[*res];
    if (r.is_scalar() || *r.shape != *h.shape) return "rmsnorm oracle: residual must have hidden_states' shape";
    if (!float_dtype(r.dtype)) return "rmsnorm oracle: residual must be float32/float16/bfloat16";
  }
  if (!float_dtype(h.dtype) || !float_dtype(wt.dtype) || !float_dtype(out.dtype))
    return "rmsnorm oracle handles float32/float16/bfloat16 tensors only";
  if (!reference_constant(d, "EPS")) return "rmsnorm oracle: the reference sets no `EPS = <number>` constant";
  std::string r = squeezed(d.reference);
  if (r.find("rsqrt") == std::string::npos || r.find("mean(") == std::string::npos)
    return "rmsnorm oracle: the reference is not recognisably rsqrt(mean(x^2) + EPS)";
  // Gemma-style (1 + weight) scaling is a different op.
  for (const char* offset : {"1+weight", "1.0+weight", "weight+1", "(1+w", "(1.0+w"})
    if (r.find(offset) != std::string::npos)
      return "rmsnorm oracle: the reference scales by (1 + weight) (Gemma style), which this oracle does not compute";
  if (res && r.find("+residual") == std::string::npos)
    return "rmsnorm oracle: the reference does not add residual to hidden_states";
  return {};
}

Status run_checked(const OracleCall& call) {
  const Definition& d = call.definition;
  if (std::string why = supports(d); !why.empty()) return make_error(Code::unsupported, d.name + ": " + why);
  const double eps = *reference_constant(d, "EPS");
  auto hs_i = *input_index(d, "hidden_states");
  auto w_i = *input_index(d, "weight");
  auto res_i = input_index(d, "residual");
  if (call.inputs.size() != d.inputs.size() || call.outputs.size() != 1)
    return make_error(Code::invalid_argument, d.name + ": rmsnorm oracle: wrong number of arguments");
  for (const Arg& a : call.inputs)
    if (!a.tensor) return make_error(Code::invalid_argument, d.name + ": rmsnorm oracle: every input must be a tensor");
  const Tensor& hs = *call.inputs[hs_i].tensor;
  const Tensor& w = *call.inputs[w_i].tensor;
  const Tensor* res = res_i ? call.inputs[*res_i].tensor : nullptr;
  Tensor& out = call.outputs[0];
  if (hs.rank() != 2 || w.rank() != 1 || out.shape() != hs.shape() || w.dim(0) != hs.dim(1) ||
      (res && res->shape() != hs.shape()))
    return make_error(Code::invalid_argument,
                      d.name + ": rmsnorm oracle: shapes of hidden_states, residual, weight and output disagree");

  const std::int64_t batch = hs.dim(0), hidden = hs.dim(1);
  std::vector<float> x = to_float(hs);
  if (res) {
    std::vector<float> r = to_float(*res);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = x[i] + r[i];
  }
  std::vector<float> wf = to_float(w);
  std::vector<float> y(x.size());
  for (std::int64_t b = 0; b < batch; ++b) {
    const float* xr = x.data() + b * hidden;
    float* yr = y.data() + b * hidden;
    double ss = 0;
    for (std::int64_t i = 0; i < hidden; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    double mean = hidden > 0 ? ss / static_cast<double>(hidden) : std::nan("");
    auto inv_rms = static_cast<float>(1.0 / std::sqrt(mean + eps));
    for (std::int64_t i = 0; i < hidden; ++i) {
      float t = xr[i] * inv_rms;
      yr[i] = t * wf[static_cast<std::size_t>(i)];
    }
  }
  return store_float(y, out);
}

Status run(const OracleCall& call) {
  try {
    return run_checked(call);
  } catch (const std::bad_alloc&) {
    return make_error(Code::out_of_memory, call.definition.name + ": rmsnorm oracle: out of memory");
  }
}

}  // namespace
extern const OracleEntry rmsnorm_oracle{"rmsnorm", "rmsnorm / fused_add_rmsnorm", supports, run};
}  // namespace kb::kernels
