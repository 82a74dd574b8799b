// Hostile CUDA plugin for kb's GPU tests (built only with CUDA): solutions of rmsnorm_h64
// (float32) whose kernels misbehave. They run in kb's worker (test_plugin_gpu.py,
// test_plugin_gpu) and in-process behind an adapter (test_plugin_gpu); the tests need a GPU.
#include <cuda_runtime.h>

#include <cstdio>

#include <kb/kb.h>

namespace {

// 1 / rms of this CTA's row (blockDim.x <= 64 threads, a power of two).
__device__ float row_inv_rms(const float* row, int hidden) {
  __shared__ float partial[64];
  float s = 0.f;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) s += row[c] * row[c];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k /= 2) {
    if (threadIdx.x < k) partial[threadIdx.x] += partial[threadIdx.x + k];
    __syncthreads();
  }
  return rsqrtf(partial[0] / hidden + 1e-5f);
}

__global__ void rmsnorm_kernel(const float* x, const float* w, float* y, int hidden) {
  const float* row = x + static_cast<long long>(blockIdx.x) * hidden;
  float inv = row_inv_rms(row, hidden);
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) y[blockIdx.x * hidden + c] = row[c] * inv * w[c];
}

// The flag is an output, poisoned with 0xFF bytes by kb: never 0, so this never ends.
__global__ void spin_forever(volatile int* flag) {
  while (*flag != 0) {
  }
}

// One float past the end of the output: lands in kb's guard region.
__global__ void write_past(float* y, long long n) { y[n] = 0.f; }

__global__ void illegal_address(float* p) { p[threadIdx.x + (1ll << 40)] = 1.f; }

cudaStream_t stream_of(const kb_plugin_call* c) { return static_cast<cudaStream_t>(c->stream); }

kb_plugin_status good(const kb_plugin_call* c) {
  int rows = static_cast<int>(c->inputs[0].tensor->shape[0]);
  if (rows > 0)
    rmsnorm_kernel<<<rows, 64, 0, stream_of(c)>>>(static_cast<const float*>(c->inputs[0].tensor->data),
                                                  static_cast<const float*>(c->inputs[1].tensor->data),
                                                  static_cast<float*>(c->outputs[0].data), 64);
  return KB_PLUGIN_OK;
}

kb_plugin_status hang(const kb_plugin_call* c) {
  spin_forever<<<1, 1, 0, stream_of(c)>>>(static_cast<volatile int*>(c->outputs[0].data) + 0);
  return KB_PLUGIN_OK;
}

long long numel(const DLTensor* t) {
  long long n = 1;
  for (int d = 0; d < t->ndim; ++d) n *= t->shape[d];
  return n;
}

kb_plugin_status past_output(const kb_plugin_call* c) {
  good(c);
  write_past<<<1, 1, 0, stream_of(c)>>>(static_cast<float*>(c->outputs[0].data), numel(&c->outputs[0]));
  return KB_PLUGIN_OK;
}

// Computes on its first two calls (kb's checked trials), then returns the
// result it remembered from the last computed call.
kb_plugin_status stale(const kb_plugin_call* c) {
  static int calls = 0;
  static float* cache = nullptr;
  static long long cached = 0;
  long long n = numel(&c->outputs[0]);
  if (calls++ < 2 || !cache || cached != n) {
    good(c);
    if (cache && cached != n) {
      cudaFree(cache);
      cache = nullptr;
    }
    if (!cache && cudaMalloc(&cache, n * sizeof(float)) != cudaSuccess) return KB_PLUGIN_ERROR;
    cached = n;
    cudaMemcpyAsync(cache, c->outputs[0].data, n * sizeof(float), cudaMemcpyDeviceToDevice, stream_of(c));
    return KB_PLUGIN_OK;
  }
  cudaMemcpyAsync(c->outputs[0].data, cache, n * sizeof(float), cudaMemcpyDeviceToDevice, stream_of(c));
  return KB_PLUGIN_OK;
}

// A fingerprint cache on the device: a hash of the first 256 bytes of
// hidden_states picks one of 16 entries; a filled entry's output is replayed
// (a copy instead of the work), an empty one is computed correctly and
// stored. A fingerprint only has to tell apart the handful of input sets a
// benchmark revisits, and the cheaper it is the more the replay gains.
//
// Timed on input sets that rotate and are revisited, this solution PASSES
// with the time of a hash and a copy: the checked calls fill an entry per
// set, every timed call on a set hits the entry its own inputs filled (the
// tests' seeds give their 2 checked and 2 timed sets 4 different entries), so
// every output judged after timing is the right one. Timed on inputs drawn
// fresh before each call, it meets a new fingerprint every call: after a few
// dozen calls every entry is filled and each call replays an output computed
// for other inputs, and of the hundreds of calls a timing makes the few kb
// keeps and judges are misses only by a chance under 1e-5
// (INCORRECT_NUMERICAL). A fingerprint wide enough never to collide would
// never hit either, and the solution would be timed doing its full work.
constexpr int kEntries = 16;
constexpr unsigned kHit = 1u << 31;

__global__ void fingerprint(const unsigned char* x, int bytes, const int* filled, unsigned* lookup) {
  if (threadIdx.x != 0) return;
  unsigned long long h = 0xCBF29CE484222325ull;
  for (int i = 0; i < bytes; ++i) h = (h ^ x[i]) * 0x100000001B3ull;
  const unsigned entry = static_cast<unsigned>(h % kEntries);
  *lookup = entry | (filled[entry] ? kHit : 0u);
}

__global__ void rmsnorm_or_replay(const float* x, const float* w, float* y, int hidden, const unsigned* lookup,
                                  float* cache, long long entry_floats) {
  const unsigned l = *lookup;
  float* stored = cache + static_cast<long long>(l & ~kHit) * entry_floats + static_cast<long long>(blockIdx.x) * hidden;
  float* out = y + static_cast<long long>(blockIdx.x) * hidden;
  if (l & kHit) {
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) out[c] = stored[c];
    return;
  }
  const float* row = x + static_cast<long long>(blockIdx.x) * hidden;
  float inv = row_inv_rms(row, hidden);
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) stored[c] = out[c] = row[c] * inv * w[c];
}

__global__ void mark_filled(const unsigned* lookup, int* filled) { filled[*lookup & ~kHit] = 1; }

kb_plugin_status fingerprint_cache(const kb_plugin_call* c) {
  static int* filled = nullptr;
  static unsigned* lookup = nullptr;
  static float* cache = nullptr;
  static long long cached = 0;
  const long long n = numel(&c->outputs[0]);
  const int rows = static_cast<int>(c->inputs[0].tensor->shape[0]);
  if (n != cached) {  // another shape: a new cache (kb synchronizes between evaluations)
    if (cache) cudaFree(cache);
    cache = nullptr;
    if (n > 0 && cudaMalloc(&cache, kEntries * n * sizeof(float)) != cudaSuccess) return KB_PLUGIN_ERROR;
    if (!filled && cudaMalloc(&filled, kEntries * sizeof(int)) != cudaSuccess) return KB_PLUGIN_ERROR;
    if (!lookup && cudaMalloc(&lookup, sizeof(unsigned)) != cudaSuccess) return KB_PLUGIN_ERROR;
    if (cudaMemset(filled, 0, kEntries * sizeof(int)) != cudaSuccess) return KB_PLUGIN_ERROR;
    cached = n;
  }
  if (rows <= 0) return KB_PLUGIN_OK;
  const long long x_bytes = numel(c->inputs[0].tensor) * static_cast<long long>(sizeof(float));
  fingerprint<<<1, 32, 0, stream_of(c)>>>(static_cast<const unsigned char*>(c->inputs[0].tensor->data),
                                          static_cast<int>(x_bytes < 256 ? x_bytes : 256), filled, lookup);
  rmsnorm_or_replay<<<rows, 64, 0, stream_of(c)>>>(static_cast<const float*>(c->inputs[0].tensor->data),
                                                   static_cast<const float*>(c->inputs[1].tensor->data),
                                                   static_cast<float*>(c->outputs[0].data), 64, lookup, cache, n);
  mark_filled<<<1, 1, 0, stream_of(c)>>>(lookup, filled);
  return KB_PLUGIN_OK;
}

// Runs its kernel on a stream of its own and waits for it there: correct
// results, but work kb's timing on the given stream would never see.
kb_plugin_status other_stream(const kb_plugin_call* c) {
  static cudaStream_t mine = nullptr;
  if (!mine && cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking) != cudaSuccess) return KB_PLUGIN_ERROR;
  kb_plugin_call moved = *c;
  moved.stream = mine;
  good(&moved);
  cudaStreamSynchronize(mine);
  return KB_PLUGIN_OK;
}

kb_plugin_status illegal(const kb_plugin_call* c) {
  illegal_address<<<1, 32, 0, stream_of(c)>>>(static_cast<float*>(c->outputs[0].data));
  return KB_PLUGIN_OK;
}

const kb_plugin_solution solutions[] = {
    {sizeof(kb_plugin_solution), "rmsnorm_h64", "hostile_cuda_good", "kb-tests", nullptr, KB_PLUGIN_DEVICE_CUDA, good, nullptr},
    {sizeof(kb_plugin_solution), "rmsnorm_h64", "hostile_cuda_kernel_hang", "kb-tests", nullptr, KB_PLUGIN_DEVICE_CUDA, hang, nullptr},
    {sizeof(kb_plugin_solution), "rmsnorm_h64", "hostile_cuda_illegal_address", "kb-tests", nullptr, KB_PLUGIN_DEVICE_CUDA, illegal, nullptr},
    {sizeof(kb_plugin_solution), "rmsnorm_h64", "hostile_cuda_write_past_output", "kb-tests", nullptr, KB_PLUGIN_DEVICE_CUDA, past_output, nullptr},
    {sizeof(kb_plugin_solution), "rmsnorm_h64", "hostile_cuda_stale", "kb-tests", nullptr, KB_PLUGIN_DEVICE_CUDA, stale, nullptr},
    {sizeof(kb_plugin_solution), "rmsnorm_h64", "hostile_cuda_other_stream", "kb-tests", nullptr, KB_PLUGIN_DEVICE_CUDA, other_stream, nullptr},
    {sizeof(kb_plugin_solution), "rmsnorm_h64", "hostile_cuda_fingerprint_cache", "kb-tests", nullptr, KB_PLUGIN_DEVICE_CUDA, fingerprint_cache, nullptr},
};
const kb_plugin_table table = {sizeof(kb_plugin_table), KB_PLUGIN_ABI_VERSION, 7, solutions};

}  // namespace

extern "C" KB_PLUGIN_EXPORT const kb_plugin_table* kb_plugin_entry_v1(uint32_t) { return &table; }
