// kb's CUDA ATen kernels (kernels/aten/*/cuda/) against the fp64 CPU oracles
// through `kb backendbench run --device cuda`'s runner (run_cuda_trace), with
// BackendBench's judge:
//  1. hand-written lines for the hard layouts: broadcasting through 0-strides,
//     permuted and gapped inputs, in-place ops on strided views, scalars and
//     0-D tensors, type promotion, reductions over inner and outer dims,
//     softmax along a strided dim, transposed and batched matmuls, addmm's bias;
//     the same lines again judged against the GPU fp64 reference (--gpu-reference);
//  2. the shared trace's smallest lines of a few operators of each family
//     (KB_SHARED_DIR), when the file is there.
// Exit codes: 0 all passed, 1 a failure, 77 skipped (no usable CUDA device).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "backendbench/run.hpp"
#include "backendbench/trace.hpp"

using namespace kb::backendbench;

namespace {

// The 512 x 1024 x 384 mm and addmm and the bf16 bmm are over matmul_cuda.cpp's
// kMinTunedFlops: their first plan times cuBLASLt's candidates, which write
// the output (addmm with beta != 0: its bias copy must still come first); the
// repeated mm takes the cached algorithm.
const char* const kLines = R"TRACE(Operator: aten.add.Tensor
cnt: 1, ((T([2, 3, 5], f16), T([5], f16)), {})
cnt: 1, ((T([4, 8], f32, stride=(1, 4)), T([4, 1], f32)), {'alpha': 2})
cnt: 1, ((T([3, 4], f16), 1.5), {})
cnt: 1, ((T([6, 7], i64), T([], f32)), {})
cnt: 1, ((T([2, 3, 4], bf16, stride=(24, 1, 6)), T([2, 3, 4], f32)), {})
Operator: aten.mul_.Tensor
cnt: 1, ((T([4, 6], f16, stride=(12, 2)), T([6], f16)), {})
Operator: aten.threshold_backward.default
cnt: 1, ((T([2, 16, 9, 9], f16, stride=(1296, 1, 144, 16)), T([2, 16, 9, 9], f16, stride=(1296, 1, 144, 16)), 0), {})
Operator: aten.where.self
cnt: 1, ((T([4, 1], b8), T([4, 5], f32), T([], f32)), {})
Operator: aten.gelu_backward.default
cnt: 1, ((T([8, 33], f16), T([8, 33], f16)), {'approximate': 'tanh'})
Operator: aten.sum.dim_IntList
cnt: 1, ((T([64, 300], f16), [0]), {})
cnt: 1, ((T([5, 7, 11], f32, stride=(1, 55, 5)), [-1, 0], True), {})
cnt: 1, ((T([3, 100000], f16), [1]), {})
Operator: aten.mean.dim
cnt: 1, ((T([2, 64, 7, 7], f16), [-1, -2], True), {})
Operator: aten._softmax.default
cnt: 1, ((T([4, 12, 33, 33], f16), -1, False), {})
cnt: 1, ((T([4, 2000, 3], f32, stride=(6000, 1, 2000)), 1, False), {})
Operator: aten._log_softmax_backward_data.default
cnt: 1, ((T([16, 5000], f32), T([16, 5000], f32), 1, f32), {})
Operator: aten.native_layer_norm.default
cnt: 1, ((T([4, 7, 96], f16), [96], T([96], f16), T([96], f16), 1e-05), {})
Operator: aten.native_layer_norm_backward.default
cnt: 1, ((T([3, 5, 40], f16), T([3, 5, 40], f16), [40], T([3, 5, 1], f32), T([3, 5, 1], f32), T([40], f16), T([40], f16), [True, True, True]), {})
cnt: 1, ((T([6, 2000], f32), T([6, 2000], f32), [2000], T([6, 1], f32), T([6, 1], f32), None, None, [True, False, False]), {})
Operator: aten.native_batch_norm.default
cnt: 1, ((T([4, 8, 5, 5], f16), T([8], f16), T([8], f16), T([8], f16), T([8], f16), True, 0.1, 1e-05), {})
cnt: 1, ((T([4, 8, 5, 5], f32, stride=(200, 1, 40, 8)), T([8], f32), T([8], f32), T([8], f32), T([8], f32), False, 0.1, 1e-05), {})
Operator: aten.native_batch_norm_backward.default
cnt: 1, ((T([4, 8, 5, 5], f16), T([4, 8, 5, 5], f16), T([8], f16), T([8], f16), T([8], f16), T([8], f32), T([8], f32), True, 1e-05, [True, True, True]), {})
Operator: aten.mm.default
cnt: 1, ((T([33, 40], f16), T([40, 17], f16)), {})
cnt: 1, ((T([33, 40], f32, stride=(1, 33)), T([40, 17], f32, stride=(1, 40))), {})
cnt: 1, ((T([512, 1024], f16), T([1024, 384], f16)), {})
cnt: 1, ((T([512, 1024], f16), T([1024, 384], f16)), {})
Operator: aten.bmm.default
cnt: 1, ((T([3, 16, 24], f16), T([3, 24, 8], f16, stride=(192, 1, 24))), {})
cnt: 1, ((T([4, 256, 512], bf16), T([4, 512, 256], bf16, stride=(131072, 1, 512))), {})
Operator: aten.addmm.default
cnt: 1, ((T([17], f16), T([33, 40], f16), T([40, 17], f16, stride=(1, 40))), {})
cnt: 1, ((T([384], f16), T([512, 1024], f16), T([1024, 384], f16, stride=(1, 1024))), {'beta': 0.5, 'alpha': 2})
Operator: aten.cat.default
cnt: 1, (([T([2, 3], f16), T([2, 5], f16), T([0], f16)], 1), {})
Operator: aten.constant_pad_nd.default
cnt: 1, ((T([2, 3, 4], f32), [1, -1, 2, 0]), {})
Operator: aten.slice_backward.default
cnt: 1, ((T([4, 3], f16), [4, 9], 1, 1, 9223372036854775807, 3), {})
Operator: aten._unsafe_view.default
cnt: 1, ((T([4, 6], f16, stride=(1, 4)), [24]), {})
cnt: 1, ((T([4, 6], f16), [2, 12]), {})
Operator: aten.split.Tensor
cnt: 1, ((T([10, 4], f16), 3), {})
Operator: aten.index_select.default
cnt: 1, ((T([10, 6], f16), 0, T([4], i64)), {})
cnt: 1, ((T([5, 7], f32, stride=(1, 5)), 1, T([3], i64)), {})
Operator: aten.gather.default
cnt: 1, ((T([4, 9], f32), 1, T([4, 3], i64)), {})
Operator: aten.embedding.default
cnt: 1, ((T([50, 8], f16), T([2, 5], i64)), {})
Operator: aten._to_copy.default
cnt: 1, ((T([5, 5], f32),), {'dtype': torch.float16})
)TRACE";

// reference: every line over the budget, so judged against the GPU fp64 reference;
// mixed: lines over the default budget judged so, the others against the oracle.
enum class Judge { oracle, reference, mixed };

bool run(const TraceFile& trace, const RunOptions& opt, const char* what, Judge how = Judge::oracle) {
  CudaRunOptions copt;
  if (how == Judge::reference) {
    copt.oracle_elements = 1;
    copt.oracle_flops = 1;
  }
  copt.gpu_reference = how != Judge::oracle;
  copt.reps = 2;
  copt.warmup = 1;
  auto rep = run_cuda_trace(trace, opt, copt);
  if (!rep) {
    std::printf("FAIL %s: %s\n", what, rep.error().message.c_str());
    return false;
  }
  bool ok = rep->fatal.empty();
  for (const LineOutcome& l : rep->lines) {
    std::printf("%s %s %s line %zu%s%s\n", l.passed ? "PASS" : "FAIL", what, l.op.c_str(), l.source_line,
                l.passed ? "" : ": ", l.problem.c_str());
    ok &= l.passed && (how == Judge::mixed || l.by_reference == (how == Judge::reference));
  }
  if (!rep->fatal.empty()) std::printf("FAIL %s: stopped: %s\n", what, rep->fatal.c_str());
  return ok;
}

}  // namespace

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("skipped: no CUDA device\n");
    return 77;
  }
  bool ok = true;
  ParseReport hand = parse_text(kLines, "hand-written");
  if (!hand.ok()) {
    std::printf("FAIL hand-written lines do not parse: %s\n", hand.format_error(hand.errors[0]).c_str());
    return 1;
  }
  ok &= run(hand.trace, RunOptions{}, "hand");
  ok &= run(hand.trace, RunOptions{}, "hand-vs-gpu-reference", Judge::reference);
  const char* shared = std::getenv("KB_SHARED_DIR");
  std::string path = std::string(shared ? shared : "../shared") + "/backendbench/tritonbench-op-traces.txt";
  if (std::filesystem::exists(path)) {
    auto trace = parse_file(path);
    if (!trace) {
      std::printf("FAIL %s\n", trace.error().message.c_str());
      return 1;
    }
    RunOptions opt;
    opt.limit_per_op = 3;
    opt.ops = {"aten.add.Tensor", "aten.mul.Tensor", "aten.relu_.default", "aten.sum.dim_IntList", "aten.mm.default",
               "aten.bmm.default", "aten.addmm.default", "aten.cat.default", "aten._softmax.default",
               "aten.native_layer_norm.default", "aten.native_batch_norm.default", "aten.clone.default",
               "aten.gather.default", "aten.embedding.default"};
    ok &= run(*trace, opt, "trace", Judge::mixed);
  } else {
    std::printf("note: %s not found; trace lines skipped\n", path.c_str());
  }
  std::printf("%s\n", ok ? "all passed" : "FAILED");
  return ok ? 0 : 1;
}
