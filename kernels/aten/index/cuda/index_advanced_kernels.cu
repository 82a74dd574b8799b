// kb's CUDA kernels for advanced indexing: index.Tensor as a byte-exact
// gather, index_put with accumulate through an fp32/fp64 scratch with
// atomics, and without accumulate through a winner pass (atomicMax of the
// writing element's row-major position per target), so the last write wins
// as in the CPU oracle (advanced.cpp).
#include <cstdint>

#include "../../common/cuda_typed.cuh"
#include "index_scatter_kernels.hpp"

namespace kb::backendbench::aten::cuda {
namespace {

using namespace typed;

constexpr int kMaxIndices = 8;

struct DevIndex {
  int rank = 0, nidx = 0;
  long long shape[kMaxRank] = {};
  long long free_stride[kMaxRank] = {};
  long long value_stride[kMaxRank] = {};
  long long base = 0, value_offset = 0, count = 0;
  const void* idx[kMaxIndices] = {};
  bool i64[kMaxIndices] = {};
  long long ioff[kMaxIndices] = {};
  long long istride[kMaxIndices][kMaxRank] = {};
  long long dim_stride[kMaxIndices] = {};
  long long dim_size[kMaxIndices] = {};
};

// The target offset of element i and, through `voff`, its values offset.
__device__ __forceinline__ long long target(const DevIndex& p, long long i, long long& voff) {
  long long t = p.base, io[kMaxIndices];
  voff = p.value_offset;
  for (int j = 0; j < p.nidx; ++j) io[j] = p.ioff[j];
  for (int k = p.rank - 1; k >= 0; --k) {
    const long long q = i / p.shape[k], c = i - q * p.shape[k];
    i = q;
    t += c * p.free_stride[k];
    voff += c * p.value_stride[k];
    for (int j = 0; j < p.nidx; ++j) io[j] += c * p.istride[j][k];
  }
  for (int j = 0; j < p.nidx; ++j) {
    long long v = ldi(p.idx[j], p.i64[j], io[j]);
    if (v < 0) v += p.dim_size[j];
    t += v * p.dim_stride[j];
  }
  return t;
}

template <class E>
__global__ void gather_kernel(E* out, const E* self, DevIndex p) {
  KB_GRID_LOOP(i, p.count) {
    long long v;
    out[i] = self[target(p, i, v)];
  }
}

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

template <class T, class A>
__global__ void accumulate_kernel(A* acc, const T* values, DevIndex p) {
  KB_GRID_LOOP(i, p.count) {
    long long v;
    const long long t = target(p, i, v);
    atomicAdd(acc + t, ld<A>(values, v));
  }
}

__global__ void winner_kernel(unsigned long long* winner, DevIndex p) {
  KB_GRID_LOOP(i, p.count) {
    long long v;
    atomicMax(winner + target(p, i, v), static_cast<unsigned long long>(i) + 1);
  }
}

template <class T, class A>
__global__ void write_winners_kernel(A* acc, const unsigned long long* winner, const T* values, DevIndex p) {
  KB_GRID_LOOP(i, p.count) {
    long long v;
    const long long t = target(p, i, v);
    if (winner[t] == static_cast<unsigned long long>(i) + 1) acc[t] = ld<A>(values, v);
  }
}

DevIndex device_index(const AdvancedIndex& ix) {
  DevIndex p;
  if (ix.shape.size() > static_cast<std::size_t>(kMaxRank)) fail("indexing: more than 8 result dims on CUDA");
  if (ix.indices.size() > static_cast<std::size_t>(kMaxIndices)) fail("indexing: more than 8 index tensors on CUDA");
  p.rank = static_cast<int>(ix.shape.size());
  p.nidx = static_cast<int>(ix.indices.size());
  p.base = ix.base;
  p.count = 1;
  for (int k = 0; k < p.rank; ++k) {
    p.shape[k] = ix.shape[static_cast<std::size_t>(k)];
    p.free_stride[k] = ix.free_stride[static_cast<std::size_t>(k)];
    p.count *= p.shape[k];
  }
  for (int j = 0; j < p.nidx; ++j) {
    const AdvancedIndex::Index& t = ix.indices[static_cast<std::size_t>(j)];
    p.idx[j] = t.view.base;
    p.i64[j] = index_is_i64(t.view, "index");
    p.ioff[j] = t.view.offset;
    for (int k = 0; k < p.rank; ++k) p.istride[j][k] = t.strides[static_cast<std::size_t>(k)];
    p.dim_stride[j] = t.dim_stride;
    p.dim_size[j] = t.dim_size;
  }
  return p;
}

}  // namespace

Launch index_gather(const DView& out, const DView& self, const AdvancedIndex& ix) {
  DevIndex p = device_index(ix);
  const std::size_t es = dtype_size(self.dtype);
  void* o = out.base;
  const void* s = self.base;
  return [p, es, o, s](void* stream) -> Status {
    if (p.count == 0) return ok_status();
    const unsigned g = grid_for(p.count);
    switch (es) {
      case 1: gather_kernel<<<g, kThreads, 0, stream_of(stream)>>>(static_cast<std::uint8_t*>(o), static_cast<const std::uint8_t*>(s), p); break;
      case 2: gather_kernel<<<g, kThreads, 0, stream_of(stream)>>>(static_cast<std::uint16_t*>(o), static_cast<const std::uint16_t*>(s), p); break;
      case 4: gather_kernel<<<g, kThreads, 0, stream_of(stream)>>>(static_cast<std::uint32_t*>(o), static_cast<const std::uint32_t*>(s), p); break;
      case 8: gather_kernel<<<g, kThreads, 0, stream_of(stream)>>>(static_cast<std::uint64_t*>(o), static_cast<const std::uint64_t*>(s), p); break;
      default: gather_kernel<<<g, kThreads, 0, stream_of(stream)>>>(static_cast<uint4*>(o), static_cast<const uint4*>(s), p); break;
    }
    return launched("index.Tensor");
  };
}

Launch index_put(const DView& out, const DView& self, const AdvancedIndex& ix, const DView& values,
                 const std::vector<std::int64_t>& value_strides, bool accumulate) {
  DevIndex p = device_index(ix);
  p.value_offset = values.offset;
  for (int k = 0; k < p.rank; ++k) p.value_stride[k] = value_strides[static_cast<std::size_t>(k)];
  if (values.dtype != self.dtype) fail("index_put: values must have self's dtype");
  const long long n = self.numel();
  const Strided ss = strided(self), so = strided(out);
  std::shared_ptr<void> winner;
  if (!accumulate) winner = device_alloc(static_cast<std::size_t>(std::max<long long>(n, 1)) * sizeof(unsigned long long));
  Launch launch;
  float_dispatch(self.dtype, "index_put", [&](auto t, auto acc) {
    using T = decltype(t);
    using A = decltype(acc);
    auto scratch = device_alloc(static_cast<std::size_t>(std::max<long long>(n, 1)) * sizeof(A));
    const T* sp = ptr<const T>(self);
    const T* vp = ptr<const T>(values);
    T* op = ptr<T>(out);
    launch = [=](void* s) -> Status {
      if (n == 0) return ok_status();
      A* a = static_cast<A*>(scratch.get());
      cudaStream_t st = stream_of(s);
      load_kernel<T, A><<<grid_for(n), kThreads, 0, st>>>(a, sp, ss, n);
      if (p.count > 0) {
        if (accumulate) {
          accumulate_kernel<T, A><<<grid_for(p.count), kThreads, 0, st>>>(a, vp, p);
        } else {
          auto* w = static_cast<unsigned long long*>(winner.get());
          cudaMemsetAsync(w, 0, static_cast<std::size_t>(n) * sizeof(unsigned long long), st);
          winner_kernel<<<grid_for(p.count), kThreads, 0, st>>>(w, p);
          write_winners_kernel<T, A><<<grid_for(p.count), kThreads, 0, st>>>(a, w, vp, p);
        }
      }
      store_kernel<T, A><<<grid_for(n), kThreads, 0, st>>>(op, so, a, n);
      return launched("index_put");
    };
  });
  return launch;
}

}  // namespace kb::backendbench::aten::cuda
