// GPU oracle for gdn (decode, mtp, prefill; k-last state): one block per
// (sequence, value head) runs the token recurrence of kernels/gdn/oracle.cpp
// with the head's [V, K] state in shared memory (fp32, as the reference
// keeps it), each thread owning rows v of the state; dot products in double.
// Outputs are zeroed first, so a zero-length prefill sequence leaves a zero
// state; mtp copies the pool to final_state and updates a private copy.
// Index values outside their range are skipped here (the CPU oracle
// reports them). tests/kernels/test_linear_gpu_oracles.cpp checks it against
// the CPU oracle on a device.
#include <cuda_runtime.h>

#include <cmath>
#include <string>
#include <variant>

#include "../common/cuda_types.cuh"
#include "oracle/gpu_oracle.hpp"

namespace kb::kernels {
namespace {

struct Tensor {
  const void* p;
  int dt;
};

struct Params {
  Tensor q, k, v, a, b, a_log, dt_bias, state, seq_index;  // state, seq_index may be null
  void* out;
  int out_dt;
  float* state_out;   // written per sequence unless null (mtp)
  long long hq, hk, hv, dk, dv;
  long long seqs, tokens_per_seq;  // decode / mtp: fixed-length sequences
  long long state_rows;
  const void* cu;  // prefill: cu_seqlens
  int cu_dt;
  double scale;
};

__global__ void gdn_recurrence(Params P) {
  extern __shared__ float S[];  // [dv][dk]
  const long long s = blockIdx.x, h = blockIdx.y;
  long long first, len, row;
  if (P.cu) {
    first = load_index(P.cu, P.cu_dt, s);
    len = load_index(P.cu, P.cu_dt, s + 1) - first;
    row = s;
  } else {
    first = s * P.tokens_per_seq;
    len = P.tokens_per_seq;
    row = P.seq_index.p ? load_index(P.seq_index.p, P.seq_index.dt, s) : s;
  }
  if (len <= 0 || row < 0 || row >= P.state_rows) return;
  const long long per = P.hv * P.dv * P.dk;
  for (long long i = threadIdx.x; i < P.dv * P.dk; i += blockDim.x)
    S[i] = P.state.p ? load_f32(P.state.p, P.state.dt, row * per + h * P.dv * P.dk + i) : 0.0f;
  __syncthreads();
  const long long qh = h / (P.hv / P.hq), kh = h / (P.hv / P.hk);
  for (long long t = first; t < first + len; ++t) {
    const float x = load_f32(P.a.p, P.a.dt, t * P.hv + h) + load_f32(P.dt_bias.p, P.dt_bias.dt, h);
    const double sp = x > 20.0f ? static_cast<double>(x) : log1p(exp(static_cast<double>(x)));
    const double g = exp(-exp(static_cast<double>(load_f32(P.a_log.p, P.a_log.dt, h))) * sp);
    const double beta = 1.0 / (1.0 + exp(-static_cast<double>(load_f32(P.b.p, P.b.dt, t * P.hv + h))));
    const long long kbase = (t * P.hk + kh) * P.dk, qbase = (t * P.hq + qh) * P.dk;
    for (long long vi = threadIdx.x; vi < P.dv; vi += blockDim.x) {
      float* r = S + vi * P.dk;
      double u = 0;
      for (long long e = 0; e < P.dk; ++e) {
        r[e] = static_cast<float>(g * r[e]);
        u += static_cast<double>(r[e]) * load_f32(P.k.p, P.k.dt, kbase + e);
      }
      const double delta = beta * (static_cast<double>(load_f32(P.v.p, P.v.dt, (t * P.hv + h) * P.dv + vi)) - u);
      double o = 0;
      for (long long e = 0; e < P.dk; ++e) {
        r[e] = static_cast<float>(r[e] + delta * load_f32(P.k.p, P.k.dt, kbase + e));
        o += static_cast<double>(r[e]) * load_f32(P.q.p, P.q.dt, qbase + e);
      }
      store_f32(P.out, P.out_dt, (t * P.hv + h) * P.dv + vi, static_cast<float>(P.scale * o));
    }
  }
  __syncthreads();
  if (P.state_out)
    for (long long i = threadIdx.x; i < P.dv * P.dk; i += blockDim.x) P.state_out[s * per + h * P.dv * P.dk + i] = S[i];
}

Status fail(const std::string& what) { return make_error(Code::cuda_error, "gdn GPU oracle: " + what); }

}  // namespace

Status gdn_gpu_oracle(const GpuOracleCall& c) {
  const Definition& d = c.definition;
  auto in = [&](const char* n) -> const cuda::DeviceTensor* {
    auto i = input_index(d, n);
    return i && *i < c.inputs.size() ? c.inputs[*i].tensor : nullptr;
  };
  const bool prefill = input_index(d, "cu_seqlens").has_value();
  const bool mtp = input_index(d, "initial_state_indices").has_value();
  const cuda::DeviceTensor *q = in("q"), *k = in("k"), *v = in("v"), *a = in("a"), *b = in("b"), *al = in("A_log"),
                           *db = in("dt_bias"), *state = in(mtp ? "initial_state" : "state");
  if (!q || !k || !v || !a || !b || !al || !db || (mtp && !state))
    return make_error(Code::invalid_argument, d.name + ": gdn GPU oracle: missing inputs");
  auto oi = output_index(d, "output"), si = output_index(d, mtp ? "final_state" : "new_state");
  if (!oi || !si) return make_error(Code::invalid_argument, d.name + ": gdn GPU oracle: missing outputs");
  const cuda::DeviceTensor& out = c.outputs[*oi];
  const cuda::DeviceTensor& state_out = c.outputs[*si];
  if (state_out.dtype != DType::float32)
    return make_error(Code::unsupported, d.name + ": gdn GPU oracle: the state output must be float32");
  const std::size_t r = prefill ? 3 : 4;
  Params P{};
  auto T = [](const cuda::DeviceTensor* t) { return Tensor{t ? t->data : nullptr, t ? static_cast<int>(t->dtype) : 0}; };
  P.q = T(q), P.k = T(k), P.v = T(v), P.a = T(a), P.b = T(b), P.a_log = T(al), P.dt_bias = T(db), P.state = T(state);
  P.out = out.data;
  P.out_dt = static_cast<int>(out.dtype);
  P.hq = q->dim(r - 2), P.hk = k->dim(r - 2), P.hv = v->dim(r - 2), P.dk = q->dim(r - 1), P.dv = v->dim(r - 1);
  if (P.hq <= 0 || P.hk <= 0 || P.hv % P.hq || P.hv % P.hk)
    return make_error(Code::invalid_argument, d.name + ": gdn GPU oracle: value heads must be a multiple of q/k heads");
  double scale = 0;
  if (auto sv = input_index(d, "scale"); sv && c.inputs[*sv].scalar)
    scale = std::visit([](auto x) { return static_cast<double>(x); }, *c.inputs[*sv].scalar);
  P.scale = scale == 0.0 ? 1.0 / std::sqrt(static_cast<double>(P.dk)) : static_cast<double>(static_cast<float>(scale));
  if (prefill) {
    const cuda::DeviceTensor* cu = in("cu_seqlens");
    if (!cu) return make_error(Code::invalid_argument, d.name + ": gdn GPU oracle: missing cu_seqlens");
    P.cu = cu->data;
    P.cu_dt = static_cast<int>(cu->dtype);
    P.seqs = cu->numel() - 1;
    P.state_rows = P.seqs;
  } else {
    P.seqs = q->dim(0);
    P.tokens_per_seq = q->dim(1);
    P.state_rows = mtp ? state->dim(0) : P.seqs;
    if (mtp) P.seq_index = T(in("initial_state_indices"));
  }
  auto stream = static_cast<cudaStream_t>(c.stream);
  if (cudaMemsetAsync(out.data, 0, out.nbytes, stream) != cudaSuccess) return fail("memset");
  if (mtp) {
    if (cudaMemcpyAsync(state_out.data, state->data, state_out.nbytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
      return fail("copying the pool");
    P.state_out = nullptr;
  } else {
    if (cudaMemsetAsync(state_out.data, 0, state_out.nbytes, stream) != cudaSuccess) return fail("memset");
    P.state_out = static_cast<float*>(state_out.data);
  }
  if (P.seqs <= 0 || P.hv == 0) return ok_status();
  const std::size_t smem = static_cast<std::size_t>(P.dv * P.dk) * sizeof(float);
  int max_smem = 0, dev = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  if (smem > static_cast<std::size_t>(max_smem))
    return make_error(Code::unsupported, d.name + ": gdn GPU oracle: a head's state does not fit in shared memory");
  cudaFuncSetAttribute(gdn_recurrence, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  gdn_recurrence<<<dim3(static_cast<unsigned>(P.seqs), static_cast<unsigned>(P.hv)), 128, smem, stream>>>(P);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return fail(cudaGetErrorString(e));
  return ok_status();
}

}  // namespace kb::kernels
