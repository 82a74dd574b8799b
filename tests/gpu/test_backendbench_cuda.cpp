// kb's CUDA ATen kernels (kernels/aten/*/cuda/) against the fp64 CPU oracles
// through `kb backendbench run --device cuda`'s runner (run_cuda_trace), with
// BackendBench's judge:
//  1. hand-written lines for the hard layouts: broadcasting through 0-strides,
//     permuted and gapped inputs, in-place ops on strided views, scalars and
//     0-D tensors, type promotion, reductions over inner and outer dims,
//     softmax along a strided dim, transposed and batched matmuls, addmm's bias;
//     the same lines again judged against the GPU fp64 reference (--gpu-reference);
//     the device judge (device_judge.hpp) against the host judge on outputs
//     with NaN pairs, infinities, values at the tolerance edge, integers and
//     strided views: same verdict, message and largest errors;
//     inputs generated on the device (device_materialize.hpp) against the
//     host's materialization of the same line: the same bytes;
//  2. the shared trace's smallest lines of a few operators of each family
//     (KB_SHARED_DIR), when the file is there.
// Exit codes: 0 all passed, 1 a failure, 77 skipped (no usable CUDA device).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "backendbench/device_judge.hpp"
#include "backendbench/device_materialize.hpp"
#include "backendbench/materialize.hpp"
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
cnt: 1, ((T([3, 5, 40], f16), T([40], f16)), {})
cnt: 1, ((T([64, 33], f16), T([1, 33], f16)), {})
cnt: 1, ((T([7, 16], bf16), T([7, 1], bf16)), {})
cnt: 1, ((T([4, 9, 16], f32), T([4, 1, 16], f32)), {'alpha': -0.5})
cnt: 1, ((T([6, 24], f16), T([6, 24], f32)), {})
cnt: 1, ((T([0, 16], f16), T([16], f16)), {})
cnt: 1, ((T([5, 3], f16), T([3], f16)), {})
cnt: 1, ((T([16, 40], f16, stride=(41, 1)), T([16, 40], f16, stride=(1, 16))), {})
Operator: aten.mul_.Tensor
cnt: 1, ((T([4, 6], f16, stride=(12, 2)), T([6], f16)), {})
cnt: 1, ((T([6, 8, 12, 12], f16), T([], f16)), {})
cnt: 1, ((T([5, 40], f16, stride=(41, 1)), T([5, 1], f16)), {})
cnt: 1, ((T([300, 24], f16), T([300, 1], f16)), {})
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
cnt: 1, ((T([4001, 64], f16), [0], True), {})
cnt: 1, ((T([1000, 24], f32), [0]), {})
cnt: 1, ((T([300, 13], f16), [0]), {})
cnt: 1, ((T([2, 48, 48, 16], f16, stride=(36864, 48, 1, 2304)), [0, 1, 2], True), {})
cnt: 1, ((T([40, 29, 3, 37], f16), [0, 1], True), {})
cnt: 1, ((T([3, 0, 5], f16), [1]), {})
Operator: aten.mean.dim
cnt: 1, ((T([2, 64, 7, 7], f16), [-1, -2], True), {})
cnt: 1, ((T([8, 64, 14, 14], f16), [2, 3], True), {})
cnt: 1, ((T([4, 32, 8, 8], f16), [-1, -2], True), {})
cnt: 1, ((T([2, 40, 56, 56], bf16), [2, 3]), {})
Operator: aten._softmax.default
cnt: 1, ((T([4, 12, 33, 33], f16), -1, False), {})
cnt: 1, ((T([4, 2000, 3], f32, stride=(6000, 1, 2000)), 1, False), {})
cnt: 1, ((T([64, 16], f16), -1, False), {})
cnt: 1, ((T([50, 49], f16), -1, False), {})
cnt: 1, ((T([6, 7], f16), -1, False), {})
cnt: 1, ((T([8, 1000], f32), -1, False), {})
cnt: 1, ((T([4, 3001], f16), -1, False), {})
cnt: 1, ((T([4, 2048], bf16), 1, False), {})
cnt: 1, ((T([0, 64], f16), -1, False), {})
Operator: aten._log_softmax_backward_data.default
cnt: 1, ((T([16, 5000], f32), T([16, 5000], f32), 1, f32), {})
cnt: 1, ((T([16, 3001], f16), T([16, 3001], f16), 1, f16), {})
cnt: 1, ((T([64, 100], f16), T([64, 100], f16), 1, f16), {})
cnt: 1, ((T([8, 2000], f32), T([8, 2000], f32), 1, f32), {})
Operator: aten.native_layer_norm.default
cnt: 1, ((T([4, 7, 96], f16), [96], T([96], f16), T([96], f16), 1e-05), {})
Operator: aten.native_layer_norm_backward.default
cnt: 1, ((T([3, 5, 40], f16), T([3, 5, 40], f16), [40], T([3, 5, 1], f32), T([3, 5, 1], f32), T([40], f16), T([40], f16), [True, True, True]), {})
cnt: 1, ((T([6, 2000], f32), T([6, 2000], f32), [2000], T([6, 1], f32), T([6, 1], f32), None, None, [True, False, False]), {})
cnt: 1, ((T([64, 50, 64], f16), T([64, 50, 64], f16), [64], T([64, 50, 1], f32), T([64, 50, 1], f32), T([64], f16), T([64], f16), [True, True, True]), {})
cnt: 1, ((T([8, 20, 768], f16), T([8, 20, 768], f16, stride=(15360, 1, 20)), [768], T([8, 20, 1], f32), T([8, 20, 1], f32), T([768], f16), T([768], f16), [False, True, True]), {})
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
cnt: 1, (([T([2, 3, 8], f16), T([2, 5, 8], f16)], 1), {})
cnt: 1, (([T([3, 7], f16), T([3, 9], f16), T([3, 17], f16)], 1), {})
cnt: 1, (([T([4, 12], f32), T([4, 20], f32)], 1), {})
Operator: aten.constant_pad_nd.default
cnt: 1, ((T([2, 3, 4], f32), [1, -1, 2, 0]), {})
cnt: 1, ((T([2, 3, 17, 17], f16), [0, -1, 0, -1]), {})
cnt: 1, ((T([2, 3, 16, 16], f16), [1, 1, 1, 1], 0.5), {})
cnt: 1, ((T([2, 3, 16, 16], f16), [-1, 2, 0, -2]), {})
Operator: aten.slice_backward.default
cnt: 1, ((T([4, 3], f16), [4, 9], 1, 1, 9223372036854775807, 3), {})
Operator: aten._unsafe_view.default
cnt: 1, ((T([4, 6], f16, stride=(1, 4)), [24]), {})
cnt: 1, ((T([4, 6], f16), [2, 12]), {})
Operator: aten.split.Tensor
cnt: 1, ((T([10, 4], f16), 3), {})
Operator: aten.index_select.default
cnt: 1, ((T([10, 6], f16), 0, T([4], i64)), {})
cnt: 1, ((T([100, 24], f16, stride=(40, 1)), 0, T([300], i64)), {})
cnt: 1, ((T([64, 12], f32), 0, T([33], i64)), {})
cnt: 1, ((T([64, 12], f16), 0, T([33], i64)), {})
cnt: 1, ((T([5, 7], f32, stride=(1, 5)), 1, T([3], i64)), {})
Operator: aten.gather.default
cnt: 1, ((T([4, 9], f32), 1, T([4, 3], i64)), {})
Operator: aten.embedding.default
cnt: 1, ((T([50, 8], f16), T([2, 5], i64)), {})
cnt: 1, ((T([50, 64], f16), T([4, 7], i64)), {})
Operator: aten._to_copy.default
cnt: 1, ((T([5, 5], f32),), {'dtype': torch.float16})
Operator: aten.div.Scalar
cnt: 1, ((T([4, 24, 9, 9], f16, stride=(24, 1, 0, 0)), 81), {})
cnt: 1, ((T([2, 16, 8, 8], f16, stride=(16, 1, 0, 0)), 64), {})
Operator: aten.sum.default
cnt: 1, ((T([3, 1000, 37], f16),), {})
cnt: 1, ((T([1001], f32),), {})
cnt: 1, ((T([6, 474], f16, stride=(948, 2)),), {})
cnt: 1, ((T([2048, 2048], f16),), {})
cnt: 1, ((T([5, 0], f16),), {})
Operator: aten.mean.default
cnt: 1, ((T([6, 3, 35, 35], f16),), {})
cnt: 1, ((T([64, 1024], bf16),), {})
Operator: aten.any.default
cnt: 1, ((T([2, 64, 1024], b8),), {})
cnt: 1, ((T([1001], b8),), {})
Operator: aten.max.default
cnt: 1, ((T([300, 33], f16),), {})
Operator: aten._log_softmax.default
cnt: 1, ((T([16, 5003], f16), 1, False), {})
cnt: 1, ((T([32, 128], f16), 1, False), {})
Operator: aten._softmax_backward_data.default
cnt: 1, ((T([8, 4, 49, 49], f16), T([8, 4, 49, 49], f16), -1, f16), {})
cnt: 1, ((T([4, 1024], f32), T([4, 1024], f32), -1, f32), {})
cnt: 1, ((T([6, 3000], bf16), T([6, 3000], bf16), 1, bf16), {})
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
  std::size_t by_reference = 0;
  for (const LineOutcome& l : rep->lines) {
    // Lines with no input elements stay under any oracle budget, so even the all-reference run judges
    // them against the oracle; every other line must be judged the way `how` asks.
    const bool judged_as_asked = how == Judge::mixed || l.by_reference == (how == Judge::reference) ||
                                 (how == Judge::reference && l.passed && !l.by_reference);
    std::printf("%s %s %s line %zu%s%s%s\n", l.passed && judged_as_asked ? "PASS" : "FAIL", what, l.op.c_str(),
                l.source_line, l.passed ? "" : ": ", l.problem.c_str(),
                l.by_reference ? " (GPU reference)" : how == Judge::reference ? " (CPU oracle: no input elements?)" : "");
    ok &= l.passed && judged_as_asked;
    by_reference += l.by_reference;
  }
  if (how == Judge::reference && by_reference + 10 < rep->lines.size()) {
    std::printf("FAIL %s: only %zu of %zu lines judged against the GPU reference\n", what, by_reference,
                rep->lines.size());
    ok = false;
  }
  if (!rep->fatal.empty()) std::printf("FAIL %s: stopped: %s\n", what, rep->fatal.c_str());
  return ok;
}

// A host tensor of `dtype` holding `values` (converted as the CPU oracles store them), viewed with `shape`/`strides`.
HostTensor host_tensor(Dtype dtype, const std::vector<double>& values, std::vector<std::int64_t> shape,
                       std::vector<std::int64_t> strides) {
  HostTensor t = empty_tensor(dtype, {static_cast<std::int64_t>(values.size())});
  for (std::size_t i = 0; i < values.size(); ++i) t.store(static_cast<std::int64_t>(i), values[i]);
  t.shape = std::move(shape);
  t.strides = std::move(strides);
  return t;
}

struct OnDevice {
  std::vector<std::shared_ptr<void>> memory;
  kb::backendbench::aten::DView put(const HostTensor& t) {
    void* p = nullptr;
    cudaMalloc(&p, t.storage->size());
    cudaMemcpy(p, t.storage->data(), t.storage->size(), cudaMemcpyHostToDevice);
    memory.emplace_back(p, [](void* q) { cudaFree(q); });
    kb::backendbench::aten::DView v;
    v.dtype = t.dtype;
    v.shape = t.shape;
    v.strides = t.strides;
    v.offset = t.offset;
    v.base = p;
    return v;
  }
};

bool same_judgment(const char* what, const std::vector<HostTensor>& e, const std::vector<HostTensor>& a,
                   Verdict expect) {
  OnDevice dev;
  std::vector<kb::backendbench::aten::DView> de, da;
  for (const auto& t : e) de.push_back(dev.put(t));
  for (const auto& t : a) da.push_back(dev.put(t));
  Judgment host = judge(e, a);
  auto gpu = device_judge(de, da, nullptr);
  if (!gpu) {
    std::printf("FAIL device judge %s: %s\n", what, gpu.error().message.c_str());
    return false;
  }
  bool same = host.verdict == gpu->verdict && host.detail == gpu->detail &&
              std::memcmp(&host.max_abs_error, &gpu->max_abs_error, sizeof(double)) == 0 &&
              std::memcmp(&host.max_rel_error, &gpu->max_rel_error, sizeof(double)) == 0;
  bool ok = same && host.verdict == expect;
  std::printf("%s device judge %s: host %s \"%s\" (%g, %g), device %s \"%s\" (%g, %g)\n", ok ? "PASS" : "FAIL", what,
              verdict_name(host.verdict), host.detail.c_str(), host.max_abs_error, host.max_rel_error,
              verdict_name(gpu->verdict), gpu->detail.c_str(), gpu->max_abs_error, gpu->max_rel_error);
  return ok;
}

bool check_device_judge() {
  bool ok = true;
  const double nan = NAN, inf = INFINITY;
  // NaN pairs, equal infinities, an error just inside atol + rtol * |e|: passes.
  std::vector<double> ev = {1.0, nan, inf, -inf, 0.0, 100.0, -3.0, 0.5};
  std::vector<double> av = {1.015, nan, inf, -inf, 0.0099, 100.9, -3.04, 0.5};
  ok &= same_judgment("pass f32", {host_tensor(Dtype::f32, ev, {8}, {1})}, {host_tensor(Dtype::f32, av, {8}, {1})},
                      Verdict::passed);
  // NaN against a number, an infinity against a number, one value out of tolerance: the first failing element is reported.
  std::vector<double> bad = {1.0, 2.0, inf, -inf, 0.0, 102.0, -3.0, 0.5};
  ok &= same_judgment("fail f32", {host_tensor(Dtype::f32, ev, {8}, {1})}, {host_tensor(Dtype::f32, bad, {8}, {1})},
                      Verdict::incorrect_numerical);
  std::vector<double> late = ev;
  late[6] = -3.2;
  ok &= same_judgment("fail late f16", {host_tensor(Dtype::f16, ev, {8}, {1})}, {host_tensor(Dtype::f16, late, {8}, {1})},
                      Verdict::incorrect_numerical);
  // A transposed (strided) candidate against a contiguous expected: element order is row-major over the shape.
  std::vector<double> rows = {1, 2, 3, 4, 5, 6};        // [2, 3] contiguous
  std::vector<double> cols = {1, 4, 2, 5, 3, 6.5};      // the same [2, 3] stored column-major, last element off
  ok &= same_judgment("strided bf16", {host_tensor(Dtype::bf16, rows, {2, 3}, {3, 1})},
                      {host_tensor(Dtype::bf16, cols, {2, 3}, {1, 2})}, Verdict::incorrect_numerical);
  cols[5] = 6;
  ok &= same_judgment("strided pass bf16", {host_tensor(Dtype::bf16, rows, {2, 3}, {3, 1})},
                      {host_tensor(Dtype::bf16, cols, {2, 3}, {1, 2})}, Verdict::passed);
  // Integers and booleans, several outputs (the second fails), and a dtype mismatch.
  ok &= same_judgment("i64 + b8", {host_tensor(Dtype::i64, {5, -7, 1LL << 40}, {3}, {1}), host_tensor(Dtype::b8, {1, 0}, {2}, {1})},
                      {host_tensor(Dtype::i64, {5, -7, 1LL << 40}, {3}, {1}), host_tensor(Dtype::b8, {1, 1}, {2}, {1})},
                      Verdict::incorrect_numerical);
  ok &= same_judgment("dtype", {host_tensor(Dtype::f32, {1}, {1}, {1})}, {host_tensor(Dtype::f16, {1}, {1}, {1})},
                      Verdict::incorrect_dtype);
  // A large output (many blocks, atomics across them): one bad element near the end.
  std::vector<double> big(3'000'001);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = std::sin(static_cast<double>(i));
  std::vector<double> big_bad = big;
  big_bad[2'999'000] += 0.5;
  big_bad[2'999'999] += 0.7;
  ok &= same_judgment("large f32", {host_tensor(Dtype::f32, big, {3'000'001}, {1})},
                      {host_tensor(Dtype::f32, big_bad, {3'000'001}, {1})}, Verdict::incorrect_numerical);
  return ok;
}

// One line materialized on the host, and again with its tensors left to the device: same bytes.
bool check_device_materialize() {
  ParseReport line = parse_text(
      "Operator: aten.where.self\n"
      "cnt: 1, ((T([300, 7], f16, stride=(10, 1)), T([64, 33], bf16), T([5, 1000], f32, stride=(1, 5)), "
      "T([2000], f64), T([70, 3], b8), T([40], i64), T([1000], f16)), {})\n",
      "device-materialize");
  if (!line.ok()) {
    std::printf("FAIL device materialize: the line does not parse\n");
    return false;
  }
  const Args& args = line.trace.operators[0].lines[0].args;
  auto host = materialize_call("aten.where.self", args, 7, 3, false);
  auto deferred = materialize_call("aten.where.self", args, 7, 3, false, 100);
  if (!host || !deferred) {
    std::printf("FAIL device materialize: materialize_call\n");
    return false;
  }
  bool ok = true;
  std::size_t left_to_device = 0;
  for (std::size_t k = 0; k < args.positional.size(); ++k) {
    const HostTensor& h = *host->positional[k].tensor;
    const HostTensor& d = *deferred->positional[k].tensor;
    if (!d.device_fill) {  // small or integral: filled on the host either way
      ok &= d.storage && *d.storage == *h.storage;
      continue;
    }
    ++left_to_device;
    const std::size_t bytes = h.storage->size();
    void* p = nullptr;
    cudaMalloc(&p, bytes);
    auto st = device_fill(p, d.dtype, h.span(), *d.device_fill, nullptr);
    std::vector<std::byte> back(bytes);
    cudaMemcpy(back.data(), p, bytes, cudaMemcpyDeviceToHost);
    cudaFree(p);
    const bool same = st && back == *h.storage;
    std::printf("%s device materialize argument %zu (%s, %lld storage elements)\n", same ? "PASS" : "FAIL", k,
                dtype_abbrev(d.dtype), static_cast<long long>(h.span()));
    ok &= same;
  }
  if (left_to_device != 6) {
    std::printf("FAIL device materialize: %zu tensors left to the device, expected 6\n", left_to_device);
    ok = false;
  }
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
  ok &= check_device_judge();
  ok &= check_device_materialize();
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
