// CUDA plans for im2col / col2im_backward, col2im / im2col_backward and
// unfold_backward: the oracle's argument checks (fold.cpp), then
// fold_kernels.cu.
#include <fmt/format.h>

#include <array>

#include "../../common/args.hpp"
#include "../../cuda_families.hpp"
#include "fold_kernels.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

std::array<std::int64_t, 2> pair_arg(const Call& c, std::size_t pos, std::string_view name) {
  auto v = int_list_arg(c, pos, name);
  if (!v || v->size() != 2) fail(fmt::format("{} must be a list of two ints", name));
  return {(*v)[0], (*v)[1]};
}

cuda::FoldWindow window_of(const Call& c, std::size_t pos) {
  auto k = pair_arg(c, pos, "kernel_size"), d = pair_arg(c, pos + 1, "dilation"), p = pair_arg(c, pos + 2, "padding"),
       s = pair_arg(c, pos + 3, "stride");
  cuda::FoldWindow w{k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1]};
  if (w.kh <= 0 || w.kw <= 0 || w.dh <= 0 || w.dw <= 0 || w.sh <= 0 || w.sw <= 0 || w.ph < 0 || w.pw < 0)
    fail("kernel_size, dilation and stride must be positive and padding not negative");
  return w;
}

std::int64_t blocks(std::int64_t size, std::int64_t k, std::int64_t d, std::int64_t p, std::int64_t s) {
  const std::int64_t span = size + 2 * p - (d * (k - 1) + 1);
  if (span < 0)
    fail(fmt::format("a dim of {} padded by {} is smaller than the dilated kernel {}", size, p, d * (k - 1) + 1));
  return span / s + 1;
}

// im2col(self, kernel_size, dilation, padding, stride) and col2im_backward
Launch im2col(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  const cuda::FoldWindow k = window_of(c, 1);
  if (x.rank() != 3 && x.rank() != 4) fail(fmt::format("input must be 3-D or 4-D, got {}", shape_text(x.shape)));
  const std::size_t r = x.rank();
  const std::int64_t n = r == 4 ? x.shape[0] : 1, ch = x.shape[r - 3], h = x.shape[r - 2], w = x.shape[r - 1];
  (void)blocks(h, k.kh, k.dh, k.ph, k.sh);
  (void)blocks(w, k.kw, k.dw, k.pw, k.sw);
  return cuda::im2col(o[0], d.view(x), n, ch, h, w, k);
}

// col2im(self, output_size, kernel_size, dilation, padding, stride) and im2col_backward
Launch col2im(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  const auto size = pair_arg(c, 1, "output_size");
  const cuda::FoldWindow k = window_of(c, 2);
  if (x.rank() != 2 && x.rank() != 3) fail(fmt::format("input must be 2-D or 3-D, got {}", shape_text(x.shape)));
  const std::int64_t n = x.rank() == 3 ? x.shape[0] : 1, rows = x.shape[x.rank() - 2], l = x.shape[x.rank() - 1];
  if (rows % (k.kh * k.kw) != 0)
    fail(fmt::format("input's dim {} ({}) must be divisible by the kernel's {} taps", x.rank() - 2, rows, k.kh * k.kw));
  const std::int64_t want = blocks(size[0], k.kh, k.dh, k.ph, k.sh) * blocks(size[1], k.kw, k.dw, k.pw, k.sw);
  if (l != want)
    fail(fmt::format("input holds {} blocks, output_size {} with these windows gives {}", l,
                     shape_text({size[0], size[1]}), want));
  return cuda::col2im(o[0], d.view(x), n, rows / (k.kh * k.kw), size[0], size[1], k);
}

// unfold_backward(grad_in, input_sizes, dim, size, step)
Launch unfold_backward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& g = tensor_arg(c, 0, "grad_in");
  auto sizes = int_list_arg(c, 1, "input_sizes");
  if (!sizes) fail("input_sizes must be a list of ints");
  const std::size_t rank = sizes->size();
  const auto dim = static_cast<std::size_t>(wrap_dim(int_arg(c, 2, "dim"), rank == 0 ? 1 : rank));
  const std::int64_t size = int_arg(c, 3, "size"), step = int_arg(c, 4, "step");
  if (size < 0 || step <= 0) fail("size must be >= 0 and step > 0");
  const std::int64_t len = rank ? (*sizes)[dim] : 1;
  if (size > len) fail(fmt::format("size {} is larger than the dim's {}", size, len));
  const std::int64_t windows = (len - size) / step + 1;
  std::vector<std::int64_t> want = *sizes;
  if (rank) want[dim] = windows;
  want.push_back(size);
  if (g.shape != want) fail(fmt::format("grad_in {} must be {}", shape_text(g.shape), shape_text(want)));
  std::int64_t outer = 1, inner = 1;
  for (std::size_t k = 0; k < rank; ++k) {
    if (k < dim) outer *= (*sizes)[k];
    if (k > dim) inner *= (*sizes)[k];
  }
  return cuda::unfold_backward(o[0], d.view(g), outer, len, inner, size, step);
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
