// CUDA plan for _fft_c2c through cuFFT, opened at run time (dlopen, as
// matmul_cuda.cpp opens cuBLASLt: libkb never links it), with the oracle's
// argument rules (../fft_args.hpp). The input is widened into a contiguous
// work buffer (complex<float> for c32 and c64, complex<double> for c128 and
// the GPU reference), each transformed dim is one batched 1-D cuFFT plan over
// it in place (a dim of stride 1 in one call; an outer dim as one call per
// block of the dims before it), and the result is scaled and rounded once
// into the output (c32: f16 parts; a part past 65504 becomes infinity, as the
// oracle's cast).
#include <cufft.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <memory>
#include <string>

#include "../../common/args.hpp"
#include "../../common/cuda_engine.hpp"
#include "../../cuda_families.hpp"
#include "../fft_args.hpp"
#include "fft_kernels.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

struct CuFft {
  std::string error;
  cufftResult (*plan_many)(cufftHandle*, int, int*, int*, int, int, int*, int, int, cufftType, int) = nullptr;
  cufftResult (*set_stream)(cufftHandle, cudaStream_t) = nullptr;
  cufftResult (*exec_c2c)(cufftHandle, cufftComplex*, cufftComplex*, int) = nullptr;
  cufftResult (*exec_z2z)(cufftHandle, cufftDoubleComplex*, cufftDoubleComplex*, int) = nullptr;
  cufftResult (*destroy)(cufftHandle) = nullptr;
};

template <class Fn>
void bind(void* lib, const char* name, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
}

// Opened once for the process (never closed: plans may outlive any one caller).
const CuFft& cufft() {
  static CuFft api = [] {
    CuFft a;
    void* lib = nullptr;
    for (const char* name : {"libcufft.so.12", "libcufft.so.11", "libcufft.so"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) {
      a.error = "cuFFT not found (libcufft.so.12/.11)";
      return a;
    }
    std::string missing;
    bind(lib, "cufftPlanMany", a.plan_many, missing);
    bind(lib, "cufftSetStream", a.set_stream, missing);
    bind(lib, "cufftExecC2C", a.exec_c2c, missing);
    bind(lib, "cufftExecZ2Z", a.exec_z2z, missing);
    bind(lib, "cufftDestroy", a.destroy, missing);
    if (!missing.empty()) a.error = "cuFFT lacks " + missing;
    return a;
  }();
  return api;
}

// One batched 1-D transform over the work buffer, run `repeats` times `step` elements apart.
struct Pass {
  std::shared_ptr<cufftHandle> plan;
  std::int64_t repeats = 1, step = 0;
};

Pass make_pass(const CuFft& api, std::int64_t n, std::int64_t stride, std::int64_t outer, bool wide) {
  Pass p;
  int len = static_cast<int>(n), batch, istride, idist;
  if (stride == 1) {
    batch = static_cast<int>(outer);
    istride = 1;
    idist = len;
  } else {
    batch = static_cast<int>(stride);
    istride = static_cast<int>(stride);
    idist = 1;
    p.repeats = outer;
    p.step = n * stride;
  }
  cufftHandle h = 0;
  int embed = len;
  if (cufftResult r = api.plan_many(&h, 1, &len, &embed, istride, idist, &embed, istride, idist,
                                    wide ? CUFFT_Z2Z : CUFFT_C2C, batch);
      r != CUFFT_SUCCESS)
    fail(fmt::format("cufftPlanMany failed (cufftResult {}) for length {} batch {}", static_cast<int>(r), n, batch));
  const auto destroy = api.destroy;
  p.plan = std::shared_ptr<cufftHandle>(new cufftHandle(h), [destroy](cufftHandle* q) {
    destroy(*q);
    delete q;
  });
  return p;
}

// _fft_c2c(self, dim, normalization, forward)
Launch fft_c2c(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  const FftArgs args = fft_args_of(c, x);
  const CuFft& api = cufft();
  if (!api.error.empty()) fail(api.error);
  const bool wide = x.dtype == Dtype::c128 || cuda::reference_mode();
  const std::int64_t total = x.numel();
  const auto strides = contiguous_strides(x.shape);
  std::vector<Pass> passes;
  for (std::size_t dim : args.dims) {
    const std::int64_t n = x.shape[dim], st = strides[dim];
    if (n <= 1 || total == 0) continue;
    const std::int64_t outer = total / (n * st);
    if (n > 0x7fffffff || st > 0x7fffffff || outer > 0x7fffffff)
      fail("_fft_c2c: a transformed size or batch over 2^31 - 1 is not supported on CUDA");
    passes.push_back(make_pass(api, n, st, outer, wide));
  }
  const std::size_t part = wide ? sizeof(double) : sizeof(float);
  auto work = cuda::device_alloc(2 * part * static_cast<std::size_t>(std::max<std::int64_t>(total, 1)));
  const DView xv = d.view(x), out = o[0];
  const double scale = args.scale(x.shape);
  const int direction = args.forward ? CUFFT_FORWARD : CUFFT_INVERSE;
  return [=, &api](void* s) -> Status {
    if (total == 0) return ok_status();
    if (auto st = cuda::fft_load(work.get(), wide, xv, s); !st) return st;
    for (const Pass& p : passes) {
      if (api.set_stream(*p.plan, static_cast<cudaStream_t>(s)) != CUFFT_SUCCESS)
        return make_error(Code::cuda_error, "cufftSetStream failed");
      for (std::int64_t r = 0; r < p.repeats; ++r) {
        cufftResult e;
        if (wide) {
          auto* w = static_cast<cufftDoubleComplex*>(work.get()) + r * p.step;
          e = api.exec_z2z(*p.plan, w, w, direction);
        } else {
          auto* w = static_cast<cufftComplex*>(work.get()) + r * p.step;
          e = api.exec_c2c(*p.plan, w, w, direction);
        }
        if (e != CUFFT_SUCCESS)
          return make_error(Code::cuda_error, fmt::format("cuFFT execution failed (cufftResult {})", static_cast<int>(e)));
      }
    }
    return cuda::fft_store(out, work.get(), wide, scale, s);
  };
}

const CudaOpInfo kOps[] = {
    {"aten._fft_c2c.default", fft_c2c},
};

}  // namespace

std::span<const CudaOpInfo> spectral_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
