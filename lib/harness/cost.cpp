#include "harness/cost.hpp"

namespace kb {

CallCost ideal_cost(const Definition& d, const AxisValues& axes) {
  CallCost c;
  auto bytes_of = [&](const TensorSpec& t) {
    if (!t.shape) return 0.0;
    double n = 1;
    for (const auto& a : *t.shape) n *= static_cast<double>(axes.get(a).value_or(0));
    return n * dtype_bits(t.dtype) / 8.0;
  };
  for (const auto& t : d.inputs) c.bytes += bytes_of(t);
  for (const auto& t : d.outputs) c.bytes += bytes_of(t);
  if (d.op_type == "gemm") {
    auto m = axes.get("M"), n = axes.get("N"), k = axes.get("K");
    if (m && n && k) c.flops = 2.0 * static_cast<double>(*m) * static_cast<double>(*n) * static_cast<double>(*k);
  }
  return c;
}

}  // namespace kb
