// CUDA plans for native_batch_norm and its backward: a block per channel over
// the input viewed as [N, C, S] (channels-last merges into that too).
#include "../../common/args.hpp"
#include "../../common/cuda_engine.hpp"
#include "../../cuda_families.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

struct Opt {
  std::optional<DView> v;
  const DView* get() const { return v ? &*v : nullptr; }
};
Opt opt_view(const Call& c, const DeviceArgs& d, std::size_t pos, std::string_view name) {
  const HostTensor* t = optional_tensor(c, pos, name);
  return t ? Opt{d.view(*t)} : Opt{};
}

Launch forward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "input");
  if (!is_floating(x.dtype)) fail("batch_norm needs a floating input");
  Opt w = opt_view(c, d, 1, "weight"), b = opt_view(c, d, 2, "bias");
  Opt rm = opt_view(c, d, 3, "running_mean"), rv = opt_view(c, d, 4, "running_var");
  return cuda::batch_norm(o[0], o[1], o[2], d.view(x), w.get(), b.get(), rm.get(), rv.get(),
                          bool_arg(c, 5, "training"), number_arg(c, 6, "momentum"), number_arg(c, 7, "eps"));
}

Launch backward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& g = tensor_arg(c, 0, "grad_out");
  const HostTensor& x = tensor_arg(c, 1, "input");
  Opt w = opt_view(c, d, 2, "weight"), rm = opt_view(c, d, 3, "running_mean"), rv = opt_view(c, d, 4, "running_var");
  Opt sm = opt_view(c, d, 5, "save_mean"), si = opt_view(c, d, 6, "save_invstd");
  return cuda::batch_norm_backward(o[0], o[1], o[2], d.view(g), d.view(x), w.get(), rm.get(), rv.get(), sm.get(),
                                   si.get(), bool_arg(c, 7, "train"), number_arg(c, 8, "eps"));
}

const CudaOpInfo kOps[] = {
    {"aten.native_batch_norm.default", forward},
    {"aten.native_batch_norm_backward.default", backward},
};

}  // namespace

std::span<const CudaOpInfo> batch_norm_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
