// BackendBench's judgment on the GPU (see device_judge.hpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "backendbench/device_judge.hpp"

namespace kb::backendbench {

namespace {

constexpr int kMaxDims = 8;
constexpr unsigned long long kNoFailure = ~0ull;

// One output's pair of views, by value in the kernel's parameters.
struct Pair {
  const char* e = nullptr;  // element 0 of the view (base + offset)
  const char* a = nullptr;
  int e_dtype = 0, a_dtype = 0;
  int e_size = 0, a_size = 0;  // bytes per element
  int ndim = 0;
  bool linear = false;  // both contiguous: element i at i
  long long shape[kMaxDims] = {};
  long long e_strides[kMaxDims] = {};
  long long a_strides[kMaxDims] = {};
  long long n = 0;
  double atol = 0, rtol = 0;
};

// Accumulated on the device: the largest errors as the bits of non-negative
// doubles (ordered like the values, so atomicMax works) and the first
// failing row-major index.
struct Totals {
  unsigned long long max_abs_bits;
  unsigned long long max_rel_bits;
  unsigned long long first_failure;
};

// Dtype order of trace.hpp: bf16, f64, f32, f16, c32, c64, c128, i8, i16, i32, i64, b8, u8.
__device__ __forceinline__ double load_as_double(const char* p, int dt) {
  switch (dt) {
    case 0: return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(p));
    case 1: return *reinterpret_cast<const double*>(p);
    case 2: return *reinterpret_cast<const float*>(p);
    case 3: return __half2float(*reinterpret_cast<const __half*>(p));
    case 7: return *reinterpret_cast<const std::int8_t*>(p);
    case 8: return *reinterpret_cast<const std::int16_t*>(p);
    case 9: return *reinterpret_cast<const std::int32_t*>(p);
    case 10: return static_cast<double>(*reinterpret_cast<const long long*>(p));
    case 11: return *reinterpret_cast<const std::uint8_t*>(p) != 0 ? 1.0 : 0.0;
    case 12: return *reinterpret_cast<const std::uint8_t*>(p);
    default: return 0.0;
  }
}

__global__ void judge_kernel(const Pair p, Totals* totals) {
  double max_abs = 0, max_rel = 0;
  unsigned long long first = kNoFailure;
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.n; i += step) {
    long long eo = i, ao = i;
    if (!p.linear) {
      eo = 0;
      ao = 0;
      long long rest = i;
      for (int d = p.ndim - 1; d >= 0; --d) {
        const long long c = rest % p.shape[d];
        rest /= p.shape[d];
        eo += c * p.e_strides[d];
        ao += c * p.a_strides[d];
      }
    }
    const double ev = load_as_double(p.e + eo * p.e_size, p.e_dtype);
    const double av = load_as_double(p.a + ao * p.a_size, p.a_dtype);
    if (isnan(ev) && isnan(av)) continue;
    bool ok;
    double abs_err;
    if (isinf(ev) || isinf(av)) {
      ok = ev == av;
      abs_err = ok ? 0.0 : INFINITY;
    } else {
      abs_err = fabs(av - ev);
      ok = abs_err <= p.atol + p.rtol * fabs(ev);  // false for NaN against a number
      if (isnan(abs_err)) abs_err = INFINITY;
    }
    max_abs = fmax(max_abs, abs_err);
    if (ev != 0) max_rel = fmax(max_rel, abs_err / fabs(ev));  // fmax drops a NaN ratio, as std::max does there
    if (!ok && static_cast<unsigned long long>(i) < first) first = static_cast<unsigned long long>(i);
  }
  for (int o = 16; o > 0; o >>= 1) {
    max_abs = fmax(max_abs, __shfl_xor_sync(0xffffffffu, max_abs, o));
    max_rel = fmax(max_rel, __shfl_xor_sync(0xffffffffu, max_rel, o));
    first = min(first, __shfl_xor_sync(0xffffffffu, first, o));
  }
  if ((threadIdx.x & 31) == 0) {
    atomicMax(&totals->max_abs_bits, static_cast<unsigned long long>(__double_as_longlong(max_abs)));
    atomicMax(&totals->max_rel_bits, static_cast<unsigned long long>(__double_as_longlong(max_rel)));
    if (first != kNoFailure) atomicMin(&totals->first_failure, first);
  }
}

Error cuda_error(const char* what, cudaError_t e) {
  return make_error(Code::cuda_error, std::string("device judge: ") + what + ": " + cudaGetErrorString(e));
}

HostTensor meta_of(const aten::DView& v) {
  HostTensor t;
  t.undefined = v.undefined;
  t.dtype = v.dtype;
  t.shape = v.shape;
  t.strides = v.strides;
  return t;  // no storage: judge_signature reads none
}

bool is_contiguous(const aten::DView& v) {
  std::int64_t expect = 1;
  for (std::size_t d = v.shape.size(); d-- > 0;) {
    if (v.shape[d] != 1 && v.strides[d] != expect) return false;
    expect *= v.shape[d];
  }
  return true;
}

// One element of a device view, read back to the host as double.
Result<double> element(const aten::DView& v, std::int64_t i) {
  std::int64_t o = v.offset;
  for (std::size_t d = v.shape.size(); d-- > 0;) {
    o += (i % v.shape[d]) * v.strides[d];
    i /= v.shape[d];
  }
  HostTensor h;
  h.dtype = v.dtype;
  h.shape = {1};
  h.strides = {1};
  const std::size_t es = dtype_size(v.dtype);
  h.storage = std::make_shared<std::vector<std::byte>>(es);
  if (cudaError_t e = cudaMemcpy(h.storage->data(), static_cast<const char*>(v.base) + o * static_cast<std::int64_t>(es),
                                 es, cudaMemcpyDeviceToHost);
      e != cudaSuccess)
    return cuda_error("reading a failing element", e);
  return h.load(0);
}

}  // namespace

Result<Judgment> device_judge(const std::vector<aten::DView>& expected, const std::vector<aten::DView>& actual,
                              void* stream_ptr, double atol, double rtol) {
  std::vector<HostTensor> em, am;
  for (const auto& v : expected) em.push_back(meta_of(v));
  for (const auto& v : actual) am.push_back(meta_of(v));
  Judgment j = judge_signature(em, am);
  if (j.verdict != Verdict::passed) return j;
  for (const auto& v : expected)
    if (!v.undefined && (is_complex(v.dtype) || v.shape.size() > kMaxDims))
      return make_error(Code::unsupported, "device judge: complex outputs or more than 8 dims");

  auto stream = static_cast<cudaStream_t>(stream_ptr);
  Totals* totals = nullptr;
  if (cudaError_t e = cudaMalloc(&totals, sizeof(Totals)); e != cudaSuccess) return cuda_error("cudaMalloc", e);
  struct Free {
    Totals* p;
    ~Free() { cudaFree(p); }
  } free_totals{totals};
  int sms = 132;
  {
    int dev = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  }
  for (std::size_t k = 0; k < expected.size(); ++k) {
    const aten::DView& e = expected[k];
    const aten::DView& a = actual[k];
    if (e.undefined) continue;
    Pair p;
    p.n = e.numel();
    if (p.n == 0) continue;
    p.e_dtype = static_cast<int>(e.dtype);
    p.a_dtype = static_cast<int>(a.dtype);
    p.e_size = static_cast<int>(dtype_size(e.dtype));
    p.a_size = static_cast<int>(dtype_size(a.dtype));
    p.e = static_cast<const char*>(e.base) + e.offset * p.e_size;
    p.a = static_cast<const char*>(a.base) + a.offset * p.a_size;
    p.ndim = static_cast<int>(e.shape.size());
    p.linear = is_contiguous(e) && is_contiguous(a);
    for (int d = 0; d < p.ndim; ++d) {
      p.shape[d] = e.shape[d];
      p.e_strides[d] = e.strides[d];
      p.a_strides[d] = a.strides[d];
    }
    p.atol = atol;
    p.rtol = rtol;
    const Totals init{0, 0, kNoFailure};
    if (cudaError_t err = cudaMemcpyAsync(totals, &init, sizeof init, cudaMemcpyHostToDevice, stream); err != cudaSuccess)
      return cuda_error("cudaMemcpyAsync", err);
    const long long blocks = std::min<long long>((p.n + 255) / 256, static_cast<long long>(sms) * 8);
    judge_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(p, totals);
    if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) return cuda_error("launch", err);
    Totals t{};
    if (cudaError_t err = cudaMemcpyAsync(&t, totals, sizeof t, cudaMemcpyDeviceToHost, stream); err != cudaSuccess)
      return cuda_error("cudaMemcpyAsync", err);
    if (cudaError_t err = cudaStreamSynchronize(stream); err != cudaSuccess) return cuda_error("comparing", err);
    double max_abs = 0, max_rel = 0;
    std::memcpy(&max_abs, &t.max_abs_bits, sizeof max_abs);
    std::memcpy(&max_rel, &t.max_rel_bits, sizeof max_rel);
    j.max_abs_error = std::max(j.max_abs_error, max_abs);
    j.max_rel_error = std::max(j.max_rel_error, max_rel);
    if (t.first_failure != kNoFailure && j.verdict == Verdict::passed) {
      const auto i = static_cast<std::int64_t>(t.first_failure);
      auto av = element(a, i);
      if (!av) return av.error();
      auto ev = element(e, i);
      if (!ev) return ev.error();
      j.verdict = Verdict::incorrect_numerical;
      j.detail = numerical_failure_detail(k, i, *av, *ev);
    }
  }
  return j;
}

}  // namespace kb::backendbench
