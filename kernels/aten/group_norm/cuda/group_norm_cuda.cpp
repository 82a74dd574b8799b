// CUDA plans for native_group_norm and its backward: the oracle's checks
// (group_norm.cpp), then group_norm_kernels.cu.
#include <fmt/format.h>

#include "../../common/args.hpp"
#include "../../cuda_families.hpp"
#include "group_norm_kernels.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

cuda::GroupNormDims dims_of(const Call& c, std::size_t at, const HostTensor& x) {
  cuda::GroupNormDims s{int_arg(c, at, "N"), int_arg(c, at + 1, "C"), int_arg(c, at + 2, "HxW"), int_arg(c, at + 3, "group")};
  if (s.n < 0 || s.c < 0 || s.hw < 0 || s.g <= 0) fail("N, C and HxW must be >= 0 and group > 0");
  if (s.c % s.g != 0) fail(fmt::format("C ({}) must be divisible by group ({})", s.c, s.g));
  if (x.numel() != s.n * s.c * s.hw)
    fail(fmt::format("input {} does not hold N * C * HxW = {} elements", shape_text(x.shape), s.n * s.c * s.hw));
  if (x.rank() < 2 || x.shape[0] != s.n || x.shape[1] != s.c) fail("input must be [N, C, *]");
  return s;
}

void check_channel_vector(const HostTensor* t, std::int64_t c, std::string_view what) {
  if (t && (t->rank() != 1 || t->shape[0] != c))
    fail(fmt::format("{} must be [{}], got {}", what, c, shape_text(t->shape)));
}

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean, rstd)
Launch group_norm(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "input");
  const HostTensor* w = optional_tensor(c, 1, "weight");
  const HostTensor* b = optional_tensor(c, 2, "bias");
  require_real(x, "input");
  cuda::GroupNormDims s = dims_of(c, 3, x);
  const double eps = number_arg(c, 7, "eps");
  check_channel_vector(w, s.c, "weight");
  check_channel_vector(b, s.c, "bias");
  std::optional<DView> wv, bv;
  if (w) wv = d.view(*w);
  if (b) bv = d.view(*b);
  return cuda::group_norm(o[0], o[1], o[2], d.view(x), wv ? &*wv : nullptr, bv ? &*bv : nullptr, s, eps);
}

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW, group, output_mask)
Launch group_norm_backward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& dy = tensor_arg(c, 0, "grad_out");
  const HostTensor& x = tensor_arg(c, 1, "input");
  const HostTensor& mean = tensor_arg(c, 2, "mean");
  const HostTensor& rstd = tensor_arg(c, 3, "rstd");
  const HostTensor* w = optional_tensor(c, 4, "weight");
  require_real(x, "input");
  cuda::GroupNormDims s = dims_of(c, 5, x);
  check_channel_vector(w, s.c, "weight");
  if (dy.shape != x.shape)
    fail(fmt::format("grad_out {} must have input's shape {}", shape_text(dy.shape), shape_text(x.shape)));
  if (mean.numel() != s.n * s.g || rstd.numel() != s.n * s.g)
    fail(fmt::format("mean and rstd must hold N * group = {} values", s.n * s.g));
  std::optional<DView> wv;
  if (w) wv = d.view(*w);
  return cuda::group_norm_backward(o[0], o[1], o[2], d.view(dy), d.view(x), d.view(mean), d.view(rstd),
                                   wv ? &*wv : nullptr, s);
}

const CudaOpInfo kOps[] = {
    {"aten.native_group_norm.default", group_norm},
    {"aten.native_group_norm_backward.default", group_norm_backward},
};

}  // namespace

std::span<const CudaOpInfo> group_norm_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
