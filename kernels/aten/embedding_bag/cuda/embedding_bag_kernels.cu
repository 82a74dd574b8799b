// kb's CUDA kernels for _embedding_bag and its per-sample-weights backward
// (see embedding_bag_kernels.hpp and the CPU oracle, embedding_bag.cpp).
#include "../../common/cuda_typed.cuh"
#include "embedding_bag_kernels.hpp"

namespace kb::backendbench::aten::cuda {
namespace {

using namespace typed;

struct BagArgs {
  const void* weight;
  long long w_off, w_s0, w_s1;
  const void* indices;
  long long i_off, i_s;
  bool i64;
  const void* offsets;
  long long o_off, o_s;
  bool o_i64;
  const void* psw;  // null without per-sample weights
  long long p_off, p_s;
  void* out;  // [bags, d] contiguous
  void* offset2bag;
  void* bag_size;
  void* max_indices;
  bool out_i64;  // the index outputs' dtype (indices')
  long long bags, n, d, padding, mode;
};

__device__ __forceinline__ void store_index(void* p, bool i64, long long i, long long v) {
  if (i64) static_cast<long long*>(p)[i] = v;
  else static_cast<int*>(p)[i] = static_cast<int>(v);
}

// One CTA per bag: the columns across threads, the bag's indices in order, so
// sums and the max's first-maximum rule follow the oracle's order.
template <class T, class A>
__global__ void bag_kernel(BagArgs a) {
  const long long b = blockIdx.x;
  const long long begin = b == 0 ? 0 : ldi(a.offsets, a.o_i64, a.o_off + b * a.o_s);
  const long long end = b + 1 < a.bags ? ldi(a.offsets, a.o_i64, a.o_off + (b + 1) * a.o_s) : a.n;
  const T* w = static_cast<const T*>(a.weight);
  const T* psw = static_cast<const T*>(a.psw);
  for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) store_index(a.offset2bag, a.out_i64, i, b);
  long long count = 0;
  for (long long i = begin; i < end; ++i) count += ldi(a.indices, a.i64, a.i_off + i * a.i_s) != a.padding;
  if (threadIdx.x == 0) store_index(a.bag_size, a.out_i64, b, count);
  for (long long j = threadIdx.x; j < a.d; j += blockDim.x) {
    A acc = a.mode == 2 ? A(-INFINITY) : A(0);
    long long arg = -1;
    for (long long i = begin; i < end; ++i) {
      const long long row = ldi(a.indices, a.i64, a.i_off + i * a.i_s);
      if (row == a.padding) continue;
      const A v = ld<A>(w, a.w_off + row * a.w_s0 + j * a.w_s1);
      if (a.mode == 2) {
        if (arg < 0 || v > acc) {
          acc = v;
          arg = row;
        }
      } else {
        const A s = psw ? ld<A>(psw, a.p_off + i * a.p_s) : A(1);
        acc += s * v;
      }
    }
    if (a.mode == 1 && count > 0) acc /= static_cast<A>(count);
    if (a.mode == 2 && arg < 0) acc = A(0);
    st(static_cast<T*>(a.out), b * a.d + j, acc);
    if (a.mode == 2) store_index(a.max_indices, a.out_i64, b * a.d + j, arg);
  }
}

// include_last_offset: the last bag_size entry belongs to no bag.
__global__ void zero_index_kernel(void* p, bool i64, long long i) { store_index(p, i64, i, 0); }

struct PswArgs {
  const void* grad;
  long long g_off, g_s0, g_s1;
  const void* weight;
  long long w_off, w_s0, w_s1;
  const void* indices;
  long long i_off, i_s;
  bool i64;
  const void* offset2bag;
  long long b_off, b_s;
  bool b_i64;
  void* out;
  long long n, d, padding;
};

template <class T, class A>
__global__ void psw_backward_kernel(PswArgs a) {
  const long long warps = static_cast<long long>(gridDim.x) * (blockDim.x / 32);
  const int lane = threadIdx.x % 32;
  const T* g = static_cast<const T*>(a.grad);
  const T* w = static_cast<const T*>(a.weight);
  for (long long i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; i < a.n; i += warps) {
    const long long row = ldi(a.indices, a.i64, a.i_off + i * a.i_s);
    const long long bag = ldi(a.offset2bag, a.b_i64, a.b_off + i * a.b_s);
    A s = 0;
    if (row != a.padding)
      for (long long j = lane; j < a.d; j += 32)
        s += ld<A>(g, a.g_off + bag * a.g_s0 + j * a.g_s1) * ld<A>(w, a.w_off + row * a.w_s0 + j * a.w_s1);
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) st(static_cast<T*>(a.out), i, s);
  }
}

}  // namespace

Launch embedding_bag(const DView& out, const DView& offset2bag, const DView& bag_size, const DView& max_indices,
                     const DView& weight, const DView& indices, const DView& offsets, const DView* psw,
                     std::int64_t mode, std::int64_t bags, std::int64_t padding_idx) {
  BagArgs a{};
  a.weight = weight.base;
  a.w_off = weight.offset;
  a.w_s0 = weight.strides[0];
  a.w_s1 = weight.strides[1];
  a.indices = indices.base;
  a.i_off = indices.offset;
  a.i_s = indices.strides[0];
  a.i64 = index_is_i64(indices, "indices");
  a.offsets = offsets.base;
  a.o_off = offsets.offset;
  a.o_s = offsets.strides[0];
  a.o_i64 = index_is_i64(offsets, "offsets");
  if (psw) {
    a.psw = psw->base;
    a.p_off = psw->offset;
    a.p_s = psw->strides[0];
  }
  a.out = out.base;
  a.offset2bag = offset2bag.base;
  a.bag_size = bag_size.base;
  a.max_indices = mode == 2 ? max_indices.base : nullptr;
  a.out_i64 = index_is_i64(offset2bag, "offset2bag");
  a.bags = bags;
  a.n = indices.shape[0];
  a.d = weight.shape[1];
  a.padding = padding_idx;
  a.mode = mode;
  const bool extra = bag_size.numel() > bags;  // include_last_offset
  const int threads = static_cast<int>(std::min<long long>(256, std::max<long long>(32, (a.d + 31) / 32 * 32)));
  Launch launch;
  float_dispatch(weight.dtype, "_embedding_bag", [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    launch = [a, bags, threads, extra](void* s) -> Status {
      if (bags > 0) bag_kernel<T, A><<<static_cast<unsigned>(bags), threads, 0, stream_of(s)>>>(a);
      if (extra) zero_index_kernel<<<1, 1, 0, stream_of(s)>>>(a.bag_size, a.out_i64, bags);
      return launched("_embedding_bag");
    };
  });
  return launch;
}

Launch embedding_bag_per_sample_weights_backward(const DView& out, const DView& grad, const DView& weight,
                                                 const DView& indices, const DView& offset2bag,
                                                 std::int64_t padding_idx) {
  PswArgs a{};
  a.grad = grad.base;
  a.g_off = grad.offset;
  a.g_s0 = grad.strides[0];
  a.g_s1 = grad.strides[1];
  a.weight = weight.base;
  a.w_off = weight.offset;
  a.w_s0 = weight.strides[0];
  a.w_s1 = weight.strides[1];
  a.indices = indices.base;
  a.i_off = indices.offset;
  a.i_s = indices.strides[0];
  a.i64 = index_is_i64(indices, "indices");
  a.offset2bag = offset2bag.base;
  a.b_off = offset2bag.offset;
  a.b_s = offset2bag.strides[0];
  a.b_i64 = index_is_i64(offset2bag, "offset2bag");
  a.out = out.base;
  a.n = indices.shape[0];
  a.d = weight.shape[1];
  a.padding = padding_idx;
  if (grad.dtype != weight.dtype) fail("grad and weight must have the same dtype on CUDA");
  Launch launch;
  float_dispatch(grad.dtype, "_embedding_bag_per_sample_weights_backward", [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    launch = [a](void* s) -> Status {
      if (a.n == 0) return ok_status();
      const int threads = 256;
      psw_backward_kernel<T, A><<<blocks_for(a.n * 32, threads), threads, 0, stream_of(s)>>>(a);
      return launched("_embedding_bag_per_sample_weights_backward");
    };
  });
  return launch;
}

}  // namespace kb::backendbench::aten::cuda
