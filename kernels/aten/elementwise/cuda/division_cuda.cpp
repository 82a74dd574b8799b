// CUDA plans for floor_divide, fmod.Scalar, remainder.Scalar and
// elu_backward (division_kernels.cu): the oracle's type promotion,
// broadcasting and checks (division.cpp); integer divisors are checked for
// zero on the host, as the oracle refuses them.
#include <fmt/format.h>

#include "../../common/args.hpp"
#include "../../cuda_families.hpp"
#include "division_kernels.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

cuda::BinaryIn broadcast_in(const HostTensor& t, const DeviceArgs& d, const std::vector<std::int64_t>& shape) {
  cuda::BinaryIn in;
  in.view = d.view(t);
  in.view.strides = broadcast_strides(t, shape);
  in.view.shape = shape;
  return in;
}

template <cuda::DivKind K>
Launch divide(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  require_real(self, c.op);
  const bool integral = is_integral(o[0].dtype);
  if (o[0].dtype == Dtype::b8) fail("boolean operands are not supported");
  cuda::BinaryIn b;
  const CallArg* a = c.find(1, "other");
  if (a && a->tensor) {
    const HostTensor& other = *a->tensor;
    require_real(other, c.op);
    if (integral)
      for (std::int64_t i = 0; i < other.numel(); ++i)
        if (static_cast<std::int64_t>(other.at(i)) == 0) fail("integer division by zero");
    b = broadcast_in(other, d, o[0].shape);
  } else {
    Scalar s = scalar_arg(c, 1, "other");
    if (integral && static_cast<std::int64_t>(s.value) == 0) fail("integer division by zero");
    b.is_const = true;
    b.value = s.value;
  }
  return cuda::rounding_divide(K, o[0], broadcast_in(self, d, o[0].shape), b);
}

// elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result)
Launch elu_backward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const double alpha = number_arg(c, 1, "alpha"), scale = number_arg(c, 2, "scale"),
               input_scale = number_arg(c, 3, "input_scale");
  const bool is_result = bool_arg(c, 4, "is_result");
  const HostTensor& y = tensor_arg(c, 5, "self_or_result");
  require_real(g, c.op);
  require_real(y, c.op);
  if (is_result && alpha < 0) fail("elu_backward with is_result=True needs alpha >= 0");
  return cuda::elu_backward(o[0], broadcast_in(g, d, o[0].shape), broadcast_in(y, d, o[0].shape), alpha, scale,
                            input_scale, is_result);
}

const CudaOpInfo kOps[] = {
    {"aten.floor_divide.default", divide<cuda::DivKind::floor_div>},
    {"aten.fmod.Scalar", divide<cuda::DivKind::fmod>},
    {"aten.remainder.Scalar", divide<cuda::DivKind::remainder>},
    {"aten.elu_backward.default", elu_backward},
};

}  // namespace

std::span<const CudaOpInfo> division_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
