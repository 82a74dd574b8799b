// kb's CUDA topk (see topk_kernels.hpp): each line's elements become
// unsigned sort keys whose order is the oracle's order of values (NaN the
// greatest, -0 equal to +0), paired with their positions, and each line is
// sorted by a stable segmented radix sort (CUB, part of the CUDA toolkit),
// descending for the largest and ascending for the smallest. Stability keeps
// equal values in position order, the oracle's tie rule; the first k of each
// line are written out, values read back from x at their positions.
#include <cub/device/device_segmented_sort.cuh>

#include <cstdint>

#include "../../common/cuda_typed.cuh"
#include "topk_kernels.hpp"

namespace kb::backendbench::aten::cuda {
namespace {

using namespace typed;

// An order-preserving unsigned key: the sign bit flipped for non-negative values, every bit for negative ones.
template <class K>
__device__ __forceinline__ K order_key(K bits, bool nan, bool zero) {
  constexpr K sign = K(1) << (sizeof(K) * 8 - 1);
  if (nan) return ~K(0);
  if (zero) bits = 0;
  return (bits & sign) ? K(~bits) : K(bits | sign);
}

__device__ __forceinline__ std::uint16_t key_of(__half v) {
  const auto b = __half_as_ushort(v);
  return order_key<std::uint16_t>(b, (b & 0x7fff) > 0x7c00, (b & 0x7fff) == 0);
}
__device__ __forceinline__ std::uint16_t key_of(__nv_bfloat16 v) {
  const auto b = __bfloat16_as_ushort(v);
  return order_key<std::uint16_t>(b, (b & 0x7fff) > 0x7f80, (b & 0x7fff) == 0);
}
__device__ __forceinline__ std::uint32_t key_of(float v) {
  return order_key<std::uint32_t>(__float_as_uint(v), v != v, v == 0.0f);
}
__device__ __forceinline__ std::uint64_t key_of(double v) {
  return order_key<std::uint64_t>(static_cast<std::uint64_t>(__double_as_longlong(v)), v != v, v == 0.0);
}
__device__ __forceinline__ std::uint32_t key_of(int v) { return static_cast<std::uint32_t>(v) ^ 0x80000000u; }
__device__ __forceinline__ std::uint64_t key_of(long long v) {
  return static_cast<std::uint64_t>(v) ^ 0x8000000000000000ull;
}

template <class T>
struct KeyOf {
  using type = decltype(key_of(T{}));
};

// keys[l * len + j], pos[...] = key of line l's element j, j; offsets[l] = l * len.
template <class T, class K>
__global__ void keys_kernel(K* keys, int* pos, int* offsets, const T* x, Strided xs, long long len, long long lines) {
  KB_GRID_LOOP(i, lines * len) {
    keys[i] = key_of(x[offset_of(xs, i)]);
    pos[i] = static_cast<int>(i % len);
  }
  KB_GRID_LOOP(l, lines + 1) offsets[l] = static_cast<int>(l * len);
}

template <class T>
__global__ void write_kernel(T* values, long long* indices, Strided os, const T* x, Strided xs, const int* sorted_pos,
                             long long len, long long k, long long lines) {
  KB_GRID_LOOP(i, lines * k) {
    const long long l = i / k, j = i - l * k;
    const long long src = sorted_pos[l * len + j];
    const long long o = offset_of(os, i);
    values[o] = x[offset_of(xs, l * len + src)];
    indices[o] = src;
  }
}

// The view with `dim` moved last: element (line, j) of the lines along dim at logical position line * n + j.
Strided dim_last(const DView& v, std::int64_t dim) {
  DView p = v;
  p.shape.clear();
  p.strides.clear();
  for (std::size_t d = 0; d < v.shape.size(); ++d)
    if (static_cast<std::int64_t>(d) != dim) {
      p.shape.push_back(v.shape[d]);
      p.strides.push_back(v.strides[d]);
    }
  if (!v.shape.empty()) {
    p.shape.push_back(v.shape[static_cast<std::size_t>(dim)]);
    p.strides.push_back(v.strides[static_cast<std::size_t>(dim)]);
  }
  return strided(p);
}

template <class T>
Launch plan_topk(const DView& values, const DView& indices, const DView& x, std::int64_t dim, std::int64_t k,
                 bool largest) {
  using K = typename KeyOf<T>::type;
  const long long len = x.shape.empty() ? 1 : x.shape[static_cast<std::size_t>(dim)];
  const long long lines = len ? x.numel() / len : 0;
  if (lines * len == 0 || k == 0) return [](void*) { return ok_status(); };
  if (len * lines > 0x7fffffffLL) fail("topk: more than 2^31 - 1 elements are not supported on CUDA");
  const int n = static_cast<int>(len * lines), segments = static_cast<int>(lines);
  auto keys = device_alloc(2 * sizeof(K) * static_cast<std::size_t>(n));
  auto pos = device_alloc(2 * sizeof(int) * static_cast<std::size_t>(n));
  auto offsets = device_alloc(sizeof(int) * static_cast<std::size_t>(segments + 1));
  K* k_in = static_cast<K*>(keys.get());
  K* k_out = k_in + n;
  int* p_in = static_cast<int*>(pos.get());
  int* p_out = p_in + n;
  int* off = static_cast<int*>(offsets.get());
  std::size_t temp_bytes = 0;
  cudaError_t e = largest ? cub::DeviceSegmentedSort::StableSortPairsDescending(nullptr, temp_bytes, k_in, k_out, p_in,
                                                                               p_out, n, segments, off, off + 1)
                          : cub::DeviceSegmentedSort::StableSortPairs(nullptr, temp_bytes, k_in, k_out, p_in, p_out, n,
                                                                      segments, off, off + 1);
  if (e != cudaSuccess) fail(std::string("topk: sizing the segmented sort: ") + cudaGetErrorString(e));
  auto temp = device_alloc(temp_bytes ? temp_bytes : 1);
  const Strided xs = dim_last(x, dim), os = dim_last(values, dim);
  const T* xp = ptr<const T>(x);
  T* vp = ptr<T>(values);
  long long* ip = ptr<long long>(indices);
  return [=](void* s) -> Status {
    cudaStream_t st = stream_of(s);
    keys_kernel<T, K><<<grid_for(n), kThreads, 0, st>>>(
        k_in, p_in, off, xp, xs, len, lines);
    if (auto r = launched("topk keys"); !r) return r;
    std::size_t bytes = temp_bytes;
    cudaError_t se = largest ? cub::DeviceSegmentedSort::StableSortPairsDescending(
                                   temp.get(), bytes, k_in, k_out, p_in, p_out, n, segments, off, off + 1, st)
                             : cub::DeviceSegmentedSort::StableSortPairs(temp.get(), bytes, k_in, k_out, p_in, p_out,
                                                                         n, segments, off, off + 1, st);
    if (se != cudaSuccess) return make_error(Code::cuda_error, std::string("topk sort: ") + cudaGetErrorString(se));
    const long long m = lines * k;
    write_kernel<T><<<grid_for(m), kThreads, 0, st>>>(
        vp, ip, os, xp, xs, p_out, len, k, lines);
    (void)keys, (void)pos, (void)offsets;
    return launched("topk write");
  };
}

}  // namespace

Launch topk(const DView& values, const DView& indices, const DView& x, std::int64_t dim, std::int64_t k,
            bool largest) {
  if (indices.dtype != Dtype::i64) fail("topk: indices must be i64");
  switch (x.dtype) {
    case Dtype::f16: return plan_topk<__half>(values, indices, x, dim, k, largest);
    case Dtype::bf16: return plan_topk<__nv_bfloat16>(values, indices, x, dim, k, largest);
    case Dtype::f32: return plan_topk<float>(values, indices, x, dim, k, largest);
    case Dtype::f64: return plan_topk<double>(values, indices, x, dim, k, largest);
    case Dtype::i32: return plan_topk<int>(values, indices, x, dim, k, largest);
    case Dtype::i64: return plan_topk<long long>(values, indices, x, dim, k, largest);
    default: fail(std::string("topk: f16, bf16, f32, f64, i32 and i64 are supported on CUDA, got ") + dtype_abbrev(x.dtype));
  }
}

}  // namespace kb::backendbench::aten::cuda
