// kb's CUDA kernels for floor_divide, fmod, remainder and elu_backward (see
// division_kernels.hpp): one thread per output element over strided,
// broadcast operands of any real dtype.
#include <cstdint>

#include "../../common/cuda_typed.cuh"
#include "division_kernels.hpp"

namespace kb::backendbench::aten::cuda {
namespace {

using namespace typed;

struct Operand {
  const void* p = nullptr;
  int dt = 0;
  bool is_const = false;
  double value = 0;
  long long ivalue = 0;
  Strided s;
};

__device__ __forceinline__ double load_f64(const Operand& o, long long i) {
  return o.is_const ? o.value : load_any_f64(o.p, static_cast<Dtype>(o.dt), offset_of(o.s, i));
}

__device__ __forceinline__ long long load_i64(const Operand& o, long long i) {
  return o.is_const ? o.ivalue : load_any_i64(o.p, static_cast<Dtype>(o.dt), offset_of(o.s, i));
}

__device__ __forceinline__ void store(void* p, int dt, long long i, double v, long long iv, bool integral) {
  store_any(p, static_cast<Dtype>(dt), i, v, iv, integral);
}

__device__ __forceinline__ long long int_div(long long a, long long b, int k) {
  if (b == -1) return k == static_cast<int>(DivKind::floor_div) ? static_cast<long long>(0ull - static_cast<unsigned long long>(a)) : 0;
  const long long q = a / b, r = a % b;
  const bool adjust = r != 0 && ((r < 0) != (b < 0));
  if (k == static_cast<int>(DivKind::floor_div)) return adjust ? q - 1 : q;
  if (k == static_cast<int>(DivKind::fmod)) return r;
  return adjust ? r + b : r;
}

__device__ __forceinline__ double float_div(double a, double b, int k) {
  if (k == static_cast<int>(DivKind::fmod)) return fmod(a, b);
  if (k == static_cast<int>(DivKind::remainder)) {
    double r = fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  }
  if (b == 0) return a / b;
  const double mod = fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0) return copysign(0.0, a / b);
  double fl = floor(div);
  if (div - fl > 0.5) fl += 1.0;
  return fl;
}

__global__ void divide_kernel(void* out, int odt, bool integral, int kind, Operand a, Operand b, long long n) {
  KB_GRID_LOOP(i, n) {
    if (integral) store(out, odt, i, 0, int_div(load_i64(a, i), load_i64(b, i), kind), true);
    else store(out, odt, i, float_div(load_f64(a, i), load_f64(b, i), kind), 0, false);
  }
}

__global__ void elu_backward_kernel(void* out, int odt, Operand g, Operand y, double alpha, double scale,
                                    double input_scale, bool is_result, long long n) {
  KB_GRID_LOOP(i, n) {
    const double go = load_f64(g, i), s = load_f64(y, i);
    double v;
    if (is_result) v = s <= 0 ? go * input_scale * (s + alpha * scale) : go * scale;
    else v = s <= 0 ? go * input_scale * alpha * scale * exp(s * input_scale) : go * scale;
    store(out, odt, i, v, 0, false);
  }
}

Operand operand(const BinaryIn& in) {
  Operand o;
  o.is_const = in.is_const;
  o.value = in.value;
  o.ivalue = static_cast<long long>(in.value);
  if (!in.is_const) {
    o.p = in.view.base;
    o.dt = static_cast<int>(in.view.dtype);
    o.s = strided(in.view);
  }
  return o;
}

// Output element i is written at its row-major position: outputs are contiguous.
void require_contiguous(const DView& out) {
  if (out.strides != contiguous(out.shape)) fail("internal: a contiguous output is expected");
}

}  // namespace

Launch rounding_divide(DivKind kind, const DView& out, const BinaryIn& a, const BinaryIn& b) {
  require_contiguous(out);
  const Operand oa = operand(a), ob = operand(b);
  const bool integral = is_integral(out.dtype);
  const int odt = static_cast<int>(out.dtype), k = static_cast<int>(kind);
  void* o = out.base;
  const long long n = out.numel();
  return [=](void* s) -> Status {
    if (n == 0) return ok_status();
    divide_kernel<<<grid_for(n), kThreads, 0, stream_of(s)>>>(o, odt, integral, k, oa, ob, n);
    return launched("rounding division");
  };
}

Launch elu_backward(const DView& out, const BinaryIn& grad, const BinaryIn& self_or_result, double alpha,
                    double scale, double input_scale, bool is_result) {
  require_contiguous(out);
  if (!is_floating(out.dtype)) fail("elu_backward needs a floating output");
  const Operand g = operand(grad), y = operand(self_or_result);
  const int odt = static_cast<int>(out.dtype);
  void* o = out.base;
  const long long n = out.numel();
  return [=](void* s) -> Status {
    if (n == 0) return ok_status();
    elu_backward_kernel<<<grid_for(n), kThreads, 0, stream_of(s)>>>(o, odt, g, y, alpha, scale, input_scale,
                                                                   is_result, n);
    return launched("elu_backward");
  };
}

}  // namespace kb::backendbench::aten::cuda
