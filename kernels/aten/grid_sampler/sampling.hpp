// The arguments of grid_sampler_2d and its backward, checked once for the CPU
// oracle (grid_sampler.cpp) and the CUDA plans (cuda/grid_sampler_cuda.cpp):
// input [N, C, H, W], grid [N, Ho, Wo, 2], interpolation 0 (bilinear) or 1
// (nearest), padding 0 (zeros) or 1 (border), align_corners.
#pragma once

#include <fmt/format.h>

#include "../common/args.hpp"

namespace kb::backendbench::aten {

struct Sampling {
  std::int64_t n, c, h, w, oh, ow;
  bool bilinear, border, align;
};

inline Sampling sampling_of(const Call& c, const HostTensor& x, const HostTensor& grid, std::size_t mode_pos) {
  if (x.rank() != 4) fail(fmt::format("input must be 4-D, got {}", shape_text(x.shape)));
  if (grid.rank() != 4 || grid.shape[3] != 2 || grid.shape[0] != x.shape[0])
    fail(fmt::format("grid must be [N, H, W, 2] with input's N, got {}", shape_text(grid.shape)));
  const std::int64_t interp = int_arg(c, mode_pos, "interpolation_mode"), pad = int_arg(c, mode_pos + 1, "padding_mode");
  if (interp != 0 && interp != 1) fail(fmt::format("interpolation_mode {} is not supported (0 bilinear, 1 nearest)", interp));
  if (pad != 0 && pad != 1) fail(fmt::format("padding_mode {} is not supported (0 zeros, 1 border)", pad));
  return Sampling{x.shape[0], x.shape[1], x.shape[2], x.shape[3], grid.shape[1], grid.shape[2], interp == 0, pad == 1,
                  bool_arg(c, mode_pos + 2, "align_corners")};
}

// grid_sampler_2d_backward's grad_output must be [N, C, Ho, Wo].
inline void check_grad_output(const HostTensor& g, const Sampling& s) {
  if (g.shape != std::vector<std::int64_t>{s.n, s.c, s.oh, s.ow})
    fail(fmt::format("grad_output {} must be [N, C, Ho, Wo]", shape_text(g.shape)));
}

}  // namespace kb::backendbench::aten
