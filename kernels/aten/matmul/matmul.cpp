// mm, bmm, addmm: double accumulation, output in the inputs' dtype.
#include <fmt/format.h>

#include "../common/args.hpp"
#include "../families.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

void same_dtype(const HostTensor& a, const HostTensor& b) {
  if (a.dtype != b.dtype)
    fail(fmt::format("expected both operands to have the same dtype, got {} and {}", dtype_abbrev(a.dtype),
                     dtype_abbrev(b.dtype)));
  require_real(a, "matmul");
}

// c[m, n] = sum_k a[m, k] b[k, n] for one batch (a, b row-major doubles).
void gemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k, std::int64_t n) {
  for (std::int64_t i = 0; i < m; ++i) {
    double* cr = c + i * n;
    for (std::int64_t j = 0; j < n; ++j) cr[j] = 0;
    for (std::int64_t p = 0; p < k; ++p) {
      const double av = a[i * k + p];
      const double* br = b + p * n;
      for (std::int64_t j = 0; j < n; ++j) cr[j] += av * br[j];
    }
  }
}

Out mm(Call& c) {
  const HostTensor& a = tensor_arg(c, 0, "self");
  const HostTensor& b = tensor_arg(c, 1, "mat2");
  same_dtype(a, b);
  if (a.rank() != 2 || b.rank() != 2 || a.shape[1] != b.shape[0])
    fail(fmt::format("cannot multiply {} by {}", shape_text(a.shape), shape_text(b.shape)));
  HostTensor out = empty_tensor(a.dtype, {a.shape[0], b.shape[1]}, c.meta);
  if (c.meta) return {out};
  auto av = to_doubles(a), bv = to_doubles(b);
  std::vector<double> cv(static_cast<std::size_t>(out.numel()));
  gemm(av.data(), bv.data(), cv.data(), a.shape[0], a.shape[1], b.shape[1]);
  for (std::size_t i = 0; i < cv.size(); ++i) out.store(static_cast<std::int64_t>(i), cv[i]);
  return {out};
}

Out bmm(Call& c) {
  const HostTensor& a = tensor_arg(c, 0, "self");
  const HostTensor& b = tensor_arg(c, 1, "mat2");
  same_dtype(a, b);
  if (a.rank() != 3 || b.rank() != 3 || a.shape[0] != b.shape[0] || a.shape[2] != b.shape[1])
    fail(fmt::format("cannot batch-multiply {} by {}", shape_text(a.shape), shape_text(b.shape)));
  const std::int64_t bs = a.shape[0], m = a.shape[1], k = a.shape[2], n = b.shape[2];
  HostTensor out = empty_tensor(a.dtype, {bs, m, n}, c.meta);
  if (c.meta) return {out};
  auto av = to_doubles(a), bv = to_doubles(b);
  std::vector<double> cv(static_cast<std::size_t>(out.numel()));
  for (std::int64_t i = 0; i < bs; ++i) gemm(av.data() + i * m * k, bv.data() + i * k * n, cv.data() + i * m * n, m, k, n);
  for (std::size_t i = 0; i < cv.size(); ++i) out.store(static_cast<std::int64_t>(i), cv[i]);
  return {out};
}

// addmm(self, mat1, mat2, *, beta=1, alpha=1) = beta * self + alpha * (mat1 @ mat2), self broadcast
Out addmm(Call& c) {
  const HostTensor& bias = tensor_arg(c, 0, "self");
  const HostTensor& a = tensor_arg(c, 1, "mat1");
  const HostTensor& b = tensor_arg(c, 2, "mat2");
  same_dtype(a, b);
  same_dtype(bias, a);
  double beta = number_arg(c, 3, "beta", 1.0), alpha = number_arg(c, 4, "alpha", 1.0);
  if (a.rank() != 2 || b.rank() != 2 || a.shape[1] != b.shape[0])
    fail(fmt::format("cannot multiply {} by {}", shape_text(a.shape), shape_text(b.shape)));
  std::vector<std::int64_t> shape{a.shape[0], b.shape[1]};
  HostTensor bview = view_as_broadcast(bias, shape);
  HostTensor out = empty_tensor(a.dtype, shape, c.meta);
  if (c.meta) return {out};
  auto av = to_doubles(a), bv = to_doubles(b), sv = to_doubles(bview);
  std::vector<double> cv(static_cast<std::size_t>(out.numel()));
  gemm(av.data(), bv.data(), cv.data(), a.shape[0], a.shape[1], b.shape[1]);
  // beta == 0 ignores self entirely (NaN in self does not propagate), as PyTorch does.
  for (std::size_t i = 0; i < cv.size(); ++i)
    out.store(static_cast<std::int64_t>(i), (beta == 0 ? 0.0 : beta * sv[i]) + alpha * cv[i]);
  return {out};
}

const OpInfo kOps[] = {
    {"aten.mm.default", "matmul", mm, nullptr},
    {"aten.bmm.default", "matmul", bmm, nullptr},
    {"aten.addmm.default", "matmul", addmm, nullptr},
};

}  // namespace

std::span<const OpInfo> matmul_ops() { return kOps; }

}  // namespace kb::backendbench::aten
