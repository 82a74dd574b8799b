// kb's CUDA kernel for triu/tril (see copy_kernels.hpp).
#include <cstdint>

#include "../../common/cuda_typed.cuh"
#include "copy_kernels.hpp"

namespace kb::backendbench::aten::cuda {
namespace {

using namespace typed;

template <class E>
__global__ void triangle_kernel(E* out, const E* x, Strided s, long long rows, long long cols, long long diag,
                                bool upper, long long n) {
  KB_GRID_LOOP(i, n) {
    const long long col = i % cols, row = i / cols % rows;
    const bool keep = upper ? col - row >= diag : col - row <= diag;
    out[i] = keep ? x[offset_of(s, i)] : E{};
  }
}

template <class E>
Status run(void* out, const void* x, const Strided& s, long long rows, long long cols, long long diag, bool upper,
           long long n, void* stream) {
  const unsigned g = grid_for(n);
  triangle_kernel<E><<<g, kThreads, 0, stream_of(stream)>>>(static_cast<E*>(out), static_cast<const E*>(x), s, rows,
                                                           cols, diag, upper, n);
  return launched(upper ? "triu" : "tril");
}

}  // namespace

Launch triangle(const DView& out, const DView& x, std::int64_t diagonal, bool upper) {
  if (x.shape.size() < 2) fail("triu/tril need a tensor of rank >= 2");
  const Strided s = strided(x);
  const long long rows = x.shape[x.shape.size() - 2], cols = x.shape.back(), n = out.numel();
  const std::size_t es = dtype_size(x.dtype);
  void* o = out.base;
  const void* xp = x.base;
  return [=](void* stream) -> Status {
    if (n == 0) return ok_status();
    switch (es) {
      case 1: return run<std::uint8_t>(o, xp, s, rows, cols, diagonal, upper, n, stream);
      case 2: return run<std::uint16_t>(o, xp, s, rows, cols, diagonal, upper, n, stream);
      case 4: return run<std::uint32_t>(o, xp, s, rows, cols, diagonal, upper, n, stream);
      case 8: return run<std::uint64_t>(o, xp, s, rows, cols, diagonal, upper, n, stream);
      default: return run<uint4>(o, xp, s, rows, cols, diagonal, upper, n, stream);
    }
  };
}

}  // namespace kb::backendbench::aten::cuda
