// GPU oracle for mamba_ssu: new_state starts as a copy of the cache; one
// thread per (head, head_dim row) walks the batch in order, so a slot named
// twice sees its first update (rounded to the cache dtype), as the
// reference's loop does; dt_f and the exponent A * dt_f are float32, as the
// reference computes them (oracle.cpp says why), the rest is double. Padding slots
// (negative) are skipped with output 0; slots past the cache are skipped
// here (the CPU oracle reports them). tests/kernels/test_linear_gpu_oracles.cpp
// checks it against the CPU oracle on a device.
#include <cuda_runtime.h>

#include <string>

#include "../common/cuda_types.cuh"
#include "oracle/gpu_oracle.hpp"

namespace kb::kernels {
namespace {

struct In {
  const void* p;
  int dt;
};

struct Params {
  In x, dt, A, B, C, D, bias, slots;
  void* state;  // new_state, holding the cache's copy
  int state_dt;
  void* out;
  int out_dt;
  long long batch, H, P, N, G, cache;
};

__global__ void mamba_update(Params p) {
  const long long hp = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (hp >= p.H * p.P) return;
  const long long h = hp / p.P, g = h / (p.H / p.G);
  for (long long b = 0; b < p.batch; ++b) {
    const long long bhp = b * p.H * p.P + hp;
    const long long slot = load_index(p.slots.p, p.slots.dt, b);
    if (slot < 0 || slot >= p.cache) {
      store_f32(p.out, p.out_dt, bhp, 0.0f);
      continue;
    }
    const float u = load_f32(p.dt.p, p.dt.dt, bhp) + load_f32(p.bias.p, p.bias.dt, hp);
    const auto dtf = static_cast<float>(u > 20.0f ? static_cast<double>(u) : log1p(exp(static_cast<double>(u))));
    const double xv = load_f32(p.x.p, p.x.dt, bhp);
    double acc = 0;
    for (long long n = 0; n < p.N; ++n) {
      const long long e = slot * p.H * p.P * p.N + hp * p.N + n;
      const float exponent = __fmul_rn(load_f32(p.A.p, p.A.dt, hp * p.N + n), dtf);
      const double s = static_cast<double>(load_f32(p.state, p.state_dt, e)) * exp(static_cast<double>(exponent)) +
                       static_cast<double>(dtf) * xv * load_f32(p.B.p, p.B.dt, (b * p.G + g) * p.N + n);
      store_f32(p.state, p.state_dt, e, static_cast<float>(s));
      acc += s * load_f32(p.C.p, p.C.dt, (b * p.G + g) * p.N + n);
    }
    store_f32(p.out, p.out_dt, bhp, static_cast<float>(acc + xv * load_f32(p.D.p, p.D.dt, hp)));
  }
}

}  // namespace

Status mamba_ssu_gpu_oracle(const GpuOracleCall& c) {
  const Definition& d = c.definition;
  auto in = [&](const char* n) -> In {
    auto i = input_index(d, n);
    const cuda::DeviceTensor* t = i && *i < c.inputs.size() ? c.inputs[*i].tensor : nullptr;
    return In{t ? t->data : nullptr, t ? static_cast<int>(t->dtype) : 0};
  };
  auto tensor = [&](const char* n) -> const cuda::DeviceTensor* {
    auto i = input_index(d, n);
    return i && *i < c.inputs.size() ? c.inputs[*i].tensor : nullptr;
  };
  const cuda::DeviceTensor *state = tensor("state"), *x = tensor("x"), *Bm = tensor("B");
  auto oi = output_index(d, "output"), si = output_index(d, "new_state");
  if (!state || !x || !Bm || !oi || !si) return make_error(Code::invalid_argument, d.name + ": mamba_ssu GPU oracle: missing tensors");
  Params p{in("x"), in("dt"), in("A"), in("B"), in("C"), in("D"), in("dt_bias"), in("state_batch_indices"),
           c.outputs[*si].data, static_cast<int>(c.outputs[*si].dtype), c.outputs[*oi].data,
           static_cast<int>(c.outputs[*oi].dtype), x->dim(0), x->dim(1), x->dim(2), Bm->dim(2), Bm->dim(1),
           state->dim(0)};
  for (const In& t : {p.x, p.dt, p.A, p.B, p.C, p.D, p.bias, p.slots})
    if (!t.p && p.batch > 0) return make_error(Code::invalid_argument, d.name + ": mamba_ssu GPU oracle: missing inputs");
  if (p.G <= 0 || p.H % p.G) return make_error(Code::invalid_argument, d.name + ": mamba_ssu GPU oracle: heads % groups != 0");
  auto stream = static_cast<cudaStream_t>(c.stream);
  if (cudaMemcpyAsync(c.outputs[*si].data, state->data, c.outputs[*si].nbytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
    return make_error(Code::cuda_error, d.name + ": mamba_ssu GPU oracle: copying the cache");
  const long long rows = p.H * p.P;
  if (rows == 0 || p.batch == 0) return ok_status();
  mamba_update<<<static_cast<unsigned>((rows + 127) / 128), 128, 0, stream>>>(p);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return make_error(Code::cuda_error, std::string("mamba_ssu GPU oracle: ") + cudaGetErrorString(e));
  return ok_status();
}

}  // namespace kb::kernels
