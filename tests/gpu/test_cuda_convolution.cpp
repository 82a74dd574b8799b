// kb's CUDA convolution (kernels/aten/convolution/cuda/) against the fp64 CPU
// oracle through `kb backendbench run --device cuda`'s runner
// (run_cuda_trace), with BackendBench's judge:
//  1. lines of every form the shared trace holds, at the trace's sizes where
//     the oracle is cheap and reduced otherwise: 1-D and 2-D, strided,
//     asymmetric and patch-embedding kernels, grouped, depthwise (with and
//     without a channel multiplier), transposed with and without
//     output_padding, channels-last and channel-sliced (gapped) inputs, with
//     and without bias, an empty batch, every output_mask pattern of the
//     backward; products small enough to run direct or per-block, and large
//     enough for 64 x 64 tiles with k split across blocks;
//     and beyond the trace: dilation, 3-D, bf16, f32 and f64 (f16/bf16 tiles
//     on tensor cores, f32 and f64 on the scalar tile);
//  2. a sample of the shared trace's own convolution lines (KB_SHARED_DIR),
//     when the file is there: the cheap ones against the CPU oracle, the
//     others against the GPU fp64 reference (the same kernels summing in fp64).
// One line printed per judged line. Exit codes: 0 all passed, 1 a failure,
// 77 skipped (no usable CUDA device).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "backendbench/run.hpp"
#include "backendbench/trace.hpp"

using namespace kb::backendbench;

namespace {

const char* const kLines = R"TRACE(Operator: aten.convolution.default
cnt: 1, ((T([1, 768, 512], f16, stride=(393216, 1, 768)), T([768, 1, 9], f16), None, [1], [4], [1], False, [0], 768), {})
cnt: 1, ((T([1, 768, 512], f16), T([384, 768, 1], f16), None, [1], [0], [1], False, [0], 1), {})
cnt: 1, ((T([2, 24, 50], f32), T([40, 12, 5], f32), T([40], f32), [3], [2], [2], False, [0], 2), {})
cnt: 1, ((T([4, 3, 33, 33], f16), T([32, 3, 3, 3], f16), None, [2, 2], [0, 0], [1, 1], False, [0, 0], 1), {})
cnt: 1, ((T([2, 128, 17, 17], f16), T([128, 128, 1, 7], f16), None, [1, 1], [0, 3], [1, 1], False, [0, 0], 1), {})
cnt: 1, ((T([2, 128, 17, 17], f16), T([96, 128, 7, 1], f16), None, [1, 1], [3, 0], [1, 1], False, [0, 0], 1), {})
cnt: 1, ((T([2, 3, 64, 64], f16), T([768, 3, 16, 16], f16), T([768], f16), [16, 16], [0, 0], [1, 1], False, [0, 0], 1), {})
cnt: 1, ((T([8, 64, 14, 14], f16, stride=(12544, 1, 896, 64)), T([64, 1, 3, 3], f16), T([64], f16), [1, 1], [1, 1], [1, 1], False, [0, 0], 64), {})
cnt: 1, ((T([2, 16, 12, 12], f16, stride=(13824, 1, 1152, 96)), T([16, 1, 7, 7], f16), T([16], f16), [1, 1], [3, 3], [1, 1], False, [0, 0], 16), {})
cnt: 1, ((T([2, 24, 9, 9], f16), T([48, 1, 3, 3], f16), None, [2, 2], [1, 1], [1, 1], False, [0, 0], 24), {})
cnt: 1, ((T([4, 256, 13, 13], f16), T([256, 128, 3, 3], f16), T([256], f16), [2, 2], [0, 0], [1, 1], False, [0, 0], 2), {})
cnt: 1, ((T([2, 96, 12, 12], f16), T([96, 16, 3, 3], f16), T([96], f16), [1, 1], [1, 1], [1, 1], False, [0, 0], 6), {})
cnt: 1, ((T([2, 64, 10, 10], f16, stride=(6400, 1, 640, 64)), T([128, 64, 3, 3], f16), T([128], f16), [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {})
cnt: 1, ((T([4, 64, 14, 14], f16, stride=(12544, 1, 896, 64)), T([128, 64, 2, 2], f16), T([128], f16), [2, 2], [0, 0], [1, 1], False, [0, 0], 1), {})
cnt: 1, ((T([1, 64, 16, 16], f16), T([64, 32, 3, 3], f16), T([32], f16), [2, 2], [1, 1], [1, 1], True, [1, 1], 1), {})
cnt: 1, ((T([2, 64, 8, 8], f16), T([64, 32, 4, 4], f16), None, [2, 2], [1, 1], [1, 1], True, [0, 0], 1), {})
cnt: 1, ((T([2, 48, 7, 9], f32), T([48, 8, 3, 3], f32), T([32], f32), [2, 3], [1, 0], [2, 1], True, [1, 2], 4), {})
cnt: 1, ((T([128, 120, 1, 1], f16), T([8, 120, 1, 1], f16), T([8], f16), [1, 1], [0, 0], [1, 1], False, [0, 0], 1), {})
cnt: 1, ((T([32, 1024, 1, 1], f16), T([64, 1024, 1, 1], f16), T([64], f16), [1, 1], [0, 0], [1, 1], False, [0, 0], 1), {})
cnt: 1, ((T([64, 1024, 1, 1], f16), T([128, 1024, 1, 1], f16), T([128], f16), [1, 1], [0, 0], [1, 1], False, [0, 0], 1), {})
cnt: 1, ((T([0, 256, 14, 14], f16), T([256, 256, 3, 3], f16), T([256], f16), [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {})
cnt: 1, ((T([3, 40, 11, 13], f16), T([72, 40, 3, 3], f16), T([72], f16), [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {})
cnt: 1, ((T([2, 16, 20, 20], f16), T([32, 16, 3, 3], f16), None, [1, 1], [2, 2], [2, 2], False, [0, 0], 1), {})
cnt: 1, ((T([2, 32, 12, 12], bf16), T([48, 32, 3, 3], bf16), T([48], bf16), [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {})
cnt: 1, ((T([2, 32, 15, 15], f32, stride=(7200, 1, 480, 32)), T([64, 8, 3, 3], f32), None, [2, 2], [1, 1], [1, 1], False, [0, 0], 4), {})
cnt: 1, ((T([2, 16, 9, 9], f64), T([16, 8, 3, 3], f64), T([8], f64), [2, 2], [1, 1], [1, 1], True, [1, 1], 1), {})
cnt: 1, ((T([2, 8, 6, 7, 8], f16), T([40, 8, 3, 3, 3], f16), T([40], f16), [1, 2, 1], [1, 1, 0], [1, 1, 2], False, [0, 0, 0], 1), {})
cnt: 1, ((T([2, 16, 4, 5, 3], f32), T([16, 4, 2, 3, 3], f32), None, [2, 1, 2], [0, 1, 1], [1, 1, 1], True, [1, 0, 1], 2), {})
Operator: aten.convolution_backward.default
cnt: 1, ((T([1, 96, 128], f16, stride=(12288, 1, 96)), T([1, 192, 128], f16), T([96, 192, 1], f16), [0], [1], [0], [1], False, [0], 1, [True, True, False]), {})
cnt: 1, ((T([1, 768, 512], f16), T([1, 768, 512], f16, stride=(393216, 1, 768)), T([768, 1, 9], f16), [0], [1], [4], [1], False, [0], 768, [True, True, False]), {})
cnt: 1, ((T([2, 40, 16], f32), T([2, 24, 50], f32), T([40, 12, 5], f32), [40], [3], [2], [2], False, [0], 2, [True, True, True]), {})
cnt: 1, ((T([4, 32, 8, 8], f16), T([4, 16, 17, 17], f16), T([32, 16, 3, 3], f16), [32], [2, 2], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True]), {})
cnt: 1, ((T([4, 32, 16, 16], f16), T([4, 3, 33, 33], f16), T([32, 3, 3, 3], f16), [0], [2, 2], [0, 0], [1, 1], False, [0, 0], 1, [False, True, False]), {})
cnt: 1, ((T([2, 96, 4, 4], f16), T([2, 3, 64, 64], f16), T([96, 3, 16, 16], f16), [96], [16, 16], [0, 0], [1, 1], False, [0, 0], 1, [False, True, True]), {})
cnt: 1, ((T([4, 64, 7, 7], f16), T([4, 32, 7, 7], f16), T([64, 32, 3, 3], f16), [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, False, False]), {})
cnt: 1, ((T([2, 128, 17, 17], f16), T([2, 96, 17, 17], f16), T([128, 96, 1, 7], f16), [0], [1, 1], [0, 3], [1, 1], False, [0, 0], 1, [True, True, False]), {})
cnt: 1, ((T([4, 64, 14, 14], f16, stride=(12544, 1, 896, 64)), T([4, 64, 14, 14], f16, stride=(12544, 1, 896, 64)), T([64, 1, 3, 3], f16), [64], [1, 1], [1, 1], [1, 1], False, [0, 0], 64, [True, True, True]), {})
cnt: 1, ((T([2, 16, 12, 12], f16, stride=(2304, 1, 192, 16)), T([2, 16, 12, 12], f16, stride=(13824, 1, 1152, 96)), T([16, 1, 7, 7], f16), [16], [1, 1], [3, 3], [1, 1], False, [0, 0], 16, [True, True, True]), {})
cnt: 1, ((T([2, 48, 5, 5], f16), T([2, 24, 9, 9], f16), T([48, 1, 3, 3], f16), [0], [2, 2], [1, 1], [1, 1], False, [0, 0], 24, [True, True, False]), {})
cnt: 1, ((T([2, 96, 6, 6], f16), T([2, 96, 13, 13], f16), T([96, 16, 3, 3], f16), [96], [2, 2], [0, 0], [1, 1], False, [0, 0], 6, [True, True, True]), {})
cnt: 1, ((T([2, 128, 7, 7], f16, stride=(6272, 1, 896, 128)), T([2, 64, 14, 14], f16, stride=(12544, 1, 896, 64)), T([128, 64, 2, 2], f16), [128], [2, 2], [0, 0], [1, 1], False, [0, 0], 1, [False, True, True]), {})
cnt: 1, ((T([2, 32, 16, 16], f16), T([2, 64, 8, 8], f16), T([64, 32, 4, 4], f16), [0], [2, 2], [1, 1], [1, 1], True, [0, 0], 1, [True, True, False]), {})
cnt: 1, ((T([1, 32, 32, 32], f16), T([1, 64, 16, 16], f16), T([64, 32, 3, 3], f16), [32], [2, 2], [1, 1], [1, 1], True, [1, 1], 1, [True, True, True]), {})
cnt: 1, ((T([8, 64, 14, 14], f16), T([8, 64, 14, 14], f16), T([64, 64, 3, 3], f16), [64], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True]), {})
cnt: 1, ((T([128, 8, 1, 1], f16), T([128, 120, 1, 1], f16), T([8, 120, 1, 1], f16), [8], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True]), {})
cnt: 1, ((T([32, 64, 1, 1], f16), T([32, 1024, 1, 1], f16), T([64, 1024, 1, 1], f16), [64], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True]), {})
cnt: 1, ((T([3, 72, 11, 13], f16), T([3, 40, 11, 13], f16), T([72, 40, 3, 3], f16), [72], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True]), {})
cnt: 1, ((T([2, 32, 20, 20], f16), T([2, 16, 20, 20], f16), T([32, 16, 3, 3], f16), [0], [1, 1], [2, 2], [2, 2], False, [0, 0], 1, [True, True, False]), {})
cnt: 1, ((T([2, 48, 12, 12], bf16), T([2, 32, 12, 12], bf16), T([48, 32, 3, 3], bf16), [48], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True]), {})
cnt: 1, ((T([2, 64, 8, 8], f32), T([2, 32, 15, 15], f32, stride=(7200, 1, 480, 32)), T([64, 8, 3, 3], f32), [0], [2, 2], [1, 1], [1, 1], False, [0, 0], 4, [True, True, False]), {})
cnt: 1, ((T([2, 8, 18, 18], f64), T([2, 16, 9, 9], f64), T([16, 8, 3, 3], f64), [8], [2, 2], [1, 1], [1, 1], True, [1, 1], 1, [True, True, True]), {})
cnt: 1, ((T([2, 40, 6, 4, 4], f16), T([2, 8, 6, 7, 8], f16), T([40, 8, 3, 3, 3], f16), [40], [1, 2, 1], [1, 1, 0], [1, 1, 2], False, [0, 0, 0], 1, [True, True, True]), {})
cnt: 1, ((T([2, 8, 9, 5, 6], f32), T([2, 16, 4, 5, 3], f32), T([16, 4, 2, 3, 3], f32), [0], [2, 1, 2], [0, 1, 1], [1, 1, 1], True, [1, 0, 1], 2, [True, True, False]), {})
cnt: 1, ((T([0, 32, 6, 6], f16), T([0, 16, 6, 6], f16), T([32, 16, 3, 3], f16), [32], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True]), {})
)TRACE";

// The text of each line of `text` (1-based, as ArgLine::line counts them).
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out{""};
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The call's tensors and scalars: the line without its "cnt: N, " and trailing ", {})".
std::string call_text(const std::vector<std::string>& lines, std::size_t at) {
  if (at >= lines.size()) return "?";
  std::string s = lines[at];
  if (auto p = s.find("(("); p != std::string::npos) s = s.substr(p);
  return s.size() > 220 ? s.substr(0, 217) + "..." : s;
}

bool run(const TraceFile& trace, const RunOptions& opt, CudaRunOptions copt, const char* what,
         const std::vector<std::string>& text) {
  copt.reps = 2;
  copt.warmup = 1;
  auto rep = run_cuda_trace(trace, opt, copt);
  if (!rep) {
    std::printf("FAIL %s: %s\n", what, rep.error().message.c_str());
    return false;
  }
  bool ok = rep->fatal.empty();
  for (const LineOutcome& l : rep->lines) {
    std::printf("%s %s %s line %zu %s: max abs error %.3g, max rel error %.3g, %.3f ms%s%s%s\n",
                l.passed ? "PASSED" : "FAIL", what, l.op.c_str(), l.source_line, call_text(text, l.source_line).c_str(),
                l.max_abs_error.value_or(-1), l.max_rel_error.value_or(-1), l.kb_ms,
                l.by_reference ? " (GPU fp64 reference)" : " (CPU oracle)", l.passed ? "" : ": ", l.problem.c_str());
    ok &= l.passed;
  }
  if (rep->lines.empty()) {
    std::printf("FAIL %s: no line ran\n", what);
    ok = false;
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
  ParseReport hand = parse_text(kLines, "convolution-lines");
  if (!hand.ok()) {
    std::printf("FAIL the test's lines do not parse: %s\n", hand.format_error(hand.errors[0]).c_str());
    return 1;
  }
  {
    CudaRunOptions copt;  // every line here is under the CPU oracle's default budget
    ok &= run(hand.trace, RunOptions{}, copt, "forms", lines_of(kLines));
  }
  const char* shared = std::getenv("KB_SHARED_DIR");
  std::string path = std::string(shared ? shared : "../shared") + "/backendbench/tritonbench-op-traces.txt";
  if (std::filesystem::exists(path)) {
    auto trace = parse_file(path);
    if (!trace) {
      std::printf("FAIL %s\n", trace.error().message.c_str());
      return 1;
    }
    std::string text;
    {
      std::FILE* f = std::fopen(path.c_str(), "rb");
      if (f) {
        char buf[1 << 16];
        for (std::size_t got; (got = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, got);
        std::fclose(f);
      }
    }
    RunOptions opt;
    opt.limit_per_op = 12;
    opt.ops = {"aten.convolution.default", "aten.convolution_backward.default"};
    CudaRunOptions copt;
    copt.oracle_flops = 3e8;  // larger lines: the GPU fp64 reference, keeping the run short
    copt.gpu_reference = true;
    ok &= run(*trace, opt, copt, "trace", lines_of(text));
  } else {
    std::printf("note: %s not found; trace lines skipped\n", path.c_str());
  }
  std::printf("%s\n", ok ? "all passed" : "FAILED");
  return ok ? 0 : 1;
}
