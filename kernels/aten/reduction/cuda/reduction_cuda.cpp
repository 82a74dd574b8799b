// CUDA plans for the reductions: sum/mean (all dims or a dim list), amax/amin,
// max/min/any of everything, through the engine's reduce kernel.
#include <fmt/format.h>

#include "../../common/args.hpp"
#include "../../common/cuda_engine.hpp"
#include "../../cuda_families.hpp"

namespace kb::backendbench::aten {
namespace {

using cuda::ROp;
using Outs = std::vector<DView>;

// Reduced dims of x (empty or absent list: all), wrapped and checked like the oracle.
std::vector<std::int64_t> reduced_dims(const HostTensor& x, const std::optional<std::vector<std::int64_t>>& dims) {
  std::vector<std::int64_t> out;
  if (!dims || dims->empty()) {
    for (std::size_t i = 0; i < x.rank(); ++i) out.push_back(static_cast<std::int64_t>(i));
    return out;
  }
  if (x.rank() == 0) return out;
  std::vector<bool> seen(x.rank(), false);
  for (auto d : *dims) {
    auto w = static_cast<std::size_t>(wrap_dim(d, x.rank()));
    if (seen[w]) fail(fmt::format("dim {} appears more than once", d));
    seen[w] = true;
    out.push_back(static_cast<std::int64_t>(w));
  }
  return out;
}

template <ROp Op>
Launch all(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  return cuda::reduce(Op, o[0], d.view(x), reduced_dims(x, std::nullopt), false);
}

template <ROp Op>
Launch by_dims(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  return cuda::reduce(Op, o[0], d.view(x), reduced_dims(x, int_list_arg(c, 1, "dim")), bool_arg(c, 2, "keepdim", false));
}

const CudaOpInfo kOps[] = {
    {"aten.sum.default", all<ROp::sum>},
    {"aten.sum.dim_IntList", by_dims<ROp::sum>},
    {"aten.mean.default", all<ROp::mean>},
    {"aten.mean.dim", by_dims<ROp::mean>},
    {"aten.amax.default", by_dims<ROp::amax>},
    {"aten.amin.default", by_dims<ROp::amin>},
    {"aten.max.default", all<ROp::amax>},
    {"aten.min.default", all<ROp::amin>},
    {"aten.any.default", all<ROp::any>},
};

}  // namespace

std::span<const CudaOpInfo> reduction_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
