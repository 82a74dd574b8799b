// kb's CUDA bernoulli_ (see factory_kernels.hpp). The stream is counter-based
// (draw k mixes seed + k * 0x9E3779B97F4A7C15, Rng in lib/backendbench), so
// each thread computes its own element's draw.
#include "../../common/cuda_typed.cuh"
#include "factory_kernels.hpp"

namespace kb::backendbench::aten::cuda {
namespace {

using namespace typed;

__global__ void bernoulli_kernel(void* self, Dtype dt, Strided sv, double p, std::uint64_t seed, long long n) {
  KB_GRID_LOOP(i, n) {
    std::uint64_t z = seed + static_cast<std::uint64_t>(i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const double u = static_cast<double>(z >> 11) * 0x1.0p-53;
    const bool one = u < p;
    store_any(self, dt, offset_of(sv, i), one ? 1.0 : 0.0, one ? 1 : 0, dt != Dtype::f16 && dt != Dtype::bf16 &&
                                                                          dt != Dtype::f32 && dt != Dtype::f64);
  }
}

}  // namespace

Launch bernoulli(const DView& self, double p, std::uint64_t seed) {
  const Strided sv = strided(self);
  const long long n = self.numel();
  void* base = self.base;
  const Dtype dt = self.dtype;
  if (dt == Dtype::c32 || dt == Dtype::c64 || dt == Dtype::c128) fail("bernoulli_: complex self is not supported on CUDA");
  return [=](void* s) -> Status {
    if (n > 0)
      bernoulli_kernel<<<grid_for(n), kThreads, 0, stream_of(s)>>>(
          base, dt, sv, p, seed, n);
    return launched("bernoulli_");
  };
}

}  // namespace kb::backendbench::aten::cuda
