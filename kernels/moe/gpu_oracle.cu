// GPU oracle for op_type "moe": the CPU oracle's computation (kernels/moe/oracle.cpp) in plain
// fp32 CUDA kernels, for workloads too large for the CPU (prefill over 7168 x 2048 experts).
//
// Routing is discrete and small (tokens x experts), so it runs on the host with the CPU oracle's
// own code (routing.cpp) on copies of routing_logits / routing_bias / topk_ids; that also makes
// the chosen experts the CPU oracle's exactly. Then, on the given stream:
//   1. activations to fp32, times their block scale (fp8 block forms);
//   2. per local expert, over the (token, weight) pairs routed to it (sorted by expert, then
//      token): g1 = x @ W13[e].T with W13 dequantized as it is loaded (16 x 16 shared-memory tiles,
//      fp32 accumulation), the routing weight multiplying x first where the form says so;
//   3. c = silu(gate * s_gate) * (up * s_up);
//   4. o = (c @ W2[e].T) * s_out (times the routing weight where it applies to the output);
//   5. each token's output the sum of its pairs' o in pair order, rounded once to the output dtype.
// Values are fp32 as the reference has them; the sums over H and I and over a token's pairs accumulate
// in double, as the CPU oracle's do: an fp32 sum of 2048 terms that cancel to a small output can miss
// the 1e-2 rule on its own (Hopper runs fp64 FMA at half the fp32 rate, so the oracle stays fast).
// The summation order is fixed, so the result does not depend on the launch. Scratch is allocated here and freed after the stream synchronizes.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../common/cuda_types.cuh"
#include "form.hpp"
#include "gpu_oracle.hpp"
#include "schema/dtype.hpp"
#include "tensor/tensor.hpp"

namespace kb::kernels {
namespace {

using moe::Form;
using moe::Weights;

constexpr int kTile = 16;

// fmt's headers do not compile under nvcc: messages are put together here, each "{}" in turn
// replaced by the next argument.
std::string text(std::string_view v) { return std::string(v); }
template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
std::string text(T v) { return std::to_string(v); }

template <class... A>
std::string message(std::string_view format, const A&... args) {
  std::string out;
  std::string parts[] = {text(args)..., std::string()};
  std::size_t next = 0;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format.compare(i, 2, "{}") == 0 && next < sizeof...(A)) {
      out += parts[next++];
      ++i;
    } else {
      out += format[i];
    }
  }
  return out;
}

__device__ __forceinline__ float fp8_e4m3_to_f32(std::uint8_t v) {
  const int sign = v >> 7, exp = (v >> 3) & 0xF, man = v & 0x7;
  float r;
  if (exp == 0xF && man == 0x7) r = __int_as_float(0x7FC00000);  // NaN
  else if (exp == 0) r = ldexpf(static_cast<float>(man), -9);      // subnormal: man / 8 * 2^-6
  else r = ldexpf(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
  return sign ? -r : r;
}

// Element i of a float32 / bfloat16 / float16 / float8_e4m3fn array as float.
__device__ __forceinline__ float load(const void* p, int dtype, long long i) {
  switch (dtype) {
    case 0: return static_cast<const float*>(p)[i];
    case 1: return to_f32(static_cast<const __nv_bfloat16*>(p)[i]);
    case 2: return to_f32(static_cast<const __half*>(p)[i]);
    default: return fp8_e4m3_to_f32(static_cast<const std::uint8_t*>(p)[i]);
  }
}

int dtype_code(DType t) {
  switch (t) {
    case DType::float32: return 0;
    case DType::bfloat16: return 1;
    case DType::float16: return 2;
    case DType::float8_e4m3fn: return 3;
    default: return -1;
  }
}

// x[t][h] = hidden[t][h] (* scale[h / B][t]).
__global__ void dequant_activations(const void* hidden, int dtype, const float* scale, int block, long long T,
                                    long long H, float* x) {
  long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= T * H) return;
  long long t = i / H, h = i % H;
  float v = load(hidden, dtype, i);
  if (scale) v *= scale[(h / block) * T + t];
  x[i] = v;
}

// C[r][n] = sum_k A(r, k) * W(n, k) for the n_rows rows of one expert, W [N, K] dequantized on load
// (wscale: [N / B, K / B] block scales, or null). A(r, k) = a[rows[r] * K + k] (* row_w[r] when given).
__global__ void expert_gemm(const float* a, const int* rows, const float* row_w, int n_rows, const void* w,
                            int w_dtype, const float* wscale, int block, long long N, long long K, float* c) {
  __shared__ float as[kTile][kTile + 1];
  __shared__ float ws[kTile][kTile + 1];
  const int tr = threadIdx.y, tc = threadIdx.x;
  const long long r = static_cast<long long>(blockIdx.y) * kTile + tr;
  const long long n = static_cast<long long>(blockIdx.x) * kTile + tc;
  const long long n_load = static_cast<long long>(blockIdx.x) * kTile + tr;  // W row this thread loads
  double acc = 0.0;
  for (long long k0 = 0; k0 < K; k0 += kTile) {
    const long long ka = k0 + tc;
    float av = 0.0f;
    if (r < n_rows && ka < K) {
      av = a[static_cast<long long>(rows[r]) * K + ka];
      if (row_w) av *= row_w[r];
    }
    as[tr][tc] = av;
    float wv = 0.0f;
    if (n_load < N && ka < K) {
      wv = load(w, w_dtype, n_load * K + ka);
      if (wscale) wv *= wscale[(n_load / block) * ((K + block - 1) / block) + ka / block];
    }
    ws[tr][tc] = wv;
    __syncthreads();
    for (int k = 0; k < kTile; ++k) acc += static_cast<double>(as[tr][k]) * ws[tc][k];
    __syncthreads();
  }
  if (r < n_rows && n < N) c[r * N + n] = static_cast<float>(acc);
}

// c[r][i] = silu(g1[r][I + i] * s_gate) * (g1[r][i] * s_up).
__global__ void swiglu(const float* g1, int n_rows, long long I, float s_up, float s_gate, float* c) {
  long long j = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n_rows * I) return;
  long long r = j / I, i = j % I;
  float up = g1[r * 2 * I + i] * s_up, gate = g1[r * 2 * I + I + i] * s_gate;
  c[j] = gate / (1.0f + expf(-gate)) * up;
}

// o[r][h] *= s_out (* weight[r]).
__global__ void scale_rows(float* o, int n_rows, long long H, float s_out, const float* weight) {
  long long j = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n_rows * H) return;
  o[j] *= s_out * (weight ? weight[j / H] : 1.0f);
}

// out[t][h] = sum over pairs p of token t (pair_first[t] .. pair_first[t + 1], in order) of o[slot[p]][h].
template <class T>
__global__ void combine(const float* o, const int* pair_first, const int* slot, long long tokens, long long H, T* out) {
  long long j = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= tokens * H) return;
  long long t = j / H, h = j % H;
  double s = 0.0;
  for (int p = pair_first[t]; p < pair_first[t + 1]; ++p) s += o[static_cast<long long>(slot[p]) * H + h];
  out[j] = from_f32<T>(static_cast<float>(s));
}

// Device memory owned until the stream is done with it.
class Scratch {
 public:
  explicit Scratch(cudaStream_t s) : stream_(s) {}
  ~Scratch() {
    cudaStreamSynchronize(stream_);
    for (void* p : owned_) cudaFree(p);
  }
  template <class T>
  Result<T*> alloc(std::size_t n) {
    void* p = nullptr;
    if (cudaError_t e = cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(T)); e != cudaSuccess)
      return make_error(Code::cuda_error, message("moe GPU oracle: cudaMalloc of {} bytes: {}", n * sizeof(T),
                                                      cudaGetErrorString(e)));
    owned_.push_back(p);
    return static_cast<T*>(p);
  }
  template <class T>
  Result<T*> upload(const std::vector<T>& v) {
    auto p = alloc<T>(v.size());
    if (!p) return p.error();
    if (!v.empty()) {
      if (cudaError_t e = cudaMemcpyAsync(*p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice, stream_); e != cudaSuccess)
        return make_error(Code::cuda_error, std::string("moe GPU oracle: upload: ") + cudaGetErrorString(e));
      // The host vectors may go before the copy runs: wait for it.
      if (cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess)
        return make_error(Code::cuda_error, std::string("moe GPU oracle: ") + cudaGetErrorString(e));
    }
    return *p;
  }

 private:
  cudaStream_t stream_;
  std::vector<void*> owned_;
};

// A host copy of a device tensor (routing inputs only: small).
Result<Tensor> to_host(const cuda::DeviceTensor& d, cudaStream_t s) {
  auto t = Tensor::allocate(d.dtype, d.shape);
  if (!t) return t.error();
  if (t->nbytes()) {
    if (cudaError_t e = cudaMemcpyAsync(t->bytes(), d.data, t->nbytes(), cudaMemcpyDeviceToHost, s); e != cudaSuccess)
      return make_error(Code::cuda_error, std::string("moe GPU oracle: download: ") + cudaGetErrorString(e));
    if (cudaError_t e = cudaStreamSynchronize(s); e != cudaSuccess)
      return make_error(Code::cuda_error, std::string("moe GPU oracle: ") + cudaGetErrorString(e));
  }
  return t;
}

Status check_launch(const char* what) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return make_error(Code::cuda_error, message("moe GPU oracle: {}: {}", what, cudaGetErrorString(e)));
  return ok_status();
}

unsigned blocks_for(long long n) { return static_cast<unsigned>((n + 255) / 256); }

}  // namespace

Status moe_gpu_oracle(const GpuOracleCall& c) {
  const Definition& d = c.definition;
  auto form = moe::read_form(d);
  if (!form) return make_error(Code::unsupported, d.name + ": " + form.error().message);
  const Form& f = *form;
  auto stream = static_cast<cudaStream_t>(c.stream);
  if (c.inputs.size() != d.inputs.size() || c.outputs.size() != 1)
    return make_error(Code::invalid_argument, d.name + ": moe GPU oracle: wrong number of arguments");

  std::vector<moe::InputView> views(d.inputs.size());
  for (std::size_t i = 0; i < d.inputs.size(); ++i) {
    views[i].scalar = c.inputs[i].scalar;
    if (const cuda::DeviceTensor* t = c.inputs[i].tensor) {
      views[i].is_tensor = true;
      views[i].dtype = t->dtype;
      views[i].shape = t->shape;
    }
  }
  auto sizes = moe::read_sizes(d, f, views);
  if (!sizes) return sizes.error();
  const moe::Sizes& s = *sizes;
  const long long T = s.tokens, H = s.hidden, I = s.inter;
  const int B = f.weights == Weights::fp8_block ? static_cast<int>(f.block) : 1;
  const cuda::DeviceTensor& out = c.outputs[0];
  if (out.shape != std::vector<std::int64_t>{T, H})
    return make_error(Code::invalid_argument, message("{}: moe GPU oracle: output must be [{}, {}]", d.name, T, H));
  const cuda::DeviceTensor& x_d = *c.inputs[*f.hidden].tensor;
  const cuda::DeviceTensor& w13 = *c.inputs[*f.w13].tensor;
  const cuda::DeviceTensor& w2 = *c.inputs[*f.w2].tensor;
  for (const cuda::DeviceTensor* t : {&x_d, &w13, &w2})
    if (dtype_code(t->dtype) < 0)
      return make_error(Code::unsupported, message("{}: moe GPU oracle: {} tensors are not supported", d.name, dtype_name(t->dtype)));
  auto float32 = [&](std::optional<std::size_t> i) -> Result<const float*> {
    if (!i) return static_cast<const float*>(nullptr);
    const cuda::DeviceTensor& t = *c.inputs[*i].tensor;
    if (t.dtype != DType::float32)
      return make_error(Code::unsupported, message("{}: moe GPU oracle: scales must be float32", d.name));
    return t.as<const float>();
  };
  auto xs = float32(f.hidden_scale), w13s = float32(f.w13_scale), w2s = float32(f.w2_scale);
  if (!xs || !w13s || !w2s) return make_error(Code::unsupported, message("{}: moe GPU oracle: scales must be float32", d.name));

  // Routing on the host: the CPU oracle's choices.
  std::vector<Tensor> host(d.inputs.size());
  std::vector<Arg> args(d.inputs.size());
  for (auto i : {f.logits, f.bias, f.topk_ids}) {
    if (!i) continue;
    auto t = to_host(*c.inputs[*i].tensor, stream);
    if (!t) return t.error();
    host[*i] = std::move(*t);
    args[*i].tensor = &host[*i];
  }
  // Pairs grouped by local expert, tokens in order within each; per token, its pairs in routing order.
  std::vector<std::vector<std::pair<int, float>>> per_expert(static_cast<std::size_t>(s.local_experts));
  std::vector<std::vector<std::pair<std::int64_t, std::size_t>>> token_refs(static_cast<std::size_t>(T));
  for (long long t = 0; t < T; ++t)
    for (const moe::Choice& ch : moe::route(f, s, args, t)) {
      const std::int64_t le = ch.expert - s.local_offset;
      if (le < 0 || le >= s.local_experts) continue;
      auto& list = per_expert[static_cast<std::size_t>(le)];
      token_refs[static_cast<std::size_t>(t)].push_back({le, list.size()});
      list.push_back({static_cast<int>(t), static_cast<float>(ch.weight)});
    }
  std::vector<int> expert_first(static_cast<std::size_t>(s.local_experts) + 1, 0);
  for (std::int64_t e = 0; e < s.local_experts; ++e)
    expert_first[static_cast<std::size_t>(e) + 1] = expert_first[static_cast<std::size_t>(e)] +
                                                     static_cast<int>(per_expert[static_cast<std::size_t>(e)].size());
  const int pairs = expert_first.back();
  std::vector<int> rows(static_cast<std::size_t>(pairs)), pair_first(static_cast<std::size_t>(T) + 1, 0), slot;
  std::vector<float> weight(static_cast<std::size_t>(pairs));
  for (std::int64_t e = 0; e < s.local_experts; ++e)
    for (std::size_t j = 0; j < per_expert[static_cast<std::size_t>(e)].size(); ++j) {
      const std::size_t p = static_cast<std::size_t>(expert_first[static_cast<std::size_t>(e)]) + j;
      rows[p] = per_expert[static_cast<std::size_t>(e)][j].first;
      weight[p] = per_expert[static_cast<std::size_t>(e)][j].second;
    }
  for (long long t = 0; t < T; ++t) {
    for (const auto& [e, j] : token_refs[static_cast<std::size_t>(t)])
      slot.push_back(expert_first[static_cast<std::size_t>(e)] + static_cast<int>(j));
    pair_first[static_cast<std::size_t>(t) + 1] = static_cast<int>(slot.size());
  }

  Scratch scratch(stream);
  auto x = scratch.alloc<float>(static_cast<std::size_t>(T * H));
  auto g1 = scratch.alloc<float>(static_cast<std::size_t>(pairs) * 2 * I);
  auto cbuf = scratch.alloc<float>(static_cast<std::size_t>(pairs) * I);
  auto o = scratch.alloc<float>(static_cast<std::size_t>(pairs) * H);
  auto rows_d = scratch.upload(rows);
  auto weight_d = scratch.upload(weight);
  auto first_d = scratch.upload(pair_first);
  auto slot_d = scratch.upload(slot);
  if (!x) return x.error();
  if (!g1) return g1.error();
  if (!cbuf) return cbuf.error();
  if (!o) return o.error();
  if (!rows_d) return rows_d.error();
  if (!weight_d) return weight_d.error();
  if (!first_d) return first_d.error();
  if (!slot_d) return slot_d.error();

  if (T * H > 0) {
    dequant_activations<<<blocks_for(T * H), 256, 0, stream>>>(x_d.data, dtype_code(x_d.dtype), *xs, B, T, H, *x);
    KB_TRY(check_launch("activations"));
  }
  // Per-expert scalars, read once on the host (E floats each).
  std::vector<float> s_up(static_cast<std::size_t>(s.local_experts), 1.0f), s_gate = s_up, s_out = s_up;
  if (f.weights == Weights::per_expert) {
    for (auto [i, v] : {std::pair{f.up_scale, &s_up}, std::pair{f.gate_scale, &s_gate}, std::pair{f.out_scale, &s_out}}) {
      auto t = to_host(*c.inputs[*i].tensor, stream);
      if (!t) return t.error();
      moe::row_as_float(*t, 0, s.local_experts, v->data());
    }
  }
  for (std::int64_t e = 0; e < s.local_experts; ++e) {
    const int first = expert_first[static_cast<std::size_t>(e)];
    const int n = expert_first[static_cast<std::size_t>(e) + 1] - first;
    if (n == 0) continue;
    const float* in_w = f.weight_on_input ? *weight_d + first : nullptr;
    const long long w13_elems = 2 * I * H, w2_elems = H * I;
    const std::size_t w13_bytes = static_cast<std::size_t>(w13_elems) * dtype_bits(w13.dtype) / 8;
    const std::size_t w2_bytes = static_cast<std::size_t>(w2_elems) * dtype_bits(w2.dtype) / 8;
    const float* w13_scales = *w13s ? *w13s + e * (2 * I / B) * (H / B) : nullptr;
    const float* s2 = *w2s ? *w2s + e * (H / B) * (I / B) : nullptr;
    dim3 threads(kTile, kTile);
    dim3 grid1(static_cast<unsigned>((2 * I + kTile - 1) / kTile), static_cast<unsigned>((n + kTile - 1) / kTile));
    expert_gemm<<<grid1, threads, 0, stream>>>(*x, *rows_d + first, in_w, n,
                                               static_cast<const std::byte*>(w13.data) + e * w13_bytes,
                                               dtype_code(w13.dtype), w13_scales, B, 2 * I, H, *g1);
    KB_TRY(check_launch("GEMM1"));
    swiglu<<<blocks_for(n * I), 256, 0, stream>>>(*g1, n, I, s_up[static_cast<std::size_t>(e)],
                                                  s_gate[static_cast<std::size_t>(e)], *cbuf);
    KB_TRY(check_launch("SwiGLU"));
    // GEMM2 over this expert's rows of c (rows 0..n-1 in order: an identity row list).
    std::vector<int> identity(static_cast<std::size_t>(n));
    for (int j = 0; j < n; ++j) identity[static_cast<std::size_t>(j)] = j;
    auto id_d = scratch.upload(identity);
    if (!id_d) return id_d.error();
    dim3 grid2(static_cast<unsigned>((H + kTile - 1) / kTile), static_cast<unsigned>((n + kTile - 1) / kTile));
    float* o_e = *o + static_cast<long long>(first) * H;
    expert_gemm<<<grid2, threads, 0, stream>>>(*cbuf, *id_d, nullptr, n,
                                               static_cast<const std::byte*>(w2.data) + e * w2_bytes,
                                               dtype_code(w2.dtype), s2, B, H, I, o_e);
    KB_TRY(check_launch("GEMM2"));
    scale_rows<<<blocks_for(n * H), 256, 0, stream>>>(o_e, n, H, s_out[static_cast<std::size_t>(e)],
                                                      f.weight_on_input ? nullptr : *weight_d + first);
    KB_TRY(check_launch("output scale"));
  }
  if (T * H > 0) {
    switch (out.dtype) {
      case DType::bfloat16: combine<<<blocks_for(T * H), 256, 0, stream>>>(*o, *first_d, *slot_d, T, H, out.as<__nv_bfloat16>()); break;
      case DType::float16: combine<<<blocks_for(T * H), 256, 0, stream>>>(*o, *first_d, *slot_d, T, H, out.as<__half>()); break;
      case DType::float32: combine<<<blocks_for(T * H), 256, 0, stream>>>(*o, *first_d, *slot_d, T, H, out.as<float>()); break;
      default: return make_error(Code::unsupported, message("{}: moe GPU oracle: output dtype {}", d.name, dtype_name(out.dtype)));
    }
    KB_TRY(check_launch("combine"));
  }
  return ok_status();
}

}  // namespace kb::kernels
