// CUDA launchers of the sliding-window operators (fold_kernels.cu): im2col
// (and col2im_backward), col2im (and im2col_backward) and unfold_backward,
// with the CPU oracle's window arithmetic (fold.cpp). The adjoint sums are
// gathered per output element in the oracle's order: no atomics.
#pragma once

#include "../../common/device.hpp"

namespace kb::backendbench::aten::cuda {

struct FoldWindow {
  std::int64_t kh = 1, kw = 1, dh = 1, dw = 1, ph = 0, pw = 0, sh = 1, sw = 1;
};

// image [batch, C, H, W] (x: any strides, 3-D or 4-D) -> columns out [batch, C*kh*kw, oh*ow] (contiguous).
Launch im2col(const DView& out, const DView& image, std::int64_t batch, std::int64_t channels, std::int64_t h,
              std::int64_t w, const FoldWindow& k);
// columns (any strides) -> image out [batch, C, H, W] (contiguous), overlapping taps summed.
Launch col2im(const DView& out, const DView& columns, std::int64_t batch, std::int64_t channels, std::int64_t h,
              std::int64_t w, const FoldWindow& k);
// unfold_backward: out [outer, len, inner] (contiguous) from grad [outer, windows, inner, size] (any strides).
Launch unfold_backward(const DView& out, const DView& grad, std::int64_t outer, std::int64_t len, std::int64_t inner,
                       std::int64_t size, std::int64_t step);

}  // namespace kb::backendbench::aten::cuda
