// The attention GPU oracle's kernel (the host side, the checks and the
// comment on the method: gpu_oracle.cpp): one warp per (query
// token, query head) walks the token's visible keys in order with an online
// softmax in fp32. Each key's logit is a warp-wide dot product (lane e takes
// elements e, e + 32, ...) times sm_scale; the running maximum, the sum of
// exponentials and the weighted values are rescaled as the maximum grows.
#include <cuda_runtime.h>

#include "../common/cuda_types.cuh"
#include "gpu_oracle.hpp"

namespace kb::kernels::attention_gpu_oracle {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxPerLane = kMaxHeadDim / 32;
constexpr float kLn2 = 0.693147180559945309417f;

__device__ __forceinline__ float load(const void* base, int type, long long i) {
  switch (type) {
    case kF16: return to_f32(static_cast<const __half*>(base)[i]);
    case kBF16: return to_f32(static_cast<const __nv_bfloat16*>(base)[i]);
    default: return static_cast<const float*>(base)[i];
  }
}

__device__ __forceinline__ void store(void* base, int type, long long i, float v) {
  switch (type) {
    case kF16: static_cast<__half*>(base)[i] = from_f32<__half>(v); break;
    case kBF16: static_cast<__nv_bfloat16*>(base)[i] = from_f32<__nv_bfloat16>(v); break;
    default: static_cast<float*>(base)[i] = v;
  }
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void attention_rows(const Params p) {
  const int lane = threadIdx.x & 31;
  const long long row = static_cast<long long>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (row >= p.tokens * p.q_heads) return;
  const long long t = row / p.q_heads;
  const int h = static_cast<int>(row % p.q_heads);
  const int g = h / p.group;

  long long visible = 0, kv_begin = 0;
  const int s = p.token_seq[t];
  if (s >= 0) {
    const long long q_len = p.seq_q_len[s], kv_len = p.seq_kv_len[s];
    kv_begin = p.seq_kv_begin[s];
    visible = kv_len;
    if (p.causal) {
      // bottom-right aligned: query i of the sequence sees keys 0 .. kv_len - q_len + i
      const long long i = t - p.seq_q_begin[s];
      visible = kv_len - q_len + i + 1;
      visible = visible < 0 ? 0 : (visible > kv_len ? kv_len : visible);
    }
  }

  float q0[kMaxPerLane], q1[kMaxRopeDim / 32];
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int e = lane + 32 * k;
    q0[k] = (visible > 0 && e < p.d_qk) ? load(p.q0, p.q0_type, row * p.d_qk + e) : 0.f;
  }
#pragma unroll
  for (int k = 0; k < kMaxRopeDim / 32; ++k) {
    const int e = lane + 32 * k;
    q1[k] = (visible > 0 && p.q1 && e < p.d_pe) ? load(p.q1, p.q1_type, row * p.d_pe + e) : 0.f;
  }

  float m = -INFINITY, l = 0.f, acc[kMaxPerLane];
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) acc[k] = 0.f;
  for (long long j = 0; j < visible; ++j) {
    const long long r = p.kv_rows[kv_begin + j];
    float part = 0.f;
    const long long k0_base = (r * p.kv_heads + g) * p.d_qk;
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
      const int e = lane + 32 * k;
      if (e < p.d_qk) part += q0[k] * load(p.k0, p.k0_type, k0_base + e);
    }
    if (p.k1) {
#pragma unroll
      for (int k = 0; k < kMaxRopeDim / 32; ++k) {
        const int e = lane + 32 * k;
        if (e < p.d_pe) part += q1[k] * load(p.k1, p.k1_type, r * p.d_pe + e);
      }
    }
    const float logit = warp_sum(part) * p.scale;
    const float m_new = fmaxf(m, logit);
    const float correction = expf(m - m_new);  // 0 on the first key (m = -inf)
    const float w = expf(logit - m_new);
    l = l * correction + w;
    const long long v_base = (r * p.kv_heads + g) * p.d_v;
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
      const int e = lane + 32 * k;
      if (e < p.d_v) acc[k] = acc[k] * correction + w * load(p.v, p.v_type, v_base + e);
    }
    m = m_new;
  }

  // No visible key (no sequence, no keys, or a causal window that is empty):
  // output 0 and lse -inf, as the CPU oracle defines it.
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int e = lane + 32 * k;
    if (e < p.d_v) store(p.out, p.out_type, row * p.d_v + e, visible > 0 ? acc[k] / l : 0.f);
  }
  if (p.lse && lane == 0) store(p.lse, p.lse_type, row, visible > 0 ? (m + logf(l)) / kLn2 : -INFINITY);
}

}  // namespace

int launch(const Params& p, void* stream) {
  const long long rows = p.tokens * p.q_heads;
  if (rows <= 0) return 0;
  const long long blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > 0x7fffffffLL) return static_cast<int>(cudaErrorInvalidConfiguration);
  attention_rows<<<static_cast<unsigned>(blocks), 32 * kWarpsPerBlock, 0, static_cast<cudaStream_t>(stream)>>>(p);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kb::kernels::attention_gpu_oracle
