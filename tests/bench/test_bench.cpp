// lib/bench: run_dataset() and list_solutions() on kb's bundled dataset, on the CPU.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/run.hpp"

namespace fs = std::filesystem;
using kb::bench::Option;
using kb::bench::RunEvent;

namespace {

std::string bundled() {
  const char* d = std::getenv("KB_BUNDLED_DATASET");
  REQUIRE_MESSAGE(d, "KB_BUNDLED_DATASET is not set (meson sets it)");
  return d;
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "kb-test-bench-XXXXXX").string();
    REQUIRE(mkdtemp(t.data()));
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

kb::bench::RunOptions small_run(const std::string& out, std::vector<std::string> definitions) {
  kb::bench::RunOptions o;
  o.datasets = {bundled()};
  o.definitions = std::move(definitions);
  o.device = "cpu";
  o.out_dir = out;
  o.max_workloads = 1;
  o.bench.trials = 1;
  o.bench.time = false;
  return o;
}

// Every event of a run, by kind, and the definitions evaluated.
struct Recorder {
  std::map<RunEvent::Kind, int> count;
  std::vector<std::string> evaluated;  // definition/solution
  std::vector<kb::EvalStatus> statuses;
  std::size_t planned_total = 0, shard_definitions = 0, selected_definitions = 0;
  std::vector<std::size_t> indices;
  kb::bench::EventFn fn() {
    return [this](const RunEvent& e) {
      ++count[e.kind];
      if (e.kind == RunEvent::Kind::planned) {
        planned_total = e.total;
        shard_definitions = e.shard_definitions;
        selected_definitions = e.selected_definitions;
      }
      if (e.kind == RunEvent::Kind::evaluated) {
        REQUIRE(e.definition);
        REQUIRE(e.solution);
        REQUIRE(e.result);
        REQUIRE(e.trace);
        CHECK(e.trace->definition == e.definition->name);
        CHECK(e.trace->solution == e.solution->name);
        CHECK(e.trace->workload.uuid == e.workload->uuid);
        evaluated.push_back(e.definition->name + "/" + e.solution->name);
        statuses.push_back(e.result->evaluation.status);
        indices.push_back(e.index);
      }
    };
  }
};

std::size_t trace_lines(const fs::path& out) {
  std::size_t n = 0;
  if (!fs::exists(out / "traces")) return 0;
  for (const auto& f : fs::recursive_directory_iterator(out / "traces"))
    if (f.path().extension() == ".jsonl") {
      std::ifstream in(f.path());
      for (std::string line; std::getline(in, line);) n += !line.empty();
    }
  return n;
}

}  // namespace

TEST_CASE("run_dataset evaluates, reports each evaluation and writes its trace line") {
  TempDir out;
  Recorder rec;
  Option option = Option::device;
  auto r = kb::bench::run_dataset(small_run(out.path.string(), {"rmsnorm_h4096", "silu_and_mul_i14336"}), rec.fn(),
                                  &option);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  CHECK(option == Option::none);
  CHECK(r->device == kb::Device::cpu);
  CHECK(r->evaluations >= 2);
  CHECK(r->passed == r->evaluations);
  CHECK(r->failed == 0);
  CHECK(r->errors == 0);
  CHECK(r->all_passed());
  CHECK(rec.count[RunEvent::Kind::planned] == 1);
  CHECK(rec.planned_total == r->evaluations);
  CHECK(rec.selected_definitions == 2);
  CHECK(rec.count[RunEvent::Kind::evaluating] == static_cast<int>(r->evaluations));
  CHECK(rec.count[RunEvent::Kind::evaluated] == static_cast<int>(r->evaluations));
  for (std::size_t i = 0; i < rec.indices.size(); ++i) CHECK(rec.indices[i] == i);
  for (auto s : rec.statuses) CHECK(s == kb::EvalStatus::passed);
  std::set<std::string> defs;
  for (const auto& e : rec.evaluated) defs.insert(e.substr(0, e.find('/')));
  CHECK(defs == std::set<std::string>{"rmsnorm_h4096", "silu_and_mul_i14336"});
  CHECK(fs::exists(out.path / "traces" / "kb" / "rmsnorm" / "rmsnorm_h4096.jsonl"));
  CHECK(trace_lines(out.path) == r->evaluations);

  // resume: everything is recorded already, nothing runs and nothing is appended.
  auto again_options = small_run(out.path.string(), {"rmsnorm_h4096", "silu_and_mul_i14336"});
  again_options.resume = true;
  Recorder again;
  auto r2 = kb::bench::run_dataset(again_options, again.fn());
  REQUIRE(r2.ok());
  CHECK(r2->evaluations == 0);
  CHECK(r2->already_recorded == r->evaluations);
  CHECK(again.count[RunEvent::Kind::evaluated] == 0);
  CHECK(trace_lines(out.path) == r->evaluations);
}

TEST_CASE("shards split the selected definitions between them") {
  const std::vector<std::string> three = {"rmsnorm_h4096", "fused_add_rmsnorm_h4096", "silu_and_mul_i14336"};
  std::set<std::string> seen;
  std::size_t total = 0;
  for (long k = 1; k <= 2; ++k) {
    TempDir out;
    auto o = small_run(out.path.string(), three);
    o.shard_index = k;
    o.shard_count = 2;
    Recorder rec;
    auto r = kb::bench::run_dataset(o, rec.fn());
    REQUIRE(r.ok());
    CHECK(rec.selected_definitions == 3);
    // Names sorted: fused_add_rmsnorm_h4096, rmsnorm_h4096, silu_and_mul_i14336; every 2nd from the k-th.
    CHECK(rec.shard_definitions == (k == 1 ? 2u : 1u));
    std::set<std::string> mine;
    for (const auto& e : rec.evaluated) mine.insert(e.substr(0, e.find('/')));
    CHECK(mine.size() == rec.shard_definitions);
    for (const auto& d : mine) CHECK_MESSAGE(seen.insert(d).second, d << " is in two shards");
    total += r->evaluations;
  }
  CHECK(seen == std::set<std::string>(three.begin(), three.end()));
  CHECK(total >= 3);
}

TEST_CASE("options that cannot be used are errors naming the option") {
  TempDir out;
  Option option = Option::none;
  auto unknown = kb::bench::run_dataset(small_run(out.path.string(), {"rmsnorm_h4096", "no_such_definition"}), {},
                                        &option);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().code == kb::Code::not_found);
  CHECK(unknown.error().message.find("no definition \"no_such_definition\"") != std::string::npos);
  CHECK(option == Option::definitions);
  CHECK(trace_lines(out.path) == 0);

  auto o = small_run(out.path.string(), {"rmsnorm_h4096"});
  o.device = "cuda:4095";  // no CUDA build, no GPU, or not that many GPUs
  auto no_device = kb::bench::run_dataset(o, {}, &option);
  REQUIRE_FALSE(no_device.ok());
  CHECK(option == Option::device);

  o = small_run(out.path.string(), {"rmsnorm_h4096"});
  o.tolerance_file = (out.path / "missing.json").string();
  auto no_file = kb::bench::run_dataset(o, {}, &option);
  REQUIRE_FALSE(no_file.ok());
  CHECK(option == Option::tolerances);

  o = small_run(out.path.string(), {"rmsnorm_h4096"});
  o.shard_index = 3;
  o.shard_count = 2;
  auto bad_shard = kb::bench::run_dataset(o, {}, &option);
  REQUIRE_FALSE(bad_shard.ok());
  CHECK(bad_shard.error().code == kb::Code::invalid_argument);
}

TEST_CASE("a definition kb cannot judge is skipped with the reason") {
  TempDir out;
  fs::create_directories(out.path / "ds" / "definitions");
  {
    std::ifstream in(fs::path(bundled()) / "rmsnorm" / "definitions" / "rmsnorm_h4096.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Another op_type: kb has no oracle for it.
    const auto at = text.find("\"op_type\"");
    REQUIRE(at != std::string::npos);
    const auto value = text.find("\"rmsnorm\"", at);
    REQUIRE(value != std::string::npos);
    text.replace(value, 9, "\"no_such_op\"");
    std::ofstream(out.path / "ds" / "definitions" / "x.json") << text;
  }
  kb::bench::RunOptions o = small_run((out.path / "out").string(), {});
  o.datasets = {(out.path / "ds").string()};
  std::vector<std::string> skipped;
  auto r = kb::bench::run_dataset(o, [&](const RunEvent& e) {
    if (e.kind == RunEvent::Kind::skipped) skipped.push_back(e.message);
  });
  REQUIRE(r.ok());
  CHECK(r->evaluations == 0);
  CHECK(r->skipped == 1);
  REQUIRE(skipped.size() == 1);
  CHECK(skipped[0].rfind("rmsnorm_h4096: ", 0) == 0);
}

TEST_CASE("list_solutions names kb's solutions and what each handles") {
  auto o = small_run("unused", {"rmsnorm_h4096"});
  auto l = kb::bench::list_solutions(o, {});
  REQUIRE(l.ok());
  bool found = false;
  for (const auto& s : l->solutions)
    if (s.name == "kb_cpu_rmsnorm") {
      found = true;
      CHECK(s.device == kb::Device::cpu);
      CHECK(std::find(s.handles.begin(), s.handles.end(), "rmsnorm_h4096") != s.handles.end());
    }
  CHECK(found);
  CHECK_FALSE(fs::exists("unused"));
}

TEST_CASE("axes_text") {
  kb::Workload w;
  CHECK(kb::bench::axes_text(w) == "-");
  w.axes = {{"M", 7}, {"N", 3}};
  CHECK(kb::bench::axes_text(w) == "M=7 N=3");
}
