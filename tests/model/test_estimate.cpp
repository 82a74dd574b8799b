// kb estimate on a record and traces made here, against the numbers worked out by hand below.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "estimate/estimate.hpp"

namespace fs = std::filesystem;
using kb::estimate::Estimate;

namespace {

std::string line(const std::string& def, const std::string& axes, const std::string& solution, const std::string& status,
                 double latency, double reference, const std::string& hw = "GPU-A") {
  static int uuid = 0;
  std::string perf = status == "PASSED"
                         ? fmt::format(R"(, "correctness": {{"max_relative_error": 0.0, "max_absolute_error": 0.0}}, "performance": {{"latency_ms": {}, "reference_latency_ms": {}, "speedup_factor": {}}})",
                                       latency, reference, latency > 0 ? reference / latency : 0.0)
                         : status == "INCORRECT_NUMERICAL"
                               ? R"(, "correctness": {"max_relative_error": 1.0, "max_absolute_error": 1.0})"
                               : "";
  return fmt::format(R"({{"definition": "{}", "workload": {{"uuid": "u{}", "axes": {{{}}}, "inputs": {{}}}}, "solution": "{}", )"
                     R"("evaluation": {{"status": "{}", "environment": {{"hardware": "{}"}}, "timestamp": "2025-01-01T00:00:00"{}}}}})",
                     def, ++uuid, axes, solution, status, hw, perf);
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / fmt::format("kb_estimate_{}", ::getpid());
    fs::remove_all(path);
    fs::create_directories(path / "a" / "b");
  }
  ~TempDir() { fs::remove_all(path); }
  void write(const std::string& name, const std::vector<std::string>& lines) {
    std::ofstream f(path / name);
    for (const auto& l : lines) f << l << "\n";
  }
};

kb::model::CallingRecord record() {
  const char* text = R"({"model": "org/m", "framework": "vLLM", "step": "decode", "kernels": [
    {"id": "gemm_a", "count": 32, "axes": {"M": 32}},
    {"id": "norm", "count": 65, "axes": {"batch_size": 48}},
    {"id": "attn", "count": 2, "axes": {"B": 1}},
    {"id": "sampler", "count": 1, "axes": {"B": 1}}]})";
  auto r = kb::model::read_calling_record(text, "r.json");
  REQUIRE(r.ok());
  return *r;
}

// The traces: two files, one in a nested folder, and lines of an unrelated definition.
void write_traces(TempDir& dir) {
  dir.write("a/gemm.jsonl", {
      line("gemm_a", R"("M": 32)", "s1", "PASSED", 0.010, 0.020),
      line("gemm_a", R"("M": 32)", "s2", "PASSED", 0.008, 0.022),
      line("gemm_a", R"("M": 32)", "s2", "PASSED", 0.009, 0.021),   // s2's best at M=32 stays 0.008
      line("gemm_a", R"("M": 32)", "s3", "PASSED", 0.005, 0.021),   // fastest, but also failed at M=32:
      line("gemm_a", R"("M": 32)", "s3", "INCORRECT_NUMERICAL", 0, 0),  // out there
      line("gemm_a", R"("M": 1024)", "s1", "PASSED", 0.5, 1.0),
      line("other", R"("M": 32)", "s1", "PASSED", 9.0, 9.0),
  });
  dir.write("a/b/norm.jsonl", {
      line("norm", R"("batch_size": 32)", "s1", "PASSED", 0.002, 0.004),
      line("norm", R"("batch_size": 64)", "s1", "PASSED", 0.003, 0.006),
      line("sampler", R"("B": 1)", "s1", "PASSED", 0.0, 0.0),  // untimed (kb bench --no-time)
      "",
  });
}

}  // namespace

TEST_CASE("the step estimate equals the one worked out by hand") {
  TempDir dir;
  write_traces(dir);
  auto e = kb::estimate::estimate(record(), {dir.path.string()}, {});
  REQUIRE_MESSAGE(e.ok(), e.error().message);
  CHECK(e->model == "org/m");
  CHECK(e->framework == "vLLM");
  CHECK(e->step == "decode");
  CHECK(e->hardware == "GPU-A");
  CHECK(e->baseline == "reference");
  CHECK(e->records == 9);  // every line of the record's definitions with an evaluation
  REQUIRE(e->kernels.size() == 4);

  // gemm_a at M=32, exact. Baseline: the median of the PASSED records' reference latencies
  // {0.020, 0.022, 0.021, 0.021} = 0.021. Best: s3 is out (it also failed there), s2's best 0.008.
  const auto& g = e->kernels[0];
  CHECK(g.measured);
  CHECK(g.exact);
  CHECK(g.distance == 0);
  CHECK(g.baseline_ms == doctest::Approx(0.021));
  CHECK(g.best_solution == "s2");
  CHECK(g.best_ms == doctest::Approx(0.008));
  CHECK(g.baseline_step_ms == doctest::Approx(0.672));  // 32 x 0.021
  CHECK(g.best_step_ms == doctest::Approx(0.256));      // 32 x 0.008
  CHECK(g.speedup == doctest::Approx(2.625));

  // norm at batch 48: batch 64 is nearer than 32 (|log2 48 - 6| = 0.415 < |log2 48 - 5| = 0.585).
  const auto& n = e->kernels[1];
  CHECK(n.measured);
  CHECK(!n.exact);
  CHECK(n.distance == doctest::Approx(6 - std::log2(48.0)));
  REQUIRE(n.matched_axes.size() == 1);
  CHECK(n.matched_axes[0] == std::pair<std::string, std::int64_t>{"batch_size", 64});
  CHECK(n.baseline_step_ms == doctest::Approx(0.39));   // 65 x 0.006
  CHECK(n.best_step_ms == doctest::Approx(0.195));      // 65 x 0.003

  CHECK(!e->kernels[2].measured);
  CHECK(e->kernels[2].reason == "no trace records of this definition");
  CHECK(!e->kernels[3].measured);
  CHECK(e->kernels[3].reason == "no timed PASSED record");

  // The step: 1.062 ms against 0.451 ms.
  CHECK(e->measured == 2);
  CHECK(e->baseline_ms == doctest::Approx(1.062));
  CHECK(e->best_ms == doctest::Approx(0.451));
  CHECK(e->speedup == doctest::Approx(1.062 / 0.451));
  CHECK(g.baseline_share == doctest::Approx(0.672 / 1.062));
  CHECK(g.best_share == doctest::Approx(0.256 / 0.451));
  CHECK(n.baseline_share + g.baseline_share == doctest::Approx(1.0));

  // The JSON carries the same numbers.
  std::string json = kb::estimate::to_json(*e, false);
  CHECK(json.find(R"("kernels_measured":2,"kernels_total":4)") != std::string::npos);
  CHECK(json.find(R"("id":"attn","count":2,"axes":{"B":1},"measured":false,"reason":"no trace records of this definition")") !=
        std::string::npos);
  CHECK(json.find(R"("matched_axes":{"batch_size":64},"exact":false)") != std::string::npos);
}

TEST_CASE("a named baseline solution replaces the records' reference latency") {
  TempDir dir;
  write_traces(dir);
  kb::estimate::Options opt;
  opt.baseline = "s1";
  auto e = kb::estimate::estimate(record(), {(dir.path / "a" / "gemm.jsonl").string(), (dir.path / "a" / "b").string()}, opt);
  REQUIRE_MESSAGE(e.ok(), e.error().message);
  CHECK(e->baseline == "s1");
  // gemm_a: s1 0.010 against s2 0.008; norm at 64: s1 alone, 0.003 both ways.
  CHECK(e->kernels[0].baseline_ms == doctest::Approx(0.010));
  CHECK(e->baseline_ms == doctest::Approx(32 * 0.010 + 65 * 0.003));
  CHECK(e->best_ms == doctest::Approx(32 * 0.008 + 65 * 0.003));
  CHECK(e->speedup == doctest::Approx(0.515 / 0.451));
  opt.baseline = "s9";
  auto none = kb::estimate::estimate(record(), {dir.path.string()}, opt);
  REQUIRE(none.ok());
  CHECK(none->measured == 0);
  CHECK(none->speedup == 0);
  CHECK(none->kernels[0].reason == "no workload where the baseline s9 and a solution both PASSED, timed");
}

TEST_CASE("records of several devices are refused unless one is chosen") {
  TempDir dir;
  write_traces(dir);
  dir.write("b.jsonl", {line("gemm_a", R"("M": 32)", "s1", "PASSED", 0.001, 0.002, "GPU-B"),
                        line("attn", R"("B": 1)", "s1", "PASSED", 0.001, 0.002, "GPU-B")});
  auto mixed = kb::estimate::estimate(record(), {dir.path.string()}, {});
  REQUIRE(!mixed.ok());
  CHECK(mixed.error().code == kb::Code::invalid_argument);
  CHECK(mixed.error().message ==
        "the traces come from 2 devices (GPU-A, GPU-B): timings of different GPUs do not add up to one step; choose "
        "one (--hardware NAME)");
  kb::estimate::Options opt;
  opt.hardware = "GPU-A";
  auto a = kb::estimate::estimate(record(), {dir.path.string()}, opt);
  REQUIRE(a.ok());
  CHECK(a->baseline_ms == doctest::Approx(1.062));
  CHECK(a->kernels[2].reason == "no records on GPU-A (1 on other devices)");
}

TEST_CASE("bad inputs name the path or the line") {
  TempDir dir;
  auto missing = kb::estimate::estimate(record(), {(dir.path / "nope").string()}, {});
  REQUIRE(!missing.ok());
  CHECK(missing.error().code == kb::Code::io_error);
  CHECK(missing.error().message == (dir.path / "nope").string() + ": no such file or folder");
  dir.write("bad.jsonl", {line("gemm_a", R"("M": 32)", "s1", "PASSED", 0.01, 0.02), R"({"definition": "gemm_a", "workload": 1})"});
  auto bad = kb::estimate::estimate(record(), {dir.path.string()}, {});
  REQUIRE(!bad.ok());
  CHECK(bad.error().message.rfind((dir.path / "bad.jsonl").string() + ":2: workload: expected an object", 0) == 0);
}

TEST_CASE("a call with no axes takes the first recorded workload and says it is not exact") {
  TempDir dir;
  write_traces(dir);
  auto r = kb::model::read_calling_record(R"({"model": "m", "framework": "SGLang", "kernels": [{"id": "gemm_a", "count": 3}]})", "r");
  REQUIRE(r.ok());
  auto e = kb::estimate::estimate(*r, {dir.path.string()}, {});
  REQUIRE(e.ok());
  REQUIRE(e->kernels[0].measured);
  CHECK(!e->kernels[0].exact);
  CHECK(e->kernels[0].matched_axes[0].second == 32);
  // A call naming an axis the records lack matches nothing, and says which.
  auto q = kb::model::read_calling_record(R"({"model": "m", "framework": "SGLang", "kernels": [{"id": "gemm_a", "count": 3, "axes": {"K": 5}}]})", "r");
  auto f = kb::estimate::estimate(*q, {dir.path.string()}, {});
  REQUIRE(f.ok());
  CHECK(f->kernels[0].reason == "the recorded workloads have no axis \"K\"");
}
