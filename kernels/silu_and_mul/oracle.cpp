// CPU oracle for silu_and_mul: out = silu(x[..., :d]) * x[..., d:], in fp32,
// rounded once to the output dtype (kb's bundled definitions).
#include <cmath>

#include <fmt/format.h>

#include "oracle/oracle.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels {
namespace {

std::string supports(const Definition& d) {
  if (d.inputs.size() != 1 || d.outputs.size() != 1 || d.inputs[0].rank() != 2 || d.outputs[0].rank() != 2)
    return "expects one [tokens, 2*d] input and one [tokens, d] output";
  return {};
}

Status run(const OracleCall& call) {
  const Tensor* x = call.inputs[0].tensor;
  Tensor& out = call.outputs[0];
  if (!x) return make_error(Code::invalid_argument, "silu_and_mul: input x is missing");
  std::int64_t tokens = x->dim(0), two_d = x->dim(1), d = out.dim(1);
  if (two_d != 2 * d || out.dim(0) != tokens)
    return make_error(Code::invalid_argument,
                      fmt::format("silu_and_mul: x is [{}, {}] but out is [{}, {}]", tokens, two_d, out.dim(0), d));
  std::vector<float> xf = to_float(*x);
  std::vector<float> y(static_cast<std::size_t>(tokens * d));
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t j = 0; j < d; ++j) {
      float g = xf[static_cast<std::size_t>(t * two_d + j)];
      float u = xf[static_cast<std::size_t>(t * two_d + d + j)];
      y[static_cast<std::size_t>(t * d + j)] = g / (1.0f + std::exp(-g)) * u;
    }
  return store_float(y, out);
}

}  // namespace
extern const OracleEntry silu_and_mul_oracle{"silu_and_mul", "silu_and_mul", supports, run};
}  // namespace kb::kernels
