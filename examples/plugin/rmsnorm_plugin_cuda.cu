// An example kb plugin in CUDA: RMSNorm (bfloat16 or float32) for rmsnorm_h4096 (EPS 1e-5) and
// rmsnorm_h7168 (EPS 1e-6). One block per row; the kernel launches on the stream kb passes.
// Built by meson only when kb is built with CUDA (examples/plugin/meson.build).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>

#include <kb/kb.h>

namespace {

template <class T> __device__ float to_f(T v);
template <> __device__ float to_f<float>(float v) { return v; }
template <> __device__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T> __device__ T from_f(float v);
template <> __device__ float from_f<float>(float v) { return v; }
template <> __device__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <class T>
__global__ void rmsnorm_kernel(const T* x, const T* w, T* y, int hidden, float eps) {
  __shared__ float partial[256];
  const T* row = x + static_cast<long long>(blockIdx.x) * hidden;
  float sum = 0.f;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
    float v = to_f(row[c]);
    sum += v * v;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  float inv = rsqrtf(partial[0] / hidden + eps);
  T* out = y + static_cast<long long>(blockIdx.x) * hidden;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) out[c] = from_f<T>((to_f(row[c]) * inv) * to_f(w[c]));
}

kb_plugin_status rmsnorm(const kb_plugin_call* call) {
  const float eps = static_cast<float>(*static_cast<const double*>(call->user_data));
  const DLTensor* x = call->inputs[0].tensor;
  const DLTensor* w = call->inputs[1].tensor;
  const DLTensor* y = &call->outputs[0];
  if (x->ndim != 2 || x->device.device_type != kDLCUDA) {
    std::snprintf(call->message, call->message_size, "expected 2-D device tensors");
    return KB_PLUGIN_ERROR;
  }
  int rows = static_cast<int>(x->shape[0]), hidden = static_cast<int>(x->shape[1]);
  if (rows == 0) return KB_PLUGIN_OK;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  if (x->dtype.code == kDLBfloat && x->dtype.bits == 16)
    rmsnorm_kernel<<<rows, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(x->data),
                                             static_cast<const __nv_bfloat16*>(w->data),
                                             static_cast<__nv_bfloat16*>(y->data), hidden, eps);
  else if (x->dtype.code == kDLFloat && x->dtype.bits == 32)
    rmsnorm_kernel<<<rows, 256, 0, stream>>>(static_cast<const float*>(x->data), static_cast<const float*>(w->data),
                                             static_cast<float*>(y->data), hidden, eps);
  else {
    std::snprintf(call->message, call->message_size, "bfloat16 and float32 only");
    return KB_PLUGIN_UNSUPPORTED;
  }
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    std::snprintf(call->message, call->message_size, "launch failed: %s", cudaGetErrorString(e));
    return KB_PLUGIN_ERROR;
  }
  return KB_PLUGIN_OK;
}

double eps_1e5 = 1e-5;
double eps_1e6 = 1e-6;

const kb_plugin_solution solutions[] = {
    {sizeof(kb_plugin_solution), "rmsnorm_h4096", "example_cuda_rmsnorm_h4096", "kb-examples",
     "RMSNorm, one block per row (example CUDA plugin)", KB_PLUGIN_DEVICE_CUDA, rmsnorm, &eps_1e5},
    {sizeof(kb_plugin_solution), "rmsnorm_h7168", "example_cuda_rmsnorm_h7168", "kb-examples",
     "RMSNorm, one block per row (example CUDA plugin)", KB_PLUGIN_DEVICE_CUDA, rmsnorm, &eps_1e6},
};
const kb_plugin_table table = {sizeof(kb_plugin_table), KB_PLUGIN_ABI_VERSION, 2, solutions};

}  // namespace

extern "C" KB_PLUGIN_EXPORT const kb_plugin_table* kb_plugin_entry_v1(uint32_t) { return &table; }
