// CUDA plan for _sparse_coo_tensor_with_dims_and_tensors: the oracle's checks
// (../coo_args.hpp), then its two outputs, (indices, values) =
// (_indices(), _values()), copied in stored order by the elementwise engine.
#include "../../common/args.hpp"
#include "../../common/cuda_engine.hpp"
#include "../../cuda_families.hpp"
#include "../coo_args.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

// _sparse_coo_tensor_with_dims_and_tensors(sparse_dim, dense_dim, size, indices, values, *, dtype, ...)
Launch sparse_coo_with_dims_and_tensors(Call& c, const DeviceArgs& d, Outs& o) {
  (void)check_coo(c);
  const HostTensor& idx = tensor_arg(c, 3, "indices");
  const HostTensor& val = tensor_arg(c, 4, "values");
  return sequence({cuda::copy(o[0], d.view(idx)), cuda::copy(o[1], d.view(val))});
}

const CudaOpInfo kOps[] = {
    {"aten._sparse_coo_tensor_with_dims_and_tensors.default", sparse_coo_with_dims_and_tensors},
};

}  // namespace

std::span<const CudaOpInfo> sparse_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
