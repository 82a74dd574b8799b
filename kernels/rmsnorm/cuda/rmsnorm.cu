// kb_cuda_rmsnorm kernels: RMSNorm and fused add + RMSNorm, bf16/fp16.
//
// Rounding follows the definitions' PyTorch reference exactly:
//   x       = float(h) [+ float(r)]                 (one fp32 add)
//   ss      = sum(x*x)                               (fp32, fixed order per launch shape)
//   inv_rms = 1 / sqrt(ss / hidden + float(eps))     (fp32, each step correctly rounded)
//   y       = (x * inv_rms) * float(w)               (two fp32 multiplies, never fused)
//   out     = round_to_nearest_even(y)               (once)
// so outputs match the CPU oracle bit for bit except where inv_rms differs
// from the oracle's (fp64 sum of squares and rsqrt) in its last bit.
//
// Memory: every element of hidden_states/residual is read once from global
// memory (warp/block paths keep the row in registers), weight is read once
// per row (L2/L1 hits after the first row), output written once.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "../../common/half_bits.cuh"
#include "../../common/issue_order_load.cuh"
#include "rmsnorm_cuda.hpp"

namespace kb::kernels {
namespace {

// ---- 16-bit float <-> fp32, one element or eight (one 16-byte vector) ------

using half_bits::from_f32;
using half_bits::pack8;
using half_bits::to_f32;
using half_bits::unpack8;

// V elements starting at element `i` (V = 8: one 16-byte access; V = 1: scalar).
template <bool BF16, int V>
__device__ __forceinline__ void load_v(const void* base, std::int64_t i, float (&f)[V]) {
  if constexpr (V == 8) {
    unpack8<BF16>(*reinterpret_cast<const uint4*>(static_cast<const std::uint16_t*>(base) + i), f);
  } else {
    f[0] = to_f32<BF16>(static_cast<const std::uint16_t*>(base)[i]);
  }
}

template <bool BF16, int V>
__device__ __forceinline__ void store_v(void* base, std::int64_t i, const float (&f)[V]) {
  if constexpr (V == 8) {
    *reinterpret_cast<uint4*>(static_cast<std::uint16_t*>(base) + i) = pack8<BF16>(f);
  } else {
    static_cast<std::uint16_t*>(base)[i] = static_cast<std::uint16_t>(from_f32<BF16>(f[0]));
  }
}

__device__ __forceinline__ float warp_sum(float v, int width) {
  for (int o = width / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block; every thread gets the same value (partials added in
// warp order: deterministic). `scratch` holds one float per warp.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  v = warp_sum(v, 32);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.f;
  const int warps = (blockDim.x + 31) / 32;
  for (int i = 0; i < warps; ++i) total += scratch[i];
  return total;
}

// The reference's fp32 rsqrt(mean + EPS), each step correctly rounded (no
// approximate rsqrt, no fp64 slow path and its stack frame).
__device__ __forceinline__ float inv_rms_of(float ss, std::int64_t hidden, float eps) {
  return __frcp_rn(__fsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(hidden)), eps)));
}

// The row's arithmetic (all of it starts from hv) waits for every load of
// the row, so ptxas issues them all first: one memory round trip
// (issue_order_load.cuh). rv is read only in the fused form.
template <bool ADD, int N>
__device__ __forceinline__ void loads_before_math(uint4 (&hv)[N], const uint4 (&rv)[N], const uint4 (&wv)[N]) {
  float zero = zero_after(wv, zero_after(hv));
  if constexpr (ADD) zero = zero_after(rv, zero);
  gate(hv, zero);
}

// ---- warp path: `tpr` (power of two <= 32) lanes per row, N vectors each ----
// Rows of up to 1024 elements: no shared memory, no barrier. A block of 128
// threads holds 128 / tpr rows.

template <bool BF16, bool ADD, int N>
__global__ void __launch_bounds__(128) rmsnorm_warp_kernel(const uint4* __restrict__ h, const uint4* __restrict__ r,
                                                           const uint4* __restrict__ w, uint4* __restrict__ out,
                                                           std::int64_t rows, int nvec, int tpr, float eps) {
  const int lane = threadIdx.x % tpr;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / tpr) + threadIdx.x / tpr;
  const bool live = row < rows;  // dead lanes still join the shuffles
  const std::int64_t base = row * nvec;

  uint4 hv[N], rv[N], wv[N];
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int j = lane + k * tpr;
    if (live && j < nvec) {
      hv[k] = h[base + j];
      if constexpr (ADD) rv[k] = r[base + j];
      wv[k] = __ldg(&w[j]);
    } else {
      hv[k] = rv[k] = wv[k] = make_uint4(0, 0, 0, 0);
    }
  }
  float x[N][8];
  loads_before_math<ADD>(hv, rv, wv);
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    unpack8<BF16>(hv[k], x[k]);
    if constexpr (ADD) {
      float t[8];
      unpack8<BF16>(rv[k], t);
#pragma unroll
      for (int e = 0; e < 8; ++e) x[k][e] = x[k][e] + t[e];
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) ss += x[k][e] * x[k][e];
  }
  ss = warp_sum(ss, tpr);
  if (!live) return;
  const float inv = inv_rms_of(ss, static_cast<std::int64_t>(nvec) * 8, eps);
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int j = lane + k * tpr;
    if (j < nvec) {
      float wf[8], y[8];
      unpack8<BF16>(wv[k], wf);
#pragma unroll
      for (int e = 0; e < 8; ++e) y[e] = __fmul_rn(__fmul_rn(x[k][e], inv), wf[e]);
      out[base + j] = pack8<BF16>(y);
    }
  }
}

// ---- block path: one block of blockDim.x threads per row, N vectors each ----

template <bool BF16, bool ADD, int N>
__global__ void __launch_bounds__(N == 8 ? 512 : N == 1 ? 1024 : 128)
    rmsnorm_block_kernel(const uint4* __restrict__ h, const uint4* __restrict__ r, const uint4* __restrict__ w,
                         uint4* __restrict__ out, int nvec, float eps) {
  __shared__ float scratch[32];
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * nvec;
  const int tid = threadIdx.x, T = blockDim.x;

  uint4 hv[N], rv[N], wv[N];
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int j = tid + k * T;
    if (j < nvec) {
      hv[k] = h[base + j];
      if constexpr (ADD) rv[k] = r[base + j];
      wv[k] = __ldg(&w[j]);
    } else {
      hv[k] = rv[k] = wv[k] = make_uint4(0, 0, 0, 0);
    }
  }
  float x[N][8];
  loads_before_math<ADD>(hv, rv, wv);
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    unpack8<BF16>(hv[k], x[k]);
    if constexpr (ADD) {
      float t[8];
      unpack8<BF16>(rv[k], t);
#pragma unroll
      for (int e = 0; e < 8; ++e) x[k][e] = x[k][e] + t[e];
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) ss += x[k][e] * x[k][e];
  }
  ss = block_sum(ss, scratch);
  const float inv = inv_rms_of(ss, static_cast<std::int64_t>(nvec) * 8, eps);
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int j = tid + k * T;
    if (j < nvec) {
      float wf[8], y[8];
      unpack8<BF16>(wv[k], wf);
#pragma unroll
      for (int e = 0; e < 8; ++e) y[e] = __fmul_rn(__fmul_rn(x[k][e], inv), wf[e]);
      out[base + j] = pack8<BF16>(y);
    }
  }
}

// ---- loop path: any hidden size; two passes over the row -------------------
// The fallback for hidden % 8 != 0 or unaligned pointers (V = 1) and for rows
// too long for registers (V = 8). The second pass re-reads the row, mostly
// from L2.

template <bool BF16, bool ADD, int V>
__global__ void __launch_bounds__(512) rmsnorm_loop_kernel(const void* __restrict__ h, const void* __restrict__ r,
                                                           const void* __restrict__ w, void* __restrict__ out,
                                                           std::int64_t hidden, float eps) {
  __shared__ float scratch[32];
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * hidden;
  const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * V;
  float ss = 0.f;
  for (std::int64_t i = static_cast<std::int64_t>(threadIdx.x) * V; i < hidden; i += stride) {
    float x[V];
    load_v<BF16, V>(h, base + i, x);
    if constexpr (ADD) {
      float t[V];
      load_v<BF16, V>(r, base + i, t);
#pragma unroll
      for (int e = 0; e < V; ++e) x[e] = x[e] + t[e];
    }
#pragma unroll
    for (int e = 0; e < V; ++e) ss += x[e] * x[e];
  }
  ss = block_sum(ss, scratch);
  const float inv = inv_rms_of(ss, hidden, eps);
  for (std::int64_t i = static_cast<std::int64_t>(threadIdx.x) * V; i < hidden; i += stride) {
    float x[V], wf[V], y[V];
    load_v<BF16, V>(h, base + i, x);
    if constexpr (ADD) {
      float t[V];
      load_v<BF16, V>(r, base + i, t);
#pragma unroll
      for (int e = 0; e < V; ++e) x[e] = x[e] + t[e];
    }
    load_v<BF16, V>(w, i, wf);
#pragma unroll
    for (int e = 0; e < V; ++e) y[e] = __fmul_rn(__fmul_rn(x[e], inv), wf[e]);
    store_v<BF16, V>(out, base + i, y);
  }
}

// ---- dispatch ----------------------------------------------------------------

struct Args {
  const void* h;
  const void* r;
  const void* w;
  void* out;
  std::int64_t rows, hidden;
  float eps;  // the reference adds EPS to an fp32 tensor: EPS rounded to fp32
};

template <bool BF16, bool ADD, int N>
void launch_warp(const Args& a, const RmsnormConfig& c, cudaStream_t s) {
  rmsnorm_warp_kernel<BF16, ADD, N><<<static_cast<unsigned>(c.grid), c.block_threads, 0, s>>>(
      static_cast<const uint4*>(a.h), static_cast<const uint4*>(a.r), static_cast<const uint4*>(a.w),
      static_cast<uint4*>(a.out), a.rows, static_cast<int>(a.hidden / 8), c.threads_per_row, a.eps);
}

template <bool BF16, bool ADD, int N>
void launch_block(const Args& a, const RmsnormConfig& c, cudaStream_t s) {
  rmsnorm_block_kernel<BF16, ADD, N><<<static_cast<unsigned>(c.grid), c.block_threads, 0, s>>>(
      static_cast<const uint4*>(a.h), static_cast<const uint4*>(a.r), static_cast<const uint4*>(a.w),
      static_cast<uint4*>(a.out), static_cast<int>(a.hidden / 8), a.eps);
}

template <bool BF16, bool ADD>
void dispatch(const Args& a, const RmsnormConfig& c, cudaStream_t s) {
  using P = RmsnormConfig::Path;
  if (c.path == P::warp) {
    switch (c.vecs_per_thread) {
      case 1: return launch_warp<BF16, ADD, 1>(a, c, s);
      case 2: return launch_warp<BF16, ADD, 2>(a, c, s);
      case 3: return launch_warp<BF16, ADD, 3>(a, c, s);
      default: return launch_warp<BF16, ADD, 4>(a, c, s);
    }
  }
  if (c.path == P::block) {
    switch (c.vecs_per_thread) {
      case 1: return launch_block<BF16, ADD, 1>(a, c, s);
      case 2: return launch_block<BF16, ADD, 2>(a, c, s);
      case 3: return launch_block<BF16, ADD, 3>(a, c, s);
      case 4: return launch_block<BF16, ADD, 4>(a, c, s);
      case 5: return launch_block<BF16, ADD, 5>(a, c, s);
      case 6: return launch_block<BF16, ADD, 6>(a, c, s);
      case 7: return launch_block<BF16, ADD, 7>(a, c, s);
      default: return launch_block<BF16, ADD, 8>(a, c, s);
    }
  }
  const unsigned grid = static_cast<unsigned>(c.grid);
  if (c.vector_width == 8)
    rmsnorm_loop_kernel<BF16, ADD, 8><<<grid, c.block_threads, 0, s>>>(a.h, a.r, a.w, a.out, a.hidden, a.eps);
  else
    rmsnorm_loop_kernel<BF16, ADD, 1><<<grid, c.block_threads, 0, s>>>(a.h, a.r, a.w, a.out, a.hidden, a.eps);
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

int round_up(std::int64_t v, int m) { return static_cast<int>((v + m - 1) / m * m); }

}  // namespace

// Block shapes, by hidden size (nvec = hidden / 8 sixteen-byte vectors a row):
//  * nvec <= 128 (hidden <= 1024; 128 and 512 among the definitions): a row
//    is too short to keep a block busy, and a block-wide reduction (shared
//    memory + barrier) would cost as much as the row's loads. So a row gets
//    tpr = the smallest power of two >= nvec / N lanes of one warp, N <= 4
//    vectors each (128 -> 16 lanes x 1; 512 -> 32 x 2; 1024 -> 32 x 4); the
//    reduction is tpr-wide shuffles, and 128-thread blocks hold 128 / tpr rows.
//  * nvec <= 1024 (hidden <= 8192; 1536 ... 7168): one block per row with the
//    fewest vectors per thread N (1..8) that keeps the block at <= 128 threads
//    (1536 -> 96 x 2, 2048 -> 128 x 2, 3072 -> 128 x 3, 4096 -> 128 x 4,
//    5120 -> 128 x 5, 5376 -> 128 x 6, 7168 -> 128 x 7). Why 128: with the
//    row in registers (12 registers per vector in the fused form) a small
//    block keeps registers per SM low enough for 8+ resident blocks, so each
//    SM has 16 bytes x N x threads x blocks (~64-128 KB) of loads in flight,
//    well over the ~20 KB per SM that hides HBM latency; the reduction is 4
//    warps and one barrier. Every load of a row is issued before any
//    arithmetic (gate() in issue_order_load.cuh; before it, ptxas issued
//    part of the weight after the row's round trip). Batch 1 is latency:
//    see the next case.
//  * Few rows (rows <= kRmsnormWideRows) of 129..1024 vectors: one block of
//    nvec threads (rounded up to a warp), one vector each. A batch-1 launch is
//    latency, not bandwidth: a thread's chain of dependent work (unpack, 8
//    FFMAs per vector into one sum) is 4x shorter than with 4 vectors, the
//    longer block reduction (up to 32 partials) costs less than that. Cold,
//    on an H100: 128 x 4 vectors 4.51 us, the same with every load issued
//    first 4.38, 512 x 1 4.19, a kernel that only reads the row and the
//    weight and writes the row 4.06, an empty kernel 3.01.
//  * nvec <= 4096 (hidden <= 32768): N = 8 and as many threads as needed
//    (<= 512, bounded by registers: 8 vectors x 12 registers < 128 per thread).
//  * longer rows, hidden % 8 != 0 or unaligned pointers: the two-pass loop
//    kernel, 16-byte accesses where possible, else scalar; 256 threads (or
//    fewer for short rows) so one block per row still has loads in flight.
RmsnormConfig rmsnorm_launch_config(std::int64_t hidden, std::int64_t rows, bool vectorizable) {
  using P = RmsnormConfig::Path;
  RmsnormConfig c;
  const std::int64_t nvec = hidden / 8;
  if (vectorizable && hidden % 8 == 0 && nvec >= 1) {
    if (rows <= kRmsnormWideRows && nvec > 128 && nvec <= 1024) {
      c.path = P::block;
      c.vector_width = 8;
      c.vecs_per_thread = 1;
      c.threads_per_row = c.block_threads = round_up(nvec, 32);
      c.grid = rows;
      return c;
    }
    if (nvec <= 128) {
      for (int n = 1; n <= 4; ++n) {
        std::int64_t need = (nvec + n - 1) / n;
        int tpr = 1;
        while (tpr < need) tpr *= 2;
        if (tpr <= 32) {
          c.path = P::warp;
          c.vector_width = 8;
          c.vecs_per_thread = n;
          c.threads_per_row = tpr;
          c.block_threads = 128;
          const int rows_per_block = 128 / tpr;
          c.grid = (rows + rows_per_block - 1) / rows_per_block;
          return c;
        }
      }
    }
    for (int n = 1; n <= 8; ++n) {
      const int t = round_up((nvec + n - 1) / n, 32);
      if (t <= 128 || (n == 8 && t <= 512)) {
        c.path = P::block;
        c.vector_width = 8;
        c.vecs_per_thread = n;
        c.threads_per_row = t;
        c.block_threads = t;
        c.grid = rows;
        return c;
      }
    }
  }
  c.path = P::loop;
  c.vector_width = vectorizable && hidden % 8 == 0 ? 8 : 1;
  const std::int64_t per_row = (hidden + c.vector_width - 1) / c.vector_width;
  c.block_threads = static_cast<int>(per_row >= 256 ? 256 : round_up(per_row < 1 ? 1 : per_row, 32));
  c.threads_per_row = c.block_threads;
  c.grid = rows;
  return c;
}

Status launch_rmsnorm(const void* hidden_states, const void* residual, const void* weight, void* output,
                      std::int64_t rows, std::int64_t hidden, double eps, DType dtype, void* stream) {
  if (dtype != DType::bfloat16 && dtype != DType::float16)
    return make_error(Code::unsupported, "kb_cuda_rmsnorm: dtype must be bfloat16 or float16");
  if (rows < 0 || hidden < 0) return make_error(Code::invalid_argument, "kb_cuda_rmsnorm: negative size");
  if (rows == 0 || hidden == 0) return ok_status();
  if (!hidden_states || !weight || !output)
    return make_error(Code::invalid_argument, "kb_cuda_rmsnorm: null tensor pointer");
  const bool vec = hidden % 8 == 0 && aligned16(hidden_states) && aligned16(weight) && aligned16(output) &&
                   (!residual || aligned16(residual));
  const RmsnormConfig c = rmsnorm_launch_config(hidden, rows, vec);
  if (c.grid > 0x7fffffff) return make_error(Code::unsupported, "kb_cuda_rmsnorm: too many rows for one launch");
  const Args a{hidden_states, residual, weight, output, rows, hidden, static_cast<float>(eps)};
  auto s = static_cast<cudaStream_t>(stream);
  const bool bf16 = dtype == DType::bfloat16;
  if (bf16) {
    if (residual) dispatch<true, true>(a, c, s);
    else dispatch<true, false>(a, c, s);
  } else {
    if (residual) dispatch<false, true>(a, c, s);
    else dispatch<false, false>(a, c, s);
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    return make_error(Code::cuda_error, std::string("kb_cuda_rmsnorm: kernel launch failed: ") + cudaGetErrorName(err) +
                                            ": " + cudaGetErrorString(err));
  return ok_status();
}

}  // namespace kb::kernels
