// The measurement record: the one writer and reader of performance.extra,
// the producers that fill it from kb's timers, and the table cells.
#include <doctest/doctest.h>

#include <string>

#include "harness/cupti_report.hpp"
#include "harness/measurement.hpp"
#include "harness/timing_report.hpp"
#include "json/json.hpp"
#include "schema/io.hpp"

namespace {

// Two JSON texts hold the same value: objects with the same keys (in any
// order), arrays element by element, numbers equal whether written as
// integers or not.
bool same_json(const kb::json::Element& a, const kb::json::Element& b) {
  using T = simdjson::dom::element_type;
  auto number = [](const kb::json::Element& e) { return e.is_int64() || e.is_uint64() || e.is_double(); };
  if (number(a) && number(b)) return double(a.get_double()) == double(b.get_double());
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case T::OBJECT: {
      kb::json::Object oa = a.get_object(), ob = b.get_object();
      if (oa.size() != ob.size()) return false;
      for (auto [k, v] : oa) {
        kb::json::Element w;
        if (ob.at_key(k).get(w) != simdjson::SUCCESS || !same_json(v, w)) return false;
      }
      return true;
    }
    case T::ARRAY: {
      kb::json::Array xa = a.get_array(), xb = b.get_array();
      if (xa.size() != xb.size()) return false;
      for (std::size_t i = 0; i < xa.size(); ++i)
        if (!same_json(xa.at(i), xb.at(i))) return false;
      return true;
    }
    default: return kb::json::minified(a) == kb::json::minified(b);
  }
}

bool same_json(const std::string& a, const std::string& b) {
  auto da = kb::json::parse(a, "a");
  auto db = kb::json::parse(b, "b");
  REQUIRE(da);
  REQUIRE(db);
  return same_json(da->root(), db->root());
}

kb::Measurement full() {
  kb::Measurement m;
  m.median_ms = 0.3094;
  m.cuda_device = 1;
  m.pci_bus_id = "0000:1a:00.0";
  m.timing = kb::TimingMethod::cuda_events;
  m.worker = true;
  m.l2_flushed = true;
  m.input_sets = 3;
  m.rotations_checked = 3;
  m.stream_check = kb::StreamCheck::inconclusive;
  m.graph = true;
  m.samples = 432;
  m.min_ms = 0.3072;
  m.max_ms = 0.3171;
  m.mean_ms = 0.3101;
  m.rel_noise = 0.0049;
  m.sm_clock_mhz = {{1980, 1755}};
  m.sm_clock_max_mhz = 1980;
  m.sm_clock_lowest_kept_mhz = 1512;
  m.throttled = true;
  m.throttled_samples_set_aside = 7;
  m.throttle_reasons = "sw_power_cap, hw_slowdown";
  m.bytes = 507510784;
  m.achieved_gbs = 1640.26;
  m.copy_bandwidth_gbs = 4281.5;
  m.fraction_of_copy_bandwidth = 0.3831;
  m.flops = 240518168576;
  m.achieved_tflops = 777.35;
  m.mma_bf16_tflops = 1202.8;
  m.fraction_of_mma_bf16 = 0.6463;
  m.cost_basis = kb::CostBasis::upper_bound;
  m.empty_kernel_ms = 0.00272;
  m.one_read_kernel_ms = 0.0032;
  m.implausible = "faster than \"copy\"";
  m.l2_flush = kb::L2FlushMode::clean;
  m.judge_s = 1.25;
  m.timing_s = 0.5;
  m.cupti_kernel_ms = 0.301;
  m.cupti_min_ms = 0.3;
  m.cupti_max_ms = 0.305;
  m.cupti_samples = 20;
  m.cupti_kernels_per_call = 2;
  m.cupti_graph = true;
  m.cupti_error = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES";
  m.samples_ms = {0.3072, 0.31, 0.3171};
  m.other = {{"tool", R"({"name":"x","v":[1,2]})"}, {"note", R"("kept")"}};
  return m;
}

// A valid PASSED trace whose performance is `p`.
kb::Trace trace_with(const kb::Performance& p) {
  auto t = kb::read_trace(
      R"({"definition":"d","workload":{"uuid":"u","axes":{"T":4},"inputs":{"x":{"type":"random"}}},"solution":"s",)"
      R"("evaluation":{"status":"PASSED","environment":{"hardware":"H200","libs":{}},)"
      R"("timestamp":"2026-01-01T00:00:00.000Z","log":"","correctness":{"max_relative_error":0.0,)"
      R"("max_absolute_error":0.0},"performance":{"latency_ms":1.0,"reference_latency_ms":0.0,"speedup_factor":0.0}}})",
      "base");
  REQUIRE_MESSAGE(t, (t.ok() ? std::string() : t.error().message));
  t->evaluation->performance = p;
  return *t;
}

// A trace line kb bench wrote on an H200 (kb_cuda_gemm, in-process CUDA
// timing): the key set and order of its time, in-process spelling of stream_check.
const char* kGpuTraceLine = R"({"definition":"gemm_n8192_k28672","workload":{"uuid":"0c24778f-565d-4e00-96a6-a65afbab073e","axes":{"M":512},"inputs":{"A":{"type":"random"},"B":{"type":"random"}}},"solution":"kb_cuda_gemm","evaluation":{"status":"PASSED","environment":{"hardware":"NVIDIA H200","libs":{"kb":"0.1.0","cuda_runtime":"13.0","cuda_driver":"13.0","cublasLt":"13.1.0"}},"timestamp":"2026-11-28T18:37:10.820Z","log":"seed=27490 trials=1 atol=0.01 rtol=0.01 required_matched_ratio=1\nreference: kb GPU oracle (fp32 CUDA cores)\nstream check: outputs untouched while kb's stream was held (work on the given stream)\ntiming: CUDA events, 432 samples (CUDA graph replay, batches of 16), median 0.309408 ms [min 0.307168, max 0.317088], noise 0.49%, SM clock 1980->1980 MHz of 1980 (THROTTLED)\nanti-gaming: 1 rotations re-checked after timing\n","correctness":{"max_relative_error":4.6817834770204465,"max_absolute_error":0.5,"extra":{"mismatched":0,"total":4194304,"trials_run":1}},"performance":{"latency_ms":0.3094080090522766,"reference_latency_ms":0.0,"speedup_factor":0.0,"extra":{"cuda_device":0,"pci_bus_id":"0000:00:06.0","timing":"cuda_events","graph":true,"samples":432,"min_ms":0.30716800689697266,"max_ms":0.3170880079269409,"rel_noise":0.004925626892215898,"l2_flushed":true,"input_sets":1,"sm_clock_mhz":[1980,1980],"sm_clock_max_mhz":1980,"sm_clock_lowest_kept_mhz":0,"throttled":true,"throttled_samples_set_aside":0,"throttle_reasons":"sw_power_cap","bytes":507510784,"achieved_gbs":1640.2638883024276,"copy_bandwidth_gbs":4281.540474233454,"fraction_of_copy_bandwidth":0.38310133891612747,"flops":240518168576,"achieved_tflops":777.3495240563175,"mma_bf16_tflops":1202.8474370790866,"empty_kernel_ms":0.0027199999894946814,"one_read_kernel_ms":0.0031999999191612005,"rotations_checked":1,"stream_check":true,"implausible":""}}}})";

}  // namespace

TEST_CASE("a full record goes through the writer and the reader unchanged") {
  const kb::Measurement m = full();
  const std::string extra = kb::write_extra(m);
  auto back = kb::read_extra(extra, "test", "extra");
  REQUIRE_MESSAGE(back, (back.ok() ? std::string() : back.error().message));
  kb::Measurement expected = m;
  expected.median_ms = 0;  // not in extra
  CHECK(*back == expected);
  CHECK(kb::write_extra(*back) == extra);

  // Through a Performance and a whole trace line, the median too.
  kb::Performance perf;
  perf.reference_latency_ms = 1.5;
  kb::record(m, perf);
  CHECK(perf.latency_ms == m.median_ms);
  CHECK(perf.reference_latency_ms == 1.5);
  auto t = kb::read_trace(kb::to_json(trace_with(perf)), "line");
  REQUIRE_MESSAGE(t, (t.ok() ? std::string() : t.error().message));
  auto again = kb::read_measurement(*t, "x.jsonl:1");
  REQUIRE(again);
  REQUIRE(again->has_value());
  CHECK(**again == m);
}

TEST_CASE("a minimal CPU record: the fields not measured stay absent, not zero") {
  kb::Measurement m;
  kb::record_wall_clock(m, {0.5, 0.25, 1.0, 0.75});
  kb::record_cost(m, kb::CallCost{1e6, 0});
  CHECK(m.timing == kb::TimingMethod::wall_clock);
  CHECK(m.median_ms == doctest::Approx(0.625));
  CHECK(*m.samples == 4);
  CHECK(*m.min_ms == 0.25);
  CHECK(*m.max_ms == 1.0);
  CHECK(*m.mean_ms == doctest::Approx(0.625));
  CHECK(*m.rel_noise == doctest::Approx(0.3227486 / 0.625).epsilon(1e-6));  // sample stdev / mean
  CHECK(*m.achieved_gbs == doctest::Approx(1e6 / 0.625e-3 / 1e9));
  const std::string extra = kb::write_extra(m);
  for (const char* absent : {"sm_clock", "throttle", "cupti", "graph", "l2_flush", "copy_bandwidth", "mma",
                             "implausible", "cuda_device", "worker", "samples_ms"}) {
    CAPTURE(absent);
    CHECK(extra.find(absent) == std::string::npos);
  }
  auto back = kb::read_extra(extra, "test", "extra");
  REQUIRE(back);
  kb::Measurement expected = m;
  expected.median_ms = 0;
  CHECK(*back == expected);

  // Nothing but the median: no extra at all, and the same record read back.
  kb::Measurement only;
  only.median_ms = 0.125;
  kb::Performance perf;
  kb::record(only, perf);
  CHECK(!perf.extra);
  auto r = kb::read_measurement(trace_with(perf), "x");
  REQUIRE(r);
  REQUIRE(r->has_value());
  CHECK(**r == only);
  // No performance (not PASSED, or not timed): no record.
  kb::Trace bare = trace_with(perf);
  bare.evaluation->performance.reset();
  auto none = kb::read_measurement(bare, "x");
  REQUIRE(none);
  CHECK(!none->has_value());
}

TEST_CASE("a trace line kb wrote parses into the record and renders the same value") {
  auto t = kb::read_trace(kGpuTraceLine, "traces/gemm.jsonl:1");
  REQUIRE(t);
  auto m = kb::read_measurement(*t, "traces/gemm.jsonl:1");
  REQUIRE_MESSAGE(m, (m.ok() ? std::string() : m.error().message));
  REQUIRE(m->has_value());
  const kb::Measurement& r = **m;
  CHECK(r.median_ms == t->evaluation->performance->latency_ms);
  CHECK(r.other.empty());  // every key known
  CHECK(*r.samples == 432);
  CHECK(*r.sm_clock_mhz == std::pair<std::uint64_t, std::uint64_t>{1980, 1980});
  CHECK(*r.throttle_reasons == "sw_power_cap");
  CHECK(*r.stream_check == kb::StreamCheck::same_stream);  // written `true` in-process
  CHECK(kb::latency_cell(r) == "0.3094*");
  CHECK(kb::achieved_cell(r) == "38% copy");
  kb::Performance p = *t->evaluation->performance;
  kb::record(r, p);
  // Every key the same value, but stream_check's spelling.
  std::string original = *t->evaluation->performance->extra;
  const std::string was = R"("stream_check":true)";
  const auto at = original.find(was);
  REQUIRE(at != std::string::npos);
  original.replace(at, was.size(), R"("stream_check":"same_stream")");
  CHECK_MESSAGE(same_json(*p.extra, original), *p.extra);
  CHECK(p.latency_ms == t->evaluation->performance->latency_ms);
}

TEST_CASE("the keys kb writes today, in their order, come back byte for byte") {
  // An outside CUDA solution timed in kb-worker with --cupti.
  const std::string worker_gpu =
      R"({"cuda_device":0,"pci_bus_id":"0000:00:06.0","timing":"cuda_events","worker":true,"l2_flushed":true,)"
      R"("input_sets":3,"rotations_checked":3,"stream_check":"same_stream","graph":true,"samples":432,)"
      R"("min_ms":0.30716800689697266,"max_ms":0.3170880079269409,"mean_ms":0.3101,"rel_noise":0.004925626892215898,)"
      R"("sm_clock_mhz":[1980,1980],"sm_clock_max_mhz":1980,"sm_clock_lowest_kept_mhz":1755,"throttled":false,)"
      R"("throttled_samples_set_aside":16,"throttle_reasons":"sw_power_cap","bytes":507510784.5,)"
      R"("achieved_gbs":1640.2638883024276,"copy_bandwidth_gbs":4281.540474233454,)"
      R"("fraction_of_copy_bandwidth":0.38310133891612747,"flops":240518168576.5,"achieved_tflops":777.3495240563175,)"
      R"("mma_bf16_tflops":1202.8474370790866,"fraction_of_mma_bf16":0.6462,"cost_basis":"exact",)"
      R"("empty_kernel_ms":0.0027199999894946814,)"
      R"("one_read_kernel_ms":0.0031999999191612005,"implausible":"","l2_flush":"clean","judge_s":0.8125,)"
      R"("timing_s":0.25,"cupti_kernel_ms":0.301,)"
      R"("cupti_min_ms":0.3,"cupti_max_ms":0.305,"cupti_samples":20,"cupti_kernels_per_call":1,"cupti_graph":true})";
  // An outside CPU solution: wall clock in the worker; CUPTI could not record.
  const std::string worker_cpu =
      R"({"timing":"wall_clock","worker":true,"l2_flushed":false,"input_sets":3,"rotations_checked":3,)"
      R"("stream_check":"not_checked","samples":12,"min_ms":0.0125,"max_ms":0.5,"bytes":4096.5,)"
      R"("achieved_gbs":0.25,"flops":0.5,"achieved_tflops":0.00015,"cupti":"CUPTI is not available"})";
  for (const std::string& text : {worker_gpu, worker_cpu}) {
    auto m = kb::read_extra(text, "test", "extra");
    REQUIRE_MESSAGE(m, (m.ok() ? std::string() : m.error().message));
    CHECK(m->other.empty());
    CHECK(kb::write_extra(*m) == text);
  }
}

TEST_CASE("keys kb does not know are kept, in order, after its own") {
  auto m = kb::read_extra(R"({"flashinfer":{"a":[1,2.5]},"samples":3,"z":null,"flashinfer":"again"})", "t", "extra");
  REQUIRE(m);
  REQUIRE(m->other.size() == 2);
  CHECK(m->other[0] == std::pair<std::string, std::string>{"z", "null"});
  CHECK(m->other[1] == std::pair<std::string, std::string>{"flashinfer", R"("again")"});
  CHECK(kb::write_extra(*m) == R"({"samples":3,"z":null,"flashinfer":"again"})");
}

TEST_CASE("malformed extra: an error naming the file and the path") {
  auto fails = [](const std::string& text, kb::Code code, const std::string& message) {
    CAPTURE(text);
    auto m = kb::read_extra(text, "traces/x.jsonl:4", "evaluation.performance.extra");
    REQUIRE(!m);
    CHECK(m.error().code == code);
    CHECK_MESSAGE(m.error().message.find(message) == 0, m.error().message);
  };
  fails("{\"samples\": 3", kb::Code::parse_error, "traces/x.jsonl:4: evaluation.performance.extra: invalid JSON");
  fails("[1]", kb::Code::invalid_data, "traces/x.jsonl:4: evaluation.performance.extra: expected an object, got array");
  fails(R"({"samples":-3})", kb::Code::invalid_data,
        "traces/x.jsonl:4: evaluation.performance.extra.samples: expected a non-negative integer, got integer -3");
  fails(R"({"samples":1.5})", kb::Code::invalid_data, "traces/x.jsonl:4: evaluation.performance.extra.samples: expected");
  fails(R"({"min_ms":"fast"})", kb::Code::invalid_data,
        "traces/x.jsonl:4: evaluation.performance.extra.min_ms: expected a number, got string");
  fails(R"({"sm_clock_mhz":[1980]})", kb::Code::invalid_data,
        "traces/x.jsonl:4: evaluation.performance.extra.sm_clock_mhz: expected [before, after]");
  fails(R"({"timing":"sundial"})", kb::Code::invalid_data,
        "traces/x.jsonl:4: evaluation.performance.extra.timing: expected one of \"cuda_events\" \"wall_clock\"");
  fails(R"({"stream_check":false})", kb::Code::invalid_data, "traces/x.jsonl:4: evaluation.performance.extra.stream_check");
  fails(R"({"graph":1})", kb::Code::invalid_data,
        "traces/x.jsonl:4: evaluation.performance.extra.graph: expected true or false, got integer 1");
  fails(R"({"samples_ms":[0.5,"x"]})", kb::Code::invalid_data,
        "traces/x.jsonl:4: evaluation.performance.extra.samples_ms[1]: expected a number, got string");
  fails(R"({"cupti":3})", kb::Code::invalid_data, "traces/x.jsonl:4: evaluation.performance.extra.cupti: expected a string");

  // From a trace line, the path starts at the trace's evaluation.
  kb::Performance p;
  p.latency_ms = 1;
  p.extra = R"({"cuda_device":"zero"})";
  auto m = kb::read_measurement(trace_with(p), "traces/x.jsonl:9");
  REQUIRE(!m);
  CHECK(m.error().message ==
        "traces/x.jsonl:9: evaluation.performance.extra.cuda_device: expected an integer, got string \"zero\"");
}

TEST_CASE("the timer's figures: the CUDA timer, the cost and the ceilings, derived right") {
  kb::cuda::TimingResult t;
  t.median_ms = 0.5;
  t.min_ms = 0.25;
  t.max_ms = 2.0;
  t.mean_ms = 0.6;
  t.rel_noise = 0.01;
  t.samples = 40;
  t.graph = true;
  t.sm_clock_mhz_before = 1980, t.sm_clock_mhz_after = 1755, t.sm_clock_mhz_max = 1980;
  t.sm_clock_mhz_lowest_kept = 1512;
  t.throttled = true;
  t.throttled_samples_set_aside = 7;
  t.throttle_reasons = 0x4;  // NVML's software power cap
  t.l2_flushed = true;
  t.l2_flush = kb::cuda::L2Flush::clean;
  kb::cuda::Ceilings c;
  c.copy_bandwidth_gbs = 8000;
  c.empty_kernel_ms = 0.003;
  c.one_read_kernel_ms = 0.004;
  kb::Measurement m;
  kb::record_gpu_timer(m, t);
  kb::record_cost(m, kb::CallCost{2e9, 4e12});
  kb::record_ceilings(m, c, 900, "faster than \"copy\"");
  CHECK(m.timing == kb::TimingMethod::cuda_events);
  CHECK(m.median_ms == 0.5);
  CHECK(*m.samples == 40);
  CHECK(*m.mean_ms == 0.6);
  CHECK(*m.throttled_samples_set_aside == 7);
  CHECK(*m.sm_clock_lowest_kept_mhz == 1512);
  CHECK(*m.sm_clock_mhz == std::pair<std::uint64_t, std::uint64_t>{1980, 1755});
  CHECK(*m.achieved_gbs == doctest::Approx(4000));  // 2e9 bytes in 0.5 ms
  CHECK(*m.fraction_of_copy_bandwidth == doctest::Approx(0.5));
  CHECK(*m.achieved_tflops == doctest::Approx(8000));  // 4e12 flops in 0.5 ms
  CHECK(*m.mma_bf16_tflops == 900);
  CHECK(*m.fraction_of_mma_bf16 == doctest::Approx(8000.0 / 900));
  CHECK(*m.one_read_kernel_ms == doctest::Approx(0.004));
  CHECK(*m.throttle_reasons == "sw_power_cap");
  CHECK(*m.l2_flush == kb::L2FlushMode::clean);
  CHECK(*m.implausible == "faster than \"copy\"");
  CHECK(kb::latency_cell(m) == "0.5000*");
  CHECK(kb::noise_cell(m) == "1.0%");
  CHECK(kb::achieved_cell(m) == "889% mma");
  CHECK(kb::cupti_cell(m) == "-");
  const std::string extra = kb::write_extra(m);
  CHECK(extra.find(R"("implausible":"faster than \"copy\"")") != std::string::npos);
  CHECK(extra.find(R"("sm_clock_mhz":[1980,1755])") != std::string::npos);
  CHECK(extra.find(R"("l2_flush":"clean")") != std::string::npos);

  // Ceilings not measured (0): absent, and no division by zero.
  kb::Measurement cold;
  kb::cuda::TimingResult zero;
  kb::record_gpu_timer(cold, zero);
  kb::record_cost(cold, kb::CallCost{2e9, 0});
  kb::record_ceilings(cold, kb::cuda::Ceilings{}, 0, "");
  CHECK(*cold.achieved_gbs == 0);
  CHECK(!cold.copy_bandwidth_gbs);
  CHECK(!cold.fraction_of_copy_bandwidth);
  CHECK(!cold.mma_bf16_tflops);
  CHECK(*cold.l2_flush == kb::L2FlushMode::none);
  CHECK(kb::achieved_cell(cold) == "-");
}

TEST_CASE("CUPTI's kernel time, or the reason it could not record, in the record and the log") {
  kb::cuda::KernelTimingResult kt;
  kt.median_ms = 0.25;
  kt.min_ms = 0.24;
  kt.max_ms = 0.3;
  kt.samples = 20;
  kt.kernels_per_call = 2;
  kt.graph = true;
  kb::Measurement m;
  const std::string line = kb::record_cupti(m, kt);
  CHECK(line == "CUPTI kernel time: median 0.250000 ms of 20 cold calls (2 kernel(s) a call, each replayed from a CUDA graph)\n");
  CHECK(*m.cupti_kernel_ms == 0.25);
  CHECK(*m.cupti_kernels_per_call == 2);
  CHECK(*m.cupti_graph);
  CHECK(!m.cupti_error);
  CHECK(kb::cupti_cell(m) == "0.2500");

  kb::Measurement no;
  const std::string why = kb::record_cupti(no, kb::make_error(kb::Code::unsupported, "no CUPTI here"));
  CHECK(why == "CUPTI kernel time: not measured: no CUPTI here\n");
  CHECK(*no.cupti_error == "no CUPTI here");
  CHECK(!no.cupti_kernel_ms);
  CHECK(kb::write_extra(no) == R"({"cupti":"no CUPTI here"})");
  CHECK(kb::cupti_cell(no) == "n/a");
}

TEST_CASE("correctness.extra: the judge's counts, the keys of each kind of judging") {
  CHECK(kb::write_judge_counts(kb::JudgeCounts::elementwise(3, 4096, 2)) ==
        R"({"mismatched":3,"total":4096,"trials_run":2})");
  kb::JudgeCounts sampled;
  sampled.tvd = 0.015;
  sampled.tvd_threshold = 0.02;
  sampled.bins = 33;
  sampled.draws = 20000;
  sampled.trials_run = 3;
  CHECK(kb::write_judge_counts(sampled) == R"({"tvd":0.015,"tvd_threshold":0.02,"bins":33,"draws":20000,"trials_run":3})");
  kb::JudgeCounts outside;
  outside.draws = 100;
  outside.out_of_support = true;
  outside.trials_run = 1;
  CHECK(kb::write_judge_counts(outside) == R"({"draws":100,"out_of_support":true,"trials_run":1})");
}
