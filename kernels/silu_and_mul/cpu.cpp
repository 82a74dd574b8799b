// kb_cpu_silu_and_mul: a plain CPU solution (float math, std::exp through a
// clamped logistic), independent of the oracle's code.
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "harness/implementation.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels {

void add_silu_and_mul_cpu(Registry& r) {
  Implementation impl;
  impl.name = "kb_cpu_silu_and_mul";
  impl.author = "kb";
  impl.device = Device::cpu;
  impl.description = "row-wise silu(gate) * up on the CPU, bf16/fp16 in, fp32 math";
  impl.supports = [](const Definition& d) -> std::string {
    if (d.op_type != "silu_and_mul") return "not a silu_and_mul definition";
    if (d.inputs.size() != 1 || d.outputs.size() != 1) return "expects one input and one output";
    return {};
  };
  impl.run = [](const ImplementationCall& c) -> Status {
    const Tensor& x = *c.inputs[0].tensor;
    Tensor& out = c.outputs[0];
    std::int64_t rows = out.dim(0), d = out.dim(1);
    std::vector<float> row(static_cast<std::size_t>(2 * d)), y(static_cast<std::size_t>(rows * d));
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t j = 0; j < 2 * d; ++j) row[static_cast<std::size_t>(j)] = static_cast<float>(element_as_double(x, r * 2 * d + j));
      for (std::int64_t j = 0; j < d; ++j) {
        float g = row[static_cast<std::size_t>(j)];
        float sig = g >= 0 ? 1.0f / (1.0f + std::exp(-g)) : std::exp(g) / (1.0f + std::exp(g));
        y[static_cast<std::size_t>(r * d + j)] = g * sig * row[static_cast<std::size_t>(d + j)];
      }
    }
    return store_float(y, out);
  };
  r.add(std::move(impl));
}

}  // namespace kb::kernels
