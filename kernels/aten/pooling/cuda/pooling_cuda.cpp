// CUDA plans for the 2-D pooling operators: the oracle's argument parsing and
// checks (pooling.cpp: kernel_size, stride defaulting to kernel_size,
// padding, dilation, ceil_mode, count_include_pad, divisor_override, output
// sizes) and pooling_kernels.cu's launchers.
#include <fmt/format.h>

#include "../../common/args.hpp"
#include "../../cuda_families.hpp"
#include "../pool_window.hpp"
#include "pooling_kernels.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

void require_planes(const HostTensor& x, const char* what) {
  if (x.rank() != 3 && x.rank() != 4)
    fail(fmt::format("{} must be [C, H, W] or [N, C, H, W], got {}", what, shape_text(x.shape)));
}
std::int64_t height(const HostTensor& x) { return x.shape[x.rank() - 2]; }
std::int64_t width(const HostTensor& x) { return x.shape[x.rank() - 1]; }

// The window arguments starting at `at` (kernel_size, stride, padding[, dilation], ceil_mode).
cuda::PoolWindow window(const Call& c, const HostTensor& x, std::size_t at, bool dilation) {
  require_planes(x, "self");
  const PoolArgs win = pool_window(c, height(x), width(x), at, dilation);
  cuda::PoolWindow w;
  w.kh = win.k[0], w.kw = win.k[1], w.sh = win.s[0], w.sw = win.s[1], w.ph = win.p[0], w.pw = win.p[1];
  w.dh = win.d[0], w.dw = win.d[1], w.oh = win.oh, w.ow = win.ow;
  return w;
}

cuda::PoolWindow avg_window(const Call& c, const HostTensor& x, std::size_t at) {
  cuda::PoolWindow w = window(c, x, at, false);
  w.include_pad = bool_arg(c, at + 4, "count_include_pad", true);
  if (has_arg(c, at + 5, "divisor_override")) {
    w.divisor = int_arg(c, at + 5, "divisor_override");
    if (w.divisor == 0) fail("divisor_override must not be zero");
  }
  return w;
}

// max_pool2d_with_indices(self, kernel_size, stride=[], padding=0, dilation=1, ceil_mode=False)
Launch max_pool2d_with_indices(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  require_real(x, "self");
  return cuda::max_pool2d(o[0], o[1], d.view(x), window(c, x, 1, true));
}

// max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices)
Launch max_pool2d_with_indices_backward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const HostTensor& x = tensor_arg(c, 1, "self");
  const HostTensor& ind = tensor_arg(c, 7, "indices");
  cuda::PoolWindow w = window(c, x, 2, true);
  auto want = with_plane(x, w.oh, w.ow);
  if (g.shape != want || ind.shape != want)
    fail(fmt::format("grad_output {} and indices {} must be {}", shape_text(g.shape), shape_text(ind.shape),
                     shape_text(want)));
  if (ind.dtype != Dtype::i64) fail("indices must be i64");
  const std::int64_t plane = height(x) * width(x);
  for (std::int64_t i = 0; i < ind.numel(); ++i) {
    const auto at = static_cast<std::int64_t>(ind.at(i));
    if (at < 0 || at >= plane)
      fail(fmt::format("index {} out of range for a {}x{} plane", at, height(x), width(x)));
  }
  return cuda::max_pool2d_backward(o[0], d.view(g), d.view(ind));
}

// avg_pool2d(self, kernel_size, stride=[], padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None)
Launch avg_pool2d(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  if (!is_floating(x.dtype)) fail("avg_pool2d needs a floating input");
  return cuda::avg_pool2d(o[0], d.view(x), avg_window(c, x, 1));
}

// avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
Launch avg_pool2d_backward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const HostTensor& x = tensor_arg(c, 1, "self");
  cuda::PoolWindow w = avg_window(c, x, 2);
  if (g.shape != with_plane(x, w.oh, w.ow))
    fail(fmt::format("grad_output {} must be {}", shape_text(g.shape), shape_text(with_plane(x, w.oh, w.ow))));
  return cuda::avg_pool2d_backward(o[0], d.view(g), w);
}

// _adaptive_avg_pool2d(self, output_size)
Launch adaptive_avg_pool2d(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  if (!is_floating(x.dtype)) fail("adaptive_avg_pool2d needs a floating input");
  require_planes(x, "self");
  auto os = pair_arg(c, 1, "output_size", {});
  if (os.empty() || os[0] < 1 || os[1] < 1) fail("output_size must hold two positive sizes");
  return cuda::adaptive_avg_pool2d(o[0], d.view(x));
}

// _adaptive_avg_pool2d_backward(grad_output, self)
Launch adaptive_avg_pool2d_backward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  const HostTensor& x = tensor_arg(c, 1, "self");
  require_planes(x, "self");
  require_planes(g, "grad_output");
  if (g.rank() != x.rank() || !std::equal(g.shape.begin(), g.shape.end() - 2, x.shape.begin()))
    fail(fmt::format("grad_output {} does not match self {}", shape_text(g.shape), shape_text(x.shape)));
  return cuda::adaptive_avg_pool2d_backward(o[0], d.view(g));
}

const CudaOpInfo kOps[] = {
    {"aten.max_pool2d_with_indices.default", max_pool2d_with_indices},
    {"aten.max_pool2d_with_indices_backward.default", max_pool2d_with_indices_backward},
    {"aten.avg_pool2d.default", avg_pool2d},
    {"aten.avg_pool2d_backward.default", avg_pool2d_backward},
    {"aten._adaptive_avg_pool2d.default", adaptive_avg_pool2d},
    {"aten._adaptive_avg_pool2d_backward.default", adaptive_avg_pool2d_backward},
};

}  // namespace

std::span<const CudaOpInfo> pooling_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
