// The dispatch table (lib/dispatch): which recorded solution wins, which
// records are left out, how a call finds its nearest workload, and the
// errors a bad trace file gets. Trace lines are written with kb's own writer
// into a temporary folder; the registry is the test's, so that several
// solutions of one definition exist on each device kind.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dispatch/dispatch_table.hpp"
#include "schema/io.hpp"

namespace fs = std::filesystem;
using kb::dispatch::build_table;
using kb::dispatch::nearest;
using kb::dispatch::Table;

namespace {

// Two var axes (m, n) and one const, so distances sum over axes.
const char* kDef = R"({
  "name": "toy_mn", "op_type": "toy",
  "axes": {"m": {"type": "var"}, "n": {"type": "var"}, "k": {"type": "const", "value": 8}},
  "inputs": {"x": {"shape": ["m", "k"], "dtype": "float32"}, "w": {"shape": ["n", "k"], "dtype": "float32"}},
  "outputs": {"y": {"shape": ["m", "n"], "dtype": "float32"}},
  "reference": "import torch\ndef run(x, w):\n    return x @ w.T\n"
})";

kb::Definition definition() {
  auto d = kb::read_definition(kDef, "test");
  REQUIRE(d.ok());
  return *d;
}

kb::Implementation impl(const char* name, kb::Device device, bool handles = true) {
  kb::Implementation i;
  i.name = name;
  i.device = device;
  i.supports = [handles](const kb::Definition&) { return handles ? std::string() : std::string("not this one"); };
  return i;
}

kb::Registry registry() {
  kb::Registry r;
  r.add(impl("cpu_a", kb::Device::cpu));
  r.add(impl("cpu_b", kb::Device::cpu));
  r.add(impl("gpu_a", kb::Device::cuda));
  r.add(impl("gpu_b", kb::Device::cuda));
  r.add(impl("gpu_other", kb::Device::cuda, false));  // handles other definitions only
  return r;
}

std::string line(const std::string& solution, std::int64_t m, std::int64_t n, double ms,
                 kb::EvalStatus status = kb::EvalStatus::passed, const std::string& hardware = "GPU X",
                 const std::string& definition = "toy_mn") {
  kb::Trace t;
  t.definition = definition;
  t.workload.uuid = solution + "-" + std::to_string(m) + "x" + std::to_string(n);
  t.workload.axes = {{"m", m}, {"n", n}};
  t.workload.inputs = {{"x", kb::InputSpec{}}, {"w", kb::InputSpec{}}};
  t.solution = solution;
  kb::Evaluation e;
  e.status = status;
  e.environment.hardware = hardware;
  e.timestamp = "2026-11-28T00:00:00.000Z";
  if (status == kb::EvalStatus::passed) {
    e.correctness = kb::Correctness{};
    kb::Performance p;
    p.latency_ms = ms;
    p.reference_latency_ms = ms;
    p.speedup_factor = 1;
    e.performance = p;
  } else if (status == kb::EvalStatus::incorrect_numerical) {
    e.correctness = kb::Correctness{};
  }
  t.evaluation = e;
  return kb::to_json(t, false);
}

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/kb-dispatch-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { fs::remove_all(path); }
  void write(const std::string& rel, const std::vector<std::string>& lines) const {
    fs::create_directories((path / rel).parent_path());
    std::ofstream f(path / rel);
    for (const auto& l : lines) f << l << "\n";
  }
};

std::vector<std::int64_t> call(std::int64_t m, std::int64_t n) { return {m, n, 8}; }

}  // namespace

TEST_CASE("the fastest PASSED solution per axis values and device kind wins") {
  const kb::Definition d = definition();
  const kb::Registry reg = registry();
  TempDir dir;
  dir.write("traces/a/toy/toy_mn.jsonl", {
      line("gpu_a", 1, 4096, 0.020), line("gpu_b", 1, 4096, 0.030),    // a wins at m = 1
      line("gpu_a", 512, 4096, 0.200), line("gpu_b", 512, 4096, 0.150),  // b wins at m = 512
      line("cpu_a", 1, 4096, 2.0), line("cpu_b", 1, 4096, 3.0),
  });
  // A second file and run: a faster record of gpu_b at m = 1 still loses to gpu_a's best.
  dir.write("traces/b/toy/toy_mn.jsonl", {line("gpu_b", 1, 4096, 0.025), line("cpu_b", 1, 4096, 1.5)});
  auto t = build_table(d, dir.path.string(), {}, reg);
  REQUIRE(t.ok());
  CHECK(t->records == 8);
  CHECK(t->used == 8);
  REQUIRE(t->cuda.size() == 2);
  REQUIRE(t->cpu.size() == 1);
  CHECK(t->cuda[0].var_values == std::vector<std::int64_t>{1, 4096});
  CHECK(t->cuda[0].impl->name == "gpu_a");
  CHECK(t->cuda[0].latency_ms == doctest::Approx(0.020));
  CHECK(t->cuda[0].workload_uuid == "gpu_a-1x4096");
  CHECK(t->cuda[1].impl->name == "gpu_b");
  CHECK(t->cpu[0].impl->name == "cpu_b");  // its best record (1.5 ms, the second file) beats cpu_a's 2.0
  CHECK(t->cpu[0].latency_ms == doctest::Approx(1.5));
}

TEST_CASE("within the tie margin, the solution the registry lists first wins") {
  const kb::Definition d = definition();
  const kb::Registry reg = registry();  // gpu_a before gpu_b
  TempDir dir;
  dir.write("traces/toy_mn.jsonl", {
      line("gpu_a", 1, 4096, 0.0200), line("gpu_b", 1, 4096, 0.0197),  // b 1.5% faster: noise
      line("gpu_a", 2, 4096, 0.0200), line("gpu_b", 2, 4096, 0.0190),  // b 5% faster
      line("gpu_a", 4, 4096, 0.0200), line("gpu_b", 4, 4096, 0.0203),  // a fastest anyway
  });
  auto t = build_table(d, dir.path.string(), {}, reg);  // the default margin, 2%
  REQUIRE(t.ok());
  REQUIRE(t->cuda.size() == 3);
  CHECK(t->cuda[0].impl->name == "gpu_a");
  CHECK(t->cuda[0].latency_ms == doctest::Approx(0.0200));  // the winner's own record
  CHECK(t->cuda[0].workload_uuid == "gpu_a-1x4096");
  CHECK(t->cuda[1].impl->name == "gpu_b");
  CHECK(t->cuda[2].impl->name == "gpu_a");
  kb::dispatch::TableOptions strict;
  strict.tie_margin = 0;
  auto s = build_table(d, dir.path.string(), strict, reg);
  REQUIRE(s.ok());
  REQUIRE(s->cuda.size() == 3);
  CHECK(s->cuda[0].impl->name == "gpu_b");
  CHECK(s->cuda[0].latency_ms == doctest::Approx(0.0197));
  CHECK(s->cuda[1].impl->name == "gpu_b");
  CHECK(s->cuda[2].impl->name == "gpu_a");
  // A failed record still puts the earlier solution out, margin or not.
  dir.write("traces/failed.jsonl", {line("gpu_a", 1, 4096, 0, kb::EvalStatus::incorrect_numerical)});
  auto f = build_table(d, dir.path.string(), {}, reg);
  REQUIRE(f.ok());
  CHECK(f->cuda[0].impl->name == "gpu_b");
}

TEST_CASE("a solution that failed on some axis values is out for them, only them; untimed records do not count") {
  const kb::Definition d = definition();
  const kb::Registry reg = registry();
  TempDir dir;
  dir.write("t.jsonl", {
      line("gpu_a", 16, 4096, 0.010), line("gpu_a", 16, 4096, 0, kb::EvalStatus::incorrect_numerical),
      line("gpu_b", 16, 4096, 0.050),
      line("gpu_a", 64, 4096, 0.010), line("gpu_b", 64, 4096, 0.050),
      line("gpu_b", 128, 4096, 0, kb::EvalStatus::runtime_error),  // nothing passed at 128
      line("gpu_a", 256, 4096, 0),  // PASSED but not timed (kb bench --no-time): no entry, and not out either
      line("gpu_a", 512, 4096, 0), line("gpu_a", 512, 4096, 0.3),
  });
  auto t = build_table(d, (dir.path / "t.jsonl").string(), {}, reg);
  REQUIRE(t.ok());
  REQUIRE(t->cuda.size() == 3);
  CHECK(t->cuda[0].var_values[0] == 16);
  CHECK(t->cuda[0].impl->name == "gpu_b");
  CHECK(t->cuda[1].var_values[0] == 64);
  CHECK(t->cuda[1].impl->name == "gpu_a");
  CHECK(t->cuda[2].var_values[0] == 512);
  CHECK(t->cuda[2].latency_ms == doctest::Approx(0.3));
}

TEST_CASE("records kb cannot run here, of other definitions or other hardware are left out") {
  const kb::Definition d = definition();
  const kb::Registry reg = registry();
  TempDir dir;
  dir.write("t.jsonl", {
      line("plugin_solution", 1, 4096, 0.001),          // not kb's: runs in a worker, not here
      line("gpu_other", 1, 4096, 0.001),                // kb's, but not for this definition
      line("gpu_a", 1, 4096, 0.001, kb::EvalStatus::passed, "GPU X", "another_def"),
      line("gpu_b", 1, 4096, 0.002, kb::EvalStatus::passed, "GPU Y"),
      line("gpu_a", 1, 4096, 0.009),
      "",  // blank lines are allowed
  });
  auto all = build_table(d, (dir.path / "t.jsonl").string(), {}, reg);
  REQUIRE(all.ok());
  CHECK(all->records == 4);  // the other definition's line is not this definition's record
  CHECK(all->used == 2);
  REQUIRE(all->cuda.size() == 1);
  CHECK(all->cuda[0].impl->name == "gpu_b");

  kb::dispatch::TableOptions only_x;
  only_x.hardware = "GPU X";
  auto x = build_table(d, (dir.path / "t.jsonl").string(), only_x, reg);
  REQUIRE(x.ok());
  REQUIRE(x->cuda.size() == 1);
  CHECK(x->cuda[0].impl->name == "gpu_a");
}

TEST_CASE("a call takes the nearest recorded workload, in log2 distance summed over var axes") {
  const kb::Definition d = definition();
  const kb::Registry reg = registry();
  TempDir dir;
  dir.write("t.jsonl", {
      line("gpu_a", 1, 4096, 0.01), line("gpu_b", 4, 4096, 0.01), line("gpu_a", 2048, 4096, 0.1),
      line("gpu_b", 4, 14336, 0.02),
  });
  auto t = build_table(d, (dir.path / "t.jsonl").string(), {}, reg);
  REQUIRE(t.ok());
  REQUIRE(t->cuda.size() == 4);
  auto pick = [&](std::int64_t m, std::int64_t n, bool exact = false) {
    auto values = call(m, n);
    const kb::dispatch::Entry* e = nearest(*t, t->cuda, values, exact);
    return e ? e->workload_uuid : std::string("none");
  };
  CHECK(pick(1, 4096) == "gpu_a-1x4096");
  CHECK(pick(2, 4096) == "gpu_a-1x4096");     // 1 and 4 are both 1 away: the smaller values win the tie
  CHECK(pick(3, 4096) == "gpu_b-4x4096");     // log2 3 = 1.58: 0.42 from 4, 1.58 from 1
  CHECK(pick(64, 4096) == "gpu_b-4x4096");    // 4 away from 4, 5 away from 2048
  CHECK(pick(512, 4096) == "gpu_a-2048x4096");
  CHECK(pick(4, 6144) == "gpu_b-4x4096");     // n: 0.58 from 4096, 1.22 from 14336
  CHECK(pick(4, 8192) == "gpu_b-4x14336");    // n: 1 from 4096, 0.81 from 14336
  CHECK(pick(4, 16384) == "gpu_b-4x14336");
  CHECK(pick(4, 4096, true) == "gpu_b-4x4096");
  CHECK(pick(3, 4096, true) == "none");
  CHECK(nearest(*t, t->cpu, call(1, 4096), false) == nullptr);  // nothing recorded on the CPU
}

TEST_CASE("bad trace files are errors naming the file and line") {
  const kb::Definition d = definition();
  const kb::Registry reg = registry();
  TempDir dir;
  SUBCASE("missing path") {
    auto t = build_table(d, (dir.path / "nope").string(), {}, reg);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().code == kb::Code::io_error);
    CHECK(t.error().message.find("nope") != std::string::npos);
  }
  SUBCASE("a torn line of this definition") {
    std::string good = line("gpu_a", 1, 4096, 0.01);
    dir.write("t.jsonl", {good, good.substr(0, good.size() / 2)});
    auto t = build_table(d, dir.path.string(), {}, reg);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().message.find("t.jsonl:2") != std::string::npos);
  }
  SUBCASE("a workload without one of the var axes") {
    std::string l = line("gpu_a", 1, 4096, 0.01);
    auto pos = l.find("\"n\":4096");
    REQUIRE(pos != std::string::npos);
    l.replace(pos, std::string("\"n\":4096").size(), "\"q\":4096");
    dir.write("sub/t.jsonl", {line("gpu_b", 1, 4096, 0.01), l});
    auto t = build_table(d, dir.path.string(), {}, reg);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().code == kb::Code::invalid_data);
    CHECK(t.error().message.find("t.jsonl:2") != std::string::npos);
    CHECK(t.error().message.find("\"n\"") != std::string::npos);
  }
  SUBCASE("lines of other definitions are not read") {
    dir.write("other.jsonl", {"{not json at all, of another definition"});
    auto t = build_table(d, dir.path.string(), {}, reg);
    REQUIRE(t.ok());
    CHECK(t->records == 0);
  }
}
