// kb_cuda_mamba_ssu kernel: Mamba2's selective state update, one decode
// step over a slot cache, exactly the reference's fp32 arithmetic:
//   dt_f = softplus(dt + dt_bias)                       fp32 add; torch's softplus (threshold 20)
//   s    = s * exp(A * dt_f) + (dt_f * x) * B           per (h, p, n): products rounded apart, then added
//   y    = sum_n s * C + x * D                          from s before it is rounded to the cache dtype
//   new_state[slot] = s rounded to the cache dtype; slots no batch element names keep their bits
// (B, C: group h / (H / G).) A batch element with a negative slot is padding:
// no update, output 0.
//
// The grid runs over the cache's slots (x) and, per slot, enough CTAs (y)
// for several waves of the GPU; a CTA walks every gridDim.y-th chunk of the
// slot's flattened [H * P] state rows. A CTA first lists the batch elements
// naming its slot (block-wide scans of state_batch_indices, once: the list is
// the same for every chunk). With none it copies its chunks of the slot to
// new_state; otherwise, per chunk, it loads the rows once (16-byte vectors
// along dstate, streaming), applies the first naming element's update, then
// every later one in batch order, with the state rounded to the cache dtype
// in between, as the reference's loop sees it; then stores the rows once. So
// each slot's bytes are read and written once, named or not, and a slot named
// twice needs no ordering between CTAs. One more column of CTAs writes the
// zero outputs of padding elements. B and C of the chunk's groups are staged
// in shared memory as fp32 per element.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../../common/cuda_types.cuh"
#include "mamba_ssu_cuda.hpp"

namespace kb::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kLanes = 16;                        // lanes sharing one state row
constexpr int kRowsAtOnce = kThreads / kLanes;    // 8 rows a CTA at a time
constexpr int kStateFloats = 32;                  // state elements a thread holds: rows x elements
constexpr int kListedUsers = 16;                  // batch elements naming one slot that a CTA lists once
// Resident CTAs an SM the compiler must allow (80 registers a thread for 6):
// 16-bit states in 16-byte vectors fit without spilling; fp32 states and the
// scalar path would spill, and keep the compiler's choice.
template <class ST, int VW>
constexpr int min_ctas_per_sm() { return sizeof(ST) == 2 && VW > 1 ? 6 : 1; }
// CTAs the grid aims at per SM: about 20 resident waves, so the slots'
// unequal work (named slots update, the others copy) balances out, while each
// CTA still walks several chunks of its slot on one scan of
// state_batch_indices. Measured on an H100 over 8 to 4096 CTAs an SM
// (docs/performance/linear.md): 128 fastest, 8 half again slower.
constexpr long long kCtasPerSm = 128;

constexpr int rows_per_thread(int vw, int nv) { return vw * nv >= kStateFloats ? 1 : kStateFloats / (vw * nv); }

struct Params {
  const void* state;
  void* new_state;
  const void *x, *dt, *A, *B, *C, *D, *dt_bias;
  int x_dt, dt_dt, A_dt, B_dt, C_dt, D_dt, dt_bias_dt;
  const void* slots;
  int slots_dt;
  void* out;
  int out_dt;
  long long batch, H, P, N, G, cache, chunks;
  int stage_groups;
};

// VW elements of ST at p (one 16-byte vector, or one element when VW == 1) as fp32.
template <class ST, int VW>
__device__ __forceinline__ void load_state(const ST* p, float* f) {
  if constexpr (VW == 1) {
    f[0] = to_f32<ST>(p[0]);
  } else {
    static_assert(VW * sizeof(ST) == 16, "a vector is 16 bytes");
    const uint4 raw = __ldcs(reinterpret_cast<const uint4*>(p));
    const ST* e = reinterpret_cast<const ST*>(&raw);
#pragma unroll
    for (int c = 0; c < VW; ++c) f[c] = to_f32<ST>(e[c]);
  }
}

template <class ST, int VW>
__device__ __forceinline__ void store_state(ST* p, const float* f) {
  if constexpr (VW == 1) {
    p[0] = from_f32<ST>(f[0]);
  } else {
    uint4 raw;
    ST* e = reinterpret_cast<ST*>(&raw);
#pragma unroll
    for (int c = 0; c < VW; ++c) e[c] = from_f32<ST>(f[c]);
    __stcs(reinterpret_cast<uint4*>(p), raw);
  }
}

// The smallest batch element after `after` whose slot is `slot`, or -1.
// Block-wide: every thread calls it.
__device__ long long next_use(const Params& p, long long slot, long long after, unsigned long long* sh) {
  if (threadIdx.x == 0) *sh = ULLONG_MAX;
  __syncthreads();
  for (long long b = after + 1 + threadIdx.x; b < p.batch; b += blockDim.x)
    if (load_index(p.slots, p.slots_dt, b) == slot) {
      atomicMin(sh, static_cast<unsigned long long>(b));  // a thread's first hit is its smallest
      break;
    }
  __syncthreads();
  const unsigned long long r = *sh;
  __syncthreads();  // before a later call resets *sh
  return r == ULLONG_MAX ? -1 : static_cast<long long>(r);
}

template <class ST, int VW, int NV>
__global__ void __launch_bounds__(kThreads, min_ctas_per_sm<ST, VW>()) mamba_ssu_kernel(Params p) {
  constexpr int R = rows_per_thread(VW, NV);
  constexpr int RC = kRowsAtOnce * R;  // rows a CTA
  constexpr int EL = VW * NV;          // elements a lane holds of each row
  extern __shared__ float4 smem4[];
  float* Bs = reinterpret_cast<float*>(smem4);  // [stage_groups][N]
  float* Cs = Bs + p.stage_groups * p.N;        // [stage_groups][N]
  __shared__ unsigned long long found;
  // The batch elements naming this slot, in batch order: the same for every
  // chunk, so found once. Past kListedUsers, later ones are found per chunk.
  __shared__ long long users[kListedUsers];

  const long long HP = p.H * p.P, ratio = p.H / p.G;
  const long long slot = blockIdx.x;
  const int hw = static_cast<int>(threadIdx.x) / kLanes, l = static_cast<int>(threadIdx.x) % kLanes;
  const ST* src = static_cast<const ST*>(p.state);
  ST* dst = static_cast<ST*>(p.new_state);

  if (slot == p.cache) {  // the padding column: zero outputs of elements without a slot
    for (long long chunk = blockIdx.y; chunk < p.chunks; chunk += gridDim.y) {
      const long long hp0 = chunk * RC;
      for (long long i = threadIdx.x; i < p.batch * RC; i += blockDim.x) {
        const long long b = i / RC, r = i % RC;
        const long long s = load_index(p.slots, p.slots_dt, b);
        if ((s < 0 || s >= p.cache) && hp0 + r < HP) store_f32(p.out, p.out_dt, b * HP + hp0 + r, 0.0f);
      }
    }
    return;
  }
  int listed = 0;        // users[0, listed) hold the first users
  long long unlisted = -1;  // the user after them, or -1: the list is complete
  for (long long b = next_use(p, slot, -1, &found); b >= 0; b = next_use(p, slot, b, &found)) {
    if (listed == kListedUsers) {
      unlisted = b;
      break;
    }
    if (threadIdx.x == 0) users[listed] = b;
    ++listed;
  }
  __syncthreads();  // users[] visible to every thread

  for (long long chunk = blockIdx.y; chunk < p.chunks; chunk += gridDim.y) {
    const long long hp0 = chunk * RC;
    const long long slot_base = slot * HP * p.N;
    if (listed == 0) {  // no element names this slot: its rows keep their bits
      if (src != dst)
#pragma unroll
        for (int i = 0; i < R; ++i) {
          const long long hp = hp0 + i * kRowsAtOnce + hw;
          if (hp >= HP) continue;
#pragma unroll
          for (int j = 0; j < NV; ++j) {
            const long long n0 = static_cast<long long>(j * kLanes + l) * VW;
            if (n0 >= p.N) continue;
            const long long e = slot_base + hp * p.N + n0;
            if constexpr (VW == 1) dst[e] = src[e];
            else __stcs(reinterpret_cast<uint4*>(dst + e), __ldcs(reinterpret_cast<const uint4*>(src + e)));
          }
        }
      continue;
    }

    // The rows' state, loaded once for every element naming the slot. A is
    // read where it is used (from L2: it is the same for every slot), which
    // keeps a thread's registers to its state (min_ctas_per_sm).
    float S[R][EL];
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const long long hp = hp0 + i * kRowsAtOnce + hw;
#pragma unroll
      for (int j = 0; j < NV; ++j) {
        const long long n0 = static_cast<long long>(j * kLanes + l) * VW;
        if (hp < HP && n0 < p.N) {
          load_state<ST, VW>(src + slot_base + hp * p.N + n0, &S[i][j * VW]);
        } else {
#pragma unroll
          for (int c = 0; c < VW; ++c) S[i][j * VW + c] = 0.f;
        }
      }
    }
    const long long hp_last = min(hp0 + RC, HP) - 1;
    const long long g_lo = hp0 / p.P / ratio, n_groups = hp_last / p.P / ratio - g_lo + 1;

    long long b = users[0];
    for (int k = 0; b >= 0; ++k) {
      // B and C of this element's groups, fp32, after every reader of the
      // previous element's (or chunk's) are done.
      __syncthreads();
      for (long long i = threadIdx.x; i < n_groups * p.N; i += blockDim.x) {
        const long long src_i = (b * p.G + g_lo) * p.N + i;
        Bs[i] = load_f32(p.B, p.B_dt, src_i);
        Cs[i] = load_f32(p.C, p.C_dt, src_i);
      }
      __syncthreads();
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const long long hp = hp0 + i * kRowsAtOnce + hw;
        const bool row_in = hp < HP;
        const long long bhp = b * HP + hp;
        const float xv = row_in ? load_f32(p.x, p.x_dt, bhp) : 0.f;
        const float u = row_in ? __fadd_rn(load_f32(p.dt, p.dt_dt, bhp), load_f32(p.dt_bias, p.dt_bias_dt, hp)) : 0.f;
        const float dtf = u > 20.0f ? u : log1pf(expf(u));
        const float dtx = __fmul_rn(dtf, xv);
        const long long gl = row_in ? (hp / p.P) / ratio - g_lo : 0;
        float acc = 0.f;
#pragma unroll
        for (int j = 0; j < NV; ++j) {
          const long long n0 = static_cast<long long>(j * kLanes + l) * VW;
          if (!row_in || n0 >= p.N) continue;
          const float* bs = Bs + gl * p.N + n0;
          const float* cs = Cs + gl * p.N + n0;
          float a[VW];
          if constexpr (VW == 1) {
            a[0] = load_f32(p.A, p.A_dt, hp * p.N + n0);
          } else {
            const float4* a4 = reinterpret_cast<const float4*>(static_cast<const float*>(p.A) + hp * p.N + n0);
#pragma unroll
            for (int c = 0; c < VW / 4; ++c) {
              const float4 v = __ldg(a4 + c);
              a[4 * c] = v.x, a[4 * c + 1] = v.y, a[4 * c + 2] = v.z, a[4 * c + 3] = v.w;
            }
          }
#pragma unroll
          for (int c = 0; c < VW; ++c) {
            float& s = S[i][j * VW + c];
            s = __fadd_rn(__fmul_rn(s, expf(__fmul_rn(a[c], dtf))), __fmul_rn(dtx, bs[c]));
            acc = fmaf(s, cs[c], acc);
          }
        }
#pragma unroll
        for (int off = kLanes / 2; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
        if (row_in && l == 0) store_f32(p.out, p.out_dt, bhp, acc + xv * load_f32(p.D, p.D_dt, hp));
        // The cache holds s rounded to its dtype; a later element naming the slot reads that.
        if constexpr (!std::is_same_v<ST, float>)
#pragma unroll
          for (int e = 0; e < EL; ++e) S[i][e] = to_f32<ST>(from_f32<ST>(S[i][e]));
      }
      // The next user: listed, the first unlisted one, or searched for (block-wide).
      if (k + 1 < listed) b = users[k + 1];
      else if (k + 1 == listed) b = unlisted;
      else b = next_use(p, slot, b, &found);
    }

#pragma unroll
    for (int i = 0; i < R; ++i) {
      const long long hp = hp0 + i * kRowsAtOnce + hw;
      if (hp >= HP) continue;
#pragma unroll
      for (int j = 0; j < NV; ++j) {
        const long long n0 = static_cast<long long>(j * kLanes + l) * VW;
        if (n0 < p.N) store_state<ST, VW>(dst + slot_base + hp * p.N + n0, &S[i][j * VW]);
      }
    }
  }
}

template <class ST, int VW, int NV>
cudaError_t launch_typed(const MambaSsuConfig& c, const Params& p, cudaStream_t s) {
  auto kernel = mamba_ssu_kernel<ST, VW, NV>;
  if (c.smem_bytes > 48 * 1024)
    if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(c.smem_bytes));
        e != cudaSuccess)
      return e;
  const dim3 grid(static_cast<unsigned>(p.cache + 1), c.grid_y);
  kernel<<<grid, kThreads, c.smem_bytes, s>>>(p);
  return cudaGetLastError();
}

// Two sizes of each path: dstate up to 128 and up to 512.
template <class ST>
cudaError_t launch_state(const MambaSsuConfig& c, const Params& p, cudaStream_t s) {
  constexpr int VW = static_cast<int>(16 / sizeof(ST));
  if (c.vec_width == 1) return c.vecs == 8 ? launch_typed<ST, 1, 8>(c, p, s) : launch_typed<ST, 1, 32>(c, p, s);
  if (c.vecs == 128 / (kLanes * VW)) return launch_typed<ST, VW, 128 / (kLanes * VW)>(c, p, s);
  return launch_typed<ST, VW, 512 / (kLanes * VW)>(c, p, s);
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

// 32 state elements a thread (dstate 128 in bf16: 4 rows of one 16-byte
// vector a lane), 128 threads: 32 rows (8 KiB of bf16 state) a CTA, all of a
// thread's state loads issued before any math.
MambaSsuConfig mamba_ssu_launch_config(DType state_dt, std::int64_t H, std::int64_t P, std::int64_t N, std::int64_t G,
                                       std::int64_t cache, int sm_count, bool vectorizable) {
  MambaSsuConfig c;
  if (N <= 0 || N > 512 || H <= 0 || P <= 0 || G <= 0) return c;
  const int vw = state_dt == DType::float32 ? 4 : 8;
  if (vectorizable && N % vw == 0) {
    c.vec_width = vw;
    c.vecs = N <= 128 ? 128 / (kLanes * vw) : 512 / (kLanes * vw);
  } else {
    c.vec_width = 1;
    c.vecs = N <= 128 ? 8 : 32;
  }
  c.rows_thread = rows_per_thread(c.vec_width, c.vecs);
  c.rows_cta = kRowsAtOnce * c.rows_thread;
  c.chunks = (H * P + c.rows_cta - 1) / c.rows_cta;
  const std::int64_t per_slot = (kCtasPerSm * std::max(sm_count, 1) + cache) / (cache + 1);
  c.grid_y = static_cast<unsigned>(std::clamp<std::int64_t>(per_slot, 1, std::min<std::int64_t>(c.chunks, 65535)));
  // Heads one CTA's rows span, hence groups (contiguous, each a run of heads).
  const std::int64_t heads = (c.rows_cta - 1 + P - 1) / P + 1;
  c.stage_groups = std::min<std::int64_t>(G, heads);
  c.smem_bytes = static_cast<std::size_t>(2 * c.stage_groups * N) * sizeof(float);
  return c;
}

Status launch_mamba_ssu(const MambaSsuArgs& a, void* stream) {
  if (a.H <= 0 || a.P <= 0 || a.N <= 0 || a.G <= 0 || a.H % a.G)
    return make_error(Code::invalid_argument, "kb_cuda_mamba_ssu: heads must be a positive multiple of groups");
  if (a.batch < 0 || a.cache < 0) return make_error(Code::invalid_argument, "kb_cuda_mamba_ssu: negative size");
  if (a.state_dt != DType::bfloat16 && a.state_dt != DType::float16 && a.state_dt != DType::float32)
    return make_error(Code::unsupported, "kb_cuda_mamba_ssu: the state must be bfloat16, float16 or float32");
  if (a.cache >= 0x7fffffff) return make_error(Code::unsupported, "kb_cuda_mamba_ssu: more slots than one grid holds");
  const bool vec = aligned16(a.state) && aligned16(a.new_state) && a.A_dt == DType::float32 && aligned16(a.A);
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return make_error(Code::cuda_error, "kb_cuda_mamba_ssu: cannot read the device's SM count");
  const MambaSsuConfig c = mamba_ssu_launch_config(a.state_dt, a.H, a.P, a.N, a.G, a.cache, sms, vec);
  if (c.vec_width == 0) return make_error(Code::unsupported, "kb_cuda_mamba_ssu: dstate over 512");
  if (c.smem_bytes > 96 * 1024)
    return make_error(Code::unsupported, "kb_cuda_mamba_ssu: B and C of one CTA's groups exceed 96 KiB of shared memory");
  if (a.cache == 0 && a.batch == 0) return ok_status();
  Params p{};
  p.state = a.state, p.new_state = a.new_state;
  p.x = a.x, p.dt = a.dt, p.A = a.A, p.B = a.B, p.C = a.C, p.D = a.D, p.dt_bias = a.dt_bias;
  p.x_dt = static_cast<int>(a.x_dt), p.dt_dt = static_cast<int>(a.dt_dt), p.A_dt = static_cast<int>(a.A_dt);
  p.B_dt = static_cast<int>(a.B_dt), p.C_dt = static_cast<int>(a.C_dt), p.D_dt = static_cast<int>(a.D_dt);
  p.dt_bias_dt = static_cast<int>(a.dt_bias_dt);
  p.slots = a.slots, p.slots_dt = static_cast<int>(a.slots_dt);
  p.out = a.out, p.out_dt = static_cast<int>(a.out_dt);
  p.batch = a.batch, p.H = a.H, p.P = a.P, p.N = a.N, p.G = a.G, p.cache = a.cache, p.chunks = c.chunks;
  p.stage_groups = static_cast<int>(c.stage_groups);
  auto s = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaSuccess;
  switch (a.state_dt) {
    case DType::bfloat16: e = launch_state<__nv_bfloat16>(c, p, s); break;
    case DType::float16: e = launch_state<__half>(c, p, s); break;
    default: e = launch_state<float>(c, p, s);
  }
  if (e != cudaSuccess)
    return make_error(Code::cuda_error, std::string("kb_cuda_mamba_ssu: kernel launch failed: ") + cudaGetErrorName(e) +
                                            ": " + cudaGetErrorString(e));
  return ok_status();
}

}  // namespace kb::kernels
