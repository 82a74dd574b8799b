// kb's CUDA kernels for the accumulating index operators (see
// index_scatter_kernels.hpp and the CPU oracles in index.cpp).
#include "../../common/cuda_typed.cuh"
#include "index_scatter_kernels.hpp"

namespace kb::backendbench::aten::cuda {
namespace {

using namespace typed;

template <class T, class A>
__global__ void load_kernel(A* acc, const T* x, Strided s, long long n) {
  KB_GRID_LOOP(i, n)
    acc[i] = ld<A>(x, offset_of(s, i));
}

template <class T, class A>
__global__ void store_kernel(T* out, Strided s, const A* acc, long long n) {
  KB_GRID_LOOP(i, n)
    st(out, offset_of(s, i), acc[i]);
}

__device__ __forceinline__ long long wrap(long long k, long long n) { return k < 0 ? k + n : k; }

struct ScatterArgs {
  int rank = 0, dim = 0;
  long long shape[kMaxRank] = {};   // index's shape
  long long istride[kMaxRank] = {};  // index's strides
  long long sstride[kMaxRank] = {};  // src's strides
  long long dstride[kMaxRank] = {};  // the contiguous strides of self's shape
  long long ioff = 0, soff = 0, n = 1, count = 0;
  bool i64 = true;
  const void* index = nullptr;
  const void* src = nullptr;
};

template <class T, class A>
__global__ void scatter_add_kernel(A* acc, ScatterArgs a) {
  KB_GRID_LOOP(i, a.count) {
    long long r = i, io = a.ioff, so = a.soff, d = 0;
    for (int k = a.rank - 1; k >= 0; --k) {
      const long long q = r / a.shape[k], p = r - q * a.shape[k];
      r = q;
      io += p * a.istride[k];
      so += p * a.sstride[k];
      if (k != a.dim) d += p * a.dstride[k];
    }
    d += wrap(ldi(a.index, a.i64, io), a.n) * a.dstride[a.dim];
    atomicAdd(acc + d, ld<A>(static_cast<const T*>(a.src), so));
  }
}

struct IndexAddArgs {
  long long outer = 1, inner = 1, n = 1, m = 0;
  const void* index = nullptr;
  long long ioff = 0, istride = 0;
  bool i64 = true;
  const void* source = nullptr;
  Strided s;
  double alpha = 1;
};

template <class T, class A>
__global__ void index_add_kernel(A* acc, IndexAddArgs a) {
  const long long count = a.outer * a.m * a.inner;
  KB_GRID_LOOP(i, count) {
    const long long in = i % a.inner, j = i / a.inner % a.m, o = i / (a.inner * a.m);
    const long long k = wrap(ldi(a.index, a.i64, a.ioff + j * a.istride), a.n);
    atomicAdd(acc + (o * a.n + k) * a.inner + in,
              static_cast<A>(a.alpha) * ld<A>(static_cast<const T*>(a.source), offset_of(a.s, i)));
  }
}

struct EmbArgs {
  Strided g, idx;
  bool i64 = true;
  const void* index = nullptr;
  const void* grad = nullptr;
  long long count = 0, d = 0, padding = -1, rows = 0;
  const unsigned* freq = nullptr;  // null without scale_grad_by_freq
};

__global__ void freq_kernel(unsigned* freq, EmbArgs a) {
  KB_GRID_LOOP(i, a.count)
    atomicAdd(freq + wrap(ldi(a.index, a.i64, offset_of(a.idx, i)), a.rows), 1u);
}

template <class T, class A>
__global__ void embedding_backward_kernel(A* acc, EmbArgs a) {
  const long long total = a.count * a.d;
  KB_GRID_LOOP(e, total) {
    const long long i = e / a.d, j = e - i * a.d;
    const long long row = wrap(ldi(a.index, a.i64, offset_of(a.idx, i)), a.rows);
    if (row == a.padding) continue;
    A v = ld<A>(static_cast<const T*>(a.grad), offset_of(a.g, e));
    if (a.freq) v /= static_cast<A>(a.freq[row]);
    atomicAdd(acc + row * a.d + j, v);
  }
}

struct NllArgs {
  const void* x = nullptr;
  long long x_off = 0, x_s0 = 0, x_s1 = 0;
  const void* target = nullptr;
  long long t_off = 0, t_s = 0;
  bool i64 = true;
  const void* weight = nullptr;  // null: all 1
  long long w_off = 0, w_s = 0;
  long long n = 1, classes = 0, reduction = 1, ignore = -100;
  bool batched = false;
};

// One CTA: the losses in fp64 (a single rounding, as the oracle), sums by a block reduction.
template <class T>
__global__ void nll_forward_kernel(T* out, T* total, NllArgs a) {
  __shared__ double s_sum[32], s_w[32];
  double sum = 0, wsum = 0;
  for (long long i = threadIdx.x; i < a.n; i += blockDim.x) {
    const long long cls = ldi(a.target, a.i64, a.t_off + i * a.t_s);
    double li = 0;
    if (cls != a.ignore) {
      const double wi = a.weight ? ld<double>(static_cast<const T*>(a.weight), a.w_off + cls * a.w_s) : 1.0;
      li = -wi * ld<double>(static_cast<const T*>(a.x), a.x_off + i * a.x_s0 + cls * a.x_s1);
      wsum += wi;
    }
    sum += li;
    if (a.reduction == 0 && a.batched) st(out, i, li);
  }
  for (int o = 16; o > 0; o /= 2) {
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
    wsum += __shfl_xor_sync(0xffffffffu, wsum, o);
  }
  if (threadIdx.x % 32 == 0) {
    s_sum[threadIdx.x / 32] = sum;
    s_w[threadIdx.x / 32] = wsum;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    sum = 0;
    wsum = 0;
    for (unsigned w = 0; w < blockDim.x / 32; ++w) {
      sum += s_sum[w];
      wsum += s_w[w];
    }
    if (a.reduction == 0 && !a.batched) st(out, 0, sum);
    if (a.reduction == 1) st(out, 0, sum / wsum);
    if (a.reduction == 2) st(out, 0, sum);
    st(total, 0, a.reduction == 0 ? 0.0 : wsum);
  }
}

template <class T>
__global__ void nll_backward_kernel(T* out, const T* grad, long long g_off, long long g_s, const T* total_weight,
                                    long long tw_off, NllArgs a) {
  KB_GRID_LOOP(i, a.n) {
    const long long cls = ldi(a.target, a.i64, a.t_off + i * a.t_s);
    if (cls == a.ignore) continue;
    const double wi = a.weight ? ld<double>(static_cast<const T*>(a.weight), a.w_off + cls * a.w_s) : 1.0;
    const double gi = ld<double>(grad, g_off + (a.reduction == 0 && a.batched ? i * g_s : 0));
    double v = -wi * gi;
    if (a.reduction == 1) v /= ld<double>(total_weight, tw_off);
    st(out, i * a.classes + cls, v);
  }
}

template <class T, class A>
Launch through_scratch(const DView& out, const DView* init, std::function<Status(A*, cudaStream_t)> body,
                       const char* what) {
  const long long n = out.numel();
  auto scratch = device_alloc(static_cast<std::size_t>(std::max<long long>(n, 1)) * sizeof(A));
  Strided so = strided(out);
  Strided si = init ? strided(*init) : Strided{};
  const T* ip = init ? ptr<const T>(*init) : nullptr;
  T* op = ptr<T>(out);
  return [=](void* s) -> Status {
    A* acc = static_cast<A*>(scratch.get());
    if (n == 0) return ok_status();
    if (ip) load_kernel<T, A><<<grid_for(n), kThreads, 0, stream_of(s)>>>(acc, ip, si, n);
    else cudaMemsetAsync(acc, 0, static_cast<std::size_t>(n) * sizeof(A), stream_of(s));
    if (auto st = body(acc, stream_of(s)); !st) return st;
    store_kernel<T, A><<<grid_for(n), kThreads, 0, stream_of(s)>>>(op, so, acc, n);
    return launched(what);
  };
}

}  // namespace

Launch scatter_add(const DView& out, const DView& self, std::int64_t dim, const DView& index, const DView& src) {
  ScatterArgs a;
  a.rank = static_cast<int>(index.shape.size());
  if (a.rank > kMaxRank) fail("scatter_add: more than 8 dims are not supported on CUDA");
  a.dim = static_cast<int>(dim);
  const std::vector<std::int64_t> dst = contiguous(self.shape);
  for (int k = 0; k < a.rank; ++k) {
    a.shape[k] = index.shape[k];
    a.istride[k] = index.strides[k];
    a.sstride[k] = src.strides[k];
    a.dstride[k] = dst[k];
  }
  a.ioff = index.offset;
  a.soff = src.offset;
  a.n = self.shape.empty() ? 1 : self.shape[dim];
  a.count = index.numel();
  a.i64 = index_is_i64(index, "index");
  a.index = index.base;
  if (src.dtype != self.dtype) fail("scatter_add: src must have self's dtype on CUDA");
  Launch launch;
  float_dispatch(self.dtype, "scatter_add", [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    a.src = src.base;
    launch = through_scratch<T, A>(out, &self, [a](A* acc, cudaStream_t s) -> Status {
      if (a.count > 0) scatter_add_kernel<T, A><<<grid_for(a.count), kThreads, 0, s>>>(acc, a);
      return ok_status();
    }, "scatter_add");
  });
  return launch;
}

Launch index_add(const DView& out, const DView& self, std::int64_t dim, const DView& index, const DView& source,
                 double alpha) {
  IndexAddArgs a;
  for (std::size_t d = 0; d < self.shape.size(); ++d) {
    if (static_cast<std::int64_t>(d) < dim) a.outer *= self.shape[d];
    if (static_cast<std::int64_t>(d) > dim) a.inner *= self.shape[d];
  }
  a.n = self.shape.empty() ? 1 : self.shape[static_cast<std::size_t>(dim)];
  a.m = index.numel();
  a.index = index.base;
  a.ioff = index.offset;
  a.istride = index.shape.empty() ? 0 : index.strides[0];
  a.i64 = index_is_i64(index, "index");
  a.s = strided(source);
  a.alpha = alpha;
  if (source.dtype != self.dtype) fail("index_add: source must have self's dtype on CUDA");
  Launch launch;
  float_dispatch(self.dtype, "index_add", [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    a.source = source.base;
    launch = through_scratch<T, A>(out, &self, [a](A* acc, cudaStream_t s) -> Status {
      const long long count = a.outer * a.m * a.inner;
      if (count > 0) index_add_kernel<T, A><<<grid_for(count), kThreads, 0, s>>>(acc, a);
      return ok_status();
    }, "index_add");
  });
  return launch;
}

Launch embedding_dense_backward(const DView& out, const DView& grad, const DView& indices, std::int64_t padding_idx,
                                bool scale_grad_by_freq) {
  EmbArgs a;
  a.g = strided(grad);
  a.idx = strided(indices);
  a.i64 = index_is_i64(indices, "indices");
  a.index = indices.base;
  a.grad = grad.base;
  a.count = indices.numel();
  a.d = out.shape[1];
  a.padding = padding_idx;
  std::shared_ptr<void> freq;
  const long long rows = out.shape[0];
  a.rows = rows;
  if (scale_grad_by_freq) freq = device_alloc(static_cast<std::size_t>(std::max<long long>(rows, 1)) * sizeof(unsigned));
  Launch launch;
  float_dispatch(grad.dtype, "embedding_dense_backward", [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    launch = through_scratch<T, A>(out, nullptr, [a, freq, rows](A* acc, cudaStream_t s) -> Status {
      if (a.count == 0) return ok_status();
      EmbArgs b = a;
      if (freq) {
        cudaMemsetAsync(freq.get(), 0, static_cast<std::size_t>(rows) * sizeof(unsigned), s);
        freq_kernel<<<grid_for(a.count), kThreads, 0, s>>>(static_cast<unsigned*>(freq.get()), a);
        b.freq = static_cast<const unsigned*>(freq.get());
      }
      if (a.d > 0) embedding_backward_kernel<T, A><<<grid_for(a.count * a.d), kThreads, 0, s>>>(acc, b);
      return ok_status();
    }, "embedding_dense_backward");
  });
  return launch;
}

namespace {
NllArgs nll_args(const DView& self_or_null, const DView& target, const DView* weight, std::int64_t reduction,
                 std::int64_t ignore_index, bool batched) {
  NllArgs a;
  a.target = target.base;
  a.t_off = target.offset;
  a.t_s = target.shape.empty() ? 0 : target.strides[0];
  a.i64 = index_is_i64(target, "target");
  if (weight) {
    a.weight = weight->base;
    a.w_off = weight->offset;
    a.w_s = weight->strides[0];
  }
  a.n = batched ? target.shape[0] : 1;
  a.reduction = reduction;
  a.ignore = ignore_index;
  a.batched = batched;
  if (self_or_null.base) {
    a.x = self_or_null.base;
    a.x_off = self_or_null.offset;
    a.x_s0 = batched ? self_or_null.strides[0] : 0;
    a.x_s1 = self_or_null.strides[batched ? 1 : 0];
    a.classes = self_or_null.shape.back();
  }
  return a;
}
}  // namespace

Launch nll_loss_forward(const DView& out, const DView& total_weight, const DView& self, const DView& target,
                        const DView* weight, std::int64_t reduction, std::int64_t ignore_index, bool batched) {
  NllArgs a = nll_args(self, target, weight, reduction, ignore_index, batched);
  if (weight && weight->dtype != self.dtype) fail("nll_loss: weight must have self's dtype on CUDA");
  Launch launch;
  float_dispatch(self.dtype, "nll_loss_forward", [&](auto t, auto) {
    using T = decltype(t);
    T* o = ptr<T>(out);
    T* tw = ptr<T>(total_weight);
    launch = [a, o, tw](void* s) -> Status {
      nll_forward_kernel<T><<<1, 1024, 0, stream_of(s)>>>(o, tw, a);
      return launched("nll_loss_forward");
    };
  });
  return launch;
}

Launch nll_loss_backward(const DView& out, const DView& grad, const DView& target, const DView* weight,
                         const DView& total_weight, std::int64_t reduction, std::int64_t ignore_index, bool batched,
                         std::int64_t classes) {
  NllArgs a = nll_args(DView{}, target, weight, reduction, ignore_index, batched);
  a.classes = classes;
  if (grad.dtype != out.dtype || total_weight.dtype != out.dtype || (weight && weight->dtype != out.dtype))
    fail("nll_loss_backward: grad_output, weight and total_weight must have self's dtype on CUDA");
  const long long g_off = grad.offset, g_s = grad.shape.empty() ? 0 : grad.strides[0], tw_off = total_weight.offset;
  const std::size_t bytes = static_cast<std::size_t>(out.numel()) * dtype_size(out.dtype);
  Launch launch;
  float_dispatch(out.dtype, "nll_loss_backward", [&](auto t, auto) {
    using T = decltype(t);
    T* o = ptr<T>(out);
    const T* g = ptr<const T>(grad);
    const T* tw = ptr<const T>(total_weight);
    launch = [=](void* s) -> Status {
      if (bytes) cudaMemsetAsync(o, 0, bytes, stream_of(s));
      if (a.n > 0) nll_backward_kernel<T><<<grid_for(a.n), kThreads, 0, stream_of(s)>>>(o, g, g_off, g_s, tw, tw_off, a);
      return launched("nll_loss_backward");
    };
  });
  return launch;
}

}  // namespace kb::backendbench::aten::cuda
