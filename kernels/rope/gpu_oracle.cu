// GPU oracle for rope (rope_with_cos_sin_cache, NeoX or GPT-J): the CPU
// oracle's arithmetic (oracle.cpp) one thread per rotated pair or passed-
// through element: cos/sin and every product and sum rounded to the compute
// dtype (float32 when the reference upcasts q/k, else q's dtype), the result
// rounded once to the output dtype. Products and sums use the _rn intrinsics
// so that nvcc cannot fuse them into FMAs the CPU oracle does not do.
// dtypes are runtime values: an oracle is for trust, not speed.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../common/cuda_types.cuh"
#include "oracle/gpu_oracle.hpp"
#include "rope_reference.hpp"

namespace kb::kernels {
namespace {

constexpr int kF32 = static_cast<int>(DType::float32);
constexpr int kF16 = static_cast<int>(DType::float16);
constexpr int kBF16 = static_cast<int>(DType::bfloat16);

__device__ float load(const void* p, int dtype, long long i) {
  if (dtype == kF16) return to_f32(static_cast<const __half*>(p)[i]);
  if (dtype == kBF16) return to_f32(static_cast<const __nv_bfloat16*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

__device__ void store(void* p, int dtype, long long i, float v) {
  if (dtype == kF16) static_cast<__half*>(p)[i] = from_f32<__half>(v);
  else if (dtype == kBF16) static_cast<__nv_bfloat16*>(p)[i] = from_f32<__nv_bfloat16>(v);
  else static_cast<float*>(p)[i] = v;
}

__device__ float round_to(int dtype, float v) {
  if (dtype == kF16) return to_f32(from_f32<__half>(v));
  if (dtype == kBF16) return to_f32(from_f32<__nv_bfloat16>(v));
  return v;
}

struct Args {
  const void* x;  // [tokens, heads, head_size], dtype x_dtype
  void* y;        // same shape and dtype
  const void* cache;
  const void* positions;  // validated on the host: every one inside the cache
  int x_dtype, cache_dtype, compute_dtype;
  bool positions_int64, gptj;
  long long tokens, heads, head_size, rotary_dim;
};

// Item j of a (token, head): j < rotary_dim / 2 rotates pair j, the rest copy
// element rotary_dim + (j - rotary_dim / 2).
__global__ void rope_oracle(Args a) {
  const long long half = a.rotary_dim / 2;
  const long long per_head = half + (a.head_size - a.rotary_dim);
  const long long n = a.tokens * a.heads * per_head;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long j = i % per_head;
    const long long token_head = i / per_head;
    const long long base = token_head * a.head_size;
    if (j >= half) {
      const long long e = base + a.rotary_dim + (j - half);
      store(a.y, a.x_dtype, e, load(a.x, a.x_dtype, e));
      continue;
    }
    const long long t = token_head / a.heads;
    const long long pos = a.positions_int64 ? static_cast<const long long*>(a.positions)[t]
                                            : static_cast<const int*>(a.positions)[t];
    const int cd = a.compute_dtype;
    const float c = round_to(cd, load(a.cache, a.cache_dtype, pos * a.rotary_dim + j));
    const float s = round_to(cd, load(a.cache, a.cache_dtype, pos * a.rotary_dim + half + j));
    const long long i1 = base + (a.gptj ? 2 * j : j);
    const long long i2 = base + (a.gptj ? 2 * j + 1 : half + j);
    const float x1 = load(a.x, a.x_dtype, i1), x2 = load(a.x, a.x_dtype, i2);
    const float o1 = round_to(cd, __fsub_rn(round_to(cd, __fmul_rn(x1, c)), round_to(cd, __fmul_rn(x2, s))));
    const float o2 = round_to(cd, __fadd_rn(round_to(cd, __fmul_rn(x2, c)), round_to(cd, __fmul_rn(x1, s))));
    store(a.y, a.x_dtype, i1, o1);
    store(a.y, a.x_dtype, i2, o2);
  }
}

Status fail(Code code, const Definition& d, const std::string& what) {
  return make_error(code, d.name + ": rope GPU oracle: " + what);
}

bool float_dtype(DType t) { return t == DType::float32 || t == DType::float16 || t == DType::bfloat16; }

}  // namespace

Status rope_gpu_oracle(const GpuOracleCall& c) {
  const Definition& d = c.definition;
  if (auto o = find_oracle(d); !o) return make_error(Code::unsupported, o.error().message);  // the CPU oracle's rules
  RopeReference ref;
  if (std::string why = read_rope_reference(d, ref); !why.empty()) return fail(Code::unsupported, d, why);
  if (c.inputs.size() != 4 || c.outputs.size() != 2) return fail(Code::invalid_argument, d, "wrong number of arguments");
  for (const auto& a : c.inputs)
    if (!a.tensor) return fail(Code::invalid_argument, d, "every input must be a tensor");
  const cuda::DeviceTensor& q = *c.inputs[0].tensor;
  const cuda::DeviceTensor& k = *c.inputs[1].tensor;
  const cuda::DeviceTensor& cache = *c.inputs[2].tensor;
  const cuda::DeviceTensor& pos = *c.inputs[3].tensor;
  if (q.shape.size() != 3 || k.shape.size() != 3 || cache.shape.size() != 2 || pos.shape.size() != 1)
    return fail(Code::invalid_argument, d, "tensor ranks differ from the definition");
  const long long tokens = q.shape[0], head_size = q.shape[2], max_seq = cache.shape[0], rotary_dim = cache.shape[1];
  if (k.shape[0] != tokens || k.shape[2] != head_size || pos.shape[0] != tokens)
    return fail(Code::invalid_argument, d, "q, k and positions disagree on tokens or head size");
  if (auto hs = rope_constant(d, c.axes, "head_size"); hs && *hs != head_size)
    return fail(Code::invalid_argument, d, "q's head size " + std::to_string(head_size) + " is not head_size " +
                                               std::to_string(*hs));
  if (auto rd = rope_constant(d, c.axes, "rotary_dim"); rd && *rd != rotary_dim)
    return fail(Code::invalid_argument, d, "cos_sin_cache's last dim " + std::to_string(rotary_dim) +
                                               " is not rotary_dim " + std::to_string(*rd));
  if (rotary_dim <= 0 || rotary_dim % 2 != 0 || rotary_dim > head_size)
    return fail(Code::invalid_argument, d, "rotary_dim " + std::to_string(rotary_dim) +
                                               " must be even and in (0, head_size " + std::to_string(head_size) + "]");
  if (!float_dtype(q.dtype) || k.dtype != q.dtype || !float_dtype(cache.dtype) ||
      (pos.dtype != DType::int64 && pos.dtype != DType::int32))
    return fail(Code::invalid_argument, d, "float32/float16/bfloat16 q, k (one dtype) and cache, int64/int32 positions");
  for (int o = 0; o < 2; ++o) {
    const cuda::DeviceTensor& in = o == 0 ? q : k;
    if (c.outputs[o].shape != in.shape || c.outputs[o].dtype != in.dtype)
      return fail(Code::invalid_argument, d, "q_out / k_out must match q / k");
  }
  if (tokens == 0) return ok_status();
  auto stream = static_cast<cudaStream_t>(c.stream);

  // Positions come to the host (tokens x 8 bytes) so that one outside the
  // cache is an error naming it, as the CPU oracle gives, not a wild read.
  const bool int64 = pos.dtype == DType::int64;
  std::vector<long long> host(static_cast<std::size_t>(tokens));
  std::vector<int> host32(int64 ? 0 : static_cast<std::size_t>(tokens));
  cudaError_t e = cudaMemcpyAsync(int64 ? static_cast<void*>(host.data()) : static_cast<void*>(host32.data()), pos.data,
                                  static_cast<std::size_t>(tokens) * (int64 ? 8 : 4), cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return fail(Code::cuda_error, d, std::string("reading positions: ") + cudaGetErrorString(e));
  for (long long t = 0; t < tokens; ++t) {
    const long long p = int64 ? host[static_cast<std::size_t>(t)] : host32[static_cast<std::size_t>(t)];
    if (p < 0 || p >= max_seq)
      return fail(Code::invalid_argument, d, "positions[" + std::to_string(t) + "] = " + std::to_string(p) +
                                                 " is outside the cache [0, " + std::to_string(max_seq) + ")");
  }

  const int compute = ref.upcast ? kF32 : static_cast<int>(q.dtype);
  for (int o = 0; o < 2; ++o) {
    const cuda::DeviceTensor& in = o == 0 ? q : k;
    Args a{in.data, c.outputs[o].data, cache.data, pos.data, static_cast<int>(in.dtype), static_cast<int>(cache.dtype),
           compute, int64, ref.style == RopeStyle::gptj, tokens, in.shape[1], head_size, rotary_dim};
    const long long n = tokens * in.shape[1] * (rotary_dim / 2 + head_size - rotary_dim);
    if (n == 0) continue;
    const long long blocks = (n + 255) / 256;
    rope_oracle<<<static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256, 0, stream>>>(a);
    if (e = cudaGetLastError(); e != cudaSuccess) return fail(Code::cuda_error, d, cudaGetErrorString(e));
  }
  return ok_status();
}

}  // namespace kb::kernels
