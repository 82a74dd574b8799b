// kb's CUDA convolution (see conv_kernels.hpp): each of the three products is
// an implicit GEMM out[m][n] = sum_k A[m][k] * B[k][n] per group, its operands
// read straight from the strided tensors (im2col addressing computed on the
// fly, taps outside the input reading zero):
//
//   product          m (rows)        n (columns)        k (summed)
//   forward          (n, o)          co in the group    (ci in the group, tap)
//   backward data    (n, i)          ci in the group    (co in the group, tap)
//   backward weight  co in the group (ci in the group, tap)  (n, o)
//
// Backward data reads gy at o_d = (i_d + pad_d - t_d * dil_d) / stride_d where
// that divides exactly and falls inside out_d (the adjoint's taps).
//
// Three kernels share those operand readers:
//  - gemm: 64 x 64 output tiles, 256 threads of 4 x 4 sums, k in steps of 16
//    through shared memory; used when both tile sides are at least kWide.
//    f16/bf16 tiles multiply on tensor cores (wmma 16 x 16 x 16, fp32 sums);
//    f32, f64 and the fp64 reference on the scalar tile.
//    When the tiles are too few to fill the device and k is long, k is split
//    over blocks that write partial sums to scratch, added in a fixed order by
//    a finishing kernel (no atomics: the result does not depend on timing).
//  - direct: one thread per output element, for narrow products (depthwise
//    forward and backward data: one column per group).
//  - reduce: one block per output element summing a long k, for narrow
//    weight gradients (depthwise: one row per group, k = N * positions).
// Sums run in Acc: fp32 for f16/bf16/f32, fp64 for f64 and the GPU reference.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include "../../common/args.hpp"
#include "../../common/cuda_engine.hpp"
#include "conv_kernels.hpp"

namespace kb::backendbench::aten::cuda {
namespace {

enum Prod : int { kForward = 0, kBackwardData = 1, kBackwardWeight = 2 };

constexpr int kBM = 64, kBN = 64, kBK = 16, kThreads = 256;
// Both sides of a product at least this wide run as tiles; narrower ones run direct.
constexpr std::int64_t kWide = 32;

struct KP {
  int groups = 1, cig = 1, cog = 1, n = 1;
  int kvol = 1, ocount = 1, icount = 1;
  int in[3], out[3], k[3], st[3], pad[3], dil[3];
  int M = 0, N = 0, K = 0;  // the product's sizes per group
  const void* x = nullptr;   // the in side [N][Ci][in]
  const void* gy = nullptr;  // the out side [N][Co][out]
  const void* w = nullptr;   // [Co][Ci/G][k]
  void* o = nullptr;         // the product's output
  const void* bias = nullptr;
  long long xs[5], ys[5], ws[5], os[5], bs = 0;
  void* partial = nullptr;  // split-k partial sums in Acc, [split][group][M][N]
  int splits = 1, kchunk = 0;
};

template <class T>
__device__ __forceinline__ float ld_f(const void* p, long long i);
template <>
__device__ __forceinline__ float ld_f<__half>(const void* p, long long i) {
  return __half2float(static_cast<const __half*>(p)[i]);
}
template <>
__device__ __forceinline__ float ld_f<__nv_bfloat16>(const void* p, long long i) {
  return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}
template <>
__device__ __forceinline__ float ld_f<float>(const void* p, long long i) {
  return static_cast<const float*>(p)[i];
}

template <class T, class Acc>
__device__ __forceinline__ Acc ld(const void* p, long long i) {
  if constexpr (std::is_same_v<T, double>) return static_cast<Acc>(static_cast<const double*>(p)[i]);
  else return static_cast<Acc>(ld_f<T>(p, i));
}

// One rounding from Acc to T.
template <class T, class Acc>
__device__ __forceinline__ void st(void* p, long long i, Acc v) {
  if constexpr (std::is_same_v<T, double>) {
    static_cast<double*>(p)[i] = static_cast<double>(v);
  } else if constexpr (std::is_same_v<T, float>) {
    static_cast<float*>(p)[i] = static_cast<float>(v);
  } else if constexpr (std::is_same_v<T, __half>) {
    if constexpr (std::is_same_v<Acc, double>) static_cast<__half*>(p)[i] = __double2half(v);
    else static_cast<__half*>(p)[i] = __float2half_rn(v);
  } else {
    if constexpr (std::is_same_v<Acc, double>) static_cast<__nv_bfloat16*>(p)[i] = __double2bfloat16(v);
    else static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  }
}

// idx over sizes s[0..2] (row-major) -> c[0..2]
__device__ __forceinline__ void decode3(int idx, const int* s, int* c) {
  c[2] = idx % s[2];
  idx /= s[2];
  c[1] = idx % s[1];
  c[0] = idx / s[1];
}

// A row (m) or B column (n) with what its k loop needs precomputed.
struct Ctx {
  long long base = 0;
  int a[3] = {0, 0, 0};
  bool valid = false;
};

template <int P>
__device__ __forceinline__ Ctx row_ctx(const KP& p, int g, int m) {
  Ctx c;
  c.valid = m < p.M;
  if (!c.valid) return c;
  if constexpr (P == kForward) {
    const int n = m / p.ocount;
    int o[3];
    decode3(m - n * p.ocount, p.out, o);
    c.base = n * p.xs[0] + static_cast<long long>(g) * p.cig * p.xs[1];
    for (int d = 0; d < 3; ++d) c.a[d] = o[d] * p.st[d] - p.pad[d];
  } else if constexpr (P == kBackwardData) {
    const int n = m / p.icount;
    int i[3];
    decode3(m - n * p.icount, p.in, i);
    c.base = n * p.ys[0] + static_cast<long long>(g) * p.cog * p.ys[1];
    for (int d = 0; d < 3; ++d) c.a[d] = i[d] + p.pad[d];
  } else {
    c.base = (static_cast<long long>(g) * p.cog + m) * p.ys[1];
  }
  return c;
}

template <int P>
__device__ __forceinline__ Ctx col_ctx(const KP& p, int g, int nn) {
  Ctx c;
  c.valid = nn < p.N;
  if (!c.valid) return c;
  if constexpr (P == kForward) {
    c.base = (static_cast<long long>(g) * p.cog + nn) * p.ws[0];
  } else if constexpr (P == kBackwardData) {
    c.base = static_cast<long long>(g) * p.cog * p.ws[0] + nn * p.ws[1];
  } else {
    const int ch = nn / p.kvol;
    int t[3];
    decode3(nn - ch * p.kvol, p.k, t);
    c.base = (static_cast<long long>(g) * p.cig + ch) * p.xs[1];
    for (int d = 0; d < 3; ++d) c.a[d] = t[d] * p.dil[d] - p.pad[d];
  }
  return c;
}

// Where A[m][k] lies in its tensor (x for forward, gy otherwise) for the
// row's context, or -1 where it is zero (a tap outside); k < K.
template <int P>
__device__ __forceinline__ long long a_off(const KP& p, const Ctx& r, int k) {
  if constexpr (P == kForward) {
    const int ch = k / p.kvol;
    int t[3];
    decode3(k - ch * p.kvol, p.k, t);
    long long off = r.base + ch * p.xs[1];
    for (int d = 0; d < 3; ++d) {
      const int i = r.a[d] + t[d] * p.dil[d];
      if (i < 0 || i >= p.in[d]) return -1;
      off += i * p.xs[2 + d];
    }
    return off;
  } else if constexpr (P == kBackwardData) {
    const int ch = k / p.kvol;
    int t[3];
    decode3(k - ch * p.kvol, p.k, t);
    long long off = r.base + ch * p.ys[1];
    for (int d = 0; d < 3; ++d) {
      const int num = r.a[d] - t[d] * p.dil[d];
      if (num < 0) return -1;
      const int o = num / p.st[d];
      if (o * p.st[d] != num || o >= p.out[d]) return -1;
      off += o * p.ys[2 + d];
    }
    return off;
  } else {
    const int n = k / p.ocount;
    int o[3];
    decode3(k - n * p.ocount, p.out, o);
    return r.base + n * p.ys[0] + o[0] * p.ys[2] + o[1] * p.ys[3] + o[2] * p.ys[4];
  }
}

// Where B[k][n] lies in its tensor (w, or x for backward weight) for the
// column's context, or -1 where it is zero; k < K.
template <int P>
__device__ __forceinline__ long long b_off(const KP& p, const Ctx& c, int k) {
  if constexpr (P == kForward || P == kBackwardData) {
    const int ch = k / p.kvol;
    int t[3];
    decode3(k - ch * p.kvol, p.k, t);
    const long long chs = P == kForward ? p.ws[1] : p.ws[0];
    return c.base + ch * chs + t[0] * p.ws[2] + t[1] * p.ws[3] + t[2] * p.ws[4];
  } else {
    const int n = k / p.ocount;
    int o[3];
    decode3(k - n * p.ocount, p.out, o);
    long long off = c.base + n * p.xs[0];
    for (int d = 0; d < 3; ++d) {
      const int i = o[d] * p.st[d] + c.a[d];
      if (i < 0 || i >= p.in[d]) return -1;
      off += i * p.xs[2 + d];
    }
    return off;
  }
}

template <int P>
__device__ __forceinline__ const void* a_tensor(const KP& p) {
  return P == kForward ? p.x : p.gy;
}
template <int P>
__device__ __forceinline__ const void* b_tensor(const KP& p) {
  return P == kBackwardWeight ? p.x : p.w;
}

template <class T, class Acc, int P>
__device__ __forceinline__ Acc a_at(const KP& p, const Ctx& r, int k) {
  const long long off = a_off<P>(p, r, k);
  return off < 0 ? Acc(0) : ld<T, Acc>(a_tensor<P>(p), off);
}
template <class T, class Acc, int P>
__device__ __forceinline__ Acc b_at(const KP& p, const Ctx& c, int k) {
  const long long off = b_off<P>(p, c, k);
  return off < 0 ? Acc(0) : ld<T, Acc>(b_tensor<P>(p), off);
}

// Stores out[m][nn] of group g (m < M, nn < N), adding the bias where given.
template <class T, class Acc, int P>
__device__ __forceinline__ void store_out(const KP& p, int g, int m, int nn, Acc v) {
  long long off;
  if constexpr (P == kForward || P == kBackwardData) {
    const int count = P == kForward ? p.ocount : p.icount;
    const int n = m / count;
    int s[3];
    decode3(m - n * count, P == kForward ? p.out : p.in, s);
    const long long ch = static_cast<long long>(g) * (P == kForward ? p.cog : p.cig) + nn;
    off = n * p.os[0] + ch * p.os[1] + s[0] * p.os[2] + s[1] * p.os[3] + s[2] * p.os[4];
    if (p.bias) v += ld<T, Acc>(p.bias, ch * p.bs);
  } else {
    const int ch = nn / p.kvol;
    int t[3];
    decode3(nn - ch * p.kvol, p.k, t);
    off = (static_cast<long long>(g) * p.cog + m) * p.os[0] + ch * p.os[1] + t[0] * p.os[2] + t[1] * p.os[3] +
          t[2] * p.os[4];
  }
  st<T, Acc>(p.o, off, v);
}

template <class T, class Acc, int P>
__global__ void __launch_bounds__(kThreads) conv_gemm_kernel(KP p) {
  __shared__ Acc As[kBK][kBM + 4];
  __shared__ Acc Bs[kBK][kBN + 4];
  const int g = static_cast<int>(blockIdx.z) % p.groups, split = static_cast<int>(blockIdx.z) / p.groups;
  const int m0 = static_cast<int>(blockIdx.x) * kBM, n0 = static_cast<int>(blockIdx.y) * kBN;
  const int kb = split * p.kchunk, ke = min(p.K, kb + p.kchunk);
  const int tid = static_cast<int>(threadIdx.x);
  const int lm = tid & 63, lk = tid >> 6;
  const Ctx rc = row_ctx<P>(p, g, m0 + lm);
  const Ctx cc = col_ctx<P>(p, g, n0 + lm);
  const int tx = tid & 15, ty = tid >> 4;
  Acc acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = Acc(0);
  for (int k0 = kb; k0 < ke; k0 += kBK) {
#pragma unroll
    for (int j = 0; j < kBK / 4; ++j) {
      const int kk = lk + 4 * j, k = k0 + kk;
      As[kk][lm] = rc.valid && k < ke ? a_at<T, Acc, P>(p, rc, k) : Acc(0);
      Bs[kk][lm] = cc.valid && k < ke ? b_at<T, Acc, P>(p, cc, k) : Acc(0);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      Acc a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[kk][ty * 4 + i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx * 4 + j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int m = m0 + ty * 4 + i;
    if (m >= p.M) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int nn = n0 + tx * 4 + j;
      if (nn >= p.N) continue;
      if (p.partial)
        static_cast<Acc*>(p.partial)[((static_cast<long long>(split) * p.groups + g) * p.M + m) * p.N + nn] = acc[i][j];
      else
        store_out<T, Acc, P>(p, g, m, nn, acc[i][j]);
    }
  }
}

// The gemm tile on tensor cores (f16/bf16 inputs, fp32 sums): the same
// 64 x 64 x 16 tiling and operand readers, the tiles staged in shared memory
// in the input dtype (exact: they are the tensors' own values, zeros for taps
// outside), each of the 8 warps multiplying a 16 x 32 strip with
// 16 x 16 x 16 mma fragments, the sums staged through shared memory to the
// same epilogue as the scalar tile.
template <class T, int P>
__global__ void __launch_bounds__(kThreads) conv_gemm_mma_kernel(KP p) {
  constexpr int kLdA = kBK + 8, kLdB = kBN + 8, kLdC = kBN + 4;
  __shared__ __align__(32) T As[kBM][kLdA];  // [m][k]
  __shared__ __align__(32) T Bs[kBK][kLdB];  // [k][n]
  __shared__ __align__(32) float Cs[kBM][kLdC];
  const int g = static_cast<int>(blockIdx.z) % p.groups, split = static_cast<int>(blockIdx.z) / p.groups;
  const int m0 = static_cast<int>(blockIdx.x) * kBM, n0 = static_cast<int>(blockIdx.y) * kBN;
  const int kb = split * p.kchunk, ke = min(p.K, kb + p.kchunk);
  const int tid = static_cast<int>(threadIdx.x);
  const int lm = tid & 63, lk = tid >> 6;
  const Ctx rc = row_ctx<P>(p, g, m0 + lm);
  const Ctx cc = col_ctx<P>(p, g, n0 + lm);
  const T* at = static_cast<const T*>(a_tensor<P>(p));
  const T* bt = static_cast<const T*>(b_tensor<P>(p));
  const T zero = T(0.0f);
  const int warp = tid >> 5, wm = warp >> 1, wn = warp & 1;
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> acc[2];
  nvcuda::wmma::fill_fragment(acc[0], 0.0f);
  nvcuda::wmma::fill_fragment(acc[1], 0.0f);
  for (int k0 = kb; k0 < ke; k0 += kBK) {
#pragma unroll
    for (int j = 0; j < kBK / 4; ++j) {
      const int kk = lk + 4 * j, k = k0 + kk;
      const long long ao = rc.valid && k < ke ? a_off<P>(p, rc, k) : -1;
      const long long bo = cc.valid && k < ke ? b_off<P>(p, cc, k) : -1;
      As[lm][kk] = ao < 0 ? zero : at[ao];
      Bs[kk][lm] = bo < 0 ? zero : bt[bo];
    }
    __syncthreads();
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, T, nvcuda::wmma::row_major> fa;
    nvcuda::wmma::load_matrix_sync(fa, &As[wm * 16][0], kLdA);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, T, nvcuda::wmma::row_major> fb;
      nvcuda::wmma::load_matrix_sync(fb, &Bs[0][wn * 32 + j * 16], kLdB);
      nvcuda::wmma::mma_sync(acc[j], fa, fb, acc[j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int j = 0; j < 2; ++j)
    nvcuda::wmma::store_matrix_sync(&Cs[wm * 16][wn * 32 + j * 16], acc[j], kLdC, nvcuda::wmma::mem_row_major);
  __syncthreads();
  for (int e = tid; e < kBM * kBN; e += kThreads) {
    const int m = m0 + e / kBN, nn = n0 + e % kBN;
    if (m >= p.M || nn >= p.N) continue;
    const float v = Cs[e / kBN][e % kBN];
    if (p.partial)
      static_cast<float*>(p.partial)[((static_cast<long long>(split) * p.groups + g) * p.M + m) * p.N + nn] = v;
    else
      store_out<T, float, P>(p, g, m, nn, v);
  }
}

// The split-k partial sums of each output element, added in split order.
template <class T, class Acc, int P>
__global__ void conv_finish_kernel(KP p) {
  const long long total = static_cast<long long>(p.groups) * p.M * p.N;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    Acc v = 0;
    for (int s = 0; s < p.splits; ++s) v += static_cast<const Acc*>(p.partial)[s * total + e];
    const int nn = static_cast<int>(e % p.N);
    const long long gm = e / p.N;
    store_out<T, Acc, P>(p, static_cast<int>(gm / p.M), static_cast<int>(gm % p.M), nn, v);
  }
}

// One thread per output element; consecutive threads take consecutive rows.
template <class T, class Acc, int P>
__global__ void conv_direct_kernel(KP p) {
  const long long total = static_cast<long long>(p.groups) * p.N * p.M;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int m = static_cast<int>(e % p.M);
    const long long gn = e / p.M;
    const int nn = static_cast<int>(gn % p.N), g = static_cast<int>(gn / p.N);
    const Ctx rc = row_ctx<P>(p, g, m);
    const Ctx cc = col_ctx<P>(p, g, nn);
    Acc acc = 0;
    for (int k = 0; k < p.K; ++k) acc += a_at<T, Acc, P>(p, rc, k) * b_at<T, Acc, P>(p, cc, k);
    store_out<T, Acc, P>(p, g, m, nn, acc);
  }
}

// One block per output element, its threads striding over k.
template <class T, class Acc, int P>
__global__ void __launch_bounds__(kThreads) conv_reduce_kernel(KP p) {
  __shared__ Acc part[kThreads / 32];
  const long long e = blockIdx.x;
  const int nn = static_cast<int>(e % p.N);
  const long long gm = e / p.N;
  const int m = static_cast<int>(gm % p.M), g = static_cast<int>(gm / p.M);
  const Ctx rc = row_ctx<P>(p, g, m);
  const Ctx cc = col_ctx<P>(p, g, nn);
  Acc acc = 0;
  for (int k = static_cast<int>(threadIdx.x); k < p.K; k += kThreads)
    acc += a_at<T, Acc, P>(p, rc, k) * b_at<T, Acc, P>(p, cc, k);
  for (int s = 16; s > 0; s >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, s);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    Acc v = 0;
    for (int i = 0; i < kThreads / 32; ++i) v += part[i];
    store_out<T, Acc, P>(p, g, m, nn, v);
  }
}

Status check_launch(const char* what) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return ok_status();
  return make_error(Code::cuda_error, std::string(what) + ": " + cudaGetErrorString(e));
}

int sm_count() {
  static int n = [] {
    int dev = 0, v = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev);
    return v > 0 ? v : 132;
  }();
  return n;
}

enum class Kind { gemm, direct, reduce };

template <class T, class Acc, int P>
Status launch(const KP& p, Kind kind, bool mma, cudaStream_t s) {
  if (kind == Kind::gemm) {
    dim3 grid(static_cast<unsigned>((p.M + kBM - 1) / kBM), static_cast<unsigned>((p.N + kBN - 1) / kBN),
              static_cast<unsigned>(p.groups * p.splits));
    if constexpr ((std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) && std::is_same_v<Acc, float>) {
      if (mma) conv_gemm_mma_kernel<T, P><<<grid, kThreads, 0, s>>>(p);
      else conv_gemm_kernel<T, Acc, P><<<grid, kThreads, 0, s>>>(p);
    } else {
      conv_gemm_kernel<T, Acc, P><<<grid, kThreads, 0, s>>>(p);
    }
    if (auto st = check_launch("convolution gemm kernel"); !st) return st;
    if (p.partial) {
      const long long total = static_cast<long long>(p.groups) * p.M * p.N;
      const auto blocks = static_cast<unsigned>(std::min<long long>((total + 255) / 256, 65535));
      conv_finish_kernel<T, Acc, P><<<blocks, 256, 0, s>>>(p);
      return check_launch("convolution split-k kernel");
    }
    return ok_status();
  }
  if (kind == Kind::direct) {
    const long long total = static_cast<long long>(p.groups) * p.M * p.N;
    const auto blocks = static_cast<unsigned>(std::min<long long>((total + 255) / 256, 1 << 20));
    conv_direct_kernel<T, Acc, P><<<blocks, 256, 0, s>>>(p);
    return check_launch("convolution direct kernel");
  }
  const long long total = static_cast<long long>(p.groups) * p.M * p.N;
  conv_reduce_kernel<T, Acc, P><<<static_cast<unsigned>(total), kThreads, 0, s>>>(p);
  return check_launch("convolution reduce kernel");
}

template <int P>
Status launch_for(const KP& p, Kind kind, Dtype dt, bool fp64, bool mma, cudaStream_t s) {
  switch (dt) {
    case Dtype::f16: return fp64 ? launch<__half, double, P>(p, kind, mma, s) : launch<__half, float, P>(p, kind, mma, s);
    case Dtype::bf16:
      return fp64 ? launch<__nv_bfloat16, double, P>(p, kind, mma, s) : launch<__nv_bfloat16, float, P>(p, kind, mma, s);
    case Dtype::f32: return fp64 ? launch<float, double, P>(p, kind, mma, s) : launch<float, float, P>(p, kind, mma, s);
    default: return launch<double, double, P>(p, kind, mma, s);
  }
}

int to_int(std::int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<int>::max())
    fail(std::string("convolution on CUDA: ") + what + " (" + std::to_string(v) + ") exceeds the kernels' 32-bit index range");
  return static_cast<int>(v);
}

// Strides of a [N][C][spatial...] view (or a weight [Co][Ci/G][k...]) as 5 entries,
// missing leading spatial dims of size 1 given stride 0.
void strides5(const DView& v, int rank, long long* out, const char* what) {
  if (static_cast<int>(v.shape.size()) != rank + 2)
    fail(std::string("convolution on CUDA: ") + what + " has rank " + std::to_string(v.shape.size()) + ", expected " +
         std::to_string(rank + 2));
  out[0] = v.strides[0];
  out[1] = v.strides[1];
  for (int d = 0; d < 3; ++d) {
    const int src = d - (3 - rank);
    out[2 + d] = src >= 0 ? v.strides[static_cast<std::size_t>(2 + src)] : 0;
  }
}

const void* at_offset(const DView& v) {
  return static_cast<const char*>(v.base) + v.offset * static_cast<std::int64_t>(dtype_size(v.dtype));
}

KP base_params(const ConvShape& s) {
  if (s.rank < 1 || s.rank > 3)
    fail("convolution on CUDA takes 1 to 3 spatial dims, not " + std::to_string(s.rank));
  KP p;
  p.groups = to_int(s.groups, "groups");
  p.cig = to_int(s.ci / s.groups, "input channels per group");
  p.cog = to_int(s.co / s.groups, "output channels per group");
  p.n = to_int(s.n, "batch");
  std::int64_t kvol = 1, oc = 1, ic = 1;
  for (int d = 0; d < 3; ++d) {
    const int src = d - (3 - s.rank);
    const bool real = src >= 0;
    p.in[d] = real ? to_int(s.in[src], "input size") : 1;
    p.out[d] = real ? to_int(s.out[src], "output size") : 1;
    p.k[d] = real ? to_int(s.k[src], "kernel size") : 1;
    p.st[d] = real ? to_int(s.stride[src], "stride") : 1;
    p.pad[d] = real ? to_int(s.pad[src], "padding") : 0;
    p.dil[d] = real ? to_int(s.dil[src], "dilation") : 1;
    kvol *= p.k[d];
    oc *= p.out[d];
    ic *= p.in[d];
  }
  p.kvol = to_int(kvol, "kernel volume");
  p.ocount = to_int(oc, "output positions");
  p.icount = to_int(ic, "input positions");
  return p;
}

// The product's sizes, the kernel for them and (gemm) its k split.
Launch plan(KP p, int prod, Dtype dt, const DView& out, std::vector<std::shared_ptr<void>> keep) {
  const bool fp64 = dt == Dtype::f64 || reference_mode();
  // Tensor cores for f16/bf16 tiles; the scalar fp32 tile for the rest.
  const bool mma = !fp64 && (dt == Dtype::f16 || dt == Dtype::bf16);
  if (dt != Dtype::f16 && dt != Dtype::bf16 && dt != Dtype::f32 && dt != Dtype::f64)
    fail(std::string("convolution on CUDA takes f16, bf16, f32 and f64, not ") + dtype_abbrev(dt));
  const std::int64_t n = p.n, cig = p.cig, cog = p.cog, kvol = p.kvol;
  std::int64_t M, N, K;
  if (prod == kForward) M = n * p.ocount, N = cog, K = cig * kvol;
  else if (prod == kBackwardData) M = n * p.icount, N = cig, K = cog * kvol;
  else M = cog, N = cig * kvol, K = n * p.ocount;
  p.M = to_int(M, "rows of the product");
  p.N = to_int(N, "columns of the product");
  p.K = to_int(K, "length of the product's sums");
  if (M == 0 || N == 0 || p.groups == 0) return [](void*) { return ok_status(); };
  if (K == 0 && prod == kBackwardWeight) return fill(out, 0.0);
  Kind kind = M >= kWide && N >= kWide ? Kind::gemm : prod == kBackwardWeight ? Kind::reduce : Kind::direct;
  if (kind == Kind::reduce && static_cast<std::int64_t>(p.groups) * M * N > std::numeric_limits<int>::max())
    fail("convolution on CUDA: too many weight-gradient elements for one launch");
  if (kind == Kind::gemm) {
    const std::int64_t tiles = ((M + kBM - 1) / kBM) * ((N + kBN - 1) / kBN) * p.groups;
    const std::int64_t want = 2 * static_cast<std::int64_t>(sm_count());
    std::int64_t splits = 1;
    if (tiles < want && K > 512) splits = std::min((want + tiles - 1) / tiles, K / 256);
    const std::int64_t acc_bytes = fp64 ? 8 : 4;
    const std::int64_t per_split = static_cast<std::int64_t>(p.groups) * M * N * acc_bytes;
    splits = std::max<std::int64_t>(1, std::min({splits, (std::int64_t{256} << 20) / std::max<std::int64_t>(per_split, 1),
                                                 std::int64_t{65535} / p.groups}));
    const std::int64_t chunk = K == 0 ? kBK : ((K + splits - 1) / splits + kBK - 1) / kBK * kBK;
    splits = K == 0 ? 1 : (K + chunk - 1) / chunk;
    if (p.groups * splits > 65535) fail("convolution on CUDA: more than 65535 groups");
    p.kchunk = static_cast<int>(chunk);
    p.splits = static_cast<int>(splits);
    if (splits > 1) {
      auto scratch = device_alloc(static_cast<std::size_t>(splits * per_split));
      p.partial = scratch.get();
      keep.push_back(std::move(scratch));
    }
  }
  return [p, kind, prod, dt, fp64, mma, keep](void* stream) -> Status {
    auto s = static_cast<cudaStream_t>(stream);
    if (prod == kForward) return launch_for<kForward>(p, kind, dt, fp64, mma, s);
    if (prod == kBackwardData) return launch_for<kBackwardData>(p, kind, dt, fp64, mma, s);
    return launch_for<kBackwardWeight>(p, kind, dt, fp64, mma, s);
  };
}

void same_dtype(const DView& a, const DView& b, const char* what) {
  if (a.dtype != b.dtype)
    fail(std::string("convolution on CUDA: ") + what + " is " + dtype_abbrev(b.dtype) + ", expected " + dtype_abbrev(a.dtype));
}

void bias_params(KP& p, const DView* bias, const DView& out, std::vector<std::shared_ptr<void>>& keep) {
  if (!bias) return;
  same_dtype(out, *bias, "bias");
  if (bias->shape.size() != 1) fail("convolution on CUDA: bias must be 1-D");
  p.bias = at_offset(*bias);
  p.bs = bias->strides[0];
  keep.push_back(bias->keep);
}

// An operand of a product: its view, its name in messages, and the KP fields its base and strides go to.
struct Operand {
  const DView* v;
  const char* name;
  const void* KP::*base;
  long long (KP::*strides)[5];
};

// The plan of one product writing `out` from operands a and b (each of out's dtype and the shape's rank).
Launch product(const ConvShape& s, int prod, const DView& out, const char* out_name, Operand a, Operand b,
               const DView* bias) {
  KP p = base_params(s);
  for (const Operand& op : {a, b}) same_dtype(out, *op.v, op.name);
  for (const Operand& op : {a, b}) strides5(*op.v, s.rank, p.*op.strides, op.name);
  strides5(out, s.rank, p.os, out_name);
  for (const Operand& op : {a, b}) p.*op.base = at_offset(*op.v);
  p.o = const_cast<void*>(at_offset(out));
  std::vector<std::shared_ptr<void>> keep{out.keep, a.v->keep, b.v->keep};
  bias_params(p, bias, out, keep);
  return plan(p, prod, out.dtype, out, std::move(keep));
}

}  // namespace

Launch conv_forward(const ConvShape& s, const DView& y, const DView& x, const DView& w, const DView* bias) {
  return product(s, kForward, y, "output", {&x, "input", &KP::x, &KP::xs}, {&w, "weight", &KP::w, &KP::ws}, bias);
}

Launch conv_backward_data(const ConvShape& s, const DView& gx, const DView& gy, const DView& w, const DView* bias) {
  return product(s, kBackwardData, gx, "grad_input", {&gy, "grad_output", &KP::gy, &KP::ys},
                 {&w, "weight", &KP::w, &KP::ws}, bias);
}

Launch conv_backward_weight(const ConvShape& s, const DView& gw, const DView& gy, const DView& x) {
  return product(s, kBackwardWeight, gw, "grad_weight", {&gy, "grad_output", &KP::gy, &KP::ys},
                 {&x, "input", &KP::x, &KP::xs}, nullptr);
}

}  // namespace kb::backendbench::aten::cuda
