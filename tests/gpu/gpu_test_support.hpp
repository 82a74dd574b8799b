// What the GPU tests of kb's CUDA solutions share: CUDA errors as exceptions,
// definitions read from files, a const axis set to another value (a shipped
// definition at other sizes), an environment variable with a fallback, the
// device check every test starts with, and one call of a solution on guarded
// device copies of its inputs, judged against the oracle's outputs
// (GuardedCall).
#pragma once

#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/device.hpp"
#include "device_buffer.hpp"
#include "harness/implementation.hpp"
#include "harness/judge.hpp"
#include "inputs/inputs.hpp"
#include "schema/io.hpp"
#include "schema/dtype.hpp"
#include "tensor/tensor.hpp"

namespace kb_gpu_test {

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

inline kb::Definition load_definition(const std::filesystem::path& p) {
  auto d = kb::read_definition_file(p.string());
  if (!d) throw std::runtime_error("cannot read definition " + p.string() + ": " + d.error().message);
  return *d;
}

inline void set_const(kb::Definition& d, const std::string& axis, std::int64_t v) {
  for (auto& a : d.axes)
    if (a.name == axis && a.kind == kb::AxisKind::const_) {
      a.value = v;
      return;
    }
  throw std::runtime_error(d.name + ": no const axis " + axis);
}

inline std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Thrown when the device cannot run this build's kernels: the test exits 77.
struct SkipTest {
  std::string reason;
};

// 0 with a usable CUDA device (its line printed), else 77 after printing
// "skipped: no CUDA device (<why>)".
inline int require_device() {
  auto n = kb::cuda::device_count();
  if (!n) {
    std::string why = n.error().message;
    const std::string prefix = "no CUDA device: ";
    if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
    std::printf("skipped: no CUDA device (%s)\n", why.c_str());
    return 77;
  }
  if (cudaError_t e = cudaFree(nullptr); e != cudaSuccess) {
    std::printf("skipped: no CUDA device (%s: %s)\n", cudaGetErrorName(e), cudaGetErrorString(e));
    return 77;
  }
  if (auto info = kb::cuda::device_info(0))
    std::printf("device 0: %s, sm_%d%d, %d SMs\n", info->name.c_str(), info->compute_major, info->compute_minor,
                info->sm_count);
  return 0;
}

// The outputs judged: per output " NAME: max abs A rel R", and for one outside
// the tolerance " [N of M outside atol X rtol Y; first mismatch]". `failure`
// is set when the case ends before a verdict (a guard overwritten).
struct Judged {
  bool ok = true;
  std::string line;
  std::string failure;
};

// One call of a solution on device copies of a materialized call: every input
// in a guarded buffer (DeviceBuffer) holding its bytes, every output in a
// guarded buffer poisoned with NaN (0xFF bytes). `args` and the tensors point
// into the buffers, so a GuardedCall stays where it was made.
class GuardedCall {
 public:
  std::vector<kb::cuda::DeviceTensor> in, out;
  std::vector<kb::cuda::DeviceArg> args;

  // min_bytes: the least room a buffer gets (an empty tensor still has an
  // address). misalign: every tensor one element off its buffer's 16-byte
  // alignment.
  GuardedCall(const kb::Materialized& m, const std::vector<kb::Tensor>& expected, std::size_t min_bytes = 0,
              bool misalign = false)
      : in(m.tensors.size()), out(expected.size()), args(m.tensors.size()), in_bufs_(m.tensors.size()) {
    auto shift = [misalign](kb::DType t) { return misalign ? static_cast<std::size_t>(kb::dtype_bits(t) / 8) : 0; };
    for (std::size_t i = 0; i < m.tensors.size(); ++i) {
      args[i].scalar = m.args[i].scalar;
      if (!m.args[i].tensor) continue;
      const kb::Tensor& t = m.tensors[i];
      auto b = std::make_unique<DeviceBuffer>(std::max(t.nbytes(), min_bytes), shift(t.dtype()));
      if (t.nbytes())
        check_cuda(cudaMemcpy(b->data(), t.bytes(), t.nbytes(), cudaMemcpyHostToDevice), "cudaMemcpy (input)");
      in[i] = kb::cuda::DeviceTensor{t.dtype(), t.shape(), b->data(), t.nbytes()};
      args[i].tensor = &in[i];
      in_bufs_[i] = std::move(b);
    }
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const kb::Tensor& t = expected[i];
      auto b = std::make_unique<DeviceBuffer>(t.nbytes(), shift(t.dtype()));
      out[i] = kb::cuda::DeviceTensor{t.dtype(), t.shape(), b->data(), t.nbytes()};
      out_bufs_.push_back(std::move(b));
    }
    poison_outputs();
  }
  GuardedCall(const GuardedCall&) = delete;
  GuardedCall& operator=(const GuardedCall&) = delete;

  // Every output back to NaN. cudaMemcpy from pageable memory and cudaMemset
  // may still be in flight on the legacy stream, which a solution's
  // non-blocking stream does not wait for: the device is synchronized so that
  // inputs and poison land before the next launch.
  void poison_outputs(const char* what = "uploads landing") {
    for (const auto& t : out) check_cuda(cudaMemset(t.data, 0xFF, t.nbytes), "cudaMemset (poison)");
    check_cuda(cudaDeviceSynchronize(), what);
  }

  // The solution `calls` times on one new non-blocking stream (a second call
  // reuses what the first planned), each synchronized. A device without this
  // build's kernel image throws SkipTest; a CUDA error throws; a refused call
  // returns its error.
  kb::Status run(const kb::Implementation& impl, const kb::Definition& d, const kb::AxisValues& axes, int calls = 1) {
    cudaStream_t stream = nullptr;
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    kb::Status st = kb::ok_status();
    std::vector<cudaError_t> syncs;
    for (int k = 0; k < calls && st; ++k) {
      st = impl.run_cuda(kb::CudaCall{d, axes, args, out, stream});
      syncs.push_back(cudaStreamSynchronize(stream));
    }
    cudaStreamDestroy(stream);
    if (!st) {
      const std::string& msg = st.error().message;
      if (msg.find("cudaErrorNoKernelImageForDevice") != std::string::npos ||
          msg.find("cudaErrorUnsupportedPtxVersion") != std::string::npos)
        throw SkipTest{msg};
      return st;
    }
    for (std::size_t k = 0; k < syncs.size(); ++k)
      check_cuda(syncs[k], k == 0 ? "kernel execution (cudaStreamSynchronize)"
                                  : "kernel execution, second call (cudaStreamSynchronize)");
    return st;
  }

  // Empty when every input holds its bytes and no guard around one was
  // overwritten; else what went wrong.
  std::string inputs_intact(const kb::Materialized& m, const kb::Definition& d) const {
    for (std::size_t i = 0; i < m.tensors.size(); ++i) {
      if (!in_bufs_[i]) continue;
      const kb::Tensor& t = m.tensors[i];
      if (t.nbytes()) {
        std::vector<std::byte> back(t.nbytes());
        check_cuda(cudaMemcpy(back.data(), in[i].data, t.nbytes(), cudaMemcpyDeviceToHost), "cudaMemcpy (input back)");
        if (std::memcmp(back.data(), t.bytes(), t.nbytes()) != 0) return "modified input " + d.inputs[i].name;
      }
      if (!in_bufs_[i]->guards_intact()) return "wrote around input " + d.inputs[i].name;
    }
    return {};
  }

  // Output i copied back as a tensor like `want`; an error where the solution
  // wrote outside it.
  kb::Result<kb::Tensor> output(std::size_t i, const kb::Tensor& want, const kb::Definition& d) const {
    if (!out_bufs_[i]->guards_intact())
      return kb::make_error(kb::Code::internal, "wrote outside output " + d.outputs[i].name);
    auto got = kb::Tensor::allocate(want.dtype(), want.shape());
    if (!got) return kb::make_error(got.error().code, "allocate: " + got.error().message);
    if (got->nbytes())
      check_cuda(cudaMemcpy(got->bytes(), out[i].data, got->nbytes(), cudaMemcpyDeviceToHost), "cudaMemcpy (output)");
    return got;
  }

  // The outputs against `expected` with the definition's tolerance (TolerancePolicy).
  Judged judge(const kb::Definition& d, const std::vector<kb::Tensor>& expected) const {
    const kb::Tolerance tol = kb::TolerancePolicy().for_definition(d.op_type, d.name);
    Judged j;
    for (std::size_t i = 0; i < expected.size(); ++i) {
      auto got = output(i, expected[i], d);
      if (!got) {
        j.ok = false, j.failure = got.error().message;
        return j;
      }
      const kb::Comparison cmp = kb::compare(*got, expected[i], tol);
      j.line += fmt::format(" {}: max abs {:.3g} rel {:.3g}", d.outputs[i].name, cmp.max_abs, cmp.max_rel);
      if (cmp.verdict != kb::Comparison::Verdict::match || cmp.mismatched) {
        j.ok = false;
        j.line += fmt::format(" [{} of {} outside atol {} rtol {}; {}]", cmp.mismatched, cmp.total, tol.atol, tol.rtol,
                              cmp.detail);
      }
    }
    return j;
  }

 private:
  std::vector<std::unique_ptr<DeviceBuffer>> in_bufs_, out_bufs_;
};

}  // namespace kb_gpu_test
