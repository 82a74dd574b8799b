// kb's CUDA kernels for vector norms over dims and the mean-squared-error
// loss and its backward (see norm_loss_kernels.hpp).
#include "../../common/cuda_typed.cuh"
#include "norm_loss_kernels.hpp"

namespace kb::backendbench::aten::cuda {
namespace {

using namespace typed;

constexpr int kLossBlocks = 512;

struct In {
  const void* p = nullptr;
  Dtype dt = Dtype::f32;
  Strided s;
};
In in_of(const DView& v) { return In{v.base, v.dtype, strided(v)}; }
__device__ __forceinline__ double get(const In& v, long long i) { return load_any_f64(v.p, v.dt, offset_of(v.s, i)); }

struct NormArgs {
  const void* x;
  Dtype xdt, odt;
  Strided kept, red;
  long long n, count;
  double p;
};

__global__ void norm_kernel(void* out, NormArgs a) {
  const int lane = threadIdx.x % 32;
  const long long warps = static_cast<long long>(gridDim.x) * (blockDim.x / 32);
  const bool pinf = isinf(a.p) && a.p > 0, ninf = isinf(a.p) && a.p < 0;
  for (long long o = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; o < a.count; o += warps) {
    const long long base = offset_of(a.kept, o);
    double r = ninf ? INFINITY : 0.0;
    bool nan = false;
    for (long long k = lane; k < a.n; k += 32) {
      const double e = load_any_f64(a.x, a.xdt, base + offset_of(a.red, k));
      if (pinf || ninf) {
        nan |= e != e;
        r = pinf ? fmax(r, fabs(e)) : fmin(r, fabs(e));
      } else if (a.p == 0) {
        r += e != 0 ? 1.0 : 0.0;
      } else {
        r += a.p == 1 ? fabs(e) : a.p == 2 ? e * e : pow(fabs(e), a.p);
      }
    }
    for (int s = 16; s > 0; s /= 2) {
      const double u = __shfl_xor_sync(0xffffffffu, r, s);
      r = pinf ? fmax(r, u) : ninf ? fmin(r, u) : r + u;
      nan |= __shfl_xor_sync(0xffffffffu, static_cast<int>(nan), s) != 0;
    }
    if (lane != 0) continue;
    if (pinf || ninf) r = nan ? NAN : r;
    else if (a.p != 0 && a.p != 1) r = a.p == 2 ? sqrt(r) : pow(r, 1.0 / a.p);
    store_any(out, a.odt, o, r, 0, false);
  }
}

__global__ void mse_none_kernel(void* out, Dtype odt, In x, In t, long long n) {
  KB_GRID_LOOP(i, n) {
    const double d = get(x, i) - get(t, i);
    store_any(out, odt, i, d * d, 0, false);
  }
}

__global__ void mse_partial_kernel(double* partial, In x, In t, long long n) {
  __shared__ double smem[kThreads / 32];
  double s = 0;
  KB_GRID_LOOP(i, n) {
    const double d = get(x, i) - get(t, i);
    s += d * d;
  }
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) smem[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    double b = 0;
    for (int w = 0; w < kThreads / 32; ++w) b += smem[w];
    partial[blockIdx.x] = b;
  }
}

__global__ void mse_finish_kernel(void* out, Dtype odt, const double* partial, int parts, long long n, bool mean) {
  double s = 0;
  for (int b = 0; b < parts; ++b) s += partial[b];
  store_any(out, odt, 0, mean ? s / static_cast<double>(n) : s, 0, false);
}

__global__ void mse_backward_kernel(void* out, Dtype odt, In g, In x, In t, double norm, long long n) {
  KB_GRID_LOOP(i, n)
    store_any(out, odt, i, norm * (get(x, i) - get(t, i)) * get(g, i), 0, false);
}

void require_contiguous(const DView& out) {
  if (out.strides != contiguous(out.shape)) fail("internal: a contiguous output is expected");
}

}  // namespace

Launch vector_norm(const DView& out, const DView& x, const std::vector<bool>& reduced, double p) {
  NormArgs a{};
  a.x = x.base;
  a.xdt = x.dtype;
  a.odt = out.dtype;
  a.p = p;
  const KeptReduced kr = split_reduced(x, reduced);
  a.kept = kr.kept;
  a.red = kr.red;
  a.n = kr.n;
  a.count = kr.count;
  void* o = out.base;
  return [a, o](void* s) -> Status {
    if (a.count == 0) return ok_status();
    norm_kernel<<<std::min<unsigned>(blocks_for(a.count * 32, kThreads), 65535u * 8u), kThreads, 0, stream_of(s)>>>(o, a);
    return launched("norm");
  };
}

Launch mse_loss(const DView& out, const DView& x, const DView& target, std::int64_t reduction) {
  require_contiguous(out);
  const In xi = in_of(x), ti = in_of(target);
  const long long n = x.numel();
  const Dtype odt = out.dtype;
  void* o = out.base;
  if (reduction == 0)
    return [=](void* s) -> Status {
      if (n > 0) mse_none_kernel<<<grid_for(n), kThreads, 0, stream_of(s)>>>(o, odt, xi, ti, n);
      return launched("mse_loss");
    };
  const int parts = static_cast<int>(std::max<long long>(1, std::min<long long>(kLossBlocks, (n + kThreads - 1) / kThreads)));
  auto partial = device_alloc(static_cast<std::size_t>(parts) * sizeof(double));
  const bool mean = reduction == 1;
  return [=](void* s) -> Status {
    double* pp = static_cast<double*>(partial.get());
    if (n > 0) mse_partial_kernel<<<parts, kThreads, 0, stream_of(s)>>>(pp, xi, ti, n);
    mse_finish_kernel<<<1, 1, 0, stream_of(s)>>>(o, odt, pp, n > 0 ? parts : 0, n, mean);
    return launched("mse_loss");
  };
}

Launch mse_loss_backward(const DView& out, const DView& grad, const DView& x, const DView& target, double norm) {
  require_contiguous(out);
  const In gi = in_of(grad), xi = in_of(x), ti = in_of(target);
  const long long n = out.numel();
  const Dtype odt = out.dtype;
  void* o = out.base;
  return [=](void* s) -> Status {
    if (n > 0) mse_backward_kernel<<<grid_for(n), kThreads, 0, stream_of(s)>>>(o, odt, gi, xi, ti, norm, n);
    return launched("mse_loss_backward");
  };
}

}  // namespace kb::backendbench::aten::cuda
