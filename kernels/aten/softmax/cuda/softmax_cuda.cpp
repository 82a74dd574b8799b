// CUDA plans for _softmax/_log_softmax and their backwards: the engine's row
// kernel along `dim` (a warp per row up to 1,024 elements, else a block).
#include "../../common/args.hpp"
#include "../../common/cuda_engine.hpp"
#include "../../cuda_families.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

std::int64_t dim_of(const HostTensor& x, std::int64_t dim) { return x.rank() ? wrap_dim(dim, x.rank()) : 0; }

template <bool Log>
Launch forward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  return cuda::softmax(o[0], d.view(x), dim_of(x, int_arg(c, 1, "dim")), Log);
}

template <bool Log>
Launch backward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const HostTensor& y = tensor_arg(c, 1, "output");
  if (g.shape != y.shape) fail("grad_output and output differ in shape");
  return cuda::softmax_backward(o[0], d.view(g), d.view(y), dim_of(g, int_arg(c, 2, "dim")), Log);
}

const CudaOpInfo kOps[] = {
    {"aten._softmax.default", forward<false>},
    {"aten._log_softmax.default", forward<true>},
    {"aten._softmax_backward_data.default", backward<false>},
    {"aten._log_softmax_backward_data.default", backward<true>},
};

}  // namespace

std::span<const CudaOpInfo> softmax_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
