// _fft_c2c's arguments, checked once for the CPU oracle (fft.cpp) and the
// CUDA plan (cuda/fft_cuda.cpp): complex self, distinct wrapped dims,
// normalization 0 (none), 1 (by_root_n) or 2 (by_n), forward.
#pragma once

#include <fmt/format.h>

#include <cmath>

#include "../common/args.hpp"

namespace kb::backendbench::aten {

struct FftArgs {
  std::vector<std::size_t> dims;
  std::int64_t norm = 0;
  bool forward = true;
  // The result's scale: 1, 1/sqrt(n) or 1/n with n the product of the transformed sizes.
  double scale(const std::vector<std::int64_t>& shape) const {
    double signal = 1;
    for (std::size_t d : dims) signal *= static_cast<double>(shape[d]);
    return norm == 0 ? 1.0 : norm == 1 ? 1.0 / std::sqrt(signal) : 1.0 / signal;
  }
};

// _fft_c2c(Tensor self, SymInt[] dim, int normalization, bool forward)
inline FftArgs fft_args_of(const Call& c, const HostTensor& x) {
  if (!is_complex(x.dtype)) fail(fmt::format("self must be complex, got {}", dtype_abbrev(x.dtype)));
  auto dims = int_list_arg(c, 1, "dim");
  if (!dims) fail("dim is required");
  FftArgs a;
  a.norm = int_arg(c, 2, "normalization");
  if (a.norm < 0 || a.norm > 2)
    fail(fmt::format("normalization {} is not a fft_norm_mode (0 none, 1 by_root_n, 2 by_n)", a.norm));
  a.forward = bool_arg(c, 3, "forward");
  std::vector<bool> seen(x.rank(), false);
  for (std::int64_t d : *dims) {
    // ATen's callers (fftn, ifftn) pass dims already wrapped; the kernel does not wrap a negative one.
    if (d < 0 || d >= static_cast<std::int64_t>(x.rank()))
      fail(fmt::format("dim {} is outside [0, {}): _fft_c2c takes wrapped dims", d, x.rank()));
    const auto w = static_cast<std::size_t>(d);
    if (seen[w]) fail(fmt::format("dim {} appears twice", d));
    seen[w] = true;
    a.dims.push_back(w);
  }
  return a;
}

}  // namespace kb::backendbench::aten
