// kb's CUDA topk (see topk_kernels.hpp): each line's elements become
// unsigned sort keys whose order is the oracle's order of values (NaN the
// greatest, -0 equal to +0), paired with their positions, and the lines are
// sorted by a stable radix sort (CUB, part of the CUDA toolkit), descending
// for the largest and ascending for the smallest. Stability keeps equal
// values in position order, the oracle's tie rule; the first k of each line
// are written out, values read back from x at their positions.
//
// Keys of up to 32 bits (f16, bf16, f32, i32) go under their line number in
// one 64-bit key (the value key inverted for the largest) and all lines sort
// in one device-wide radix sort over just the bits in use; 64-bit keys (f64,
// i64) sort per line with CUB's stable segmented sort.
#include <cub/device/device_radix_sort.cuh>
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

// keys[l * len + j] = (l << bits) | (line l's element j's key, inverted when `invert`), pos[...] = j.
template <class T>
__global__ void line_keys_kernel(std::uint64_t* keys, int* pos, const T* x, Strided xs, long long len, long long lines,
                                 int bits, bool invert) {
  const std::uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
  KB_GRID_LOOP(i, lines * len) {
    const long long l = i / len;
    std::uint64_t k = static_cast<std::uint64_t>(key_of(x[offset_of(xs, i)]));
    if (invert) k = ~k & mask;
    keys[i] = (static_cast<std::uint64_t>(l) << bits) | k;
    pos[i] = static_cast<int>(i - l * len);
  }
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

// Launches keys, sort and write for the sorted positions at p_out (the keys and scratch held by `keep`).
template <class T, class Sort>
Launch with_sort(const DView& values, const DView& indices, const DView& x, std::int64_t dim, std::int64_t k,
                 long long len, long long lines, int* p_out, std::vector<std::shared_ptr<void>> keep, Sort sort) {
  const Strided xs = dim_last(x, dim), os = dim_last(values, dim);
  const T* xp = ptr<const T>(x);
  T* vp = ptr<T>(values);
  long long* ip = ptr<long long>(indices);
  return [=](void* s) -> Status {
    cudaStream_t st = stream_of(s);
    if (auto r = sort(st); !r) return r;
    const long long m = lines * k;
    write_kernel<T><<<grid_for(m), kThreads, 0, st>>>(vp, ip, os, xp, xs, p_out, len, k, lines);
    (void)keep;
    return launched("topk write");
  };
}

Status sorted(cudaError_t e) {
  if (e != cudaSuccess) return make_error(Code::cuda_error, std::string("topk sort: ") + cudaGetErrorString(e));
  return launched("topk keys");
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
  const Strided xs = dim_last(x, dim);
  const T* xp = ptr<const T>(x);
  auto pos = device_alloc(2 * sizeof(int) * static_cast<std::size_t>(n));
  int* p_in = static_cast<int*>(pos.get());
  int* p_out = p_in + n;
  std::size_t temp_bytes = 0;
  if constexpr (sizeof(K) <= 4) {
    int line_bits = 0;
    while ((1LL << line_bits) < lines) ++line_bits;
    const int bits = static_cast<int>(8 * sizeof(K)), end_bit = bits + line_bits;
    auto keys = device_alloc(2 * sizeof(std::uint64_t) * static_cast<std::size_t>(n));
    auto* k_in = static_cast<std::uint64_t*>(keys.get());
    std::uint64_t* k_out = k_in + n;
    if (cudaError_t e = cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, k_in, k_out, p_in, p_out, n, 0, end_bit);
        e != cudaSuccess)
      fail(std::string("topk: sizing the sort: ") + cudaGetErrorString(e));
    auto temp = device_alloc(temp_bytes ? temp_bytes : 1);
    return with_sort<T>(values, indices, x, dim, k, len, lines, p_out, {keys, pos, temp}, [=](cudaStream_t st) {
      line_keys_kernel<T><<<grid_for(n), kThreads, 0, st>>>(k_in, p_in, xp, xs, len, lines, bits, largest);
      if (auto r = launched("topk keys"); !r) return r;
      std::size_t b = temp_bytes;
      return sorted(cub::DeviceRadixSort::SortPairs(temp.get(), b, k_in, k_out, p_in, p_out, n, 0, end_bit, st));
    });
  } else {
    auto keys = device_alloc(2 * sizeof(K) * static_cast<std::size_t>(n));
    auto offsets = device_alloc(sizeof(int) * static_cast<std::size_t>(segments + 1));
    K* k_in = static_cast<K*>(keys.get());
    K* k_out = k_in + n;
    int* off = static_cast<int*>(offsets.get());
    auto sort = [=](void* temp, std::size_t& bytes, cudaStream_t st) {
      return largest ? cub::DeviceSegmentedSort::StableSortPairsDescending(temp, bytes, k_in, k_out, p_in, p_out, n,
                                                                           segments, off, off + 1, st)
                     : cub::DeviceSegmentedSort::StableSortPairs(temp, bytes, k_in, k_out, p_in, p_out, n, segments,
                                                                 off, off + 1, st);
    };
    if (cudaError_t e = sort(nullptr, temp_bytes, nullptr); e != cudaSuccess)
      fail(std::string("topk: sizing the segmented sort: ") + cudaGetErrorString(e));
    auto temp = device_alloc(temp_bytes ? temp_bytes : 1);
    return with_sort<T>(values, indices, x, dim, k, len, lines, p_out, {keys, offsets, pos, temp},
                        [=](cudaStream_t st) {
                          keys_kernel<T, K><<<grid_for(n), kThreads, 0, st>>>(k_in, p_in, off, xp, xs, len, lines);
                          if (auto r = launched("topk keys"); !r) return r;
                          std::size_t b = temp_bytes;
                          return sorted(sort(temp.get(), b, st));
                        });
  }
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
