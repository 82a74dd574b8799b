// kb's CUDA kernels for 2-D upsampling (see upsample_kernels.hpp): one thread
// per output element forward; backward scatters each output gradient to its
// taps with atomics into an fp32/fp64 scratch, then rounds once.
#include "../../common/cuda_typed.cuh"
#include "upsample_kernels.hpp"

namespace kb::backendbench::aten::cuda {
namespace {

using namespace typed;

struct DevTap {
  long long i0, i1;
  double w0, w1;
};

// [N, C, H, W] addressing.
struct View4 {
  long long off, s0, s1, s2, s3, c;
};
View4 view4(const DView& v) {
  if (v.shape.size() != 4) fail("upsampling: expected an [N, C, H, W] tensor");
  return {v.offset, v.strides[0], v.strides[1], v.strides[2], v.strides[3], std::max<long long>(v.shape[1], 1)};
}
__device__ __forceinline__ long long at(const View4& v, long long p, long long h, long long w) {
  return v.off + (p / v.c) * v.s0 + (p % v.c) * v.s1 + h * v.s2 + w * v.s3;
}

template <class T, class A>
__global__ void upsample_kernel(T* out, const T* x, View4 vx, const DevTap* th, const DevTap* tw, bool bilinear,
                                long long OH, long long OW, long long n) {
  KB_GRID_LOOP(i, n) {
    const long long ow = i % OW, oh = i / OW % OH, p = i / (OW * OH);
    const DevTap h = th[oh], w = tw[ow];
    if (!bilinear) {
      st(out, i, ld<A>(x, at(vx, p, h.i0, w.i0)));
      continue;
    }
    A s = static_cast<A>(h.w0 * w.w0) * ld<A>(x, at(vx, p, h.i0, w.i0));
    s += static_cast<A>(h.w0 * w.w1) * ld<A>(x, at(vx, p, h.i0, w.i1));
    s += static_cast<A>(h.w1 * w.w0) * ld<A>(x, at(vx, p, h.i1, w.i0));
    s += static_cast<A>(h.w1 * w.w1) * ld<A>(x, at(vx, p, h.i1, w.i1));
    st(out, i, s);
  }
}

template <class T, class A>
__global__ void upsample_backward_kernel(A* acc, const T* g, View4 vg, const DevTap* th, const DevTap* tw,
                                         bool bilinear, long long OH, long long OW, long long H, long long W,
                                         long long n) {
  KB_GRID_LOOP(i, n) {
    const long long ow = i % OW, oh = i / OW % OH, p = i / (OW * OH);
    const DevTap h = th[oh], w = tw[ow];
    const A v = ld<A>(g, at(vg, p, oh, ow));
    A* plane = acc + p * H * W;
    if (!bilinear) {
      atomicAdd(plane + h.i0 * W + w.i0, v);
      continue;
    }
    atomicAdd(plane + h.i0 * W + w.i0, static_cast<A>(h.w0 * w.w0) * v);
    atomicAdd(plane + h.i0 * W + w.i1, static_cast<A>(h.w0 * w.w1) * v);
    atomicAdd(plane + h.i1 * W + w.i0, static_cast<A>(h.w1 * w.w0) * v);
    atomicAdd(plane + h.i1 * W + w.i1, static_cast<A>(h.w1 * w.w1) * v);
  }
}

template <class T, class A>
__global__ void to_output_kernel(T* out, const A* acc, long long n) {
  KB_GRID_LOOP(i, n) st(out, i, acc[i]);
}

// Both dims' taps in one device table: h first, then w.
std::shared_ptr<void> upload_taps(const std::vector<UpsampleTap>& h, const std::vector<UpsampleTap>& w) {
  std::vector<DevTap> all;
  for (const auto* v : {&h, &w})
    for (const UpsampleTap& t : *v) all.push_back({t.i0, t.i1, t.w0, t.w1});
  auto mem = device_alloc(std::max<std::size_t>(all.size(), 1) * sizeof(DevTap));
  // A copy from pageable memory may return before its DMA lands, and the kernels run on a
  // non-blocking stream that does not wait for the legacy one: the device is synchronized so the
  // tables are in place before any launch reads them.
  if (!all.empty() && (cudaMemcpy(mem.get(), all.data(), all.size() * sizeof(DevTap), cudaMemcpyHostToDevice) != cudaSuccess ||
                       cudaDeviceSynchronize() != cudaSuccess)) {
    (void)cudaGetLastError();
    fail("upsampling: copying the taps to the device failed");
  }
  return mem;
}

}  // namespace

Launch upsample2d(const DView& out, const DView& x, bool bilinear, const std::vector<UpsampleTap>& h,
                  const std::vector<UpsampleTap>& w) {
  const View4 vx = view4(x);
  const long long OH = static_cast<long long>(h.size()), OW = static_cast<long long>(w.size()), n = out.numel();
  auto taps = upload_taps(h, w);
  Launch launch;
  float_dispatch(x.dtype, "upsample2d", [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    T* o = ptr<T>(out);
    const T* xp = ptr<const T>(x);
    launch = [=](void* s) -> Status {
      const DevTap* th = static_cast<const DevTap*>(taps.get());
      if (n > 0) upsample_kernel<T, A><<<grid_for(n), kThreads, 0, stream_of(s)>>>(o, xp, vx, th, th + OH, bilinear, OH, OW, n);
      return launched("upsample2d");
    };
  });
  return launch;
}

Launch upsample2d_backward(const DView& grad_input, const DView& grad_output, bool bilinear,
                           const std::vector<UpsampleTap>& h, const std::vector<UpsampleTap>& w) {
  const View4 vg = view4(grad_output);
  const long long OH = static_cast<long long>(h.size()), OW = static_cast<long long>(w.size());
  const long long n = grad_output.numel(), total = grad_input.numel();
  const long long H = grad_input.shape[2], W = grad_input.shape[3];
  auto taps = upload_taps(h, w);
  Launch launch;
  float_dispatch(grad_output.dtype, "upsample2d_backward", [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    auto scratch = device_alloc(static_cast<std::size_t>(std::max<long long>(total, 1)) * sizeof(A));
    T* gx = ptr<T>(grad_input);
    const T* g = ptr<const T>(grad_output);
    launch = [=](void* s) -> Status {
      if (total == 0) return ok_status();
      A* a = static_cast<A*>(scratch.get());
      const DevTap* th = static_cast<const DevTap*>(taps.get());
      cudaMemsetAsync(a, 0, static_cast<std::size_t>(total) * sizeof(A), stream_of(s));
      if (n > 0)
        upsample_backward_kernel<T, A><<<grid_for(n), kThreads, 0, stream_of(s)>>>(a, g, vg, th, th + OH, bilinear, OH, OW, H, W, n);
      to_output_kernel<T, A><<<grid_for(total), kThreads, 0, stream_of(s)>>>(gx, a, total);
      return launched("upsample2d_backward");
    };
  });
  return launch;
}

}  // namespace kb::backendbench::aten::cuda
