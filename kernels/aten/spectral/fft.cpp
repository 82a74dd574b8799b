// _fft_c2c: the complex-to-complex discrete Fourier transform over a list of
// dims, PyTorch's building block of torch.fft.fftn / ifftn.
//
//   _fft_c2c(self, dim, normalization, forward)
//   out[k] = scale * sum_j self[j] * exp(sign * 2 pi i * j k / n), per dim in `dim`
//
// sign is -1 when `forward`, +1 otherwise; `normalization` is PyTorch's
// fft_norm_mode: 0 none (scale 1), 1 by_root_n (1/sqrt(n)), 2 by_n (1/n),
// with n the product of the transformed sizes, whatever the direction. The
// output has self's shape and dtype (c32, c64 or c128).
//
// The oracle computes in double: each 1-D transform by mixed-radix
// Cooley-Tukey (decimation in time over the smallest prime factor, twiddles
// from one table of exp(sign * 2 pi i * j / n) per length), a prime length
// over 32 by Bluestein's chirp-z through a power-of-two transform, so any
// length costs O(n log n) or O(n * small primes). Each part of the result is
// rounded once to the output dtype (c32: f16 parts, whose range ends at
// 65504; a larger part becomes infinity as the device's cast does).
#include <fmt/format.h>

#include <cmath>
#include <complex>
#include <memory>
#include <numbers>

#include "../common/args.hpp"
#include "../families.hpp"
#include "fft_args.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;
using cd = std::complex<double>;

// exp(sign * 2 pi i * j / n) for j in [0, n), each from its own reduced angle.
std::vector<cd> twiddles(std::int64_t n, int sign) {
  std::vector<cd> w(static_cast<std::size_t>(n));
  for (std::int64_t j = 0; j < n; ++j) {
    const double a = 2.0 * std::numbers::pi * static_cast<double>(j) / static_cast<double>(n);
    w[static_cast<std::size_t>(j)] = {std::cos(a), sign * std::sin(a)};
  }
  return w;
}

std::int64_t smallest_factor(std::int64_t n) {
  for (std::int64_t p = 2; p * p <= n; ++p)
    if (n % p == 0) return p;
  return n;
}

class Fft1d {
 public:
  Fft1d(std::int64_t n, int sign) : n_(n), sign_(sign), w_(twiddles(n, sign)) {
    if (n > 1 && smallest_factor(n) == n && n > kDirectPrime) setup_bluestein();
  }

  // x (n values) <- its transform, unscaled.
  void run(std::vector<cd>& x) {
    if (n_ <= 1) return;
    if (!chirp_.empty()) return bluestein(x);
    scratch_.resize(static_cast<std::size_t>(n_));
    recurse(x.data(), 1, n_, scratch_.data(), x.data());
  }

 private:
  static constexpr std::int64_t kDirectPrime = 32;

  // out[k] = sum_j in[j * stride] * w^(j k (n_/n)), k < n, for the sub-length n dividing n_.
  // `out` and the scratch must not overlap `in`'s reach unless in == out with stride 1 (handled by copying).
  void recurse(const cd* in, std::int64_t stride, std::int64_t n, cd* tmp, cd* out) {
    if (n == 1) {
      out[0] = in[0];
      return;
    }
    const std::int64_t step = n_ / n;  // twiddle index of exp(sign 2 pi i / n)
    const std::int64_t p = smallest_factor(n);
    if (p == n) {  // a prime sub-length: direct DFT
      std::vector<cd> r(static_cast<std::size_t>(n));
      for (std::int64_t k = 0; k < n; ++k) {
        cd acc = 0;
        for (std::int64_t j = 0; j < n; ++j) acc += in[j * stride] * w_[static_cast<std::size_t>(((j * k) % n) * step)];
        r[static_cast<std::size_t>(k)] = acc;
      }
      for (std::int64_t k = 0; k < n; ++k) out[k] = r[static_cast<std::size_t>(k)];
      return;
    }
    const std::int64_t m = n / p;
    // Sub-transforms of the p decimated sequences in[(j p + r) stride], each into tmp[r m, (r + 1) m).
    std::vector<cd> sub(static_cast<std::size_t>(n));
    for (std::int64_t r = 0; r < p; ++r)
      recurse(in + r * stride, stride * p, m, tmp, sub.data() + r * m);
    // X[k + m q] = sum_r w_n^(r (k + m q)) Y_r[k]
    for (std::int64_t k = 0; k < m; ++k)
      for (std::int64_t q = 0; q < p; ++q) {
        const std::int64_t kk = k + m * q;
        cd acc = 0;
        for (std::int64_t r = 0; r < p; ++r)
          acc += sub[static_cast<std::size_t>(r * m + k)] * w_[static_cast<std::size_t>(((r * kk) % n) * step)];
        tmp[kk] = acc;
      }
    for (std::int64_t k = 0; k < n; ++k) out[k] = tmp[k];
  }

  // Bluestein: j k = (j^2 + k^2 - (k - j)^2) / 2, so X[k] = c[k] * sum_j (x[j] c[j]) conj(c)[k - j]
  // with c[j] = exp(sign pi i j^2 / n): a convolution of length m >= 2n - 1, done by power-of-two FFTs.
  void setup_bluestein() {
    std::int64_t m = 1;
    while (m < 2 * n_ - 1) m *= 2;
    chirp_.resize(static_cast<std::size_t>(n_));
    for (std::int64_t j = 0; j < n_; ++j) {
      const std::int64_t jj = (j * j) % (2 * n_);  // exp(sign pi i j^2 / n) has period 2n in j^2
      const double a = std::numbers::pi * static_cast<double>(jj) / static_cast<double>(n_);
      chirp_[static_cast<std::size_t>(j)] = {std::cos(a), sign_ * std::sin(a)};
    }
    fwd_ = std::make_unique<Fft1d>(m, -1);
    inv_ = std::make_unique<Fft1d>(m, 1);
    kernel_.assign(static_cast<std::size_t>(m), 0);
    for (std::int64_t j = 0; j < n_; ++j) {
      const cd c = std::conj(chirp_[static_cast<std::size_t>(j)]);
      kernel_[static_cast<std::size_t>(j)] = c;
      if (j) kernel_[static_cast<std::size_t>(m - j)] = c;
    }
    fwd_->run(kernel_);
  }

  void bluestein(std::vector<cd>& x) {
    const std::size_t m = kernel_.size();
    std::vector<cd> a(m, 0);
    for (std::int64_t j = 0; j < n_; ++j) a[static_cast<std::size_t>(j)] = x[static_cast<std::size_t>(j)] * chirp_[static_cast<std::size_t>(j)];
    fwd_->run(a);
    for (std::size_t i = 0; i < m; ++i) a[i] *= kernel_[i];
    inv_->run(a);
    const double inv_m = 1.0 / static_cast<double>(m);
    for (std::int64_t k = 0; k < n_; ++k)
      x[static_cast<std::size_t>(k)] = a[static_cast<std::size_t>(k)] * inv_m * chirp_[static_cast<std::size_t>(k)];
  }

  std::int64_t n_;
  int sign_;
  std::vector<cd> w_, scratch_, chirp_, kernel_;
  std::unique_ptr<Fft1d> fwd_, inv_;
};

// _fft_c2c(Tensor self, SymInt[] dim, int normalization, bool forward)
Out fft_c2c(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  const FftArgs args = fft_args_of(c, x);
  const std::vector<std::size_t>& ds = args.dims;
  const bool forward = args.forward;
  HostTensor out = empty_tensor(x.dtype, x.shape, c.meta);
  if (c.meta) return {out};
  const std::int64_t total = x.numel();
  std::vector<cd> v(static_cast<std::size_t>(total));
  for (std::int64_t i = 0; i < total; ++i) v[static_cast<std::size_t>(i)] = x.at_complex(i);
  const auto strides = contiguous_strides(x.shape);
  for (std::size_t d : ds) {
    const std::int64_t n = x.shape[d], st = strides[d];
    if (n <= 1 || total == 0) continue;
    Fft1d f(n, forward ? -1 : 1);
    std::vector<cd> line(static_cast<std::size_t>(n));
    const std::int64_t outer = total / (n * st);
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t in = 0; in < st; ++in) {
        const std::int64_t base = o * n * st + in;
        for (std::int64_t j = 0; j < n; ++j) line[static_cast<std::size_t>(j)] = v[static_cast<std::size_t>(base + j * st)];
        f.run(line);
        for (std::int64_t j = 0; j < n; ++j) v[static_cast<std::size_t>(base + j * st)] = line[static_cast<std::size_t>(j)];
      }
  }
  const double scale = args.scale(x.shape);
  for (std::int64_t i = 0; i < total; ++i) out.store_complex(i, v[static_cast<std::size_t>(i)] * scale);
  return {out};
}

const OpInfo kOps[] = {
    {"aten._fft_c2c.default", "spectral", fft_c2c, nullptr},
};

}  // namespace

std::span<const OpInfo> spectral_ops() { return kOps; }

}  // namespace kb::backendbench::aten
