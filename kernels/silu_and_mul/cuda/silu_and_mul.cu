// kb_cuda_silu_and_mul kernel: out[t, j] = silu(x[t, j]) * x[t, d + j].
//
// The reference's formula and roundings, in fp32:
//   g, u = float(gate), float(up)
//   sig  = 1 / (1 + exp(-g))      (torch.sigmoid's formula; accurate expf, IEEE reciprocal)
//   out  = round((g * sig) * u)   (two fp32 multiplies, never fused; one rounding)
// Memory-bound: each thread reads a 16-byte gate vector and the matching
// 16-byte up vector and writes one 16-byte vector; 2-D grid-stride loop
// (rows on y, vectors of a row on x) so there is no per-element division.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "../../common/half_bits.cuh"
#include "silu_and_mul_cuda.hpp"

namespace kb::kernels {
namespace {

using half_bits::from_f32;
using half_bits::pack8;
using half_bits::to_f32;
using half_bits::unpack8;

// V elements at element index i: one 16-byte access (V = 8) or one scalar.
template <bool BF16, int V>
__device__ __forceinline__ void load_v(const std::uint16_t* p, float (&f)[V]) {
  if constexpr (V == 8) {
    unpack8<BF16>(*reinterpret_cast<const uint4*>(p), f);
  } else {
    f[0] = to_f32<BF16>(*p);
  }
}

template <bool BF16, int V>
__device__ __forceinline__ void store_v(std::uint16_t* p, const float (&f)[V]) {
  if constexpr (V == 8) {
    *reinterpret_cast<uint4*>(p) = pack8<BF16>(f);
  } else {
    *p = static_cast<std::uint16_t>(from_f32<BF16>(f[0]));
  }
}

__device__ __forceinline__ float silu_mul(float g, float u) {
  const float sig = __frcp_rn(__fadd_rn(1.0f, expf(-g)));
  return __fmul_rn(__fmul_rn(g, sig), u);
}

template <bool BF16, int V>
__global__ void __launch_bounds__(128) silu_and_mul_kernel(const std::uint16_t* __restrict__ x,
                                                           std::uint16_t* __restrict__ out, std::int64_t rows,
                                                           std::int64_t d) {
  const std::int64_t vpr = d / V;  // vectors a row
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t jstep = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
    const std::uint16_t* gate = x + t * 2 * d;
    const std::uint16_t* up = gate + d;
    std::uint16_t* o = out + t * d;
    for (std::int64_t j = j0; j < vpr; j += jstep) {
      float g[V], u[V], y[V];
      load_v<BF16, V>(gate + j * V, g);
      load_v<BF16, V>(up + j * V, u);
#pragma unroll
      for (int e = 0; e < V; ++e) y[e] = silu_mul(g[e], u[e]);
      store_v<BF16, V>(o + j * V, y);
    }
  }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

// 128 threads a block, one 16-byte vector each per row: for the definitions'
// d (12288 .. 18432: 1536 .. 2304 vectors) a row spreads over 12 .. 18
// blocks, so even one token (batch 1) reaches a dozen SMs and the launch is
// one memory round trip; many tokens give thousands of small blocks, 16 of
// them resident per SM (2048 threads x 32 bytes of loads in flight). grid.y
// is capped at 65535 (CUDA's limit) and the kernel strides over the rest.
SiluAndMulConfig silu_and_mul_launch_config(std::int64_t rows, std::int64_t d, bool vectorizable) {
  SiluAndMulConfig c;
  c.vector_width = vectorizable && d % 8 == 0 ? 8 : 1;
  const std::int64_t vpr = d / c.vector_width;
  const std::int64_t threads = vpr >= 128 ? 128 : (vpr + 31) / 32 * 32;
  c.block_threads = static_cast<int>(threads < 32 ? 32 : threads);
  const std::int64_t gx = (vpr + c.block_threads - 1) / c.block_threads;
  c.grid_x = static_cast<unsigned>(gx < 1 ? 1 : gx > 65535 ? 65535 : gx);
  c.grid_y = static_cast<unsigned>(rows < 1 ? 1 : rows > 65535 ? 65535 : rows);
  return c;
}

Status launch_silu_and_mul(const void* x, void* out, std::int64_t rows, std::int64_t d, DType dtype, void* stream) {
  if (dtype != DType::bfloat16 && dtype != DType::float16)
    return make_error(Code::unsupported, "kb_cuda_silu_and_mul: dtype must be bfloat16 or float16");
  if (rows < 0 || d < 0) return make_error(Code::invalid_argument, "kb_cuda_silu_and_mul: negative size");
  if (rows == 0 || d == 0) return ok_status();
  if (!x || !out) return make_error(Code::invalid_argument, "kb_cuda_silu_and_mul: null tensor pointer");
  const SiluAndMulConfig c = silu_and_mul_launch_config(rows, d, aligned16(x) && aligned16(out));
  const dim3 grid(c.grid_x, c.grid_y);
  auto s = static_cast<cudaStream_t>(stream);
  auto xi = static_cast<const std::uint16_t*>(x);
  auto oi = static_cast<std::uint16_t*>(out);
  if (dtype == DType::bfloat16) {
    if (c.vector_width == 8) silu_and_mul_kernel<true, 8><<<grid, c.block_threads, 0, s>>>(xi, oi, rows, d);
    else silu_and_mul_kernel<true, 1><<<grid, c.block_threads, 0, s>>>(xi, oi, rows, d);
  } else {
    if (c.vector_width == 8) silu_and_mul_kernel<false, 8><<<grid, c.block_threads, 0, s>>>(xi, oi, rows, d);
    else silu_and_mul_kernel<false, 1><<<grid, c.block_threads, 0, s>>>(xi, oi, rows, d);
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    return make_error(Code::cuda_error, std::string("kb_cuda_silu_and_mul: kernel launch failed: ") +
                                            cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
  return ok_status();
}

}  // namespace kb::kernels
