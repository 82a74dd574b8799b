// 1,000 evaluations of one plugin solution with a fault injected in every
// tenth (segfault, abort, guard-byte write, input write, hang, error status,
// wrong shape, stale output, SIGFPE, exit): every evaluation is recorded, the
// 900 healthy ones all PASSED, each fault earned its own status, and the trace
// file is valid JSONL throughout.
//
//   test_thousand [N]    N evaluations (default 1000; a multiple of 100)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <fmt/format.h>

#include "harness/trace_writer.hpp"
#include "plugin/plugin.hpp"
#include "schema/io.hpp"

int main(int argc, char** argv) {
  long n = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 1000;
  if (n <= 0 || n % 100 != 0) {
    std::fprintf(stderr, "test_thousand: N must be a positive multiple of 100\n");
    return 2;
  }
  auto d = kb::read_definition_file(std::string(KB_TEST_DATASET) + "/definitions/rmsnorm/rmsnorm_h64.json");
  if (!d) {
    std::fprintf(stderr, "%s\n", d.error().message.c_str());
    return 1;
  }
  kb::plugin::Options o;
  o.timeout_s = 0.5;
  o.load_timeout_s = 30;
  o.worker_path = KB_TEST_WORKER;
  auto p = kb::plugin::load(KB_TEST_HOSTILE_PLUGIN, o);
  if (!p) {
    std::fprintf(stderr, "%s\n", p.error().message.c_str());
    return 1;
  }
  auto impls = kb::plugin::implementations(*p);
  const kb::Implementation* impl = nullptr;
  for (const auto& i : impls)
    if (i.name == "hostile_every_tenth") impl = &i;
  if (!impl) return 1;

  char tmpl[] = "/tmp/kb-thousand-XXXXXX";
  if (!::mkdtemp(tmpl)) return 1;
  std::string out = tmpl;
  kb::TraceWriter writer(out);
  kb::BenchOptions bo;
  bo.trials = 1;
  bo.time = false;
  int failures = 0;
  const bool verbose = std::getenv("KB_TEST_VERBOSE") != nullptr;
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) {
      std::fprintf(stderr, "FAIL: %s\n", what.c_str());
      ++failures;
    }
  };
  // batch_size cycles 1..100: the plugin faults when batch_size % 10 == 0.
  for (long i = 0; i < n; ++i) {
    kb::Workload w;
    std::int64_t batch = i % 100 + 1;
    w.uuid = fmt::format("eval-{:04d}", i);
    w.axes = {{"batch_size", batch}};
    w.inputs = {{"hidden_states", kb::InputSpec{}}, {"weight", kb::InputSpec{}}};
    bo.seed = 1000 + static_cast<std::uint64_t>(i);
    auto t0 = std::chrono::steady_clock::now();
    auto r = kb::plugin::evaluate(*d, w, *impl, bo);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (verbose) std::fprintf(stderr, "eval %ld batch %lld: %.1f ms\n", i, static_cast<long long>(batch), ms);
    if (!r) {
      check(false, fmt::format("evaluation {} not recorded: {}", i, r.error().message));
      continue;
    }
    kb::Trace t{d->name, w, impl->name, r->evaluation};
    if (auto st = writer.append("kb-tests", *d, t); !st.ok()) {
      std::fprintf(stderr, "%s\n", st.error().message.c_str());
      return 1;
    }
  }

  // Read back what was recorded, the way a reader of the trace would.
  std::ifstream f(writer.path_for("kb-tests", *d));
  std::string line;
  long lines = 0, passed = 0;
  std::map<std::string, int> fault_status;
  // batch/10 % 10 -> the status that fault must earn, and a word its log must hold.
  const std::map<int, std::pair<kb::EvalStatus, std::string>> expected = {
      {1, {kb::EvalStatus::runtime_error, "SIGSEGV"}},
      {2, {kb::EvalStatus::runtime_error, "SIGABRT"}},
      {3, {kb::EvalStatus::runtime_error, "guard bytes changed"}},
      {4, {kb::EvalStatus::runtime_error, "modified input"}},
      {5, {kb::EvalStatus::timeout, "limit"}},
      {6, {kb::EvalStatus::runtime_error, "refusing on purpose"}},
      {7, {kb::EvalStatus::incorrect_shape, "changed its shape"}},
      {8, {kb::EvalStatus::incorrect_numerical, "output"}},
      {9, {kb::EvalStatus::runtime_error, "SIGFPE"}},
      {0, {kb::EvalStatus::runtime_error, "exited with status 3"}},
  };
  while (std::getline(f, line)) {
    ++lines;
    auto t = kb::read_trace(line, fmt::format("trace line {}", lines));
    if (!t) {
      check(false, t.error().message);
      continue;
    }
    std::int64_t batch = t->workload.axes.at(0).second;
    const kb::Evaluation& ev = *t->evaluation;
    if (batch % 10 != 0) {
      if (ev.status == kb::EvalStatus::passed) ++passed;
      else check(false, fmt::format("{} (batch {}) is {}: {}", t->workload.uuid, batch, kb::eval_status_name(ev.status), ev.log));
      continue;
    }
    const auto& [status, word] = expected.at(static_cast<int>(batch / 10 % 10));
    check(ev.status == status && ev.log.find(word) != std::string::npos,
          fmt::format("{} (batch {}): expected {} with \"{}\", got {}: {}", t->workload.uuid, batch,
                      kb::eval_status_name(status), word, kb::eval_status_name(ev.status), ev.log));
    ++fault_status[std::string(kb::eval_status_name(ev.status))];
  }
  check(lines == n, fmt::format("{} trace lines for {} evaluations", lines, n));
  check(passed == n / 10 * 9, fmt::format("{} of the {} healthy evaluations passed", passed, n / 10 * 9));
  std::printf("%ld evaluations recorded: %ld passed", lines, passed);
  for (const auto& [s, c] : fault_status) std::printf(", %d %s", c, s.c_str());
  std::printf("; %zu worker processes started\n", (*p)->worker->starts());
  if (failures == 0) {
    std::error_code ec;
    std::filesystem::remove_all(out, ec);
  } else {
    std::fprintf(stderr, "traces kept in %s\n", out.c_str());
  }
  return failures ? 1 : 0;
}
