// CUDA plans for upsample_nearest2d / upsample_bilinear2d and their
// backwards: the oracle's size rules and PyTorch's source-coordinate
// arithmetic (../upsample_taps.hpp) evaluated on the host per output row and column,
// handed to upsample_kernels.cu as tap tables.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "../../common/args.hpp"
#include "../../cuda_families.hpp"
#include "../upsample_taps.hpp"
#include "upsample_kernels.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;
using cuda::UpsampleTap;

// The tap table of one dim: per output position its two source indices and weights (nearest: one index).
std::vector<UpsampleTap> taps(const UpsampleSizes& s, int d, bool bilinear, bool align, Dtype dtype) {
  std::vector<UpsampleTap> out(static_cast<std::size_t>(s.out[d]));
  const float scale = nearest_scale(s, d);
  for (std::int64_t dst = 0; dst < s.out[d]; ++dst) {
    UpsampleTap& t = out[static_cast<std::size_t>(dst)];
    if (!bilinear) {
      t.i0 = t.i1 = nearest_src(scale, dst, s.in[d]);
    } else {
      const BilinearTaps b = bilinear_taps(s, d, align, dst, dtype);
      t = {b.i0, b.i1, b.w0, b.w1};
    }
  }
  return out;
}

Launch upsample(Call& c, const DeviceArgs& dev, Outs& o, bool bilinear) {
  const HostTensor& x = tensor_arg(c, 0, "input");
  if (!is_floating(x.dtype)) fail("upsampling needs a floating input");
  const bool align = bilinear && bool_arg(c, 2, "align_corners");
  UpsampleSizes s = upsample_sizes(c, x.shape, 1, bilinear ? 3 : 2);
  return cuda::upsample2d(o[0], dev.view(x), bilinear, taps(s, 0, bilinear, align, x.dtype),
                          taps(s, 1, bilinear, align, x.dtype));
}

Launch upsample_backward(Call& c, const DeviceArgs& dev, Outs& o, bool bilinear) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  auto input_size = int_list_arg(c, 2, "input_size");
  if (!input_size) fail("input_size is missing");
  const bool align = bilinear && bool_arg(c, 3, "align_corners");
  UpsampleSizes s = upsample_sizes(c, *input_size, 1, bilinear ? 4 : 3);
  const std::vector<std::int64_t> gshape{(*input_size)[0], (*input_size)[1], s.out[0], s.out[1]};
  if (g.shape != gshape) fail(fmt::format("grad_output {} must be {}", shape_text(g.shape), shape_text(gshape)));
  return cuda::upsample2d_backward(o[0], dev.view(g), bilinear, taps(s, 0, bilinear, align, g.dtype),
                                   taps(s, 1, bilinear, align, g.dtype));
}

Launch upsample_nearest2d(Call& c, const DeviceArgs& d, Outs& o) { return upsample(c, d, o, false); }
Launch upsample_nearest2d_backward(Call& c, const DeviceArgs& d, Outs& o) { return upsample_backward(c, d, o, false); }
Launch upsample_bilinear2d(Call& c, const DeviceArgs& d, Outs& o) { return upsample(c, d, o, true); }
Launch upsample_bilinear2d_backward(Call& c, const DeviceArgs& d, Outs& o) { return upsample_backward(c, d, o, true); }

const CudaOpInfo kOps[] = {
    {"aten.upsample_nearest2d.vec", upsample_nearest2d},
    {"aten.upsample_nearest2d_backward.vec", upsample_nearest2d_backward},
    {"aten.upsample_bilinear2d.vec", upsample_bilinear2d},
    {"aten.upsample_bilinear2d_backward.vec", upsample_bilinear2d_backward},
};

}  // namespace

std::span<const CudaOpInfo> upsample_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
