// CUDA plans for grid_sampler_2d and its backward (grid_sampler_kernels.cu),
// with the oracle's argument rules (../sampling.hpp).
#include "../../common/args.hpp"
#include "../../cuda_families.hpp"
#include "../sampling.hpp"
#include "grid_sampler_kernels.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

cuda::GridSampling modes(const Sampling& s) { return cuda::GridSampling{s.bilinear, s.border, s.align}; }

// grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners)
Launch grid_sampler_2d(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "input");
  const HostTensor& grid = tensor_arg(c, 1, "grid");
  const Sampling s = sampling_of(c, x, grid, 2);
  return cuda::grid_sampler_2d(o[0], d.view(x), d.view(grid), modes(s));
}

// grid_sampler_2d_backward(grad_output, input, grid, interpolation_mode, padding_mode, align_corners,
//                          output_mask) -> (grad_input, grad_grid)
Launch grid_sampler_2d_backward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const HostTensor& x = tensor_arg(c, 1, "input");
  const HostTensor& grid = tensor_arg(c, 2, "grid");
  const Sampling s = sampling_of(c, x, grid, 3);
  check_grad_output(g, s);
  return cuda::grid_sampler_2d_backward(o[0], o[1], d.view(g), d.view(x), d.view(grid), modes(s));
}

const CudaOpInfo kOps[] = {
    {"aten.grid_sampler_2d.default", grid_sampler_2d},
    {"aten.grid_sampler_2d_backward.default", grid_sampler_2d_backward},
};

}  // namespace

std::span<const CudaOpInfo> grid_sampler_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
