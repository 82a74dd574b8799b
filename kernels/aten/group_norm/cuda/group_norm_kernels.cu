// kb's CUDA kernels for group normalization (see group_norm_kernels.hpp):
// one CTA per (sample, group) for the statistics and the input gradient,
// per-(sample, channel) sums kept in a scratch so the weight and bias
// gradients add the samples in order (no atomics).
#include "../../common/cuda_typed.cuh"
#include "group_norm_kernels.hpp"

namespace kb::backendbench::aten::cuda {
namespace {

using namespace typed;

constexpr int kGroupThreads = 512;

struct Vec {
  const void* p = nullptr;
  Dtype dt = Dtype::f32;
  Strided s;
};
Vec vec(const DView* v) {
  Vec r;
  if (v) {
    r.p = v->base;
    r.dt = v->dtype;
    r.s = strided(*v);
  }
  return r;
}
__device__ __forceinline__ double get(const Vec& v, long long i, double dflt) {
  return v.p ? load_any_f64(v.p, v.dt, offset_of(v.s, i)) : dflt;
}

__device__ double block_sum(double v, double* smem) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  double s = 0;
  for (unsigned w = 0; w < blockDim.x / 32; ++w) s += smem[w];
  return s;
}

struct GnArgs {
  Vec x, w, b, dy, mean, rstd;
  long long N, C, HW, G, D;
  double eps;
};

__global__ void group_norm_kernel(void* out, Dtype odt, void* mean_out, void* rstd_out, GnArgs a) {
  __shared__ double smem[32];
  const long long ng = blockIdx.x, n = ng / a.G, g = ng % a.G;
  const long long base = (n * a.C + g * a.D) * a.HW, m = a.D * a.HW;
  double s = 0;
  for (long long i = threadIdx.x; i < m; i += blockDim.x) s += get(a.x, base + i, 0);
  const double mean = m ? block_sum(s, smem) / static_cast<double>(m) : 0.0;
  double v = 0;
  for (long long i = threadIdx.x; i < m; i += blockDim.x) {
    const double e = get(a.x, base + i, 0) - mean;
    v += e * e;
  }
  const double var = m ? block_sum(v, smem) / static_cast<double>(m) : 0.0;
  const double rstd = 1.0 / sqrt(var + a.eps);
  for (long long i = threadIdx.x; i < m; i += blockDim.x) {
    const long long cc = g * a.D + i / a.HW;
    store_any(out, odt, base + i, (get(a.x, base + i, 0) - mean) * rstd * get(a.w, cc, 1.0) + get(a.b, cc, 0.0), 0,
              false);
  }
  if (threadIdx.x == 0) {
    store_any(mean_out, odt, ng, mean, 0, false);
    store_any(rstd_out, odt, ng, rstd, 0, false);
  }
}

// Per (n, g): each warp takes channels, sums dy * x and dy over HxW into the scratch
// (ds, dbs at [n * C + c]); then the group's closed form gives grad_input.
__global__ void group_norm_backward_kernel(void* gx, Dtype odt, double* ds_nc, double* dbs_nc, GnArgs a) {
  __shared__ double smem[32];
  const long long ng = blockIdx.x, n = ng / a.G, g = ng % a.G;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (long long ch = warp; ch < a.D; ch += warps) {
    const long long cc = g * a.D + ch, base = (n * a.C + cc) * a.HW;
    double ds = 0, dbs = 0;
    for (long long i = lane; i < a.HW; i += 32) {
      const double dy = get(a.dy, base + i, 0);
      ds += dy * get(a.x, base + i, 0);
      dbs += dy;
    }
    for (int o = 16; o > 0; o /= 2) {
      ds += __shfl_xor_sync(0xffffffffu, ds, o);
      dbs += __shfl_xor_sync(0xffffffffu, dbs, o);
    }
    if (lane == 0) {
      ds_nc[n * a.C + cc] = ds;
      dbs_nc[n * a.C + cc] = dbs;
    }
  }
  __syncthreads();
  if (!gx) return;
  double s1 = 0, s2 = 0;
  for (long long ch = threadIdx.x; ch < a.D; ch += blockDim.x) {
    const long long cc = g * a.D + ch;
    const double gamma = get(a.w, cc, 1.0);
    s1 += ds_nc[n * a.C + cc] * gamma;
    s2 += dbs_nc[n * a.C + cc] * gamma;
  }
  const double ds_g = block_sum(s1, smem), db_g = block_sum(s2, smem);
  const double mean = get(a.mean, ng, 0), rstd = get(a.rstd, ng, 0);
  const long long m = a.D * a.HW;
  const double scale = m > 0 ? 1.0 / static_cast<double>(m) : 0.0;
  const double c2 = (db_g * mean - ds_g) * rstd * rstd * rstd * scale;
  const double c3 = -c2 * mean - db_g * rstd * scale;
  const long long base = (n * a.C + g * a.D) * a.HW;
  for (long long i = threadIdx.x; i < m; i += blockDim.x) {
    const long long cc = g * a.D + i / a.HW;
    const double c1 = rstd * get(a.w, cc, 1.0);
    store_any(gx, odt, base + i, c1 * get(a.dy, base + i, 0) + c2 * get(a.x, base + i, 0) + c3, 0, false);
  }
}

__global__ void group_norm_params_kernel(void* gw, void* gb, Dtype odt, const double* ds_nc, const double* dbs_nc,
                                         GnArgs a) {
  KB_GRID_LOOP(cc, a.C) {
    const long long g = cc / a.D;
    double dw = 0, db = 0;
    for (long long n = 0; n < a.N; ++n) {
      const double ds = ds_nc[n * a.C + cc], dbs = dbs_nc[n * a.C + cc];
      dw += (ds - dbs * get(a.mean, n * a.G + g, 0)) * get(a.rstd, n * a.G + g, 0);
      db += dbs;
    }
    if (gw) store_any(gw, odt, cc, dw, 0, false);
    if (gb) store_any(gb, odt, cc, db, 0, false);
  }
}

GnArgs args(const GroupNormDims& d, const DView& x) {
  GnArgs a{};
  a.x = vec(&x);
  a.N = d.n;
  a.C = d.c;
  a.HW = d.hw;
  a.G = d.g;
  a.D = d.c / d.g;
  return a;
}

}  // namespace

Launch group_norm(const DView& out, const DView& mean, const DView& rstd, const DView& x, const DView* weight,
                  const DView* bias, const GroupNormDims& d, double eps) {
  GnArgs a = args(d, x);
  a.w = vec(weight);
  a.b = vec(bias);
  a.eps = eps;
  if (out.strides != contiguous(out.shape)) fail("internal: a contiguous output is expected");
  void* o = out.base;
  void* mp = mean.base;
  void* rp = rstd.base;
  const Dtype odt = out.dtype;
  const long long blocks = d.n * d.g;
  return [=](void* s) -> Status {
    if (blocks == 0) return ok_status();
    group_norm_kernel<<<static_cast<unsigned>(blocks), kGroupThreads, 0, stream_of(s)>>>(o, odt, mp, rp, a);
    return launched("native_group_norm");
  };
}

Launch group_norm_backward(const DView& grad_input, const DView& grad_weight, const DView& grad_bias,
                           const DView& grad_out, const DView& x, const DView& mean, const DView& rstd,
                           const DView* weight, const GroupNormDims& d) {
  GnArgs a = args(d, x);
  a.w = vec(weight);
  a.dy = vec(&grad_out);
  a.mean = vec(&mean);
  a.rstd = vec(&rstd);
  auto scratch = device_alloc(static_cast<std::size_t>(std::max<long long>(2 * d.n * d.c, 1)) * sizeof(double));
  void* gx = grad_input.undefined ? nullptr : grad_input.base;
  void* gw = grad_weight.undefined ? nullptr : grad_weight.base;
  void* gb = grad_bias.undefined ? nullptr : grad_bias.base;
  const Dtype odt = x.dtype;
  const long long blocks = d.n * d.g;
  return [=](void* s) -> Status {
    double* ds = static_cast<double*>(scratch.get());
    double* dbs = ds + d.n * d.c;
    if (blocks > 0)
      group_norm_backward_kernel<<<static_cast<unsigned>(blocks), kGroupThreads, 0, stream_of(s)>>>(gx, odt, ds, dbs, a);
    if ((gw || gb) && d.c > 0)
      group_norm_params_kernel<<<blocks_for(d.c, 256), 256, 0, stream_of(s)>>>(gw, gb, odt, ds, dbs, a);
    return launched("native_group_norm_backward");
  };
}

}  // namespace kb::backendbench::aten::cuda
