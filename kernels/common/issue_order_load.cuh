// Making a one-round-trip kernel issue every load before its arithmetic.
//
// Why: a kernel that is one memory round trip long (a norm at batch 1) must
// have all its loads in flight before it waits on any. ptxas (CUDA 13,
// sm_90a) schedules a load close to its first use: rmsnorm_block_kernel's
// weight vectors, first used after the block reduction, were issued after
// the first multiply of the row's sum of squares, i.e. behind the row's
// DRAM round trip: two round trips instead of one (SASS of the batch-1
// kernel at hidden 4096: 5 of 8 LDGs before the first FFMA). Neither
// `asm volatile` loads (9 of 14 first at hidden 7168) nor loading the
// weight first in the source changed that. What does: making the first arithmetic depend on
// every load. zero_after(v) (chained: zero_after(a, zero_after(b))) is
// +0.0f for any bits in v (fmin(0, |w|) is 0 for every w, NaN included) but
// ptxas cannot know that; gate(v, zero) ORs its (zero) bits into every word
// of v, so every use of v waits for all the loads behind `zero`, and those
// loads are issued first.
#pragma once

#include <cuda_runtime.h>

namespace kb::kernels {

template <int N>
__device__ __forceinline__ float zero_after(const uint4 (&v)[N], float z = 0.f) {
#pragma unroll
  for (int k = 0; k < N; ++k) z = fminf(z, fabsf(__uint_as_float(v[k].x)));
  return z;
}

template <int N>
__device__ __forceinline__ void gate(uint4 (&v)[N], float zero) {
  const unsigned bits = __float_as_uint(zero);
#pragma unroll
  for (int k = 0; k < N; ++k) v[k].x |= bits, v[k].y |= bits, v[k].z |= bits, v[k].w |= bits;
}

}  // namespace kb::kernels
