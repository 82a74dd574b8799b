// engine_step: kb at an inference engine's call site (SGLang / vLLM style), from C++ through the C
// ABI. An engine allocates its buffers once, calls kernels on its own stream every step, and
// captures a decode step into a CUDA graph that it replays. This program does that with kb's
// RMSNorm and gemm (M = 16, the decode regime, N = K = 4096):
//   1. a step captured cold (no call before on the stream): RMSNorm captures; the gemm refuses
//      with kb's reason (its stream workspace is allocated by a first call outside capture) and
//      leaves the capture intact;
//   2. one eager step (the warm-up every engine does), then the step captured into a graph;
//   3. the graph replayed 20 times on fresh inputs: every replay's outputs equal those of an eager
//      step on the same inputs, bit for bit.
// Given a third argument, traces from `kb bench --out DIR` on this GPU, steps 2 and 3 run the gemm
// through kb_dispatch: the solution that was fastest and PASSED on the nearest recorded M.
// Exit 0 when all holds, 1 otherwise, 77 without a CUDA device.
//
//   $ kb_example_engine_step kernels/rmsnorm/definitions/rmsnorm_h4096.json kernels/gemm/definitions/gemm_n4096_k4096.json [TRACES]
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kb/kb.h"

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

#define CU(x)                                                                                    \
  do {                                                                                           \
    cudaError_t e_ = (x);                                                                        \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

// A device tensor the engine owns: memory, shape, and the DLTensor view kb reads.
struct DeviceTensor {
  std::vector<int64_t> shape;
  void* data = nullptr;
  size_t bytes = 0;
  DLTensor view{};
  DeviceTensor(std::vector<int64_t> s, DLDataTypeCode code) : shape(std::move(s)) {
    bytes = 2;
    for (int64_t d : shape) bytes *= static_cast<size_t>(d);
    CU(cudaMalloc(&data, bytes));
    int device = 0;
    CU(cudaGetDevice(&device));
    view.data = data;
    view.device = DLDevice{kDLCUDA, device};
    view.ndim = static_cast<int32_t>(shape.size());
    view.dtype = DLDataType{static_cast<uint8_t>(code), 16, 1};
    view.shape = shape.data();
  }
  ~DeviceTensor() { cudaFree(data); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  std::vector<uint8_t> read() const {
    std::vector<uint8_t> h(bytes);
    CU(cudaMemcpy(h.data(), data, bytes, cudaMemcpyDeviceToHost));
    return h;
  }
};

// Fills `t` with values of magnitude in [1/8, 1/4), either sign, from `seed` (the bit patterns of
// its dtype: bfloat16 exponent 124, float16 exponent 12), on `stream`.
void fill(DeviceTensor& t, uint32_t seed, cudaStream_t stream) {
  const bool bf16 = t.view.dtype.code == kDLBfloat;
  std::vector<uint16_t> h(t.bytes / 2);
  for (auto& v : h) {
    seed = seed * 1664525u + 1013904223u;
    const uint32_t mantissa = (seed >> 16) & (bf16 ? 0x7fu : 0x3ffu), sign = (seed & 1u) << 15;
    v = static_cast<uint16_t>(sign | (bf16 ? 0x3e00u : 0x3000u) | mantissa);
  }
  CU(cudaMemcpyAsync(t.data, h.data(), t.bytes, cudaMemcpyHostToDevice, stream));
  CU(cudaStreamSynchronize(stream));
}

struct Call {
  const kb_definition* def;
  const char* solution;
  std::vector<const DLTensor*> in, out;
  const kb_dispatch* dispatch = nullptr;  // set: the solution is chosen per call from traces
};

kb_status run(kb_context* ctx, const Call& c, cudaStream_t stream) {
  if (c.dispatch) return kb_dispatch_run(c.dispatch, c.in.data(), c.in.size(), c.out.data(), c.out.size(), stream);
  return kb_solution_run(ctx, c.def, c.solution, c.in.data(), c.in.size(), c.out.data(), c.out.size(), stream);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: %s RMSNORM_H4096.json GEMM_N4096_K4096.json [TRACES]\n", argv[0]);
    return 2;
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
    std::printf("skipped: no CUDA device\n");
    return 77;
  }
  kb_context* ctx = nullptr;
  kb_definition *norm_def = nullptr, *gemm_def = nullptr;
  if (kb_context_create(nullptr, KB_ABI_VERSION, &ctx) != KB_OK ||
      kb_definition_load_file(ctx, argv[1], &norm_def) != KB_OK ||
      kb_definition_load_file(ctx, argv[2], &gemm_def) != KB_OK) {
    std::fprintf(stderr, "kb_example_engine_step: %s\n", kb_last_error());
    return 1;
  }
  constexpr int64_t tokens = 16, hidden = 4096;
  DeviceTensor x({tokens, hidden}, kDLBfloat), w({hidden}, kDLBfloat), y({tokens, hidden}, kDLBfloat);
  DeviceTensor a({tokens, hidden}, kDLFloat), b({hidden, hidden}, kDLFloat), c({tokens, hidden}, kDLFloat);
  const Call norm{norm_def, "kb_cuda_rmsnorm", {&x.view, &w.view}, {&y.view}};
  Call gemm{gemm_def, "kb_cuda_gemm", {&a.view, &b.view}, {&c.view}};
  cudaStream_t stream = nullptr;
  CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  fill(w, 1, stream);
  fill(b, 2, stream);

  // 1. Captured cold.
  {
    CU(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const kb_status sn = run(ctx, norm, stream);
    check(sn == KB_OK, std::string("a cold RMSNorm is captured: ") + (sn == KB_OK ? "ok" : kb_last_error()));
    const kb_status sg = run(ctx, gemm, stream);
    const std::string why = sg == KB_OK ? "" : kb_last_error();
    check(sg == KB_ERROR_UNSUPPORTED && why.find("outside stream capture") != std::string::npos,
          "a cold gemm under capture is refused with kb's reason: " + why);
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream, &graph);
    check(end == cudaSuccess && graph, std::string("the capture is still valid after the refusal: ") +
                                           cudaGetErrorString(end));
    if (graph) cudaGraphDestroy(graph);
  }

  // From here on, the gemm's solution comes from the traces, if given.
  kb_dispatch* dispatch = nullptr;
  if (argc == 4) {
    const kb_status sd = kb_dispatch_create(ctx, gemm_def, argv[3], nullptr, &dispatch);
    check(sd == KB_OK, std::string("a dispatch from ") + argv[3] + ": " + (sd == KB_OK ? "ok" : kb_last_error()));
    if (!dispatch) return 1;
    kb_dispatch_choice choice = KB_DISPATCH_CHOICE_INIT;
    const kb_status sc = kb_dispatch_choose(dispatch, gemm.in.data(), gemm.in.size(), gemm.out.data(), gemm.out.size(),
                                            &choice);
    check(sc == KB_OK && choice.workload_uuid,
          sc != KB_OK ? std::string("choosing: ") + kb_last_error()
                      : std::string("the gemm at M = 16 runs ") + choice.solution + ", fastest on recorded workload " +
                            (choice.workload_uuid ? choice.workload_uuid : "(none: the fallback)") + " (" +
                            std::to_string(choice.recorded_latency_ms * 1000) + " us, " +
                            std::to_string(kb_dispatch_entry_count(dispatch)) + " entries)");
    gemm.dispatch = dispatch;
  }

  // 2. The warm-up step, then the step captured.
  fill(x, 10, stream);
  fill(a, 11, stream);
  check(run(ctx, norm, stream) == KB_OK && run(ctx, gemm, stream) == KB_OK, "an eager step");
  CU(cudaStreamSynchronize(stream));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CU(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const kb_status cn = run(ctx, norm, stream), cg = run(ctx, gemm, stream);
  CU(cudaStreamEndCapture(stream, &graph));
  check(cn == KB_OK && cg == KB_OK, std::string("the warmed-up step is captured: ") +
                                        (cn == KB_OK && cg == KB_OK ? "ok" : kb_last_error()));
  CU(cudaGraphInstantiate(&exec, graph, 0));

  // 3. Replays against eager steps, on fresh inputs each time.
  int same = 0;
  constexpr int kReplays = 20;
  for (int r = 0; r < kReplays; ++r) {
    fill(x, 100 + r, stream);
    fill(a, 200 + r, stream);
    CU(cudaMemsetAsync(y.data, 0xff, y.bytes, stream));
    CU(cudaMemsetAsync(c.data, 0xff, c.bytes, stream));
    CU(cudaGraphLaunch(exec, stream));
    CU(cudaStreamSynchronize(stream));
    const auto y_graph = y.read(), c_graph = c.read();
    CU(cudaMemsetAsync(y.data, 0xff, y.bytes, stream));
    CU(cudaMemsetAsync(c.data, 0xff, c.bytes, stream));
    if (run(ctx, norm, stream) != KB_OK || run(ctx, gemm, stream) != KB_OK) break;
    CU(cudaStreamSynchronize(stream));
    if (y.read() == y_graph && c.read() == c_graph) ++same;
  }
  check(same == kReplays, std::to_string(same) + " of " + std::to_string(kReplays) +
                              " graph replays equal an eager step bit for bit (RMSNorm and gemm outputs)");

  CU(cudaGraphExecDestroy(exec));
  CU(cudaGraphDestroy(graph));
  CU(cudaStreamDestroy(stream));
  kb_dispatch_destroy(dispatch);
  kb_definition_destroy(norm_def);
  kb_definition_destroy(gemm_def);
  kb_context_destroy(ctx);
  std::printf("%d failures\n", failures);
  return failures ? 1 : 0;
}
