// kb's CUDA kernels for the ATen operators (see cuda_engine.hpp): the
// elementwise engine, reductions, row kernels (softmax, layer_norm) and
// batch_norm. Host-side planning (dim merging, launch shapes) is here too;
// plan functions in the family folders call these launchers.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "args.hpp"
#include "cuda_engine.hpp"

namespace kb::backendbench::aten {

std::int64_t DView::numel() const {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

void* DeviceArgs::base(const HostTensor& t) const {
  auto it = base_.find(&t);
  if (it == base_.end()) fail("internal: a tensor argument was not copied to the device");
  return it->second;
}

DView DeviceArgs::view(const HostTensor& t) const {
  return DView{t.dtype, t.shape, t.strides, t.offset, base(t), false, nullptr};
}

Launch sequence(std::vector<Launch> parts) {
  return [parts = std::move(parts)](void* stream) -> Status {
    for (const Launch& l : parts)
      if (auto st = l(stream); !st) return st;
    return ok_status();
  };
}

namespace cuda {
namespace {

constexpr int kMaxDims = 8;

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

// ---- loads and stores with PyTorch's conversions ----
// Dtype order: bf16, f64, f32, f16, c32, c64, c128, i8, i16, i32, i64, b8, u8.
enum : int { kBF16, kF64, kF32, kF16, kC32, kC64, kC128, kI8, kI16, kI32, kI64, kB8, kU8 };

template <class T>
__device__ __forceinline__ T load(const char* p, int dt) {
  switch (dt) {
    case kBF16: return static_cast<T>(__bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(p)));
    case kF64: return static_cast<T>(*reinterpret_cast<const double*>(p));
    case kF32: return static_cast<T>(*reinterpret_cast<const float*>(p));
    case kF16: return static_cast<T>(__half2float(*reinterpret_cast<const __half*>(p)));
    case kI8: return static_cast<T>(*reinterpret_cast<const std::int8_t*>(p));
    case kI16: return static_cast<T>(*reinterpret_cast<const std::int16_t*>(p));
    case kI32: return static_cast<T>(*reinterpret_cast<const std::int32_t*>(p));
    case kI64: return static_cast<T>(*reinterpret_cast<const std::int64_t*>(p));
    case kB8: return static_cast<T>(*reinterpret_cast<const std::uint8_t*>(p) != 0 ? 1 : 0);
    case kU8: return static_cast<T>(*reinterpret_cast<const std::uint8_t*>(p));
    default: return T(0);
  }
}

template <class I, class T>
__device__ __forceinline__ I to_int(T v, double lo, double hi) {
  if (v != v) return I(0);
  double d = static_cast<double>(v);
  d = d < lo ? lo : d > hi ? hi : d;
  return static_cast<I>(d);
}

template <class T>
__device__ __forceinline__ void store(char* p, int dt, T v) {
  switch (dt) {
    case kBF16: *reinterpret_cast<__nv_bfloat16*>(p) = __float2bfloat16_rn(static_cast<float>(v)); break;
    case kF64: *reinterpret_cast<double*>(p) = static_cast<double>(v); break;
    case kF32: *reinterpret_cast<float*>(p) = static_cast<float>(v); break;
    case kF16:
      if constexpr (sizeof(T) == 8) *reinterpret_cast<__half*>(p) = __double2half(v);
      else *reinterpret_cast<__half*>(p) = __float2half_rn(v);
      break;
    case kI8: *reinterpret_cast<std::int8_t*>(p) = to_int<std::int8_t>(v, -128.0, 127.0); break;
    case kI16: *reinterpret_cast<std::int16_t*>(p) = to_int<std::int16_t>(v, -32768.0, 32767.0); break;
    case kI32: *reinterpret_cast<std::int32_t*>(p) = to_int<std::int32_t>(v, -2147483648.0, 2147483647.0); break;
    case kI64: *reinterpret_cast<std::int64_t*>(p) = to_int<std::int64_t>(v, -9.2233720368547748e18, 9.2233720368547748e18); break;
    case kB8: *reinterpret_cast<std::uint8_t*>(p) = v != T(0) ? 1 : 0; break;
    case kU8: *reinterpret_cast<std::uint8_t*>(p) = to_int<std::uint8_t>(v, 0.0, 255.0); break;
    default: break;
  }
}

// ---- math in the compute type ----
__device__ __forceinline__ float m_exp(float x) { return expf(x); }
__device__ __forceinline__ double m_exp(double x) { return exp(x); }
__device__ __forceinline__ float m_log(float x) { return logf(x); }
__device__ __forceinline__ double m_log(double x) { return log(x); }
__device__ __forceinline__ float m_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double m_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float m_erf(float x) { return erff(x); }
__device__ __forceinline__ double m_erf(double x) { return erf(x); }
__device__ __forceinline__ float m_sin(float x) { return sinf(x); }
__device__ __forceinline__ double m_sin(double x) { return sin(x); }
__device__ __forceinline__ float m_cos(float x) { return cosf(x); }
__device__ __forceinline__ double m_cos(double x) { return cos(x); }
__device__ __forceinline__ float m_log2(float x) { return log2f(x); }
__device__ __forceinline__ double m_log2(double x) { return log2(x); }
__device__ __forceinline__ float m_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double m_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float m_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double m_pow(double x, double y) { return pow(x, y); }
__device__ __forceinline__ float m_trunc(float x) { return truncf(x); }
__device__ __forceinline__ double m_trunc(double x) { return trunc(x); }
__device__ __forceinline__ float m_floor(float x) { return floorf(x); }
__device__ __forceinline__ double m_floor(double x) { return floor(x); }
template <class T> __device__ __forceinline__ bool m_isnan(T x) { return x != x; }
template <class T> __device__ __forceinline__ T m_min(T a, T b) { return a < b ? a : b; }
template <class T> __device__ __forceinline__ T m_max(T a, T b) { return a > b ? a : b; }

template <class T>
__device__ __forceinline__ T apply(int op, T a, T b, T c, const double* p) {
  const T one = T(1), zero = T(0);
  constexpr double kSqrt2 = 1.4142135623730951, kGeluC = 0.7978845608028654, kInvSqrt2Pi = 0.3989422804014327;
  switch (static_cast<EOp>(op)) {
    case EOp::copy: return a;
    case EOp::fill: return T(p[0]);
    case EOp::add: return a + T(p[0]) * b;
    case EOp::sub: return a - T(p[0]) * b;
    case EOp::rsub: return b - T(p[0]) * a;
    case EOp::mul: return a * b;
    case EOp::div: return a / b;
    case EOp::div_trunc: return m_trunc(a / b);
    case EOp::div_floor: return m_floor(a / b);
    case EOp::minimum: return m_isnan(a) || m_isnan(b) ? a + b : m_min(a, b);
    case EOp::maximum: return m_isnan(a) || m_isnan(b) ? a + b : m_max(a, b);
    case EOp::bit_and: return T(static_cast<long long>(a) & static_cast<long long>(b));
    case EOp::pow: return m_pow(a, b);
    case EOp::eq: return a == b ? one : zero;
    case EOp::ne: return a != b ? one : zero;
    case EOp::lt: return a < b ? one : zero;
    case EOp::le: return a <= b ? one : zero;
    case EOp::gt: return a > b ? one : zero;
    case EOp::ge: return a >= b ? one : zero;
    case EOp::neg: return -a;
    case EOp::abs: return a < zero ? -a : a;
    case EOp::sgn: return m_isnan(a) ? a : T((a > zero) - (a < zero));
    case EOp::exp: return m_exp(a);
    case EOp::sqrt: return m_sqrt(a);
    case EOp::rsqrt: return one / m_sqrt(a);
    case EOp::reciprocal: return one / a;
    case EOp::erf: return m_erf(a);
    case EOp::sin: return m_sin(a);
    case EOp::cos: return m_cos(a);
    case EOp::log2: return m_log2(a);
    case EOp::tanh: return m_tanh(a);
    case EOp::sigmoid: return one / (one + m_exp(-a));
    case EOp::relu: return m_isnan(a) ? a : (a > zero ? a : zero);
    case EOp::silu: return a / (one + m_exp(-a));
    case EOp::gelu: return T(0.5) * a * (one + m_erf(a / T(kSqrt2)));
    case EOp::gelu_tanh: return T(0.5) * a * (one + m_tanh(T(kGeluC) * (a + T(0.044715) * a * a * a)));
    case EOp::hardswish: return a * m_min(m_max(a + T(3), zero), T(6)) / T(6);
    case EOp::hardsigmoid: return m_min(m_max(a + T(3), zero), T(6)) / T(6);
    case EOp::leaky_relu: return a > zero ? a : a * T(p[0]);
    case EOp::hardtanh: return m_isnan(a) ? a : m_min(m_max(a, T(p[0])), T(p[1]));
    case EOp::elu: return a > zero ? T(p[1]) * a : T(p[1]) * T(p[0]) * (m_exp(a * T(p[2])) - one);
    case EOp::clamp: {
      if (m_isnan(a)) return a;
      T y = a;
      if (p[2] != 0) y = m_max(y, T(p[0]));
      if (p[3] != 0) y = m_min(y, T(p[1]));
      return y;
    }
    case EOp::isinf: return (a == T(INFINITY) || a == T(-INFINITY)) ? one : zero;
    case EOp::isnan: return m_isnan(a) ? one : zero;
    case EOp::bit_not: return T(~static_cast<long long>(a));
    case EOp::logical_not: return a != zero ? zero : one;
    case EOp::threshold_bw: return b <= T(p[0]) ? zero : a;
    case EOp::sigmoid_bw: return a * (one - b) * b;
    case EOp::tanh_bw: return a * (one - b * b);
    case EOp::silu_bw: {
      T s = one / (one + m_exp(-b));
      return a * s * (one + b * (one - s));
    }
    case EOp::gelu_bw: {
      T cdf = T(0.5) * (one + m_erf(b / T(kSqrt2)));
      T pdf = m_exp(T(-0.5) * b * b) * T(kInvSqrt2Pi);
      return a * (cdf + b * pdf);
    }
    case EOp::gelu_tanh_bw: {
      T inner = T(kGeluC) * (b + T(0.044715) * b * b * b);
      T t = m_tanh(inner);
      T dinner = T(kGeluC) * (one + T(3.0 * 0.044715) * b * b);
      return a * (T(0.5) * (one + t) + T(0.5) * b * (one - t * t) * dinner);
    }
    case EOp::hardswish_bw: return b < T(-3) ? zero : b <= T(3) ? a * (b / T(3) + T(0.5)) : a;
    case EOp::hardsigmoid_bw: return b > T(-3) && b < T(3) ? a / T(6) : zero;
    case EOp::leaky_relu_bw: return b > zero ? a : a * T(p[0]);
    case EOp::hardtanh_bw: return b <= T(p[0]) || b >= T(p[1]) ? zero : a;
    case EOp::where: return a != zero ? b : c;
    case EOp::masked_fill: return b != zero ? T(p[0]) : a;
    case EOp::addcmul: return a + T(p[0]) * b * c;
  }
  return a;
}

struct Operand {
  char* ptr = nullptr;  // at the view's offset
  int dtype = 0;
  int esize = 0;
  int is_const = 0;
  double cval = 0;
  std::int64_t stride[kMaxDims] = {};
};

struct ElemParams {
  int op = 0;
  int rank = 0;
  int nin = 0;
  std::int64_t n = 0;
  std::int64_t size[kMaxDims] = {};
  Operand o[4];  // 0: out
  double p[4] = {};
};

// Offsets of element i for every operand (I: the index type; 32-bit when
// every offset fits, since 64-bit division is several times slower).
// Every one of the 4 operand slots is computed (unused ones have stride 0), so
// the unrolled off[] stays in registers instead of a local-memory array.
template <class I>
__device__ __forceinline__ void offsets_of(const ElemParams& P, I i, I* off) {
#pragma unroll
  for (int k = 0; k < 4; ++k) off[k] = 0;
  if (P.rank == 1) {
#pragma unroll
    for (int k = 0; k < 4; ++k) off[k] = i * static_cast<I>(P.o[k].stride[0]);
    return;
  }
  I r = i;
  for (int d = P.rank - 1; d >= 0; --d) {
    const I sz = static_cast<I>(P.size[d]);
    const I idx = r % sz;
    r /= sz;
#pragma unroll
    for (int k = 0; k < 4; ++k) off[k] += idx * static_cast<I>(P.o[k].stride[d]);
  }
}

// Each thread takes kIlp elements a grid-stride apart, loading all before
// storing any (in-place operands may alias the output).
constexpr int kIlp = 4;

template <class T, class I>
__global__ void elementwise_kernel(const ElemParams P) {
  const I n = static_cast<I>(P.n);
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I base = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; base < n; base += step * kIlp) {
    T v[kIlp][3];
    I out_off[kIlp];
#pragma unroll
    for (int u = 0; u < kIlp; ++u) {
      const I i = base + u * step;
      if (i >= n) break;
      I off[4];
      offsets_of<I>(P, i, off);
      out_off[u] = off[0];
      for (int k = 0; k < 3; ++k) {
        if (k >= P.nin) {
          v[u][k] = T(0);
          continue;
        }
        const Operand& o = P.o[k + 1];
        v[u][k] = o.is_const ? T(o.cval) : load<T>(o.ptr + static_cast<std::int64_t>(off[k + 1]) * o.esize, o.dtype);
      }
    }
#pragma unroll
    for (int u = 0; u < kIlp; ++u) {
      const I i = base + u * step;
      if (i >= n) break;
      store<T>(P.o[0].ptr + static_cast<std::int64_t>(out_off[u]) * P.o[0].esize, P.o[0].dtype,
               apply<T>(P.op, v[u][0], v[u][1], v[u][2], P.p));
    }
  }
}

// The contiguous fast path: every tensor operand and the output walk one
// stride-1 dim (after merging) in one dtype DT (f16, bf16 or f32), 16-byte
// aligned. Each thread loads whole 16-byte vectors of every input and stores
// one of the output, with the same conversions and math as the generic kernel
// (so results are bitwise the same); the generic kernel's per-element offset
// arithmetic and 2-byte accesses ran big f16 tensors at a fifth of torch's speed.
template <int DT>
__device__ __forceinline__ float vec_lane(const uint4& v, int e) {
  if constexpr (DT == kF32) {
    return reinterpret_cast<const float*>(&v)[e];
  } else if constexpr (DT == kF16) {
    return __half2float(reinterpret_cast<const __half*>(&v)[e]);
  } else {
    return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(&v)[e]);
  }
}
template <int DT>
__device__ __forceinline__ void vec_set(uint4& v, int e, float x) {
  if constexpr (DT == kF32) {
    reinterpret_cast<float*>(&v)[e] = x;
  } else if constexpr (DT == kF16) {
    reinterpret_cast<__half*>(&v)[e] = __float2half_rn(x);
  } else {
    reinterpret_cast<__nv_bfloat16*>(&v)[e] = __float2bfloat16_rn(x);
  }
}

template <int DT>
__global__ void elementwise_vec_kernel(const ElemParams P) {
  constexpr int E = DT == kF32 ? 4 : 8;  // elements per 16 bytes
  const std::int64_t nvec = P.n / E;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t tid = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::int64_t v = tid; v < nvec; v += step) {
    uint4 in[3];
#pragma unroll
    for (int k = 0; k < 3; ++k)
      if (k < P.nin && !P.o[k + 1].is_const) in[k] = reinterpret_cast<const uint4*>(P.o[k + 1].ptr)[v];
    uint4 out;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      float x[3] = {0.f, 0.f, 0.f};
#pragma unroll
      for (int k = 0; k < 3; ++k)
        if (k < P.nin) x[k] = P.o[k + 1].is_const ? static_cast<float>(P.o[k + 1].cval) : vec_lane<DT>(in[k], e);
      vec_set<DT>(out, e, apply<float>(P.op, x[0], x[1], x[2], P.p));
    }
    reinterpret_cast<uint4*>(P.o[0].ptr)[v] = out;
  }
  for (std::int64_t i = nvec * E + tid; i < P.n; i += step) {  // the last n % E elements
    float x[3] = {0.f, 0.f, 0.f};
    for (int k = 0; k < P.nin; ++k) {
      const Operand& o = P.o[k + 1];
      x[k] = o.is_const ? static_cast<float>(o.cval) : load<float>(o.ptr + i * o.esize, o.dtype);
    }
    store<float>(P.o[0].ptr + i * P.o[0].esize, P.o[0].dtype, apply<float>(P.op, x[0], x[1], x[2], P.p));
  }
}

// The strided vector path: the output's innermost (merged) dim has stride 1,
// but operands need not be flat: broadcast operands (innermost stride 0: a
// bias over channels, a 0-dim tensor, x.expand), views with row gaps (a cat or
// pad slice of the output, a cropped input) or another dtype. A thread takes E
// consecutive output elements (E = 16 bytes of DT), finds their coordinates
// once (not once per element as the generic kernel does), and loads each
// operand as one 16-byte vector where it is stride 1, DT and aligned there, as
// one broadcast value where its innermost stride is 0, else element by
// element; the output is stored the same way. Vectors that cross a row (the
// innermost size not a multiple of E) take the generic per-element path.
// Same conversions and math as the generic kernel: bitwise the same results.
// The generic kernel ran these at ~0.2x of torch (mul_ by a 0-dim tensor,
// div.Scalar of an expanded [N, C, 1, 1] mean, add of a [C] bias).
template <int DT, class I>
__global__ void elementwise_strided_vec_kernel(const ElemParams P) {
  constexpr int E = DT == kF32 ? 4 : 8;
  constexpr int ES = DT == kF32 ? 4 : 2;
  const I n = static_cast<I>(P.n);
  const I S = static_cast<I>(P.size[P.rank - 1]);
  const I nvec = (n + E - 1) / E;
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I v = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; v < nvec; v += step) {
    const I i0 = v * E;
    if (i0 % S + E <= S) {  // E elements of one row
      I off[4];
      offsets_of<I>(P, i0, off);
      float x[3][E];
#pragma unroll
      for (int k = 0; k < 3; ++k) {
        if (k >= P.nin) {
#pragma unroll
          for (int e = 0; e < E; ++e) x[k][e] = 0.f;
          continue;
        }
        const Operand& o = P.o[k + 1];
        const std::int64_t st = o.stride[P.rank - 1];
        const char* p = o.ptr + static_cast<std::int64_t>(off[k + 1]) * o.esize;
        if (o.is_const || st == 0) {
          const float c = o.is_const ? static_cast<float>(o.cval) : load<float>(p, o.dtype);
#pragma unroll
          for (int e = 0; e < E; ++e) x[k][e] = c;
        } else if (st == 1 && o.dtype == DT && reinterpret_cast<std::uintptr_t>(p) % 16 == 0) {
          const uint4 w = *reinterpret_cast<const uint4*>(p);
#pragma unroll
          for (int e = 0; e < E; ++e) x[k][e] = vec_lane<DT>(w, e);
        } else {
#pragma unroll
          for (int e = 0; e < E; ++e) x[k][e] = load<float>(p + e * st * o.esize, o.dtype);
        }
      }
      char* q = P.o[0].ptr + static_cast<std::int64_t>(off[0]) * ES;
      if (reinterpret_cast<std::uintptr_t>(q) % 16 == 0) {  // the output's innermost stride is 1
        uint4 w;
#pragma unroll
        for (int e = 0; e < E; ++e) vec_set<DT>(w, e, apply<float>(P.op, x[0][e], x[1][e], x[2][e], P.p));
        *reinterpret_cast<uint4*>(q) = w;
      } else {
        float y[E];
#pragma unroll
        for (int e = 0; e < E; ++e) y[e] = apply<float>(P.op, x[0][e], x[1][e], x[2][e], P.p);
#pragma unroll
        for (int e = 0; e < E; ++e) store<float>(q + e * ES, DT, y[e]);
      }
    } else {  // a vector across rows (or the end): element by element, loads before stores
      float y[E];
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const I i = i0 + e;
        if (i >= n) break;
        I off[4];
        offsets_of<I>(P, i, off);
        float x[3] = {0.f, 0.f, 0.f};
#pragma unroll
        for (int k = 0; k < 3; ++k) {
          const Operand& o = P.o[k + 1];
          if (k < P.nin)
            x[k] = o.is_const ? static_cast<float>(o.cval)
                              : load<float>(o.ptr + static_cast<std::int64_t>(off[k + 1]) * o.esize, o.dtype);
        }
        y[e] = apply<float>(P.op, x[0], x[1], x[2], P.p);
      }
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const I i = i0 + e;
        if (i >= n) break;
        I off[4];
        offsets_of<I>(P, i, off);
        store<float>(P.o[0].ptr + static_cast<std::int64_t>(off[0]) * ES, DT, y[e]);
      }
    }
  }
}

int dt_code(Dtype d) {
  if (is_complex(d)) fail(std::string("complex dtype ") + dtype_abbrev(d) + " is not supported on CUDA");
  return static_cast<int>(d);
}

char* at_offset(const DView& v) {
  return static_cast<char*>(v.base) + v.offset * static_cast<std::int64_t>(dtype_size(v.dtype));
}

std::vector<std::int64_t> bstrides(const DView& t, const std::vector<std::int64_t>& shape) {
  if (t.shape.size() > shape.size()) fail("cannot broadcast " + shape_text(t.shape) + " to " + shape_text(shape));
  std::vector<std::int64_t> s(shape.size(), 0);
  std::size_t lead = shape.size() - t.shape.size();
  for (std::size_t i = 0; i < t.shape.size(); ++i) {
    if (t.shape[i] == shape[lead + i]) s[lead + i] = t.strides[i];
    else if (t.shape[i] != 1) fail("cannot broadcast " + shape_text(t.shape) + " to " + shape_text(shape));
  }
  return s;
}

// Merges dims so that every operand walks them as one (sizes, per-operand strides).
void collapse(std::vector<std::int64_t>& size, std::vector<std::vector<std::int64_t>>& strides) {
  std::vector<std::int64_t> ns;
  std::vector<std::vector<std::int64_t>> nst(strides.size());
  for (std::size_t d = 0; d < size.size(); ++d) {
    if (size[d] == 1) continue;
    bool merge = !ns.empty();
    for (std::size_t k = 0; merge && k < strides.size(); ++k)
      merge = nst[k].back() == strides[k][d] * size[d];
    if (merge) {
      ns.back() *= size[d];
      for (std::size_t k = 0; k < strides.size(); ++k) nst[k].back() = strides[k][d];
    } else {
      ns.push_back(size[d]);
      for (std::size_t k = 0; k < strides.size(); ++k) nst[k].push_back(strides[k][d]);
    }
  }
  size = std::move(ns);
  strides = std::move(nst);
}

int grid_for(std::int64_t n, int threads) {
  std::int64_t blocks = (n + threads - 1) / threads;
  return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(blocks, sm_count() * 16)));
}

bool g_reference = false;

}  // namespace

void set_reference_mode(bool on) { g_reference = on; }
bool reference_mode() { return g_reference; }

std::vector<std::int64_t> contiguous(const std::vector<std::int64_t>& shape) { return contiguous_strides(shape); }

std::shared_ptr<void> device_alloc(std::size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, std::max<std::size_t>(bytes, 256)) != cudaSuccess) {
    (void)cudaGetLastError();
    throw std::bad_alloc();
  }
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
}

DView device_empty(Dtype dtype, const std::vector<std::int64_t>& shape) {
  DView v;
  v.dtype = dtype;
  v.shape = shape;
  v.strides = contiguous(shape);
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  v.keep = device_alloc(static_cast<std::size_t>(n) * dtype_size(dtype));
  v.base = v.keep.get();
  return v;
}

Launch elementwise(EOp op, const DView& out, std::vector<EIn> ins, std::array<double, 4> p) {
  if (ins.size() > 3) fail("internal: more than 3 elementwise inputs");
  ElemParams P;
  P.op = static_cast<int>(op);
  P.nin = static_cast<int>(ins.size());
  for (int k = 0; k < 4; ++k) P.p[k] = p[static_cast<std::size_t>(k)];
  std::vector<std::int64_t> size = out.shape;
  std::vector<std::vector<std::int64_t>> strides{out.strides};
  bool use_double = out.dtype == Dtype::f64 || is_integral(out.dtype) || g_reference;
  for (const EIn& in : ins) {
    if (in.is_const) {
      strides.push_back(std::vector<std::int64_t>(size.size(), 0));
      continue;
    }
    strides.push_back(bstrides(in.view, size));
    use_double |= in.view.dtype == Dtype::f64 || is_integral(in.view.dtype);
  }
  P.n = out.numel();
  collapse(size, strides);
  if (size.size() > kMaxDims) fail("more than 8 dims after merging; not supported on CUDA");
  P.rank = static_cast<int>(size.size());
  if (P.rank == 0) {  // one element
    P.rank = 1;
    size = {1};
    for (auto& s : strides) s = {0};
  }
  for (int d = 0; d < P.rank; ++d) P.size[d] = size[static_cast<std::size_t>(d)];
  auto fill_operand = [&](Operand& o, const DView* v, const std::vector<std::int64_t>& st) {
    if (v) {
      o.ptr = at_offset(*v);
      o.dtype = dt_code(v->dtype);
      o.esize = static_cast<int>(dtype_size(v->dtype));
    }
    for (int d = 0; d < P.rank; ++d) o.stride[d] = st[static_cast<std::size_t>(d)];
  };
  fill_operand(P.o[0], &out, strides[0]);
  for (std::size_t k = 0; k < ins.size(); ++k) {
    fill_operand(P.o[k + 1], ins[k].is_const ? nullptr : &ins[k].view, strides[k + 1]);
    P.o[k + 1].is_const = ins[k].is_const;
    P.o[k + 1].cval = ins[k].value;
  }
  std::vector<std::shared_ptr<void>> keep{out.keep};
  for (const EIn& in : ins) keep.push_back(in.view.keep);
  if (P.n == 0) return [](void*) { return ok_status(); };
  // 32-bit indexing when every index and offset (plus a grid step of slack) fits.
  std::int64_t reach = P.n + std::int64_t{sm_count()} * 16 * 256 * kIlp;
  for (int k = 0; k <= P.nin; ++k) {
    std::int64_t span = 0;
    for (int d = 0; d < P.rank; ++d) {
      if (P.o[k].stride[d] < 0) span = std::int64_t{1} << 40;
      span += (P.size[d] - 1) * P.o[k].stride[d];
    }
    reach = std::max(reach, span + 1);
  }
  const bool narrow = reach < (std::int64_t{1} << 31) && !g_reference;
  const int threads = 256, grid = grid_for((P.n + kIlp - 1) / kIlp, threads);
  // The contiguous fast path (elementwise_vec_kernel): one dtype, stride 1, 16-byte aligned.
  int vec = -1;
  if (!use_double && P.rank == 1 && (out.dtype == Dtype::f16 || out.dtype == Dtype::bf16 || out.dtype == Dtype::f32)) {
    vec = dt_code(out.dtype);
    for (int k = 0; k <= P.nin && vec >= 0; ++k) {
      const Operand& o = P.o[k];
      if (k > 0 && o.is_const) continue;
      if (o.dtype != vec || (P.n > 1 && o.stride[0] != 1) || reinterpret_cast<std::uintptr_t>(o.ptr) % 16 != 0) vec = -1;
    }
  }
  // The strided vector path (elementwise_strided_vec_kernel): fp32 compute, an f16/bf16/f32 output whose
  // innermost merged dim is stride 1 and at least a vector long; any other layout of the inputs.
  int svec = -1;
  if (vec < 0 && !use_double && P.o[0].stride[P.rank - 1] == 1 &&
      (out.dtype == Dtype::f16 || out.dtype == Dtype::bf16 || out.dtype == Dtype::f32) &&
      P.size[P.rank - 1] >= (out.dtype == Dtype::f32 ? 4 : 8))
    svec = dt_code(out.dtype);
  if (svec >= 0) {
    const int vgrid = grid_for((P.n + 7) / 8, threads);
    return [P, vgrid, svec, narrow, keep](void* stream) -> Status {
      auto s = static_cast<cudaStream_t>(stream);
      if (narrow) {
        if (svec == kF16) elementwise_strided_vec_kernel<kF16, std::int32_t><<<vgrid, threads, 0, s>>>(P);
        else if (svec == kBF16) elementwise_strided_vec_kernel<kBF16, std::int32_t><<<vgrid, threads, 0, s>>>(P);
        else elementwise_strided_vec_kernel<kF32, std::int32_t><<<vgrid, threads, 0, s>>>(P);
      } else {
        if (svec == kF16) elementwise_strided_vec_kernel<kF16, std::int64_t><<<vgrid, threads, 0, s>>>(P);
        else if (svec == kBF16) elementwise_strided_vec_kernel<kBF16, std::int64_t><<<vgrid, threads, 0, s>>>(P);
        else elementwise_strided_vec_kernel<kF32, std::int64_t><<<vgrid, threads, 0, s>>>(P);
      }
      return check_launch("elementwise kernel");
    };
  }
  if (vec >= 0) {
    const int vgrid = grid_for((P.n + 7) / 8, threads);
    return [P, vgrid, vec, keep](void* stream) -> Status {
      auto s = static_cast<cudaStream_t>(stream);
      if (vec == kF16) elementwise_vec_kernel<kF16><<<vgrid, threads, 0, s>>>(P);
      else if (vec == kBF16) elementwise_vec_kernel<kBF16><<<vgrid, threads, 0, s>>>(P);
      else elementwise_vec_kernel<kF32><<<vgrid, threads, 0, s>>>(P);
      return check_launch("elementwise kernel");
    };
  }
  return [P, grid, use_double, narrow, keep](void* stream) -> Status {
    auto s = static_cast<cudaStream_t>(stream);
    if (use_double) {
      if (narrow) elementwise_kernel<double, std::int32_t><<<grid, threads, 0, s>>>(P);
      else elementwise_kernel<double, std::int64_t><<<grid, threads, 0, s>>>(P);
    } else {
      if (narrow) elementwise_kernel<float, std::int32_t><<<grid, threads, 0, s>>>(P);
      else elementwise_kernel<float, std::int64_t><<<grid, threads, 0, s>>>(P);
    }
    return check_launch("elementwise kernel");
  };
}

// ---- gathers ----
namespace {

struct GatherParams {
  const char* src;
  int sdt, ses;
  char* out;
  int odt, oes;
  const char* idx;
  int idt, ies;
  int rank;
  std::int64_t size[kMaxDims], sstride[kMaxDims], istride[kMaxDims];
  std::int64_t gstride, bound, n;
};

__global__ void gather_kernel(const GatherParams P) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < P.n; i += step) {
    std::int64_t r = i, so = 0, io = 0;
    for (int d = P.rank - 1; d >= 0; --d) {
      const std::int64_t c = r % P.size[d];
      r /= P.size[d];
      so += c * P.sstride[d];
      io += c * P.istride[d];
    }
    std::int64_t k = load<double>(P.idx + io * P.ies, P.idt);
    if (k < 0) k += P.bound;
    so += k * P.gstride;
    store<double>(P.out + i * P.oes, P.odt, load<double>(P.src + so * P.ses, P.sdt));
  }
}

// The vector gather (index_select / embedding rows): when the output's inner
// dim is a contiguous run of the source (stride 1, not indexed) of the same
// dtype, a multiple of 16 bytes long and aligned, each thread copies 16 bytes
// with one index lookup and one coordinate decode, where gather_kernel decoded
// (64-bit) and converted every element (index_select of 192-wide f16 rows ran
// at ~0.6x of torch). A raw copy: the same bits as load + store of one dtype.
__global__ void gather_vec_kernel(const GatherParams P, int E) {
  const std::int64_t nvec = P.n / E;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < nvec; v += step) {
    std::int64_t r = v * E, so = 0, io = 0;
    for (int d = P.rank - 1; d >= 0; --d) {
      const std::int64_t c = r % P.size[d];
      r /= P.size[d];
      so += c * P.sstride[d];
      io += c * P.istride[d];
    }
    std::int64_t k = load<double>(P.idx + io * P.ies, P.idt);
    if (k < 0) k += P.bound;
    so += k * P.gstride;
    reinterpret_cast<uint4*>(P.out)[v] = *reinterpret_cast<const uint4*>(P.src + so * P.ses);
  }
}

}  // namespace

Launch gather(const DView& out, const DView& src, const std::vector<std::int64_t>& src_strides, const DView& index,
              const std::vector<std::int64_t>& index_strides, std::int64_t gather_stride, std::int64_t bound) {
  if (out.strides != contiguous(out.shape)) fail("internal: gather output must be contiguous");
  if (is_floating(index.dtype) || is_complex(index.dtype)) fail("indices must be an integer tensor");
  GatherParams P{};
  P.src = at_offset(src);
  P.sdt = dt_code(src.dtype);
  P.ses = static_cast<int>(dtype_size(src.dtype));
  P.out = at_offset(out);
  P.odt = dt_code(out.dtype);
  P.oes = static_cast<int>(dtype_size(out.dtype));
  P.idx = at_offset(index);
  P.idt = dt_code(index.dtype);
  P.ies = static_cast<int>(dtype_size(index.dtype));
  std::vector<std::int64_t> size = out.shape;
  std::vector<std::vector<std::int64_t>> st{src_strides, index_strides, out.strides};
  P.n = out.numel();
  collapse(size, st);
  if (size.size() > kMaxDims) fail("more than 8 dims after merging; not supported on CUDA");
  P.rank = static_cast<int>(size.size());
  for (int d = 0; d < P.rank; ++d) {
    P.size[d] = size[static_cast<std::size_t>(d)];
    P.sstride[d] = st[0][static_cast<std::size_t>(d)];
    P.istride[d] = st[1][static_cast<std::size_t>(d)];
  }
  P.gstride = gather_stride;
  P.bound = bound;
  auto keep = std::vector<std::shared_ptr<void>>{out.keep, src.keep, index.keep};
  if (P.n == 0) return [](void*) { return ok_status(); };
  int E = P.sdt == P.odt ? 16 / P.ses : 0;  // gather_vec_kernel's elements per 16 bytes (0: not eligible)
  if (E > 0 && !g_reference && P.rank >= 1) {
    const int in = P.rank - 1;
    bool ok = P.size[in] % E == 0 && P.sstride[in] == 1 && P.istride[in] == 0 && P.gstride % E == 0 &&
              reinterpret_cast<std::uintptr_t>(P.src) % 16 == 0 && reinterpret_cast<std::uintptr_t>(P.out) % 16 == 0;
    for (int d = 0; ok && d < in; ++d) ok = P.sstride[d] % E == 0;
    if (!ok) E = 0;
  } else {
    E = 0;
  }
  return [P, E, keep](void* stream) -> Status {
    if (E > 0) gather_vec_kernel<<<grid_for(P.n / E, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(P, E);
    else gather_kernel<<<grid_for(P.n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(P);
    return check_launch("gather kernel");
  };
}

// ---- group reductions (a group of G threads, G = 32 or the block) ----
namespace {

// kind 0 sum, 1 max, 2 min; max and min propagate NaN as PyTorch does.
template <class T>
__device__ __forceinline__ T combine(int kind, T a, T b) {
  if (kind == 0) return a + b;
  if (m_isnan(a) || m_isnan(b)) return a + b;
  return kind == 1 ? m_max(a, b) : m_min(a, b);
}
template <class T>
__device__ __forceinline__ T warp_reduce(T v, int kind) {
  for (int o = 16; o > 0; o >>= 1) v = combine(kind, v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
template <class T>
__device__ __forceinline__ T warp_sum(T v) {
  return warp_reduce(v, 0);
}
template <class T>
__device__ __forceinline__ T warp_max(T v) {
  return warp_reduce(v, 1);
}

// Block-wide reduce (kind 0 sum, 1 max, 2 min); every thread gets the result.
template <class T>
__device__ T block_reduce(T v, int kind, T* smem) {
  v = warp_reduce(v, kind);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  T r = smem[0];
  for (int w = 1; w < nw; ++w) r = combine(kind, r, smem[w]);
  return r;
}

struct Strided {
  int rank = 0;
  std::int64_t size[kMaxDims] = {};
  std::int64_t stride[kMaxDims] = {};   // of x
  std::int64_t stride2[kMaxDims] = {};  // of the second tensor (out)
};

__device__ __forceinline__ void decode(const Strided& s, std::int64_t i, std::int64_t& a, std::int64_t& b) {
  if (s.rank == 1) {
    a = i * s.stride[0];
    b = i * s.stride2[0];
    return;
  }
  a = 0;
  b = 0;
  for (int d = s.rank - 1; d >= 0; --d) {
    std::int64_t idx = i % s.size[d];
    i /= s.size[d];
    a += idx * s.stride[d];
    b += idx * s.stride2[d];
  }
}

struct ReduceParams {
  const char* x;
  int xdt, xes;
  char* out;
  int odt, oes;
  int op;
  Strided kept;     // stride: x, stride2: out
  Strided reduced;  // stride: x
  std::int64_t nout, R;
};

__device__ __forceinline__ double r_init(int op) {
  return op == static_cast<int>(ROp::amax) ? -INFINITY : op == static_cast<int>(ROp::amin) ? INFINITY : 0.0;
}
__device__ __forceinline__ double r_step(int op, double acc, double v) {
  if (op == static_cast<int>(ROp::amax)) return (m_isnan(acc) || m_isnan(v)) ? acc + v : m_max(acc, v);
  if (op == static_cast<int>(ROp::amin)) return (m_isnan(acc) || m_isnan(v)) ? acc + v : m_min(acc, v);
  if (op == static_cast<int>(ROp::any)) return (acc != 0 || v != 0) ? 1.0 : 0.0;
  return acc + v;
}
__device__ __forceinline__ double r_final(int op, double acc, std::int64_t R) {
  return op == static_cast<int>(ROp::mean) ? acc / static_cast<double>(R) : acc;
}
__device__ __forceinline__ int r_kind(int op) {
  return op == static_cast<int>(ROp::amax) ? 1 : op == static_cast<int>(ROp::amin) ? 2 : 0;
}

// One block per output element.
__global__ void reduce_block_kernel(const ReduceParams P) {
  __shared__ double smem[32];
  for (std::int64_t o = blockIdx.x; o < P.nout; o += gridDim.x) {
    std::int64_t xb, ob;
    decode(P.kept, o, xb, ob);
    double acc = r_init(P.op);
    for (std::int64_t r = threadIdx.x; r < P.R; r += blockDim.x) {
      std::int64_t xo, unused;
      decode(P.reduced, r, xo, unused);
      acc = r_step(P.op, acc, load<double>(P.x + (xb + xo) * P.xes, P.xdt));
    }
    if (P.op == static_cast<int>(ROp::any)) acc = block_reduce(acc, 0, smem) != 0 ? 1.0 : 0.0;
    else acc = block_reduce(acc, r_kind(P.op), smem);
    if (threadIdx.x == 0) store<double>(P.out + ob * P.oes, P.odt, r_final(P.op, acc, P.R));
  }
}

// One thread per output element (short reductions, many outputs).
__global__ void reduce_thread_kernel(const ReduceParams P) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < P.nout; o += step) {
    std::int64_t xb, ob;
    decode(P.kept, o, xb, ob);
    double acc = r_init(P.op);
    for (std::int64_t r = 0; r < P.R; ++r) {
      std::int64_t xo, unused;
      decode(P.reduced, r, xo, unused);
      acc = r_step(P.op, acc, load<double>(P.x + (xb + xo) * P.xes, P.xdt));
    }
    store<double>(P.out + ob * P.oes, P.odt, r_final(P.op, acc, P.R));
  }
}

// Reductions over outer dims (the output's innermost dim contiguous in x):
// threads over outputs (coalesced), the reduced range split across
// blockIdx.y into fp64 partials, then one thread per output combines them.
__global__ void reduce_columns_kernel(const ReduceParams P, double* partial, std::int64_t chunk) {
  const std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= P.nout) return;
  std::int64_t xb, ob;
  decode(P.kept, o, xb, ob);
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * chunk;
  const std::int64_t r1 = r0 + chunk < P.R ? r0 + chunk : P.R;
  double acc = r_init(P.op);
  for (std::int64_t r = r0; r < r1; ++r) {
    std::int64_t xo, unused;
    decode(P.reduced, r, xo, unused);
    acc = r_step(P.op, acc, load<double>(P.x + (xb + xo) * P.xes, P.xdt));
  }
  partial[static_cast<std::int64_t>(blockIdx.y) * P.nout + o] = acc;
}

__global__ void reduce_combine_kernel(const ReduceParams P, const double* partial, int splits) {
  const std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= P.nout) return;
  std::int64_t xb, ob;
  decode(P.kept, o, xb, ob);
  double acc = r_init(P.op);
  for (int s = 0; s < splits; ++s) acc = r_step(P.op, acc, partial[static_cast<std::int64_t>(s) * P.nout + o]);
  store<double>(P.out + ob * P.oes, P.odt, r_final(P.op, acc, P.R));
}

// Why the split reductions below: reduce_block_kernel gives an output one
// block, so a full reduction (sum of [8, 512, 30522]) ran on one block, 1000x
// slower than torch; and a block per output of a few thousand elements with
// 2-byte loads ran mean over H, W at ~0.2x. Here a group of G lanes (G <= 32,
// shuffles only) reduces one chunk of one output's range, loading 16-byte
// vectors of DT where the range is contiguous and aligned (DT < 0: element by
// element); with few outputs the range is split into `splits` chunks whose
// fp64 partials reduce_partials_kernel combines in a fixed order (no atomics:
// run to run deterministic). Accumulation stays in fp64 as before.
template <int DT>
struct VecOf {
  static constexpr int size = DT == kF32 ? 4 : DT == kB8 ? 1 : 2;
  static constexpr int E = DT < 0 ? 1 : 16 / size;
};

template <int DT, int G>
__global__ void reduce_group_kernel(const ReduceParams P, double* partial, std::int64_t splits, std::int64_t chunk) {
  constexpr int E = VecOf<DT>::E;
  const int lane = threadIdx.x % G;
  const std::int64_t total = P.nout * splits;
  const std::int64_t gstep = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / G);
  // Whole warps iterate together (the shuffles need every lane), invalid groups idle.
  const std::int64_t gfirst = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  const std::int64_t wfirst = gfirst - (threadIdx.x % 32) / G;
  for (std::int64_t gw = wfirst, g = gfirst; gw < total; gw += gstep, g += gstep) {
    const bool valid = g < total;
    const std::int64_t o = valid ? g / splits : 0, sp = valid ? g % splits : 0;
    double acc = r_init(P.op);
    std::int64_t xb = 0, ob = 0;
    if (valid) {
      decode(P.kept, o, xb, ob);
      const std::int64_t r0 = sp * chunk, r1 = r0 + chunk < P.R ? r0 + chunk : P.R;
      if constexpr (DT >= 0) {
        constexpr int U = 4;  // vectors in flight per lane
        for (std::int64_t r = r0 + static_cast<std::int64_t>(lane) * E; r < r1; r += std::int64_t{U} * G * E) {
          uint4 w[U];
#pragma unroll
          for (int u = 0; u < U; ++u) {
            const std::int64_t rr = r + static_cast<std::int64_t>(u) * G * E;
            if (rr < r1) {
              std::int64_t xo, unused;
              decode(P.reduced, rr, xo, unused);
              w[u] = *reinterpret_cast<const uint4*>(P.x + (xb + xo) * VecOf<DT>::size);
            }
          }
#pragma unroll
          for (int u = 0; u < U; ++u) {
            if (r + static_cast<std::int64_t>(u) * G * E >= r1) break;
#pragma unroll
            for (int e = 0; e < E; ++e)
              acc = r_step(P.op, acc, load<double>(reinterpret_cast<const char*>(&w[u]) + e * VecOf<DT>::size, DT));
          }
        }
      } else {
        for (std::int64_t r = r0 + lane; r < r1; r += G) {
          std::int64_t xo, unused;
          decode(P.reduced, r, xo, unused);
          acc = r_step(P.op, acc, load<double>(P.x + (xb + xo) * P.xes, P.xdt));
        }
      }
    }
#pragma unroll
    for (int m = G / 2; m > 0; m >>= 1) acc = r_step(P.op, acc, __shfl_xor_sync(0xffffffffu, acc, m));
    if (valid && lane == 0) {
      if (splits == 1) store<double>(P.out + ob * P.oes, P.odt, r_final(P.op, acc, P.R));
      else partial[o * splits + sp] = acc;
    }
  }
}

// W threads per output (a warp, or a 256-thread block for many partials): each
// takes a fixed strided subset of the output's partials (4 loads in flight),
// then a fixed shuffle tree and, for a block, the warps' sums in order: the
// same order every run.
template <int W>
__global__ void reduce_partials_kernel(const ReduceParams P, const double* partial, std::int64_t splits) {
  __shared__ double sm[W / 32];
  const std::int64_t o = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / W;
  const int t = threadIdx.x % W;
  if (o >= P.nout) return;  // whole groups leave together (blockDim is a multiple of W)
  const double* q = partial + o * splits;
  double acc = r_init(P.op);
  std::int64_t s = t;
  for (; s + 3 * W < splits; s += 4 * W) {
    const double a = q[s], b = q[s + W], c = q[s + 2 * W], d = q[s + 3 * W];
    acc = r_step(P.op, r_step(P.op, acc, a), r_step(P.op, r_step(P.op, b, c), d));
  }
  for (; s < splits; s += W) acc = r_step(P.op, acc, q[s]);
  for (int m = 16; m > 0; m >>= 1) acc = r_step(P.op, acc, __shfl_xor_sync(0xffffffffu, acc, m));
  if constexpr (W > 32) {
    if (t % 32 == 0) sm[t / 32] = acc;
    __syncthreads();
    acc = sm[0];
    for (int w = 1; w < W / 32; ++w) acc = r_step(P.op, acc, sm[w]);
  }
  if (t == 0) {
    std::int64_t xb, ob;
    decode(P.kept, o, xb, ob);
    store<double>(P.out + ob * P.oes, P.odt, r_final(P.op, acc, P.R));
  }
}

// Reductions over outer dims (the kept innermost dim contiguous in x), e.g. a
// bias gradient sum([401536, 64], 0): a block is TW lanes across the outputs
// (each E of them, as 16-byte vectors of DT when aligned) by TR lanes down the
// reduced range, several rows in flight; the TR partial sums meet in shared
// memory in a fixed order, and the range splits over blockIdx.y into fp64
// partials (reduce_partials_kernel). reduce_columns_kernel gave each output
// one thread, so 64 outputs used 64 of 256 threads with 2-byte loads (0.1x).
template <int DT>
__global__ void reduce_columns_vec_kernel(const ReduceParams P, double* partial, std::int64_t chunk, int tw) {
  constexpr int E = VecOf<DT>::E;
  const int ES = DT >= 0 ? VecOf<DT>::size : P.xes;
  __shared__ double sm[256 * E];
  const int tx = threadIdx.x % tw, ty = threadIdx.x / tw, tr = blockDim.x / tw;
  const std::int64_t o0 = (static_cast<std::int64_t>(blockIdx.x) * tw + tx) * E;  // first of E outputs
  const bool valid = o0 < P.nout;
  std::int64_t xb = 0, ob = 0;
  if (valid) decode(P.kept, o0, xb, ob);
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * chunk;
  const std::int64_t r1 = r0 + chunk < P.R ? r0 + chunk : P.R;
  double acc[E];
#pragma unroll
  for (int e = 0; e < E; ++e) acc[e] = r_init(P.op);
  if (valid) {
    constexpr int U = 4;
    for (std::int64_t r = r0 + ty; r < r1; r += std::int64_t{U} * tr) {
      uint4 w[U];
      double d[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const std::int64_t rr = r + static_cast<std::int64_t>(u) * tr;
        if (rr < r1) {
          std::int64_t xo, unused;
          decode(P.reduced, rr, xo, unused);
          if constexpr (DT >= 0) w[u] = *reinterpret_cast<const uint4*>(P.x + (xb + xo) * ES);
          else d[u] = load<double>(P.x + (xb + xo) * ES, P.xdt);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (r + static_cast<std::int64_t>(u) * tr >= r1) break;
        if constexpr (DT >= 0) {
#pragma unroll
          for (int e = 0; e < E; ++e)
            acc[e] = r_step(P.op, acc[e], load<double>(reinterpret_cast<const char*>(&w[u]) + e * ES, DT));
        } else {
          acc[0] = r_step(P.op, acc[0], d[u]);
        }
      }
    }
  }
#pragma unroll
  for (int e = 0; e < E; ++e) sm[threadIdx.x * E + e] = acc[e];
  __syncthreads();
  if (ty != 0 || !valid) return;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    double a = sm[tx * E + e];
    for (int y = 1; y < tr; ++y) a = r_step(P.op, a, sm[(y * tw + tx) * E + e]);
    const std::int64_t o = o0 + e;
    if (gridDim.y == 1) store<double>(P.out + (ob + e * P.kept.stride2[P.kept.rank - 1]) * P.oes, P.odt, r_final(P.op, a, P.R));
    else partial[o * gridDim.y + blockIdx.y] = a;
  }
}

void set_strided(Strided& s, std::vector<std::int64_t> size, std::vector<std::vector<std::int64_t>> st) {
  collapse(size, st);
  if (size.size() > kMaxDims) fail("more than 8 dims after merging; not supported on CUDA");
  s.rank = static_cast<int>(size.size());
  for (int d = 0; d < s.rank; ++d) {
    s.size[d] = size[static_cast<std::size_t>(d)];
    s.stride[d] = st[0][static_cast<std::size_t>(d)];
    s.stride2[d] = st.size() > 1 ? st[1][static_cast<std::size_t>(d)] : 0;
  }
}

// The vector dtype code for x when every 16-byte vector the split kernels load
// along the contiguous dim (reduced innermost, or kept innermost for columns)
// lies in one run and is aligned; -1: load element by element.
int reduce_vec_dt(const ReduceParams& P, const DView& x, bool columns) {
  int dt = -1;
  if (x.dtype == Dtype::f16) dt = kF16;
  else if (x.dtype == Dtype::bf16) dt = kBF16;
  else if (x.dtype == Dtype::f32) dt = kF32;
  else if (x.dtype == Dtype::b8) dt = kB8;
  if (dt < 0 || reinterpret_cast<std::uintptr_t>(P.x) % 16 != 0) return -1;
  const std::int64_t E = 16 / P.xes;
  const Strided& run = columns ? P.kept : P.reduced;
  if (run.rank < 1 || run.stride[run.rank - 1] != 1 || run.size[run.rank - 1] % E != 0) return -1;
  for (int d = 0; d < P.kept.rank; ++d)
    if (P.kept.stride[d] % E != 0 && !(columns && d == P.kept.rank - 1)) return -1;
  for (int d = 0; d < P.reduced.rank; ++d)
    if (P.reduced.stride[d] % E != 0 && !(!columns && d == P.reduced.rank - 1)) return -1;
  return dt;
}

template <int DT>
void launch_group(const ReduceParams& P, double* part, std::int64_t splits, std::int64_t chunk, int G, int blocks,
                  cudaStream_t s) {
  if (G == 32) reduce_group_kernel<DT, 32><<<blocks, 256, 0, s>>>(P, part, splits, chunk);
  else if (G == 16) reduce_group_kernel<DT, 16><<<blocks, 256, 0, s>>>(P, part, splits, chunk);
  else reduce_group_kernel<DT, 4><<<blocks, 256, 0, s>>>(P, part, splits, chunk);
}

// Plans the split reductions (reduce_group_kernel, or reduce_columns_vec_kernel
// for outer dims) and the combine of their partials.
Launch reduce_split(const ReduceParams& P, std::vector<std::shared_ptr<void>> keep, bool columns, const DView& x) {
  const int dt = reduce_vec_dt(P, x, columns);
  const std::int64_t E = dt >= 0 ? 16 / P.xes : 1;
  const std::int64_t sms = sm_count();
  std::int64_t splits = 1, chunk = std::max<std::int64_t>(P.R, 1);
  int G = 32, tw = 1, gridx = 1;
  if (columns) {
    const std::int64_t units = (P.nout + E - 1) / E;
    std::int64_t w = 1;
    while (w < units && w < 256) w *= 2;
    tw = static_cast<int>(w);
    const std::int64_t tr = 256 / tw;
    gridx = static_cast<int>((units + tw - 1) / tw);
    const std::int64_t want = sms * 8 / gridx;  // 256-thread blocks: 8 an SM
    splits = std::max<std::int64_t>(1, std::min<std::int64_t>({want, (P.R + 4 * tr - 1) / (4 * tr), 4096}));
    chunk = (P.R + splits - 1) / splits;
    splits = (P.R + chunk - 1) / chunk;
    if (gridx > 65535 * 256) fail("reduction: too many outputs");
  } else {
    const std::int64_t units = P.R / E;
    G = units >= 128 ? 32 : units >= 32 ? 16 : 4;
    const std::int64_t want = sms * 2048 / G;  // groups to fill the GPU
    splits = std::max<std::int64_t>(1, std::min<std::int64_t>({want / P.nout, units / (4 * G), 4096}));
    if (P.R > 0) {
      chunk = (P.R + splits - 1) / splits;
      chunk = (chunk + E - 1) / E * E;
      splits = (P.R + chunk - 1) / chunk;
    }
  }
  double* part = nullptr;
  if (splits > 1) {
    auto partial = device_alloc(static_cast<std::size_t>(splits * P.nout) * sizeof(double));
    part = static_cast<double*>(partial.get());
    keep.push_back(partial);
  }
  const std::int64_t groups_blocks = (P.nout * splits * G + 255) / 256;
  const int blocks = static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(groups_blocks, sms * 32)));
  return [P, dt, columns, part, splits, chunk, G, tw, gridx, blocks, keep](void* stream) -> Status {
    auto s = static_cast<cudaStream_t>(stream);
    if (columns) {
      const dim3 grid(static_cast<unsigned>(gridx), static_cast<unsigned>(splits));
      if (dt == kF16) reduce_columns_vec_kernel<kF16><<<grid, 256, 0, s>>>(P, part, chunk, tw);
      else if (dt == kBF16) reduce_columns_vec_kernel<kBF16><<<grid, 256, 0, s>>>(P, part, chunk, tw);
      else if (dt == kF32) reduce_columns_vec_kernel<kF32><<<grid, 256, 0, s>>>(P, part, chunk, tw);
      else if (dt == kB8) reduce_columns_vec_kernel<kB8><<<grid, 256, 0, s>>>(P, part, chunk, tw);
      else reduce_columns_vec_kernel<-1><<<grid, 256, 0, s>>>(P, part, chunk, tw);
    } else {
      if (dt == kF16) launch_group<kF16>(P, part, splits, chunk, G, blocks, s);
      else if (dt == kBF16) launch_group<kBF16>(P, part, splits, chunk, G, blocks, s);
      else if (dt == kF32) launch_group<kF32>(P, part, splits, chunk, G, blocks, s);
      else if (dt == kB8) launch_group<kB8>(P, part, splits, chunk, G, blocks, s);
      else launch_group<-1>(P, part, splits, chunk, G, blocks, s);
    }
    if (splits > 256) reduce_partials_kernel<256><<<static_cast<unsigned>(P.nout), 256, 0, s>>>(P, part, splits);
    else if (splits > 1)
      reduce_partials_kernel<32><<<static_cast<unsigned>((P.nout * 32 + 255) / 256), 256, 0, s>>>(P, part, splits);
    return check_launch("reduce kernel");
  };
}

}  // namespace

Launch reduce(ROp op, const DView& out, const DView& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  ReduceParams P{};
  P.x = at_offset(x);
  P.xdt = dt_code(x.dtype);
  P.xes = static_cast<int>(dtype_size(x.dtype));
  P.out = at_offset(out);
  P.odt = dt_code(out.dtype);
  P.oes = static_cast<int>(dtype_size(out.dtype));
  P.op = static_cast<int>(op);
  const std::size_t rank = x.shape.size();
  std::vector<bool> red(rank, false);
  for (auto d : dims) red[static_cast<std::size_t>(d)] = true;
  std::vector<std::int64_t> ksize, kx, ko, rsize, rx;
  std::size_t od = 0;
  for (std::size_t d = 0; d < rank; ++d) {
    if (red[d]) {
      rsize.push_back(x.shape[d]);
      rx.push_back(x.strides[d]);
      if (keepdim) ++od;
    } else {
      ksize.push_back(x.shape[d]);
      kx.push_back(x.strides[d]);
      ko.push_back(od < out.strides.size() ? out.strides[od] : 0);
      ++od;
    }
  }
  P.nout = 1;
  for (auto s : ksize) P.nout *= s;
  P.R = 1;
  for (auto s : rsize) P.R *= s;
  set_strided(P.kept, ksize, {kx, ko});
  set_strided(P.reduced, rsize, {rx});
  auto keep = std::vector<std::shared_ptr<void>>{out.keep, x.keep};
  if (P.nout == 0) return [](void*) { return ok_status(); };
  const bool kept_inner = P.kept.rank >= 1 && P.kept.stride[P.kept.rank - 1] == 1;
  const bool reduced_inner = P.reduced.rank >= 1 && P.reduced.stride[P.reduced.rank - 1] == 1;
  const bool columns = kept_inner && P.nout >= 64 && P.R > 32 && !reduced_inner;
  // Short reductions with many outputs: a thread each (as before).
  const bool per_thread = P.R <= 32 && P.nout >= 4 * 1024;
  // Everything else runs split (the GPU reference keeps the kernels below).
  if (!g_reference && !per_thread) return reduce_split(P, std::move(keep), kept_inner && !reduced_inner && P.R > 32, x);
  if (columns) {
    const std::int64_t want = std::int64_t{sm_count()} * 2048;  // threads to fill the GPU
    std::int64_t splits = std::max<std::int64_t>(1, std::min<std::int64_t>(want / P.nout, P.R / 32));
    splits = std::min<std::int64_t>(splits, 65535);
    const std::int64_t chunk = (P.R + splits - 1) / splits;
    splits = (P.R + chunk - 1) / chunk;
    auto partial = device_alloc(static_cast<std::size_t>(splits * P.nout) * sizeof(double));
    keep.push_back(partial);
    auto* part = static_cast<double*>(partial.get());
    return [P, part, splits, chunk, keep](void* stream) -> Status {
      auto s = static_cast<cudaStream_t>(stream);
      dim3 grid(static_cast<unsigned>((P.nout + 255) / 256), static_cast<unsigned>(splits));
      reduce_columns_kernel<<<grid, 256, 0, s>>>(P, part, chunk);
      reduce_combine_kernel<<<static_cast<unsigned>((P.nout + 255) / 256), 256, 0, s>>>(P, part, static_cast<int>(splits));
      return check_launch("reduce kernel");
    };
  }
  // Long reductions get a block each; short ones with many outputs a thread each.
  return [P, per_thread, keep](void* stream) -> Status {
    auto s = static_cast<cudaStream_t>(stream);
    if (per_thread) reduce_thread_kernel<<<grid_for(P.nout, 256), 256, 0, s>>>(P);
    else {
      int threads = P.R >= 4096 ? 512 : P.R >= 256 ? 256 : P.R > 32 ? 128 : 32;
      reduce_block_kernel<<<static_cast<int>(std::min<std::int64_t>(P.nout, 65535 * 16)), threads, 0, s>>>(P);
    }
    return check_launch("reduce kernel");
  };
}

// ---- row kernels: softmax (+backward), layer_norm ----
namespace {

enum RowMode : int { kSoftmax, kLogSoftmax, kSoftmaxBw, kLogSoftmaxBw, kLayerNorm, kLayerNormBw };

struct RowParams {
  int mode;
  const char* a;  // x, or grad
  int adt, aes;
  const char* b;  // y (backward)
  int bdt, bes;
  char* out;
  int odt, oes;
  std::int64_t L, as, bs, os;  // row length and strides along it
  Strided rows;                // stride: a, stride2: out
  std::int64_t brow[kMaxDims];  // b's strides over the row dims
  std::int64_t nrows;
  // layer_norm
  const char* w;
  const char* bias;
  int wdt, wes, bdt2, bes2;
  char* mean;
  char* rstd;
  int sdt, ses;
  double eps;
};

// G threads per row: G = 32 (a warp, several rows per block) or the whole block.
template <int G, class T>
__global__ void row_kernel(const RowParams P) {
  __shared__ T smem[32];
  const int rows_per_block = G == 32 ? blockDim.x / 32 : 1;
  const int lane = G == 32 ? (threadIdx.x & 31) : threadIdx.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * rows_per_block + (G == 32 ? threadIdx.x / 32 : 0);
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * rows_per_block;
  const int gsize = G == 32 ? 32 : blockDim.x;
  auto red = [&](T v, int kind) -> T {
    if constexpr (G == 32) return kind == 0 ? warp_sum(v) : warp_max(v);
    else return block_reduce(v, kind, smem);
  };
  for (std::int64_t row = first; row < P.nrows; row += step) {
    std::int64_t ab = 0, ob = 0, bb = 0;
    {
      std::int64_t i = row;
      for (int d = P.rows.rank - 1; d >= 0; --d) {
        std::int64_t idx = i % P.rows.size[d];
        i /= P.rows.size[d];
        ab += idx * P.rows.stride[d];
        ob += idx * P.rows.stride2[d];
        bb += idx * P.brow[d];
      }
    }
    auto A = [&](std::int64_t k) { return load<T>(P.a + (ab + k * P.as) * P.aes, P.adt); };
    auto B = [&](std::int64_t k) { return load<T>(P.b + (bb + k * P.bs) * P.bes, P.bdt); };
    auto O = [&](std::int64_t k, T v) { store<T>(P.out + (ob + k * P.os) * P.oes, P.odt, v); };
    if (P.mode == kSoftmax || P.mode == kLogSoftmax) {
      T m = T(-INFINITY);
      for (std::int64_t k = lane; k < P.L; k += gsize) {
        T v = A(k);
        m = (m_isnan(m) || m_isnan(v)) ? m + v : m_max(m, v);
      }
      m = red(m, 1);
      if (m == T(-INFINITY)) m = T(0);
      T s = T(0);
      for (std::int64_t k = lane; k < P.L; k += gsize) s += m_exp(A(k) - m);
      s = red(s, 0);
      const T ls = m_log(s), inv = T(1) / s;
      for (std::int64_t k = lane; k < P.L; k += gsize) {
        T v = A(k) - m;
        O(k, P.mode == kLogSoftmax ? v - ls : m_exp(v) * inv);
      }
    } else if (P.mode == kSoftmaxBw || P.mode == kLogSoftmaxBw) {
      T s = T(0);
      for (std::int64_t k = lane; k < P.L; k += gsize) s += P.mode == kLogSoftmaxBw ? A(k) : A(k) * B(k);
      s = red(s, 0);
      for (std::int64_t k = lane; k < P.L; k += gsize) {
        T g = A(k), y = B(k);
        O(k, P.mode == kLogSoftmaxBw ? g - m_exp(y) * s : y * (g - s));
      }
    } else if (P.mode == kLayerNormBw) {  // a: grad, b: x; mean/rstd are inputs
      const T mean = load<T>(P.mean + row * P.ses, P.sdt), rstd = load<T>(P.rstd + row * P.ses, P.sdt);
      T s1 = T(0), s2 = T(0);
      for (std::int64_t k = lane; k < P.L; k += gsize) {
        T dy = A(k) * (P.w ? load<T>(P.w + k * P.wes, P.wdt) : T(1));
        s1 += dy;
        s2 += dy * (B(k) - mean) * rstd;
      }
      s1 = red(s1, 0);
      s2 = red(s2, 0);
      const T n = static_cast<T>(P.L);
      for (std::int64_t k = lane; k < P.L; k += gsize) {
        T dy = A(k) * (P.w ? load<T>(P.w + k * P.wes, P.wdt) : T(1));
        T xhat = (B(k) - mean) * rstd;
        O(k, rstd / n * (n * dy - s1 - xhat * s2));
      }
    } else {  // layer_norm: two passes for an accurate variance
      T s = T(0);
      for (std::int64_t k = lane; k < P.L; k += gsize) s += A(k);
      const T mean = red(s, 0) / static_cast<T>(P.L);
      T q = T(0);
      for (std::int64_t k = lane; k < P.L; k += gsize) {
        T d = A(k) - mean;
        q += d * d;
      }
      const T rstd = T(1) / m_sqrt(red(q, 0) / static_cast<T>(P.L) + static_cast<T>(P.eps));
      for (std::int64_t k = lane; k < P.L; k += gsize) {
        T y = (A(k) - mean) * rstd;
        if (P.w) y *= load<T>(P.w + k * P.wes, P.wdt);
        if (P.bias) y += load<T>(P.bias + k * P.bes2, P.bdt2);
        O(k, y);
      }
      if (lane == 0) {
        store<T>(P.mean + row * P.ses, P.sdt, mean);
        store<T>(P.rstd + row * P.ses, P.sdt, rstd);
      }
    }
  }
}

// exact: compute in fp64 (the GPU reference always; see softmax_backward for the other use).
Launch launch_rows(const RowParams& P, std::vector<std::shared_ptr<void>> keep, bool exact) {
  if (P.nrows == 0 || P.L == 0) {
    if (P.mode != kLayerNorm || P.nrows == 0) return [](void*) { return ok_status(); };
  }
  const bool wide = P.L > 1024;
  return [P, wide, exact, keep](void* stream) -> Status {
    auto s = static_cast<cudaStream_t>(stream);
    const int rows = static_cast<int>(std::min<std::int64_t>(P.nrows, 65535 * 8));
    const int threads = 512;  // leaves 128 registers a thread for the fp64 reference variant
    if (wide) {
      if (exact) row_kernel<0, double><<<rows, threads, 0, s>>>(P);
      else row_kernel<0, float><<<rows, threads, 0, s>>>(P);
    } else {
      if (exact) row_kernel<32, double><<<grid_for(P.nrows * 32, 256), 256, 0, s>>>(P);
      else row_kernel<32, float><<<grid_for(P.nrows * 32, 256), 256, 0, s>>>(P);
    }
    return check_launch("row kernel");
  };
}

// The softmax family over contiguous rows (stride 1 along dim) of one dtype DT
// (f16, bf16, f32), computed in T like row_kernel and with its formulas: each
// pass loads 16-byte vectors (a scalar head up to the first aligned element,
// vectors, a scalar tail), where row_kernel loaded 2 bytes per element through
// a dtype switch and ran [256, 1024, 1024] softmax at ~0.23x of torch. G lanes
// per row: 4 for short rows (L <= 64: [12544, 4, 16, 16] left 16 of 32 lanes
// idle), a warp up to 1024, else the block. The plan checks that every tensor
// has the same row strides and the same address mod 16 (so one head fits all).
template <int N>
using Ic = std::integral_constant<int, N>;

template <int DT, class T, int N>
__device__ __forceinline__ void row_ld(const char* row, std::int64_t k, T* x) {
  constexpr int ES = DT == kF32 ? 4 : 2;
  if constexpr (N == 1) {
    x[0] = load<T>(row + k * ES, DT);
  } else {
    const uint4 w = *reinterpret_cast<const uint4*>(row + k * ES);
#pragma unroll
    for (int e = 0; e < N; ++e) x[e] = load<T>(reinterpret_cast<const char*>(&w) + e * ES, DT);
  }
}
template <int DT, class T, int N>
__device__ __forceinline__ void row_st(char* row, std::int64_t k, const T* y) {
  constexpr int ES = DT == kF32 ? 4 : 2;
  if constexpr (N == 1) {
    store<T>(row + k * ES, DT, y[0]);
  } else {
    uint4 w;
#pragma unroll
    for (int e = 0; e < N; ++e) store<T>(reinterpret_cast<char*>(&w) + e * ES, DT, y[e]);
    *reinterpret_cast<uint4*>(row + k * ES) = w;
  }
}

template <int DT, class T, int G>
__global__ void softmax_vec_kernel(const RowParams P) {
  constexpr int E = DT == kF32 ? 4 : 8;
  constexpr int ES = DT == kF32 ? 4 : 2;
  __shared__ T smem[32];
  const int gsize = G > 0 ? G : blockDim.x;
  const int lane = G > 0 ? threadIdx.x % G : threadIdx.x;
  const std::int64_t per_block = G > 0 ? blockDim.x / G : 1;
  const std::int64_t gfirst = G > 0 ? (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / G : blockIdx.x;
  const std::int64_t wfirst = G > 0 && G < 32 ? gfirst - (threadIdx.x % 32) / G : gfirst;  // warps iterate together
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * per_block;
  auto red = [&](T v, int kind) -> T {
    if constexpr (G == 0) {
      return block_reduce(v, kind, smem);
    } else {
#pragma unroll
      for (int m = G / 2; m > 0; m >>= 1) {
        const T w = __shfl_xor_sync(0xffffffffu, v, m);
        v = kind == 0 ? v + w : ((m_isnan(v) || m_isnan(w)) ? v + w : m_max(v, w));
      }
      return v;
    }
  };
  for (std::int64_t rw = wfirst, row = gfirst; rw < P.nrows; rw += step, row += step) {
    const bool valid = row < P.nrows;
    std::int64_t ab = 0, ob = 0, bb = 0;
    for (std::int64_t i = valid ? row : 0, d = P.rows.rank - 1; d >= 0; --d) {
      const std::int64_t idx = i % P.rows.size[d];
      i /= P.rows.size[d];
      ab += idx * P.rows.stride[d];
      ob += idx * P.rows.stride2[d];
      bb += idx * P.brow[d];
    }
    const char* a = P.a + ab * ES;
    const char* b = P.b ? P.b + bb * ES : nullptr;
    char* out = P.out + ob * ES;
    const std::int64_t L = valid ? P.L : 0;
    const int mis = static_cast<int>(reinterpret_cast<std::uintptr_t>(a) % 16) / ES;
    const std::int64_t head = mis ? (E - mis < L ? E - mis : L) : 0;
    const std::int64_t nvec = (L - head) / E, tail = head + nvec * E;
    auto pass = [&](auto f) {
      for (std::int64_t k = lane; k < head; k += gsize) f(k, Ic<1>{});
      for (std::int64_t v = lane; v < nvec; v += gsize) f(head + v * E, Ic<E>{});
      for (std::int64_t k = tail + lane; k < L; k += gsize) f(k, Ic<1>{});
    };
    if (P.mode == kSoftmax || P.mode == kLogSoftmax) {
      T m = T(-INFINITY);
      pass([&](std::int64_t k, auto n) {
        T x[decltype(n)::value];
        row_ld<DT, T, decltype(n)::value>(a, k, x);
#pragma unroll
        for (int e = 0; e < decltype(n)::value; ++e) m = (m_isnan(m) || m_isnan(x[e])) ? m + x[e] : m_max(m, x[e]);
      });
      m = red(m, 1);
      if (m == T(-INFINITY)) m = T(0);
      T s = T(0);
      pass([&](std::int64_t k, auto n) {
        T x[decltype(n)::value];
        row_ld<DT, T, decltype(n)::value>(a, k, x);
#pragma unroll
        for (int e = 0; e < decltype(n)::value; ++e) s += m_exp(x[e] - m);
      });
      s = red(s, 0);
      const T ls = m_log(s), inv = T(1) / s;
      const bool lg = P.mode == kLogSoftmax;
      pass([&](std::int64_t k, auto n) {
        T x[decltype(n)::value];
        row_ld<DT, T, decltype(n)::value>(a, k, x);
#pragma unroll
        for (int e = 0; e < decltype(n)::value; ++e) {
          const T v = x[e] - m;
          x[e] = lg ? v - ls : m_exp(v) * inv;
        }
        row_st<DT, T, decltype(n)::value>(out, k, x);
      });
    } else {  // backward: a = grad, b = y (the forward's output)
      const bool lg = P.mode == kLogSoftmaxBw;
      T s = T(0);
      pass([&](std::int64_t k, auto n) {
        T g[decltype(n)::value], y[decltype(n)::value];
        row_ld<DT, T, decltype(n)::value>(a, k, g);
        if (!lg) row_ld<DT, T, decltype(n)::value>(b, k, y);
#pragma unroll
        for (int e = 0; e < decltype(n)::value; ++e) s += lg ? g[e] : g[e] * y[e];
      });
      s = red(s, 0);
      pass([&](std::int64_t k, auto n) {
        T g[decltype(n)::value], y[decltype(n)::value];
        row_ld<DT, T, decltype(n)::value>(a, k, g);
        row_ld<DT, T, decltype(n)::value>(b, k, y);
#pragma unroll
        for (int e = 0; e < decltype(n)::value; ++e) g[e] = lg ? g[e] - m_exp(y[e]) * s : y[e] * (g[e] - s);
        row_st<DT, T, decltype(n)::value>(out, k, g);
      });
    }
  }
}

template <int DT, class T>
void launch_softmax_vec(const RowParams& P, int G, cudaStream_t s) {
  if (G == 0) {
    softmax_vec_kernel<DT, T, 0><<<static_cast<int>(std::min<std::int64_t>(P.nrows, 65535 * 8)), 512, 0, s>>>(P);
  } else {
    const int blocks = grid_for(P.nrows * G, 256);
    if (G == 4) softmax_vec_kernel<DT, T, 4><<<blocks, 256, 0, s>>>(P);
    else softmax_vec_kernel<DT, T, 32><<<blocks, 256, 0, s>>>(P);
  }
}

// softmax_vec_kernel where it applies (see there), else row_kernel.
Launch launch_softmax_rows(const RowParams& P, std::vector<std::shared_ptr<void>> keep, bool exact, Dtype dtype,
                           bool backward) {
  bool vec = !g_reference && P.nrows > 0 && P.L > 0 && P.as == 1 && P.os == 1 && (!backward || P.bs == 1) &&
             (dtype == Dtype::f16 || dtype == Dtype::bf16 || dtype == Dtype::f32) && P.adt == P.odt &&
             (!backward || P.bdt == P.adt) && P.adt == dt_code(dtype);
  const auto mod16 = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16; };
  vec = vec && mod16(P.a) == mod16(P.out) && (!backward || mod16(P.b) == mod16(P.a));
  for (int d = 0; vec && d < P.rows.rank; ++d)
    vec = P.rows.stride[d] == P.rows.stride2[d] && (!backward || P.brow[d] == P.rows.stride[d]);
  if (!vec) return launch_rows(P, std::move(keep), exact);
  RowParams Q = P;
  if (!backward) Q.b = nullptr;
  const int G = P.L <= 64 ? 4 : P.L <= 1024 ? 32 : 0;
  const int dt = dt_code(dtype);
  return [Q, G, dt, exact, keep](void* stream) -> Status {
    auto s = static_cast<cudaStream_t>(stream);
    if (dt == kF16) {
      if (exact) launch_softmax_vec<kF16, double>(Q, G, s);
      else launch_softmax_vec<kF16, float>(Q, G, s);
    } else if (dt == kBF16) {
      if (exact) launch_softmax_vec<kBF16, double>(Q, G, s);
      else launch_softmax_vec<kBF16, float>(Q, G, s);
    } else {
      if (exact) launch_softmax_vec<kF32, double>(Q, G, s);
      else launch_softmax_vec<kF32, float>(Q, G, s);
    }
    return check_launch("softmax kernel");
  };
}

// Row dims of `t` (all but `dim`), merged; strides of up to three tensors.
void row_layout(RowParams& P, const std::vector<std::int64_t>& shape, std::size_t dim, const DView& a, const DView& o,
                const DView* b) {
  std::vector<std::int64_t> size;
  std::vector<std::vector<std::int64_t>> st(3);
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d == dim) continue;
    size.push_back(shape[d]);
    st[0].push_back(a.strides[d]);
    st[1].push_back(o.strides[d]);
    st[2].push_back(b ? b->strides[d] : 0);
  }
  P.nrows = 1;
  for (auto s : size) P.nrows *= s;
  collapse(size, st);
  if (size.size() > kMaxDims) fail("more than 8 dims after merging; not supported on CUDA");
  P.rows.rank = static_cast<int>(size.size());
  for (std::size_t d = 0; d < size.size(); ++d) {
    P.rows.size[d] = size[d];
    P.rows.stride[d] = st[0][d];
    P.rows.stride2[d] = st[1][d];
    P.brow[d] = st[2][d];
  }
}

}  // namespace

Launch softmax(const DView& out, const DView& x, std::int64_t dim, bool log) {
  RowParams P{};
  P.mode = log ? kLogSoftmax : kSoftmax;
  P.a = at_offset(x);
  P.adt = dt_code(x.dtype);
  P.aes = static_cast<int>(dtype_size(x.dtype));
  P.out = at_offset(out);
  P.odt = dt_code(out.dtype);
  P.oes = static_cast<int>(dtype_size(out.dtype));
  const bool scalar = x.shape.empty();
  P.L = scalar ? 1 : x.shape[static_cast<std::size_t>(dim)];
  P.as = scalar ? 0 : x.strides[static_cast<std::size_t>(dim)];
  P.os = scalar ? 0 : out.strides[static_cast<std::size_t>(dim)];
  row_layout(P, x.shape, scalar ? 0 : static_cast<std::size_t>(dim), x, out, nullptr);
  return launch_softmax_rows(P, {out.keep, x.keep}, g_reference, x.dtype, false);
}

Launch softmax_backward(const DView& out, const DView& grad, const DView& y, std::int64_t dim, bool log) {
  RowParams P{};
  P.mode = log ? kLogSoftmaxBw : kSoftmaxBw;
  P.a = at_offset(grad);
  P.adt = dt_code(grad.dtype);
  P.aes = static_cast<int>(dtype_size(grad.dtype));
  P.b = at_offset(y);
  P.bdt = dt_code(y.dtype);
  P.bes = static_cast<int>(dtype_size(y.dtype));
  P.out = at_offset(out);
  P.odt = dt_code(out.dtype);
  P.oes = static_cast<int>(dtype_size(out.dtype));
  const bool scalar = grad.shape.empty();
  const auto d = static_cast<std::size_t>(dim);
  P.L = scalar ? 1 : grad.shape[d];
  P.as = scalar ? 0 : grad.strides[d];
  P.bs = scalar ? 0 : y.strides[d];
  P.os = scalar ? 0 : out.strides[d];
  row_layout(P, grad.shape, scalar ? 0 : d, grad, out, &y);
  // log_softmax's backward, grad - exp(y) * sum(grad), reaches the f16 overflow edge on long rows (vocabulary-
  // sized sums of ~L/2), where fp32 rounding decides between -inf and -65504 against the fp64 oracle; an
  // fp64 pass rounds once, like the oracle. The kernel stays memory-bound on Hopper's fp64 rate.
  const bool exact = g_reference || (log && out.dtype == Dtype::f16 && P.L > 1024);
  return launch_softmax_rows(P, {out.keep, grad.keep, y.keep}, exact, grad.dtype, true);
}

Launch layer_norm(const DView& out, const DView& mean, const DView& rstd, const DView& x, const DView* w,
                  const DView* b, std::int64_t norm_dims, double eps) {
  // The normalized dims must form one stride-1 run; otherwise normalize a contiguous copy.
  const std::size_t rank = x.shape.size(), nd = static_cast<std::size_t>(norm_dims);
  std::int64_t L = 1;
  for (std::size_t d = rank - nd; d < rank; ++d) L *= x.shape[d];
  std::int64_t rows = x.numel() / std::max<std::int64_t>(L, 1);
  DView xs = x;
  std::vector<Launch> steps;
  bool flat = x.strides == contiguous(x.shape) && out.strides == contiguous(out.shape);
  if (!flat) {
    xs = device_empty(x.dtype, x.shape);
    steps.push_back(copy(xs, x));
  }
  for (const DView* p : {w, b})
    if (p && p->strides != contiguous(p->shape)) fail("layer_norm: non-contiguous weight or bias");
  DView o = out;
  std::shared_ptr<void> tmp_keep;
  if (out.strides != contiguous(out.shape)) fail("internal: layer_norm output must be contiguous");
  RowParams P{};
  P.mode = kLayerNorm;
  P.a = at_offset(xs);
  P.adt = dt_code(xs.dtype);
  P.aes = static_cast<int>(dtype_size(xs.dtype));
  P.out = at_offset(o);
  P.odt = dt_code(o.dtype);
  P.oes = static_cast<int>(dtype_size(o.dtype));
  P.L = L;
  P.as = 1;
  P.os = 1;
  P.nrows = rows;
  P.rows.rank = 1;
  P.rows.size[0] = rows;
  P.rows.stride[0] = L;
  P.rows.stride2[0] = L;
  if (w) {
    P.w = at_offset(*w);
    P.wdt = dt_code(w->dtype);
    P.wes = static_cast<int>(dtype_size(w->dtype));
  }
  if (b) {
    P.bias = at_offset(*b);
    P.bdt2 = dt_code(b->dtype);
    P.bes2 = static_cast<int>(dtype_size(b->dtype));
  }
  P.mean = at_offset(mean);
  P.rstd = at_offset(rstd);
  P.sdt = dt_code(mean.dtype);
  P.ses = static_cast<int>(dtype_size(mean.dtype));
  P.eps = eps;
  if (rows == 0) return sequence(std::move(steps));
  steps.push_back(launch_rows(P, {out.keep, x.keep, xs.keep, mean.keep, rstd.keep, w ? w->keep : nullptr,
                                  b ? b->keep : nullptr},
                              g_reference));
  return sequence(std::move(steps));
}

namespace {

// layer_norm_backward's grad_weight / grad_bias: columns of [rows, L], rows
// split across blockIdx.y into fp64 atomics acc[0][L] (weight), acc[1][L] (bias).
// A block is tw columns by tr rows (tw = L rounded up to a power of two, at
// most 256): with one thread per column, L = 64 left 192 of 256 threads idle
// (0.4x of torch); the tr partial sums meet in shared memory, one atomic each.
__global__ void ln_columns_kernel(const RowParams P, double* acc, std::int64_t chunk, int tw) {
  __shared__ double sa[256], sb[256];
  const int tx = threadIdx.x % tw, ty = threadIdx.x / tw, tr = blockDim.x / tw;
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * tw + tx;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * chunk;
  const std::int64_t r1 = r0 + chunk < P.nrows ? r0 + chunk : P.nrows;
  double a = 0, b = 0;
  if (j < P.L) {
    for (std::int64_t r = r0 + ty; r < r1; r += tr) {
      const double g = load<double>(P.a + (r * P.L + j) * P.aes, P.adt);
      const double x = load<double>(P.b + (r * P.L + j) * P.bes, P.bdt);
      a += g * (x - load<double>(P.mean + r * P.ses, P.sdt)) * load<double>(P.rstd + r * P.ses, P.sdt);
      b += g;
    }
  }
  sa[threadIdx.x] = a;
  sb[threadIdx.x] = b;
  __syncthreads();
  if (ty != 0 || j >= P.L) return;
  for (int y = 1; y < tr; ++y) {
    a += sa[y * tw + tx];
    b += sb[y * tw + tx];
  }
  atomicAdd(acc + j, a);
  atomicAdd(acc + P.L + j, b);
}

}  // namespace

Launch layer_norm_backward(const DView& gx, const DView& gw, const DView& gb, const DView& g, const DView& x,
                           const DView& mean, const DView& rstd, const DView* w, std::int64_t norm_dims) {
  const std::size_t rank = x.shape.size(), nd = static_cast<std::size_t>(norm_dims);
  if (g.shape != x.shape) fail("grad_out and input differ in shape");
  std::int64_t L = 1;
  for (std::size_t d = rank - nd; d < rank; ++d) L *= x.shape[d];
  const std::int64_t rows = L ? x.numel() / L : 0;
  std::vector<Launch> steps;
  auto flat = [&](const DView& v) {
    if (v.strides == contiguous(v.shape)) return v;
    DView c = device_empty(v.dtype, v.shape);
    steps.push_back(copy(c, v));
    return c;
  };
  DView gs = flat(g), xs = flat(x), ms = flat(mean), rs = flat(rstd);
  if (ms.dtype != rs.dtype) fail("mean and rstd differ in dtype");
  if (w && w->strides != contiguous(w->shape)) fail("layer_norm_backward: non-contiguous weight");
  RowParams P{};
  P.mode = kLayerNormBw;
  P.a = at_offset(gs);
  P.adt = dt_code(gs.dtype);
  P.aes = static_cast<int>(dtype_size(gs.dtype));
  P.b = at_offset(xs);
  P.bdt = dt_code(xs.dtype);
  P.bes = static_cast<int>(dtype_size(xs.dtype));
  P.L = L;
  P.as = P.bs = P.os = 1;
  P.nrows = rows;
  P.rows.rank = 1;
  P.rows.size[0] = rows;
  P.rows.stride[0] = L;
  P.rows.stride2[0] = L;
  P.brow[0] = L;
  if (w) {
    P.w = at_offset(*w);
    P.wdt = dt_code(w->dtype);
    P.wes = static_cast<int>(dtype_size(w->dtype));
  }
  P.mean = const_cast<char*>(static_cast<const char*>(at_offset(ms)));
  P.rstd = const_cast<char*>(static_cast<const char*>(at_offset(rs)));
  P.sdt = dt_code(ms.dtype);
  P.ses = static_cast<int>(dtype_size(ms.dtype));
  std::vector<std::shared_ptr<void>> keep{gx.keep, gw.keep, gb.keep, gs.keep, xs.keep, ms.keep, rs.keep};
  if (!gx.undefined && rows > 0) {
    if (gx.strides != contiguous(gx.shape)) fail("internal: layer_norm_backward grad_input must be contiguous");
    RowParams Q = P;
    Q.out = at_offset(gx);
    Q.odt = dt_code(gx.dtype);
    Q.oes = static_cast<int>(dtype_size(gx.dtype));
    steps.push_back(launch_rows(Q, keep, g_reference));
  }
  if (!gw.undefined || !gb.undefined) {
    auto acc_mem = device_alloc(static_cast<std::size_t>(2 * std::max<std::int64_t>(L, 1)) * sizeof(double));
    auto* acc = static_cast<double*>(acc_mem.get());
    keep.push_back(acc_mem);
    // The GPU reference keeps the former shape (a thread per column: tw = 256).
    int tw = 1;
    while (tw < L && tw < 256) tw *= 2;
    if (g_reference) tw = 256;
    const std::int64_t tr = 256 / tw, gx = (std::max<std::int64_t>(L, 1) + tw - 1) / tw;
    const std::int64_t want = g_reference ? std::int64_t{sm_count()} * 8 * 256 / std::max<std::int64_t>(L, 1)
                                          : std::int64_t{sm_count()} * 8 / gx;  // 256-thread blocks: 8 an SM
    const std::int64_t splits =
        std::max<std::int64_t>(1, std::min<std::int64_t>({want, g_reference ? rows : (rows + tr - 1) / tr, 65535}));
    const std::int64_t chunk = std::max<std::int64_t>(1, (rows + splits - 1) / splits);
    const std::int64_t nsplit = rows ? (rows + chunk - 1) / chunk : 1;
    steps.push_back([P, acc, chunk, nsplit, tw, gx, keep](void* stream) -> Status {
      auto s = static_cast<cudaStream_t>(stream);
      if (cudaMemsetAsync(acc, 0, static_cast<std::size_t>(2 * std::max<std::int64_t>(P.L, 1)) * sizeof(double), s) !=
          cudaSuccess)
        return check_launch("layer_norm_backward (cudaMemsetAsync)");
      if (P.L > 0 && P.nrows > 0) {
        dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(nsplit));
        ln_columns_kernel<<<grid, 256, 0, s>>>(P, acc, chunk, tw);
      }
      return check_launch("layer_norm_backward columns kernel");
    });
    auto acc_view = [&](std::int64_t at, const DView& like) {
      DView v;
      v.dtype = Dtype::f64;
      v.shape = like.shape;
      v.strides = contiguous(like.shape);
      v.offset = at;
      v.base = acc;
      v.keep = acc_mem;
      return v;
    };
    if (!gw.undefined) steps.push_back(copy(gw, acc_view(0, gw)));
    if (!gb.undefined) steps.push_back(copy(gb, acc_view(L, gb)));
  }
  return sequence(std::move(steps));
}

// ---- batch_norm: one block per channel over x viewed as [N, C, S] ----
namespace {

struct BnParams {
  const char* x;
  const char* g;  // backward: grad_out
  int xdt, xes, gdt, ges;
  std::int64_t N, C, S;
  std::int64_t xn, xc, xs, gn, gc, gs, on, oc, os;
  char* out;  // forward: out; backward: grad_input (may be null)
  int odt, oes;
  const char* w;
  int wdt, wes;
  const char* rm;
  const char* rv;
  int rdt, res;
  char* rm_w;  // forward training: running stats to update (may be null)
  char* rv_w;
  const char* sm;  // backward training: saved stats
  const char* si;
  int sdt, ses;
  char* smean;  // forward training outputs
  char* sinv;
  char* gw;  // backward
  char* gb;
  int gwdt, gwes;
  int training;
  double momentum, eps;
};

// batch_norm over x viewed as [N, C, S]: a grid of (C, splits) blocks, each
// split a contiguous range of the channel's N * S elements (32-bit indices:
// the plan checks N * S < 2^32). Statistics go through fp64 atomics into
// acc[C][2] (zeroed by the launch), then the apply kernel normalizes.
struct BnRange {
  unsigned j0, j1;
};
__device__ __forceinline__ BnRange bn_range(const BnParams& P, unsigned chunk) {
  const unsigned long long M = static_cast<unsigned long long>(P.N) * static_cast<unsigned long long>(P.S);
  const unsigned long long j0 = static_cast<unsigned long long>(blockIdx.y) * chunk;
  const unsigned long long j1 = j0 + chunk < M ? j0 + chunk : M;
  return BnRange{static_cast<unsigned>(j0 < M ? j0 : M), static_cast<unsigned>(j1)};
}

// Per-channel mean and 1/std the backward (and the eval forward) use.
__device__ __forceinline__ void bn_given_stats(const BnParams& P, std::int64_t c, double& mean, double& inv) {
  if (P.training && P.sm) {
    mean = load<double>(P.sm + c * P.ses, P.sdt);
    inv = load<double>(P.si + c * P.ses, P.sdt);
  } else {
    mean = load<double>(P.rm + c * P.res, P.rdt);
    inv = 1.0 / sqrt(load<double>(P.rv + c * P.res, P.rdt) + P.eps);
  }
}

// forward: acc = (sum x, sum x^2); backward: acc = (sum g, sum g * xhat).
__global__ void bn_stats_kernel(const BnParams P, double* acc, unsigned chunk, int backward) {
  __shared__ double smem[32];
  const std::int64_t c = blockIdx.x;
  const BnRange r = bn_range(P, chunk);
  const unsigned S = static_cast<unsigned>(P.S);
  double mean = 0, inv = 1;
  if (backward) bn_given_stats(P, c, mean, inv);
  double a = 0, b = 0;
  for (unsigned j = r.j0 + threadIdx.x; j < r.j1; j += blockDim.x) {
    const unsigned n = j / S, sp = j - n * S;
    const double x = load<double>(P.x + (n * P.xn + c * P.xc + sp * P.xs) * P.xes, P.xdt);
    if (!backward) {
      a += x;
      b += x * x;
    } else {
      const double g = load<double>(P.g + (n * P.gn + c * P.gc + sp * P.gs) * P.ges, P.gdt);
      a += g;
      b += g * (x - mean) * inv;
    }
  }
  a = block_reduce(a, 0, smem);
  b = block_reduce(b, 0, smem);
  if (threadIdx.x == 0) {
    atomicAdd(acc + 2 * c, a);
    atomicAdd(acc + 2 * c + 1, b);
  }
}

template <class T>
__global__ void bn_forward_kernel(const BnParams P, const double* acc, unsigned chunk) {
  const std::int64_t c = blockIdx.x;
  const double M = static_cast<double>(P.N) * static_cast<double>(P.S);
  double mean, inv;
  if (P.training) {
    mean = acc[2 * c] / M;
    double var = acc[2 * c + 1] / M - mean * mean;
    var = var > 0 ? var : 0;
    inv = 1.0 / sqrt(var + P.eps);
    if (blockIdx.y == 0 && threadIdx.x == 0) {
      store<double>(P.smean + c * P.ses, P.sdt, mean);
      store<double>(P.sinv + c * P.ses, P.sdt, inv);
      if (P.rm_w) {
        double rv = load<double>(P.rm_w + c * P.res, P.rdt);
        store<double>(P.rm_w + c * P.res, P.rdt, (1 - P.momentum) * rv + P.momentum * mean);
      }
      if (P.rv_w) {
        double rv = load<double>(P.rv_w + c * P.res, P.rdt);
        double unbiased = M > 1 ? var * M / (M - 1) : var;
        store<double>(P.rv_w + c * P.res, P.rdt, (1 - P.momentum) * rv + P.momentum * unbiased);
      }
    }
  } else {
    bn_given_stats(P, c, mean, inv);
  }
  const T w = P.w ? load<T>(P.w + c * P.wes, P.wdt) : T(1);
  const T b = P.g ? load<T>(P.g + c * P.ges, P.gdt) : T(0);  // forward: g carries bias
  const T fm = static_cast<T>(mean), fi = static_cast<T>(inv);
  const BnRange r = bn_range(P, chunk);
  const unsigned S = static_cast<unsigned>(P.S);
  for (unsigned j = r.j0 + threadIdx.x; j < r.j1; j += blockDim.x) {
    const unsigned n = j / S, sp = j - n * S;
    T v = load<T>(P.x + (n * P.xn + c * P.xc + sp * P.xs) * P.xes, P.xdt);
    store<T>(P.out + (n * P.on + c * P.oc + sp * P.os) * P.oes, P.odt, (v - fm) * fi * w + b);
  }
}

template <class T>
__global__ void bn_backward_kernel(const BnParams P, const double* acc, unsigned chunk) {
  const std::int64_t c = blockIdx.x;
  double mean, inv;
  bn_given_stats(P, c, mean, inv);
  const double sg = acc[2 * c], sgx = acc[2 * c + 1];
  if (blockIdx.y == 0 && threadIdx.x == 0) {
    if (P.gw) store<double>(P.gw + c * P.gwes, P.gwdt, sgx);
    if (P.gb) store<double>(P.gb + c * P.gwes, P.gwdt, sg);
  }
  if (!P.out) return;
  const double w = P.w ? load<double>(P.w + c * P.wes, P.wdt) : 1.0;
  const double cnt = static_cast<double>(P.N) * static_cast<double>(P.S);
  const T k = static_cast<T>(w * inv / cnt), fm = static_cast<T>(mean), fi = static_cast<T>(inv);
  const T fsg = static_cast<T>(sg), fsgx = static_cast<T>(sgx), fcnt = static_cast<T>(cnt);
  const T kev = static_cast<T>(inv * w);
  const BnRange r = bn_range(P, chunk);
  const unsigned S = static_cast<unsigned>(P.S);
  for (unsigned j = r.j0 + threadIdx.x; j < r.j1; j += blockDim.x) {
    const unsigned n = j / S, sp = j - n * S;
    T g = load<T>(P.g + (n * P.gn + c * P.gc + sp * P.gs) * P.ges, P.gdt);
    T v;
    if (P.training) {
      T x = load<T>(P.x + (n * P.xn + c * P.xc + sp * P.xs) * P.xes, P.xdt);
      T xhat = (x - fm) * fi;
      v = k * (fcnt * g - fsg - xhat * fsgx);
    } else {
      v = g * kev;
    }
    store<T>(P.out + (n * P.on + c * P.oc + sp * P.os) * P.oes, P.odt, v);
  }
}

// Launch shape: (C, splits) blocks of 256 threads, about 8 blocks per SM in all.
struct BnGrid {
  unsigned splits = 1, chunk = 1;
};
BnGrid bn_grid(std::int64_t C, std::int64_t M) {
  if (M >= (std::int64_t{1} << 32)) fail("batch_norm: more than 2^32 elements per channel");
  BnGrid g;
  const std::int64_t want = std::max<std::int64_t>(1, std::int64_t{sm_count()} * 8 / std::max<std::int64_t>(C, 1));
  const std::int64_t splits = std::max<std::int64_t>(1, std::min<std::int64_t>({want, (M + 2047) / 2048, 65535}));
  g.chunk = static_cast<unsigned>(std::max<std::int64_t>(1, (M + splits - 1) / splits));
  g.splits = static_cast<unsigned>(std::max<std::int64_t>(1, (M + g.chunk - 1) / g.chunk));
  return g;
}

// [N, C, S] strides of a rank >= 2 view whose dims 2.. merge into one; else nullopt.
bool ncs(const DView& v, std::int64_t& n, std::int64_t& c, std::int64_t& s) {
  n = v.strides[0];
  c = v.strides[1];
  std::vector<std::int64_t> size(v.shape.begin() + 2, v.shape.end());
  std::vector<std::vector<std::int64_t>> st{std::vector<std::int64_t>(v.strides.begin() + 2, v.strides.end())};
  collapse(size, st);
  if (size.size() > 1) return false;
  s = size.empty() ? 1 : st[0][0];
  return true;
}

void set_ncs(const DView& v, std::vector<Launch>& steps, DView& use, std::int64_t& n, std::int64_t& c,
             std::int64_t& s) {
  use = v;
  if (!ncs(v, n, c, s)) {
    use = device_empty(v.dtype, v.shape);
    steps.push_back(copy(use, v));
    ncs(use, n, c, s);
  }
}

void set_small(const DView* v, const char*& p, int& dt, int& es) {
  if (!v) return;
  if (v->shape.size() != 1) fail("batch_norm: per-channel tensors must be 1-D");
  if (v->strides[0] != 1 && v->shape[0] > 1) fail("batch_norm: per-channel tensors must be contiguous");
  p = at_offset(*v);
  dt = dt_code(v->dtype);
  es = static_cast<int>(dtype_size(v->dtype));
}

}  // namespace

Launch batch_norm(const DView& out, const DView& save_mean, const DView& save_invstd, const DView& x, const DView* w,
                  const DView* b, const DView* running_mean, const DView* running_var, bool training, double momentum,
                  double eps) {
  if (x.shape.size() < 2) fail("batch_norm needs an input of rank >= 2");
  BnParams P{};
  std::vector<Launch> steps;
  DView xv;
  set_ncs(x, steps, xv, P.xn, P.xc, P.xs);
  std::int64_t on, oc, os;
  if (!ncs(out, on, oc, os)) fail("internal: batch_norm output layout");
  P.on = on, P.oc = oc, P.os = os;
  P.x = at_offset(xv);
  P.xdt = dt_code(x.dtype);
  P.xes = static_cast<int>(dtype_size(x.dtype));
  P.N = x.shape[0];
  P.C = x.shape[1];
  P.S = 1;
  for (std::size_t d = 2; d < x.shape.size(); ++d) P.S *= x.shape[d];
  P.out = at_offset(out);
  P.odt = dt_code(out.dtype);
  P.oes = static_cast<int>(dtype_size(out.dtype));
  set_small(w, P.w, P.wdt, P.wes);
  set_small(b, P.g, P.gdt, P.ges);
  set_small(running_mean, P.rm, P.rdt, P.res);
  set_small(running_var, P.rv, P.rdt, P.res);
  if (running_mean && running_var && running_mean->dtype != running_var->dtype)
    fail("batch_norm: running_mean and running_var differ in dtype");
  P.training = training;
  if (training) {
    P.rm_w = const_cast<char*>(P.rm);
    P.rv_w = const_cast<char*>(P.rv);
    P.smean = at_offset(save_mean);
    P.sinv = at_offset(save_invstd);
    P.sdt = dt_code(save_mean.dtype);
    P.ses = static_cast<int>(dtype_size(save_mean.dtype));
  } else if (!P.rm || !P.rv) {
    fail("eval mode needs running_mean and running_var");
  }
  P.momentum = momentum;
  P.eps = eps;
  if (P.C == 0) return sequence(std::move(steps));
  auto acc_mem = device_alloc(static_cast<std::size_t>(P.C) * 2 * sizeof(double));
  auto* acc = static_cast<double*>(acc_mem.get());
  const BnGrid g = bn_grid(P.C, P.N * P.S);
  auto keep = std::vector<std::shared_ptr<void>>{out.keep, save_mean.keep, save_invstd.keep, xv.keep, acc_mem};
  steps.push_back([P, keep, acc, g, exact = g_reference](void* stream) -> Status {
    auto s = static_cast<cudaStream_t>(stream);
    const dim3 grid(static_cast<unsigned>(P.C), g.splits);
    if (P.training) {
      if (cudaMemsetAsync(acc, 0, static_cast<std::size_t>(P.C) * 2 * sizeof(double), s) != cudaSuccess)
        return check_launch("batch_norm statistics (cudaMemsetAsync)");
      if (P.N * P.S > 0) bn_stats_kernel<<<grid, 256, 0, s>>>(P, acc, g.chunk, 0);
    }
    const dim3 agrid(static_cast<unsigned>(P.C), P.N * P.S > 0 ? g.splits : 1);
    if (exact) bn_forward_kernel<double><<<agrid, 256, 0, s>>>(P, acc, g.chunk);
    else bn_forward_kernel<float><<<agrid, 256, 0, s>>>(P, acc, g.chunk);
    return check_launch("batch_norm kernel");
  });
  return sequence(std::move(steps));
}

Launch batch_norm_backward(const DView& gx, const DView& gw, const DView& gb, const DView& g, const DView& x,
                           const DView* w, const DView* running_mean, const DView* running_var,
                           const DView* save_mean, const DView* save_invstd, bool training, double eps) {
  if (x.shape.size() < 2) fail("batch_norm needs an input of rank >= 2");
  if (g.shape != x.shape) fail("grad_out and input differ in shape");
  BnParams P{};
  std::vector<Launch> steps;
  DView xv, gv;
  set_ncs(x, steps, xv, P.xn, P.xc, P.xs);
  set_ncs(g, steps, gv, P.gn, P.gc, P.gs);
  P.x = at_offset(xv);
  P.xdt = dt_code(x.dtype);
  P.xes = static_cast<int>(dtype_size(x.dtype));
  P.g = at_offset(gv);
  P.gdt = dt_code(g.dtype);
  P.ges = static_cast<int>(dtype_size(g.dtype));
  P.N = x.shape[0];
  P.C = x.shape[1];
  P.S = 1;
  for (std::size_t d = 2; d < x.shape.size(); ++d) P.S *= x.shape[d];
  if (!gx.undefined) {
    std::int64_t on, oc, os;
    if (!ncs(gx, on, oc, os)) fail("internal: batch_norm grad_input layout");
    P.on = on, P.oc = oc, P.os = os;
    P.out = at_offset(gx);
    P.odt = dt_code(gx.dtype);
    P.oes = static_cast<int>(dtype_size(gx.dtype));
  }
  set_small(w, P.w, P.wdt, P.wes);
  if (training) {
    if (!save_mean || !save_invstd) fail("train=True needs save_mean and save_invstd");
    const char* p = nullptr;
    set_small(save_mean, P.sm, P.sdt, P.ses);
    set_small(save_invstd, p, P.sdt, P.ses);
    P.si = p;
  } else {
    if (!running_mean || !running_var) fail("train=False needs running_mean and running_var");
    set_small(running_mean, P.rm, P.rdt, P.res);
    set_small(running_var, P.rv, P.rdt, P.res);
  }
  if (!gw.undefined) {
    P.gw = at_offset(gw);
    P.gwdt = dt_code(gw.dtype);
    P.gwes = static_cast<int>(dtype_size(gw.dtype));
  }
  if (!gb.undefined) {
    P.gb = at_offset(gb);
    P.gwdt = dt_code(gb.dtype);
    P.gwes = static_cast<int>(dtype_size(gb.dtype));
  }
  P.training = training;
  P.eps = eps;
  if (P.C == 0) return sequence(std::move(steps));
  auto acc_mem = device_alloc(static_cast<std::size_t>(P.C) * 2 * sizeof(double));
  auto* acc = static_cast<double*>(acc_mem.get());
  const BnGrid grd = bn_grid(P.C, P.N * P.S);
  auto keep = std::vector<std::shared_ptr<void>>{gx.keep, gw.keep, gb.keep, xv.keep, gv.keep, acc_mem};
  steps.push_back([P, keep, acc, grd, exact = g_reference](void* stream) -> Status {
    auto s = static_cast<cudaStream_t>(stream);
    if (cudaMemsetAsync(acc, 0, static_cast<std::size_t>(P.C) * 2 * sizeof(double), s) != cudaSuccess)
      return check_launch("batch_norm backward statistics (cudaMemsetAsync)");
    const dim3 grid(static_cast<unsigned>(P.C), grd.splits);
    if (P.N * P.S > 0) bn_stats_kernel<<<grid, 256, 0, s>>>(P, acc, grd.chunk, 1);
    const dim3 agrid(static_cast<unsigned>(P.C), P.N * P.S > 0 ? grd.splits : 1);
    if (exact) bn_backward_kernel<double><<<agrid, 256, 0, s>>>(P, acc, grd.chunk);
    else bn_backward_kernel<float><<<agrid, 256, 0, s>>>(P, acc, grd.chunk);
    return check_launch("batch_norm backward kernel");
  });
  return sequence(std::move(steps));
}

}  // namespace cuda
}  // namespace kb::backendbench::aten
