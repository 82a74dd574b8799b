// kb_cpu_rmsnorm: rmsnorm and fused add + rmsnorm on the CPU, float
// accumulation (the oracle accumulates in double). EPS from the reference.
#include <cmath>

#include "harness/implementation.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels {

void add_rmsnorm_cpu(Registry& r) {
  Implementation impl;
  impl.name = "kb_cpu_rmsnorm";
  impl.author = "kb";
  impl.device = Device::cpu;
  impl.description = "row-wise rmsnorm / fused add + rmsnorm on the CPU, fp32 math";
  impl.supports = [](const Definition& d) -> std::string {
    if (d.op_type != "rmsnorm") return "not an rmsnorm definition";
    if (!input_index(d, "hidden_states") || !input_index(d, "weight")) return "needs hidden_states and weight";
    if (!reference_constant(d, "EPS")) return "the reference sets no EPS";
    return {};
  };
  impl.run = [](const ImplementationCall& c) -> Status {
    const Definition& d = c.definition;
    const Tensor& x = *c.inputs[*input_index(d, "hidden_states")].tensor;
    const Tensor& w = *c.inputs[*input_index(d, "weight")].tensor;
    auto ri = input_index(d, "residual");
    const Tensor* res = ri ? c.inputs[*ri].tensor : nullptr;
    float eps = static_cast<float>(*reference_constant(d, "EPS"));
    std::int64_t rows = x.dim(0), h = x.dim(1);
    std::vector<float> xf = to_float(x), wf = to_float(w), y(xf.size());
    if (res) {
      auto rf = to_float(*res);
      for (std::size_t i = 0; i < xf.size(); ++i) xf[i] += rf[i];
    }
    for (std::int64_t r0 = 0; r0 < rows; ++r0) {
      const float* row = &xf[static_cast<std::size_t>(r0 * h)];
      float ss = 0;
      for (std::int64_t j = 0; j < h; ++j) ss += row[j] * row[j];
      float inv = 1.0f / std::sqrt(ss / static_cast<float>(h) + eps);
      for (std::int64_t j = 0; j < h; ++j) y[static_cast<std::size_t>(r0 * h + j)] = row[j] * inv * wf[static_cast<std::size_t>(j)];
    }
    return store_float(y, c.outputs[0]);
  };
  r.add(std::move(impl));
}

}  // namespace kb::kernels
