// kb's CUDA kernels for cumsum and var_mean (see scan_kernels.hpp).
#include "../../common/cuda_typed.cuh"
#include "scan_kernels.hpp"

namespace kb::backendbench::aten::cuda {
namespace {

using namespace typed;

unsigned warps_grid(long long warps) {
  return std::min<unsigned>(blocks_for(warps * 32, kThreads), 65535u * 8u);
}

struct ScanArgs {
  const void* x;
  Dtype xdt, odt;
  bool integral;
  Strided lines;     // x's shape with the scanned dim of size 1, x's strides: each line's start
  Strided out_lines; // the same over out's strides
  long long len, xs, os, count;
};

template <class S>
__device__ __forceinline__ S warp_inclusive_scan(S v, int lane) {
  for (int o = 1; o < 32; o *= 2) {
    const S u = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += u;
  }
  return v;
}

__global__ void cumsum_kernel(void* out, ScanArgs a) {
  const int lane = threadIdx.x % 32;
  const long long warps = static_cast<long long>(gridDim.x) * (blockDim.x / 32);
  for (long long line = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; line < a.count; line += warps) {
    const long long xb = offset_of(a.lines, line), ob = offset_of(a.out_lines, line);
    double carry = 0;
    long long icarry = 0;
    for (long long base = 0; base < a.len; base += 32) {
      const long long k = base + lane;
      const bool in = k < a.len;
      if (a.integral) {
        long long v = in ? load_any_i64(a.x, a.xdt, xb + k * a.xs) : 0;
        v = warp_inclusive_scan(v, lane) + icarry;
        if (in) store_any(out, a.odt, ob + k * a.os, 0, v, true);
        icarry = __shfl_sync(0xffffffffu, v, 31);
      } else {
        double v = in ? load_any_f64(a.x, a.xdt, xb + k * a.xs) : 0;
        v = warp_inclusive_scan(v, lane) + carry;
        if (in) store_any(out, a.odt, ob + k * a.os, v, 0, false);
        carry = __shfl_sync(0xffffffffu, v, 31);
      }
    }
  }
}

struct VarArgs {
  const void* x;
  Dtype xdt, odt;
  Strided kept;     // kept dims of x (x's strides, x's offset)
  Strided red;      // reduced dims of x (x's strides, offset 0)
  long long n, count;
  double correction;
};

__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void var_mean_kernel(void* var, void* mean, VarArgs a) {
  const int lane = threadIdx.x % 32;
  const long long warps = static_cast<long long>(gridDim.x) * (blockDim.x / 32);
  for (long long o = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; o < a.count; o += warps) {
    const long long base = offset_of(a.kept, o);
    double s = 0;
    for (long long r = lane; r < a.n; r += 32) s += load_any_f64(a.x, a.xdt, base + offset_of(a.red, r));
    const double m = warp_sum(s) / static_cast<double>(a.n);
    double ss = 0;
    for (long long r = lane; r < a.n; r += 32) {
      const double e = load_any_f64(a.x, a.xdt, base + offset_of(a.red, r)) - m;
      ss += e * e;
    }
    ss = warp_sum(ss);
    if (lane == 0) {
      const double denom = fmax(0.0, static_cast<double>(a.n) - a.correction);
      store_any(var, a.odt, o, ss / denom, 0, false);
      store_any(mean, a.odt, o, m, 0, false);
    }
  }
}

}  // namespace

Launch cumsum(const DView& out, const DView& x, std::int64_t dim) {
  ScanArgs a{};
  a.x = x.base;
  a.xdt = x.dtype;
  a.odt = out.dtype;
  a.integral = is_integral(out.dtype);
  DView lx = x, lo = out;
  if (!x.shape.empty()) {
    const auto d = static_cast<std::size_t>(dim);
    a.len = x.shape[d];
    a.xs = x.strides[d];
    a.os = out.strides[d];
    lx.shape[d] = 1;
    lo.shape[d] = 1;
  } else {
    a.len = 1;
  }
  a.lines = strided(lx);
  a.out_lines = strided(lo);
  a.count = lx.numel();
  void* o = out.base;
  if (x.numel() == 0) return [](void*) { return ok_status(); };
  return [a, o](void* s) -> Status {
    cumsum_kernel<<<warps_grid(a.count), kThreads, 0, stream_of(s)>>>(o, a);
    return launched("cumsum");
  };
}

Launch var_mean(const DView& var, const DView& mean, const DView& x, const std::vector<bool>& reduced,
                double correction) {
  VarArgs a{};
  a.x = x.base;
  a.xdt = x.dtype;
  a.odt = var.dtype;
  a.correction = correction;
  const KeptReduced kr = split_reduced(x, reduced);
  a.kept = kr.kept;
  a.red = kr.red;
  a.n = kr.n;
  a.count = kr.count;
  void* vp = var.base;
  void* mp = mean.base;
  if (a.count == 0) return [](void*) { return ok_status(); };
  return [a, vp, mp](void* s) -> Status {
    var_mean_kernel<<<warps_grid(a.count), kThreads, 0, stream_of(s)>>>(vp, mp, a);
    return launched("var_mean");
  };
}

}  // namespace kb::backendbench::aten::cuda
