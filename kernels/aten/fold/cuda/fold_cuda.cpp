// CUDA plans for im2col / col2im_backward, col2im / im2col_backward and
// unfold_backward: the oracle's argument checks (fold.cpp), then
// fold_kernels.cu.
#include <fmt/format.h>

#include <array>

#include "../../common/args.hpp"
#include "../../cuda_families.hpp"
#include "../fold_args.hpp"
#include "fold_kernels.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

cuda::FoldWindow window_of(const Call& c, std::size_t pos) {
  const FoldArgs a = fold_window_of(c, pos);
  return cuda::FoldWindow{a.kh, a.kw, a.dh, a.dw, a.ph, a.pw, a.sh, a.sw};
}

// im2col(self, kernel_size, dilation, padding, stride) and col2im_backward
Launch im2col(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  const cuda::FoldWindow k = window_of(c, 1);
  if (x.rank() != 3 && x.rank() != 4) fail(fmt::format("input must be 3-D or 4-D, got {}", shape_text(x.shape)));
  const std::size_t r = x.rank();
  const std::int64_t n = r == 4 ? x.shape[0] : 1, ch = x.shape[r - 3], h = x.shape[r - 2], w = x.shape[r - 1];
  (void)fold_blocks(h, k.kh, k.dh, k.ph, k.sh);
  (void)fold_blocks(w, k.kw, k.dw, k.pw, k.sw);
  return cuda::im2col(o[0], d.view(x), n, ch, h, w, k);
}

// col2im(self, output_size, kernel_size, dilation, padding, stride) and im2col_backward
Launch col2im(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  const auto size = fold_pair_arg(c, 1, "output_size");
  const cuda::FoldWindow k = window_of(c, 2);
  if (x.rank() != 2 && x.rank() != 3) fail(fmt::format("input must be 2-D or 3-D, got {}", shape_text(x.shape)));
  const std::int64_t n = x.rank() == 3 ? x.shape[0] : 1, rows = x.shape[x.rank() - 2], l = x.shape[x.rank() - 1];
  if (rows % (k.kh * k.kw) != 0)
    fail(fmt::format("input's dim {} ({}) must be divisible by the kernel's {} taps", x.rank() - 2, rows, k.kh * k.kw));
  const std::int64_t want = fold_blocks(size[0], k.kh, k.dh, k.ph, k.sh) * fold_blocks(size[1], k.kw, k.dw, k.pw, k.sw);
  if (l != want)
    fail(fmt::format("input holds {} blocks, output_size {} with these windows gives {}", l,
                     shape_text({size[0], size[1]}), want));
  return cuda::col2im(o[0], d.view(x), n, rows / (k.kh * k.kw), size[0], size[1], k);
}

// unfold_backward(grad_in, input_sizes, dim, size, step)
Launch unfold_backward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& g = tensor_arg(c, 0, "grad_in");
  const UnfoldArgs u = unfold_backward_args(c, g);
  return cuda::unfold_backward(o[0], d.view(g), u.outer, u.len, u.inner, u.size, u.step);
}

const CudaOpInfo kOps[] = {
    {"aten.im2col.default", im2col},
    {"aten.col2im_backward.default", im2col},
    {"aten.col2im.default", col2im},
    {"aten.im2col_backward.default", col2im},
    {"aten.unfold_backward.default", unfold_backward},
};

}  // namespace

std::span<const CudaOpInfo> fold_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
