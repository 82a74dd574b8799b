// CUDA plans for the factories new_empty and new_empty_strided, and for
// bernoulli_.float (factory_kernels.cu: the oracle's draws). PyTorch
// leaves their values unspecified; kb fills zeros, as the CPU oracle does
// (factory.cpp), so the CUDA runner's value judgment holds, and
// new_empty_strided's output has the requested strides over storage of
// exactly their span.
#include <fmt/format.h>

#include "../../common/args.hpp"
#include "../../common/cuda_engine.hpp"
#include "../../cuda_families.hpp"
#include "../factory_args.hpp"
#include "factory_kernels.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

// new_empty(self, size, dtype=None, layout=None, device=None, pin_memory=None)
Launch new_empty(Call& c, const DeviceArgs&, Outs& o) {
  (void)tensor_arg(c, 0, "self");
  (void)size_arg(c, 1, "size");
  return cuda::fill(o[0], 0.0);
}

// new_empty_strided(self, size, stride, dtype=None, layout=None, device=None, pin_memory=None)
Launch new_empty_strided(Call& c, const DeviceArgs&, Outs& o) {
  (void)tensor_arg(c, 0, "self");
  auto size = size_arg(c, 1, "size");
  auto stride = size_arg(c, 2, "stride");
  if (stride.size() != size.size())
    fail(fmt::format("stride {} must have one entry per dim of size {}", shape_text(stride), shape_text(size)));
  std::int64_t span = 1;
  for (std::size_t d = 0; d < size.size(); ++d) {
    if (size[d] == 0) span = 0;
    if (span) span += (size[d] - 1) * stride[d];
  }
  DView v;
  v.dtype = o[0].dtype;
  v.shape = size;
  v.strides = stride;
  v.keep = cuda::device_alloc(static_cast<std::size_t>(span) * dtype_size(v.dtype));
  v.base = v.keep.get();
  o[0] = v;
  return cuda::fill(o[0], 0.0);
}

// bernoulli_.float(self, p=0.5, generator=None): in place, self's strides.
Launch bernoulli_inplace(Call& c, const DeviceArgs&, Outs& o) {
  (void)tensor_arg(c, 0, "self");
  const double p = bernoulli_p(c);
  return cuda::bernoulli(o[0], p, bernoulli_seed(p));
}

const CudaOpInfo kOps[] = {
    {"aten.new_empty.default", new_empty},
    {"aten.new_empty_strided.default", new_empty_strided},
    {"aten.bernoulli_.float", bernoulli_inplace},
};

}  // namespace

std::span<const CudaOpInfo> factory_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
