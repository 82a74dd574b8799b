// kb_cuda_silu_and_mul kernel: out[t, j] = silu(x[t, j]) * x[t, d + j].
//
// The reference's formula and roundings, in fp32:
//   g, u = float(gate), float(up)
//   sig  = 1 / (1 + exp(-g))      (torch.sigmoid's formula; accurate expf, IEEE reciprocal)
//   out  = round((g * sig) * u)   (two fp32 multiplies, never fused; one rounding)
// Memory-bound: each thread reads the 16-byte gate and up vectors of two
// rows (all four loads in flight before any math) and writes two 16-byte
// vectors; 2-D grid-stride loop (row pairs on y, vectors of a row on x) so
// there is no per-element division.
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

__device__ __forceinline__ float silu_mul(float g, float u) {
  const float sig = __frcp_rn(__fadd_rn(1.0f, expf(-g)));
  return __fmul_rn(__fmul_rn(g, sig), u);
}

// x is read once: 16-byte loads that skip L1 (ld.global.nc.L1::no_allocate).
// No L2 policy: evict_first on the loads, the stores or both (the gemv's and
// paged decode's rule, l2_stream_policy.cuh) measured level or up to 3%
// slower here (H200).
__device__ __forceinline__ uint4 load_stream(const std::uint16_t* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Each thread takes R rows (blockIdx.y R .. + R - 1, then strides by
// gridDim.y R) at one vector column: all R rows' loads are issued before
// any math, so a thread has 2R loads in flight and a block R times the work
// of a one-row block.
template <bool BF16, int R>
__global__ void __launch_bounds__(128) silu_and_mul_vec8_kernel(const std::uint16_t* __restrict__ x,
                                                                std::uint16_t* __restrict__ out, std::int64_t rows,
                                                                std::int64_t d) {
  const std::int64_t vpr = d / 8;  // vectors a row
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t jstep = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t t0 = static_cast<std::int64_t>(blockIdx.y) * R; t0 < rows;
       t0 += static_cast<std::int64_t>(gridDim.y) * R) {
    for (std::int64_t j = j0; j < vpr; j += jstep) {
      uint4 g[R], u[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (t0 + r < rows) {
          const std::uint16_t* gate = x + (t0 + r) * 2 * d + j * 8;
          g[r] = load_stream(gate);
          u[r] = load_stream(gate + d);
        }
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (t0 + r < rows) {
          float gf[8], uf[8], y[8];
          unpack8<BF16>(g[r], gf);
          unpack8<BF16>(u[r], uf);
#pragma unroll
          for (int e = 0; e < 8; ++e) y[e] = silu_mul(gf[e], uf[e]);
          *reinterpret_cast<uint4*>(out + (t0 + r) * d + j * 8) = pack8<BF16>(y);
        }
      }
    }
  }
}

// The fallback for unaligned tensors or d % 8 != 0: one element a thread.
template <bool BF16>
__global__ void __launch_bounds__(128) silu_and_mul_scalar_kernel(const std::uint16_t* __restrict__ x,
                                                                  std::uint16_t* __restrict__ out, std::int64_t rows,
                                                                  std::int64_t d) {
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t jstep = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
    const std::uint16_t* gate = x + t * 2 * d;
    for (std::int64_t j = j0; j < d; j += jstep)
      out[t * d + j] =
          static_cast<std::uint16_t>(from_f32<BF16>(silu_mul(to_f32<BF16>(gate[j]), to_f32<BF16>(gate[d + j]))));
  }
}

template <bool BF16>
void launch_typed(const SiluAndMulConfig& c, const std::uint16_t* x, std::uint16_t* out, std::int64_t rows,
                  std::int64_t d, cudaStream_t s) {
  const dim3 grid(c.grid_x, c.grid_y);
  if (c.vector_width != 8) {
    silu_and_mul_scalar_kernel<BF16><<<grid, c.block_threads, 0, s>>>(x, out, rows, d);
  } else if (c.rows_per_thread == 4) {
    silu_and_mul_vec8_kernel<BF16, 4><<<grid, c.block_threads, 0, s>>>(x, out, rows, d);
  } else if (c.rows_per_thread == 2) {
    silu_and_mul_vec8_kernel<BF16, 2><<<grid, c.block_threads, 0, s>>>(x, out, rows, d);
  } else {
    silu_and_mul_vec8_kernel<BF16, 1><<<grid, c.block_threads, 0, s>>>(x, out, rows, d);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

// 128 threads a block, one 16-byte vector column each: for the definitions'
// d (12288 .. 18432: 1536 .. 2304 vectors) a row spreads over 12 .. 18
// blocks, so even one token (batch 1) reaches a dozen SMs and the launch is
// one memory round trip; many tokens give thousands of small blocks, 16 of
// them resident per SM. grid.y is capped at 65535 (CUDA's limit) and the
// kernel strides over the rest.
// Two rows a thread: one row a thread (a block per row of 128 vectors, 32
// bytes in flight per thread) streamed at 93-94% of copy bandwidth at 16384
// tokens and 86-89% at 4096 (300-450 MB); two rows 101-102% and 93-97%, four
// 101-102% and 91-96%, and two rows are level or faster at 1024 tokens too
// (H200, measured side by side).
SiluAndMulConfig silu_and_mul_launch_config(std::int64_t rows, std::int64_t d, bool vectorizable) {
  SiluAndMulConfig c;
  c.vector_width = vectorizable && d % 8 == 0 ? 8 : 1;
  const std::int64_t vpr = d / c.vector_width;
  const std::int64_t threads = vpr >= 128 ? 128 : (vpr + 31) / 32 * 32;
  c.block_threads = static_cast<int>(threads < 32 ? 32 : threads);
  const std::int64_t gx = (vpr + c.block_threads - 1) / c.block_threads;
  c.grid_x = static_cast<unsigned>(gx < 1 ? 1 : gx > 65535 ? 65535 : gx);
  c.rows_per_thread = c.vector_width == 8 ? 2 : 1;
  const std::int64_t gy = (rows + c.rows_per_thread - 1) / c.rows_per_thread;
  c.grid_y = static_cast<unsigned>(gy < 1 ? 1 : gy > 65535 ? 65535 : gy);
  return c;
}

Status launch_silu_and_mul(const void* x, void* out, std::int64_t rows, std::int64_t d, DType dtype, void* stream) {
  if (dtype != DType::bfloat16 && dtype != DType::float16)
    return make_error(Code::unsupported, "kb_cuda_silu_and_mul: dtype must be bfloat16 or float16");
  if (rows < 0 || d < 0) return make_error(Code::invalid_argument, "kb_cuda_silu_and_mul: negative size");
  if (rows == 0 || d == 0) return ok_status();
  if (!x || !out) return make_error(Code::invalid_argument, "kb_cuda_silu_and_mul: null tensor pointer");
  const SiluAndMulConfig c = silu_and_mul_launch_config(rows, d, aligned16(x) && aligned16(out));
  auto s = static_cast<cudaStream_t>(stream);
  auto xi = static_cast<const std::uint16_t*>(x);
  auto oi = static_cast<std::uint16_t*>(out);
  if (dtype == DType::bfloat16) launch_typed<true>(c, xi, oi, rows, d, s);
  else launch_typed<false>(c, xi, oi, rows, d, s);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    return make_error(Code::cuda_error, std::string("kb_cuda_silu_and_mul: kernel launch failed: ") +
                                            cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
  return ok_status();
}

}  // namespace kb::kernels
