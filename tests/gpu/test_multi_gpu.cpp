// kb_solution_run on a machine with two or more GPUs, through the C ABI as an
// engine calls it: tensors on device 1 while the calling thread's current
// device is 0. kb must run the solution on the tensors' device (their DLPack
// device_id) and give the caller back device 0; tensors split over two
// devices are refused. Exit 77 (skip) with fewer than two devices.
//
// usage: test_multi_gpu [RMSNORM_H4096_DEFINITION.json]  (default: kb's, from the repository root)
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "capi_gpu_test.hpp"
#include "kb/kb.h"

namespace {

using kb_gpu_test::check;
using kb_gpu_test::failures;

// A 2-D or 1-D bf16 tensor view.
struct View {
  std::vector<int64_t> shape;
  DLTensor t{};
  View(void* data, DLDevice dev, std::vector<int64_t> s) : shape(std::move(s)) {
    t.data = data;
    t.device = dev;
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = DLDataType{kDLBfloat, 16, 1};
    t.shape = shape.data();
  }
};

float bf16_to_float(std::uint16_t v) {
  std::uint32_t u = static_cast<std::uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2) {
    std::fprintf(stderr, "usage: test_multi_gpu [RMSNORM_H4096_DEFINITION.json]\n");
    return 2;
  }
  const char* definition = argc == 2 ? argv[1] : "kernels/rmsnorm/definitions/rmsnorm_h4096.json";
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) {
    std::printf("skipped: needs two CUDA devices (%d usable)\n", n);
    return 77;
  }
  kb_context* ctx = nullptr;
  kb_definition* def = nullptr;
  if (kb_context_create(nullptr, KB_ABI_VERSION, &ctx) != KB_OK ||
      kb_definition_load_file(ctx, definition, &def) != KB_OK) {
    std::fprintf(stderr, "setup: %s\n", kb_last_error());
    return 1;
  }
  constexpr int64_t rows = 5, hidden = 4096;
  const std::size_t x_bytes = rows * hidden * 2, w_bytes = hidden * 2;

  // Host inputs, then the expected output from kb's CPU oracle.
  std::vector<std::uint16_t> hx(rows * hidden), hw(hidden), expected(rows * hidden), got(rows * hidden);
  std::srand(7);
  for (auto& v : hx) v = __bfloat16_as_ushort(__float2bfloat16(std::rand() / float(RAND_MAX) * 4 - 2));
  for (auto& v : hw) v = __bfloat16_as_ushort(__float2bfloat16(std::rand() / float(RAND_MAX) + 0.5f));
  const DLDevice host{kDLCPU, 0};
  View cx(hx.data(), host, {rows, hidden}), cw(hw.data(), host, {hidden}), ce(expected.data(), host, {rows, hidden});
  const DLTensor* cin[] = {&cx.t, &cw.t};
  const DLTensor* cout[] = {&ce.t};
  check(kb_solution_run(ctx, def, "reference", cin, 2, cout, 1, nullptr) == KB_OK, "the CPU oracle runs");

  // The same on device 1, called while device 0 is current.
  void *dx = nullptr, *dw = nullptr, *dout = nullptr, *dx0 = nullptr;
  CU(cudaSetDevice(1));
  CU(cudaMalloc(&dx, x_bytes));
  CU(cudaMalloc(&dw, w_bytes));
  CU(cudaMalloc(&dout, x_bytes));
  CU(cudaMemcpy(dx, hx.data(), x_bytes, cudaMemcpyHostToDevice));
  CU(cudaMemcpy(dw, hw.data(), w_bytes, cudaMemcpyHostToDevice));
  CU(cudaMemset(dout, 0xFF, x_bytes));
  cudaStream_t s1 = nullptr;
  CU(cudaStreamCreate(&s1));  // a stream of device 1, as an engine serving on device 1 has
  CU(cudaSetDevice(0));
  CU(cudaMalloc(&dx0, x_bytes));  // a tensor on device 0, for the mixed call below

  const DLDevice gpu1{kDLCUDA, 1}, gpu0{kDLCUDA, 0};
  View gx(dx, gpu1, {rows, hidden}), gw(dw, gpu1, {hidden}), go(dout, gpu1, {rows, hidden});
  const DLTensor* gin[] = {&gx.t, &gw.t};
  const DLTensor* gout[] = {&go.t};
  for (cudaStream_t stream : {static_cast<cudaStream_t>(nullptr), s1}) {
    CU(cudaSetDevice(1));
    CU(cudaMemset(dout, 0xFF, x_bytes));
    CU(cudaDeviceSynchronize());
    CU(cudaSetDevice(0));
    const kb_status st = kb_solution_run(ctx, def, "kb_cuda_rmsnorm", gin, 2, gout, 1, stream);
    if (st != KB_OK) std::printf("  kb_solution_run: %s\n", kb_last_error());
    check(st == KB_OK, stream ? "kb_cuda_rmsnorm on device 1 tensors, device 1's stream, device 0 current"
                              : "kb_cuda_rmsnorm on device 1 tensors, the default stream, device 0 current");
    int current = -1;
    CU(cudaGetDevice(&current));
    check(current == 0, "the caller's current device is device 0 again after the call");
    // Without the device guard the kernel ran on device 0 against device 1's memory and faulted there
    // (measured on two H200s: the illegal address surfaced at a later call on device 0).
    const cudaError_t sync0 = cudaDeviceSynchronize();
    check(sync0 == cudaSuccess, std::string("device 0 saw no CUDA error: ") + cudaGetErrorString(sync0));
    CU(cudaSetDevice(1));
    const cudaError_t sync = cudaDeviceSynchronize();
    check(sync == cudaSuccess, "device 1 finishes the call without a CUDA error");
    CU(cudaMemcpy(got.data(), dout, x_bytes, cudaMemcpyDeviceToHost));
    CU(cudaSetDevice(0));
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      worst = std::fmax(worst, std::fabs(bf16_to_float(got[i]) - bf16_to_float(expected[i])));
    std::printf("  largest difference from the CPU oracle: %g\n", worst);
    check(worst <= 0.02, "device 1's output matches the CPU oracle (|diff| <= 0.02, bf16)");
  }

  // Tensors on two devices: refused before anything runs.
  View mx(dx0, gpu0, {rows, hidden});
  const DLTensor* mixed[] = {&mx.t, &gw.t};
  const kb_status st = kb_solution_run(ctx, def, "kb_cuda_rmsnorm", mixed, 2, gout, 1, nullptr);
  std::printf("  mixed devices: %s\n", kb_last_error());
  check(st == KB_ERROR_INVALID_ARGUMENT && std::strstr(kb_last_error(), "device") != nullptr,
        "tensors on devices 0 and 1 are KB_ERROR_INVALID_ARGUMENT naming the devices");

  CU(cudaFree(dx0));
  CU(cudaSetDevice(1));
  CU(cudaStreamDestroy(s1));
  CU(cudaFree(dx));
  CU(cudaFree(dw));
  CU(cudaFree(dout));
  kb_definition_destroy(def);
  kb_context_destroy(ctx);
  std::printf("%d failures\n", failures);
  return failures ? 1 : 0;
}
