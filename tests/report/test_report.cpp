// kb export / compare / report on traces written here, against numbers worked out by hand.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "model/records.hpp"
#include "report/compare.hpp"
#include "report/export.hpp"
#include "report/render.hpp"
#include "report/report.hpp"
#include "report/traces.hpp"

// Trace lines are written with designated initializers naming only the fields each line needs.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace fs = std::filesystem;
using namespace kb::report;

namespace {

struct Line {
  std::string def = "gemm_x";
  std::string uuid;
  std::string axes;  // e.g. R"("M": 16)"
  std::string solution;
  std::string status = "PASSED";
  double latency = 0, reference = 0;
  std::string extra;  // performance.extra's JSON object, "" for none
  std::string log;
  double max_abs = 0;
  std::string hw = "GPU-A";
};

std::string render(const Line& l) {
  std::string tail;
  if (l.status == "PASSED")
    tail = fmt::format(R"(, "correctness": {{"max_relative_error": 0.0, "max_absolute_error": {}}}, "performance": {{"latency_ms": {}, "reference_latency_ms": {}, "speedup_factor": {}{}}})",
                       l.max_abs, l.latency, l.reference,
                       l.latency > 0 && l.reference > 0 ? l.reference / l.latency : 0.0,
                       l.extra.empty() ? "" : ", \"extra\": " + l.extra);
  else if (l.status == "INCORRECT_NUMERICAL")
    tail = fmt::format(R"(, "correctness": {{"max_relative_error": 1.0, "max_absolute_error": {}}})", l.max_abs);
  std::string log;
  for (char c : l.log) log += c == '\n' ? std::string("\\n") : c == '"' ? std::string("\\\"") : std::string(1, c);
  return fmt::format(R"({{"definition": "{}", "workload": {{"uuid": "{}", "axes": {{{}}}, "inputs": {{}}}}, "solution": "{}", )"
                     R"("evaluation": {{"status": "{}", "environment": {{"hardware": "{}"}}, "timestamp": "2025-01-01T00:00:00", "log": "{}"{}}}}})",
                     l.def, l.uuid, l.axes, l.solution, l.status, l.hw, log, tail);
}

struct TempDir {
  fs::path path;
  explicit TempDir(const char* tag) {
    path = fs::temp_directory_path() / fmt::format("kb_report_{}_{}", tag, ::getpid());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::vector<Line>& lines) {
    fs::create_directories((path / name).parent_path());
    std::ofstream f(path / name);
    for (const auto& l : lines) f << render(l) << "\n";
    return (path / name).string();
  }
};

TraceSet read(const std::vector<std::string>& paths) {
  auto s = read_traces(paths);
  REQUIRE_MESSAGE(s.ok(), s.error().message);
  return *s;
}

}  // namespace

TEST_CASE("export: one Benchmark Result per definition, solution and device, round-tripping") {
  TempDir dir("export");
  dir.write("t.jsonl", {
      {.uuid = "w1", .axes = R"("M": 1)", .solution = "fast", .latency = 1.0, .reference = 2.0, .max_abs = 0.1},
      {.uuid = "w2", .axes = R"("M": 2)", .solution = "fast", .latency = 4.0, .reference = 2.0, .max_abs = 0.3},
      {.uuid = "w1", .axes = R"("M": 1)", .solution = "broken", .status = "COMPILE_ERROR", .log = "x.cu:3: error: bad\nmore"},
      {.uuid = "w2", .axes = R"("M": 2)", .solution = "broken", .status = "COMPILE_ERROR", .log = "second"},
      {.uuid = "w1", .axes = R"("M": 1)", .solution = "wrong", .status = "INCORRECT_NUMERICAL", .max_abs = 7.5},
      {.uuid = "w1", .axes = R"("M": 1)", .solution = "fast", .latency = 3.0, .reference = 3.0, .hw = "GPU-B"},
  });
  auto results = benchmark_results(read({dir.path.string()}).records);
  REQUIRE(results.size() == 4);
  // Sorted by kernel, source, device.
  CHECK(results[0].source == "broken");
  CHECK_FALSE(results[0].compiled);
  CHECK(results[0].compile_error == "x.cu:3: error: bad\nmore");
  CHECK_FALSE(results[0].time);
  CHECK(results[1].source == "fast");
  CHECK(results[1].device_name == "GPU-A");
  CHECK(results[1].compiled);
  CHECK(*results[1].time == doctest::Approx(2.5));     // (1 + 4) / 2
  CHECK(*results[1].speedup == doctest::Approx(1.0));  // sqrt(2 x 0.5)
  CHECK(*results[1].max_diff == doctest::Approx(0.3));
  CHECK(results[2].device_name == "GPU-B");
  CHECK(*results[2].speedup == doctest::Approx(1.0));
  CHECK(results[3].source == "wrong");
  CHECK(results[3].compiled);
  CHECK_FALSE(results[3].time);
  CHECK_FALSE(results[3].speedup);
  CHECK(*results[3].max_diff == doctest::Approx(7.5));
  for (const auto& r : results) {
    auto back = kb::model::read_benchmark_result(kb::model::to_json(r, false), "line");
    REQUIRE_MESSAGE(back.ok(), back.error().message);
    CHECK(*back == r);
  }
}

TEST_CASE("compare: nvbench's rule, the smaller spread is the noise") {
  std::optional<double> noise;
  CHECK(classify(1.0, 0.05, 0.9, 0.02, &noise) == Change::faster);
  CHECK(*noise == doctest::Approx(0.02));
  CHECK(classify(1.0, 0.05, 0.99, 0.02) == Change::within_noise);
  CHECK(classify(1.0, 0.05, 1.015, 0.02) == Change::within_noise);
  CHECK(classify(1.0, 0.20, 1.10, 0.02) == Change::slower);        // beyond the smaller spread
  CHECK(classify(1.0, std::nullopt, 1.10, 0.2) == Change::within_noise);
  CHECK(classify(1.0, 0.3, 0.5, std::nullopt) == Change::faster);
  CHECK(classify(1.0, std::nullopt, 5.0, std::nullopt, &noise) == Change::no_spread);
  CHECK_FALSE(noise);

  kb::Measurement m;
  m.median_ms = 2.0;
  CHECK_FALSE(relative_spread(m));
  m.min_ms = 1.8;
  m.max_ms = 2.6;
  CHECK(*relative_spread(m) == doctest::Approx(0.2));  // (2.6 - 1.8) / 2 / 2
  m.rel_noise = 0.01;
  CHECK(*relative_spread(m) == doctest::Approx(0.01));
}

TEST_CASE("compare: two trace sets, every kind of change, the summary") {
  TempDir dir("compare");
  const std::string tight = R"({"rel_noise": 0.01})";
  auto old_path = dir.write("old/t.jsonl", {
      {.uuid = "a", .axes = R"("M": 1)", .solution = "s", .latency = 1.0, .reference = 1.0, .extra = tight},
      {.uuid = "b", .axes = R"("M": 2)", .solution = "s", .latency = 1.0, .reference = 1.0, .extra = tight},
      {.uuid = "c", .axes = R"("M": 4)", .solution = "s", .latency = 1.0, .reference = 1.0, .extra = R"({"min_ms": 0.9, "max_ms": 1.1})"},
      {.uuid = "d", .axes = R"("M": 8)", .solution = "s", .latency = 1.0, .reference = 1.0, .extra = tight},
      {.uuid = "e", .axes = R"("M": 16)", .solution = "s", .status = "RUNTIME_ERROR"},
      {.uuid = "f", .axes = R"("M": 32)", .solution = "s", .latency = 1.0, .reference = 1.0},
      {.uuid = "g", .axes = R"("M": 64)", .solution = "s", .latency = 1.0, .reference = 1.0, .extra = tight},
      {.uuid = "a", .axes = R"("M": 1)", .solution = "gone", .latency = 1.0, .reference = 1.0},
  });
  auto new_path = dir.write("new/t.jsonl", {
      {.uuid = "a", .axes = R"("M": 1)", .solution = "s", .latency = 0.5, .reference = 1.0, .extra = tight},   // faster
      {.uuid = "b", .axes = R"("M": 2)", .solution = "s", .latency = 2.0, .reference = 1.0, .extra = tight},   // slower
      {.uuid = "c", .axes = R"("M": 4)", .solution = "s", .latency = 1.05, .reference = 1.0},                    // within the 10% spread
      {.uuid = "d", .axes = R"("M": 8)", .solution = "s", .status = "INCORRECT_NUMERICAL"},                     // now failing
      {.uuid = "e", .axes = R"("M": 16)", .solution = "s", .latency = 1.0, .reference = 1.0, .extra = tight},  // now passing
      {.uuid = "f", .axes = R"("M": 32)", .solution = "s", .latency = 3.0, .reference = 1.0},                    // no spread
      {.uuid = "g", .axes = R"("M": 64)", .solution = "s", .latency = 9.0, .reference = 1.0, .extra = tight},  // repeated:
      {.uuid = "g", .axes = R"("M": 64)", .solution = "s", .latency = 1.0, .reference = 1.0, .extra = tight},  // this one counts
      {.uuid = "a", .axes = R"("M": 1)", .solution = "added", .latency = 1.0, .reference = 1.0},
  });
  Comparison c = compare(read({old_path}), read({new_path}));
  REQUIRE(c.rows.size() == 9);
  auto count = [&](Change ch) { return c.counts[static_cast<std::size_t>(ch)]; };
  CHECK(count(Change::faster) == 1);
  CHECK(count(Change::slower) == 1);
  CHECK(count(Change::within_noise) == 2);  // c, and g (the later line)
  CHECK(count(Change::no_spread) == 1);
  CHECK(count(Change::now_failing) == 1);
  CHECK(count(Change::now_passing) == 1);
  CHECK(count(Change::only_old) == 1);
  CHECK(count(Change::only_new) == 1);
  CHECK(c.new_repeats == 1);
  CHECK(c.timed_pairs == 5);
  // new / old over a, b, c, f, g: 0.5, 2, 1.05, 3, 1.
  CHECK(c.geomean_ratio == doctest::Approx(std::pow(0.5 * 2 * 1.05 * 3 * 1, 1.0 / 5)));
  // Rows of solution s in axis order.
  std::vector<std::string> order;
  for (const auto& r : c.rows)
    if (r.solution == "s") order.push_back(r.workload);
  CHECK(order == std::vector<std::string>{"a", "b", "c", "d", "e", "f", "g"});
  const CompareRow& rc = c.rows[std::find_if(c.rows.begin(), c.rows.end(), [](auto& r) { return r.workload == "c" && r.solution == "s"; }) - c.rows.begin()];
  CHECK(*rc.noise == doctest::Approx(0.1));
  CHECK(*rc.difference == doctest::Approx(0.05));
  std::string json = to_json(c, false);
  CHECK(json.find(R"("faster":1,"slower":1,"within_noise":2,"no_spread":1,"now_failing":1,"now_passing":1)") != std::string::npos);
}

namespace {

// Two authors on one definition with three workloads (M = 1, 16, 256), and a second definition.
std::string write_report_traces(TempDir& dir, const std::string& evil = "b_fast") {
  dir.write("set/traces/alice/gemm/gemm_x.jsonl", {
      {.uuid = "w1", .axes = R"("M": 1)", .solution = "a_sol", .latency = 1.0, .reference = 2.0},    // 2x
      {.uuid = "w2", .axes = R"("M": 16)", .solution = "a_sol", .latency = 2.0, .reference = 2.0},   // 1x
      {.uuid = "w3", .axes = R"("M": 256)", .solution = "a_sol", .status = "INCORRECT_NUMERICAL", .log = "mismatch | 3 of 4\n<b>bad</b>", .max_abs = 1},
  });
  dir.write("set/traces/bob/gemm/gemm_x.jsonl", {
      {.uuid = "w1", .axes = R"("M": 1)", .solution = evil, .latency = 0.5, .reference = 2.0},     // 4x
      {.uuid = "w2", .axes = R"("M": 16)", .solution = evil, .latency = 4.0, .reference = 2.0},    // 0.5x
      {.uuid = "w3", .axes = R"("M": 256)", .solution = evil, .latency = 8.0, .reference = 16.0},  // 2x
  });
  dir.write("set/traces/bob/norm/norm_y.jsonl", {
      {.def = "norm_y", .uuid = "n1", .axes = R"("B": 4)", .solution = "b_norm", .status = "COMPILE_ERROR", .log = "cc failed"},
  });
  return (dir.path / "set").string();
}

}  // namespace

TEST_CASE("report: speedups, fast_p, win rate, charts and the status matrix") {
  TempDir dir("build");
  auto set_path = write_report_traces(dir);
  Options opt;
  opt.trace_paths = {set_path};
  auto rep = build(read({set_path}), opt);
  REQUIRE_MESSAGE(rep.ok(), rep.error().message);
  REQUIRE(rep->definitions.size() == 2);
  const DefinitionReport& d = rep->definitions[0];
  CHECK(d.name == "gemm_x");
  CHECK(d.op_type == "gemm");
  REQUIRE(d.workloads.size() == 3);
  CHECK(d.workloads[2].axes == Axes{{"M", 256}});
  CHECK(*d.workloads[2].baseline_ms == doctest::Approx(16.0));
  REQUIRE(d.solutions.size() == 2);
  CHECK(d.solutions[0].name == "a_sol");
  CHECK(d.solutions[0].author == "alice");
  CHECK(d.solutions[0].passed == 2);
  CHECK(*d.solutions[0].geomean_speedup == doctest::Approx(std::sqrt(2.0)));
  CHECK(*d.solutions[1].geomean_speedup == doctest::Approx(std::cbrt(4.0 * 0.5 * 2.0)));
  CHECK(*d.solutions[1].min_speedup == doctest::Approx(0.5));
  CHECK(d.cells[0][2].status == "INCORRECT_NUMERICAL");
  CHECK(d.cells[0][2].message == "mismatch | 3 of 4\n<b>bad</b>");
  // fast_p: a_sol is faster than 1x the baseline on 1 of 3 workloads, correct on 2; b_fast on 2 and 3.
  auto at = [&](const FastP& f, std::size_t curve, double p) {
    for (std::size_t i = 0; i < f.p.size(); ++i)
      if (std::fabs(f.p[i] - p) < 1e-12) return f.curves[curve].second[i];
    FAIL("no threshold ", p);
    return -1.0;
  };
  CHECK(at(d.fast_p, 0, 0.0) == doctest::Approx(2.0 / 3));
  CHECK(at(d.fast_p, 0, 1.0) == doctest::Approx(1.0 / 3));
  CHECK(at(d.fast_p, 1, 1.0) == doctest::Approx(2.0 / 3));
  CHECK(at(d.fast_p, 1, 3.0) == doctest::Approx(1.0 / 3));
  CHECK(d.fast_p.p.back() >= 4.0);  // the grid reaches past the largest speedup
  // Latency against M: the baseline and both solutions, log x (1..256).
  REQUIRE(d.charts.size() == 1);
  CHECK(d.charts[0].axis == "M");
  CHECK(d.charts[0].log_x);
  REQUIRE(d.charts[0].series.size() == 3);
  CHECK(d.charts[0].series[0].baseline);
  CHECK(d.charts[0].series[1].points.size() == 2);  // a_sol failed at M=256
  CHECK(d.charts[0].series[2].points == std::vector<std::pair<double, double>>{{1, 0.5}, {16, 4.0}, {256, 8.0}});
  // Win rate: bob wins w1 and w3, alice w2; bob also entered norm_y (no winner there).
  // Sorted by win rate.
  REQUIRE(rep->authors.size() == 2);
  CHECK(rep->authors[0].author == "bob");
  CHECK(rep->authors[0].wins == 2);
  CHECK(rep->authors[0].entered == 4);
  CHECK(rep->authors[0].win_rate == doctest::Approx(0.5));
  CHECK(rep->authors[1].author == "alice");
  CHECK(rep->authors[1].win_rate == doctest::Approx(1.0 / 3));
  CHECK(rep->devices.size() == 1);
  CHECK(rep->devices[0].records == 7);
  CHECK(rep->definitions[1].cells[0][0].message == "cc failed");

  SUBCASE("a named solution as the baseline") {
    Options o2 = opt;
    o2.baseline = "a_sol";
    auto r2 = build(read({set_path}), o2);
    REQUIRE(r2.ok());
    const auto& d2 = r2->definitions[0];
    CHECK(*d2.workloads[0].baseline_ms == doctest::Approx(1.0));
    CHECK_FALSE(d2.workloads[2].baseline_ms);  // a_sol did not pass there
    CHECK(*d2.cells[1][0].speedup == doctest::Approx(2.0));
  }
}

TEST_CASE("report printers escape what comes from traces") {
  TempDir dir("escape");
  const std::string evil = "<script>alert(1)</script>";
  auto set_path = write_report_traces(dir, evil);
  Options opt;
  opt.trace_paths = {set_path};
  auto rep = build(read({set_path}), opt);
  REQUIRE(rep.ok());
  Files html = to_html(*rep);
  REQUIRE(html.size() == 1);
  const std::string& page = html[0].second;
  CHECK(page.find(evil) == std::string::npos);
  CHECK(page.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
  CHECK(page.find("\\u003cscript\\u003ealert(1)\\u003c/script\\u003e") != std::string::npos);  // the chart data
  CHECK(page.find("&lt;b&gt;bad&lt;/b&gt;") != std::string::npos);
  // Exactly kb's three scripts: Chart.js, the chart data, the drawing code.
  std::size_t scripts = 0;
  for (std::size_t p = page.find("<script"); p != std::string::npos; p = page.find("<script", p + 1)) ++scripts;
  CHECK(scripts == 3);
  CHECK(page.find("Chart.js v3.9.1") != std::string::npos);
  CHECK(page.find("http://") == std::string::npos);
  CHECK(page.find("src=") == std::string::npos);  // nothing loaded from elsewhere

  std::string md = to_markdown(*rep);
  CHECK(md.find(evil) == std::string::npos);
  CHECK(md.find("mismatch \\| 3 of 4<br>&lt;b&gt;bad&lt;/b&gt;") != std::string::npos);

  Files csv = to_csv(*rep);
  REQUIRE(csv[0].first == "results.csv");
  CHECK(csv[0].second.find("\"mismatch | 3 of 4\n<b>bad</b>\"") != std::string::npos);

  // The JSON reads back as JSON with the name intact.
  std::string json = to_json(*rep, false);
  CHECK(json.find("\"<script>alert(1)</script>\"") != std::string::npos);
}

TEST_CASE("report: calling records through kb estimate, agent traces in order") {
  TempDir dir("pages");
  auto set_path = write_report_traces(dir);
  {
    std::ofstream f(dir.path / "model.json");
    f << R"({"model": "org/m", "framework": "SGLang", "step": "decode", "kernels": [
      {"id": "gemm_x", "count": 10, "axes": {"M": 16}}, {"id": "missing_kernel", "count": 1}]})";
    std::ofstream a(dir.path / "agent.json");
    a << R"([{"type": "llm_request", "model": "m1", "conversation": [{"role": "user", "content": "write <kernel>"}],
              "response": {"model": "m1", "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}},
             {"type": "tool_call", "tool_name": "compile", "arguments": {"file": "k.cu"}, "result": "done"}])";
  }
  Options opt;
  opt.trace_paths = {set_path};
  opt.record_paths = {(dir.path / "model.json").string()};
  opt.agent_trace_paths = {(dir.path / "agent.json").string()};
  auto rep = build(read({set_path}), opt);
  REQUIRE_MESSAGE(rep.ok(), rep.error().message);
  REQUIRE(rep->models.size() == 1);
  REQUIRE(rep->models[0].estimate);
  const auto& e = *rep->models[0].estimate;
  CHECK(e.measured == 1);
  // At M=16 the reference is 2 ms and the fastest PASSED is a_sol at 2 ms.
  CHECK(e.baseline_ms == doctest::Approx(20.0));
  CHECK(e.best_ms == doctest::Approx(20.0));
  REQUIRE(rep->agents.size() == 1);
  Files html = to_html(*rep);
  REQUIRE(html.size() == 3);
  CHECK(html[1].first == "models.html");
  CHECK(html[1].second.find("missing_kernel") != std::string::npos);
  CHECK(html[2].first == "agents.html");
  const std::string& agents = html[2].second;
  auto q = agents.find("LLM request"), t = agents.find("Tool call");
  CHECK(q != std::string::npos);
  CHECK(t != std::string::npos);
  CHECK(q < t);
  CHECK(agents.find("write &lt;kernel&gt;") != std::string::npos);
  CHECK(agents.find("compile") != std::string::npos);

  auto written = write_report(*rep, (dir.path / "out").string());
  REQUIRE_MESSAGE(written.ok(), written.error().message);
  for (const char* f : {"index.html", "models.html", "agents.html", "report.md", "results.csv", "solutions.csv",
                        "authors.csv", "fast_p.csv", "models.csv", "report.json"})
    CHECK_MESSAGE(fs::is_regular_file(dir.path / "out" / f), f);
}

TEST_CASE("trace sets: author from the folder layout, errors name the place") {
  CHECK(author_from_path("x/traces/alice/gemm/g.jsonl") == std::pair<std::string, std::string>{"alice", "gemm"});
  CHECK(author_from_path("x/alice/gemm/g.jsonl") == std::pair<std::string, std::string>{});
  CHECK(author_from_path("g.jsonl") == std::pair<std::string, std::string>{});
  TempDir dir("errors");
  auto missing = read_traces({(dir.path / "nope").string()});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("no such file or folder") != std::string::npos);
  auto empty = read_traces({dir.path.string()});
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().message.find("no .jsonl trace file") != std::string::npos);
  {
    std::ofstream f(dir.path / "bad.jsonl");
    f << render({.uuid = "w", .axes = R"("M": 1)", .solution = "s", .latency = 1, .reference = 1}) << "\n{\"definition\": 3}\n";
  }
  auto bad = read_traces({dir.path.string()});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("bad.jsonl:2") != std::string::npos);
}
