// Outside solutions: plugins that load or are refused with the right error,
// hostile solutions that each earn their status while kb carries on, Solution
// JSON built from sources (and not), and the build cache under concurrency.
#include <doctest/doctest.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "cuda/plausible.hpp"
#include "harness/cpu_floor.hpp"
#include "harness/trace_writer.hpp"
#include "plugin/build.hpp"
#include "plugin/plugin.hpp"
#include "schema/io.hpp"

namespace {

std::string temp_dir(const char* tag) {
  std::string t = std::string(KB_TEST_BUILD_DIR) + "/tmp-" + tag + "-XXXXXX";
  char* p = ::mkdtemp(t.data());
  REQUIRE(p != nullptr);
  return t;
}

kb::Definition definition() {
  auto d = kb::read_definition_file(std::string(KB_TEST_DATASET) + "/definitions/rmsnorm/rmsnorm_h64.json");
  REQUIRE(d.ok());
  return *d;
}

kb::Workload workload(std::int64_t batch) {
  kb::Workload w;
  w.uuid = "batch-" + std::to_string(batch);
  w.axes = {{"batch_size", batch}};
  w.inputs = {{"hidden_states", kb::InputSpec{}}, {"weight", kb::InputSpec{}}};
  return w;
}

kb::plugin::Options options(double timeout_s = 5) {
  kb::plugin::Options o;
  o.timeout_s = timeout_s;
  o.load_timeout_s = 20;
  o.worker_path = KB_TEST_WORKER;
  o.cache_dir = std::string(KB_TEST_BUILD_DIR) + "/cache";
  return o;
}

kb::BenchOptions bench(int trials = 2) {
  kb::BenchOptions b;
  b.trials = trials;
  b.time = false;
  return b;
}

const kb::Implementation& find(const std::vector<kb::Implementation>& impls, const std::string& name) {
  for (const auto& i : impls)
    if (i.name == name) return i;
  FAIL("no implementation " << name);
  return impls.front();
}

std::string read_text(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("timing an outside solution cannot be gamed: timed calls run on fresh inputs and are judged") {
  auto p = kb::plugin::load(KB_TEST_HOSTILE_PLUGIN, options(5.0));
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  auto impls = kb::plugin::implementations(*p);
  auto d = definition();
  kb::BenchOptions timed = bench(3);
  timed.time = true;
  // Correct while checked, then returns without writing: its timed outputs are still poison.
  auto lazy = kb::plugin::evaluate(d, workload(4), find(impls, "hostile_lazy"), timed);
  REQUIRE_MESSAGE(lazy.ok(), lazy.error().message);
  CHECK_MESSAGE(lazy->evaluation.status == kb::EvalStatus::incorrect_numerical, lazy->evaluation.log);
  CHECK_MESSAGE(lazy->evaluation.log.find("after timing, timed set 0") != std::string::npos, lazy->evaluation.log);
  CHECK_FALSE(lazy->evaluation.performance.has_value());
  // Results kept by a fingerprint of the inputs: every timed call meets an input it has not
  // seen, so the latency is that of the work (at least the 2 ms it adds when computing).
  auto memo = kb::plugin::evaluate(d, workload(4), find(impls, "hostile_memo"), timed);
  REQUIRE_MESSAGE(memo.ok(), memo.error().message);
  CHECK_MESSAGE(memo->evaluation.status == kb::EvalStatus::passed, memo->evaluation.log);
  REQUIRE(memo->evaluation.performance.has_value());
  CHECK_MESSAGE(memo->evaluation.performance->latency_ms >= 1.9, memo->evaluation.log);
  CHECK(memo->evaluation.log.find("one call on each of 5 fresh input sets") != std::string::npos);
  // An honest solution passes with a speedup against the timed oracle.
  auto good = kb::plugin::evaluate(d, workload(4), find(impls, "hostile_good"), timed);
  REQUIRE_MESSAGE(good.ok(), good.error().message);
  CHECK_MESSAGE(good->evaluation.status == kb::EvalStatus::passed, good->evaluation.log);
  REQUIRE(good->evaluation.performance.has_value());
  CHECK(good->evaluation.performance->latency_ms > 0);
  CHECK(good->evaluation.performance->reference_latency_ms > 0);
  CHECK(good->evaluation.performance->speedup_factor > 0);
}

TEST_CASE("a CPU latency under the host's copy time for the bytes moved is implausible") {
  CHECK(kb::implausible_cpu_latency(64e6, 0.0).find("no measurable work") != std::string::npos);
  CHECK(kb::implausible_cpu_latency(64e6, 1e-6).find("faster than the host copies") != std::string::npos);
  CHECK(kb::implausible_cpu_latency(4096, 10.0).empty());
  CHECK(kb::implausible_cpu_latency(64e6, 1000.0).empty());
}

TEST_CASE("plugins that cannot be loaded are refused with a clear error") {
  struct Case {
    std::string lib;
    kb::Code code;
    std::string needle;
  };
  std::string dir = KB_TEST_BUILD_DIR;
  std::vector<Case> cases = {
      {dir + "/no_such_plugin.so", kb::Code::io_error, "cannot open"},
      {std::string(KB_TEST_DATASET) + "/definitions/rmsnorm/rmsnorm_h64.json", kb::Code::not_found, "cannot load the library"},
      {dir + "/libkb_bad_table_0.so", kb::Code::not_found, "no kb_plugin_entry_v1 symbol"},
      {dir + "/libkb_bad_table_1.so", kb::Code::abi_mismatch, "plugin ABI version 99"},
      {dir + "/libkb_bad_table_2.so", kb::Code::abi_mismatch, "returned NULL"},
      {dir + "/libkb_bad_table_3.so", kb::Code::invalid_data, "run is NULL"},
      {dir + "/libkb_bad_table_4.so", kb::Code::invalid_data, "both named \"bad_a\""},
      {dir + "/libkb_bad_table_5.so", kb::Code::invalid_data, ".device is 7"},
      {dir + "/libkb_bad_table_6.so", kb::Code::invalid_data, "n_solutions is 0"},
      {dir + "/libkb_bad_table_7.so", kb::Code::invalid_data, "solutions[0].name is not a valid name"},
      {dir + "/libkb_bad_table_8.so", kb::Code::invalid_data, "struct_size is 4"},
      {dir + "/libkb_bad_table_9.so", kb::Code::invalid_data, "killed by SIGSEGV"},
      {dir + "/libkb_bad_table_10.so", kb::Code::invalid_data, "loading took longer than"},
      {dir + "/libkb_bad_table_11.so", kb::Code::invalid_data, ".device is -1 (expected 0 = cpu or 1 = cuda)"},
      {dir + "/libkb_bad_table_12.so", kb::Code::invalid_data, ".device is 2147483647 (expected 0 = cpu or 1 = cuda)"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.lib);
    kb::plugin::Options o = options(1.0);
    o.load_timeout_s = 2.0;  // the plugin that hangs in its entry point
    auto p = kb::plugin::load(c.lib, o);
    REQUIRE_FALSE(p.ok());
    CHECK(p.error().code == c.code);
    CHECK(p.error().message.find(c.lib) == 0);
    CHECK_MESSAGE(p.error().message.find(c.needle) != std::string::npos, p.error().message);
  }
}

TEST_CASE("the example plugin loads and passes") {
  auto p = kb::plugin::load(KB_TEST_EXAMPLE_PLUGIN, options());
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  auto impls = kb::plugin::implementations(*p);
  REQUIRE(impls.size() == 3);
  CHECK(impls[0].name == "example_c_rmsnorm_h4096");
  CHECK(impls[0].author == "kb-examples");
  auto d = definition();
  const auto& impl = find(impls, "example_c_rmsnorm_h64");
  CHECK(impl.supports(d).empty());
  CHECK_FALSE(impls[0].supports(d).empty());
  kb::BenchOptions b = bench(3);
  b.time = true;
  b.min_samples = 3;
  b.max_samples = 5;
  b.min_time_s = 0;
  auto r = kb::plugin::evaluate(d, workload(5), impl, b);
  REQUIRE_MESSAGE(r.ok(), r.error().message);
  CHECK_MESSAGE(r->evaluation.status == kb::EvalStatus::passed, r->evaluation.log);
  REQUIRE(r->evaluation.performance);
  CHECK(r->evaluation.performance->latency_ms > 0);
  CHECK(r->evaluation.log.find("one call on each of 5 fresh input sets") != std::string::npos);
}

TEST_CASE("hostile solutions each earn their status and kb carries on") {
  auto p = kb::plugin::load(KB_TEST_HOSTILE_PLUGIN, options(1.0));
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  auto impls = kb::plugin::implementations(*p);
  auto d = definition();
  std::string out = temp_dir("hostile");
  kb::TraceWriter writer(out);
  struct Case {
    std::string solution;
    kb::EvalStatus status;
    std::string needle;
  };
  std::vector<Case> cases = {
      {"hostile_segfault", kb::EvalStatus::runtime_error, "killed by SIGSEGV"},
      {"hostile_abort", kb::EvalStatus::runtime_error, "killed by SIGABRT"},
      {"hostile_hang", kb::EvalStatus::timeout, "ran longer than the limit (1 s a call"},
      {"hostile_write_past_output", kb::EvalStatus::runtime_error, "wrote outside output \"output\" (guard bytes changed)"},
      {"hostile_write_input", kb::EvalStatus::runtime_error, "modified input \"hidden_states\""},
      {"hostile_overrun_6k", kb::EvalStatus::runtime_error, "killed by SIGSEGV"},
      {"hostile_stale", kb::EvalStatus::incorrect_numerical, "trial 1"},
      {"hostile_wrong_shape", kb::EvalStatus::incorrect_shape, "changed its shape from [4, 64] to [4, 32]"},
      {"hostile_wrong_dtype", kb::EvalStatus::incorrect_dtype, "changed its dtype"},
      {"hostile_error", kb::EvalStatus::runtime_error, "refusing on purpose"},
      {"hostile_status_minus_one", kb::EvalStatus::runtime_error,
       "returned -1, which is not a kb_plugin_status (0 ok, 1 error, 2 unsupported)"},
      {"hostile_status_force_32bit", kb::EvalStatus::runtime_error,
       "returned 2147483647, which is not a kb_plugin_status"},
      {"hostile_output_device", kb::EvalStatus::runtime_error,
       "output #0: the solution changed its device from {1, 0} to {99, 0}"},
      {"hostile_output_device_negative", kb::EvalStatus::runtime_error,
       "output #0: the solution changed its device from {1, 0} to {-7, 0}"},
      {"hostile_output_dtype_code", kb::EvalStatus::incorrect_dtype,
       "output #0: the solution changed its dtype from {2, 32, 1} to {200, 32, 1}"},
  };
  std::size_t starts_before = (*p)->worker->starts();
  for (const auto& c : cases) {
    CAPTURE(c.solution);
    auto r = kb::plugin::evaluate(d, workload(4), find(impls, c.solution), bench());
    REQUIRE_MESSAGE(r.ok(), r.error().message);
    CHECK_MESSAGE(r->evaluation.status == c.status, r->evaluation.log);
    CHECK_MESSAGE(r->evaluation.log.find(c.needle) != std::string::npos, r->evaluation.log);
    kb::Trace t{d.name, workload(4), c.solution, r->evaluation};
    REQUIRE(writer.append("kb-tests", d, t).ok());
    // After every fault the next evaluation, in the same (or a replaced) worker, passes.
    auto g = kb::plugin::evaluate(d, workload(3), find(impls, "hostile_good"), bench());
    REQUIRE(g.ok());
    CHECK_MESSAGE(g->evaluation.status == kb::EvalStatus::passed, g->evaluation.log);
    kb::Trace tg{d.name, workload(3), std::string("hostile_good"), g->evaluation};
    REQUIRE(writer.append("kb-tests", d, tg).ok());
  }
  // segfault, abort, hang and the overrun into a guard page each cost a worker; the others did not.
  CHECK((*p)->worker->starts() - starts_before == 4);
  // The abort's message reached the log; the trace file is valid JSONL, one line per evaluation.
  std::string text = read_text(writer.path_for("kb-tests", d));
  std::istringstream lines(text);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    auto t = kb::read_trace(line, "trace");
    CHECK_MESSAGE(t.ok(), line);
    ++n;
  }
  CHECK(n == static_cast<int>(2 * cases.size()));
  CHECK(text.find("hostile: about to abort") != std::string::npos);
}

TEST_CASE("a solution's stdout/stderr is captured into the log, bounded") {
  auto p = kb::plugin::load(KB_TEST_HOSTILE_PLUGIN, options());
  REQUIRE(p.ok());
  auto impls = kb::plugin::implementations(*p);
  auto r = kb::plugin::evaluate(definition(), workload(2), find(impls, "hostile_chatty"), bench(1));
  REQUIRE(r.ok());
  CHECK(r->evaluation.status == kb::EvalStatus::passed);
  const std::string& log = r->evaluation.log;
  CHECK(log.find("solution stdout/stderr:\nchatty line 0 of output") != std::string::npos);
  CHECK(log.find("more bytes of output not kept") != std::string::npos);
  CHECK(log.size() < 20 * 1024);
}

TEST_CASE("SHA-256 matches FIPS 180-4 test vectors") {
  CHECK(kb::plugin::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(kb::plugin::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(kb::plugin::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(kb::plugin::sha256_hex(std::string(1000000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

namespace {

kb::Solution solution(const std::string& name) {
  auto s = kb::read_solution_file(std::string(KB_TEST_DATASET) + "/solutions/kb-tests/rmsnorm/rmsnorm_h64/" + name + ".json");
  REQUIRE_MESSAGE(s.ok(), s.error().message);
  return *s;
}

kb::EvaluationResult evaluate_solution(const kb::Solution& s, const kb::plugin::Options& o) {
  auto d = definition();
  auto p = kb::plugin::load_solution(s, d, o);
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  auto impls = kb::plugin::implementations(*p);
  REQUIRE(impls.size() == 1);
  CHECK(impls[0].name == s.name);
  auto r = kb::plugin::evaluate(d, workload(3), impls[0], bench());
  REQUIRE_MESSAGE(r.ok(), r.error().message);
  return *r;
}

}  // namespace

TEST_CASE("Solution JSON: built from sources, judged, or refused with the right status") {
  kb::plugin::Options o = options();
  o.cache_dir = temp_dir("cache");
  struct Case {
    std::string name;
    kb::EvalStatus status;
    std::string needle;
  };
  std::vector<Case> cases = {
      {"cpp_good", kb::EvalStatus::passed, "cpp_good ran on 3 rows"},
      {"cpp_two_files", kb::EvalStatus::passed, "compiled in"},
      {"cpp_compile_error", kb::EvalStatus::compile_error, "this is not C++"},
      {"cpp_missing_symbol", kb::EvalStatus::compile_error, "rmsnorm_run"},
      {"cpp_wrong_arity", kb::EvalStatus::compile_error,
       "kb: entry point rmsnorm_run must take 3 parameters (hidden_states, weight, output)"},
      {"cpp_include_device", kb::EvalStatus::compile_error,
       "src/dev.cpp:2: #include \"/dev/zero\" names a path outside the solution"},
      {"cpp_segfault", kb::EvalStatus::runtime_error, "killed by SIGSEGV"},
      {"cpp_nonzero_return", kb::EvalStatus::runtime_error, "rmsnorm_run returned 7"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto r = evaluate_solution(solution(c.name), o);
    CHECK_MESSAGE(r.evaluation.status == c.status, r.evaluation.log);
    CHECK_MESSAGE(r.evaluation.log.find(c.needle) != std::string::npos, r.evaluation.log);
  }
  // A second load reuses the cached build, successful or not.
  auto again = kb::plugin::load_solution(solution("cpp_good"), definition(), o);
  REQUIRE(again.ok());
  CHECK((*again)->build_note.find("reused") != std::string::npos);
  auto bad_again = kb::plugin::load_solution(solution("cpp_compile_error"), definition(), o);
  REQUIRE(bad_again.ok());
  CHECK((*bad_again)->build_error);
  CHECK((*bad_again)->build_note.find("cached") != std::string::npos);
}

TEST_CASE("includes of paths outside the solution are refused before the compiler runs") {
  using kb::plugin::refused_include;
  CHECK(refused_include("a.cpp", "#include <vector>\n#include \"b.h\"\n#include \"sub/c.h\"\n").empty());
  CHECK(refused_include("sub/a.cpp", "#include \"../b.h\"\n").empty());
  CHECK(refused_include("a.cpp", "asm(\".incbin \\\"table.bin\\\"\");\n").empty());
  CHECK(refused_include("a.cpp", "int x; // #include \"/dev/zero\" in a comment\n").empty());
  struct Case {
    const char* path;
    const char* content;
    const char* needle;
  };
  for (const Case& c : {Case{"a.cpp", "int x;\n  #  include \"/dev/zero\"\n", "src/a.cpp:2: #include \"/dev/zero\""},
                        Case{"a.cpp", "#include </proc/self/environ>\n", "#include \"/proc/self/environ\""},
                        Case{"a.cpp", "#include \"../include/kb/kb.h\"\n", "#include \"../include/kb/kb.h\""},
                        Case{"sub/a.cpp", "#include \"../../x.h\"\n", "src/sub/a.cpp:1:"},
                        Case{"a.cpp", "#include <../../../etc/passwd>\n", "etc/passwd"},
                        Case{"a.cpp", "#include_next \"/etc/hosts\"\n", "#include_next"},
                        Case{"a.cpp", "#embed \"/dev/urandom\"\n", "#embed \"/dev/urandom\""},
                        Case{"a.cu", "asm(\".incbin \\\"/dev/zero\\\"\");\n", ".incbin \"/dev/zero\""}}) {
    CAPTURE(c.content);
    std::string why = refused_include(c.path, c.content);
    CHECK_MESSAGE(why.find(c.needle) != std::string::npos, why);
    CHECK(why.find("names a path outside the solution") != std::string::npos);
  }
}

TEST_CASE("a build is bounded: memory, output size and wall time, each a COMPILE_ERROR naming the limit") {
  auto d = definition();
  kb::Solution base = solution("cpp_good");
  std::string cache = temp_dir("limits");
  auto build = [&](const std::string& name, const std::string& source, kb::plugin::BuildLimits limits) {
    kb::Solution s = base;
    s.name = name;
    s.spec.entry_point = "main.cpp::rmsnorm_run";
    s.sources = {{"main.cpp", source}};
    kb::plugin::BuildOptions bo;
    bo.cache_dir = cache;
    bo.limits = limits;
    auto t0 = std::chrono::steady_clock::now();
    auto r = kb::plugin::build_solution(s, d, bo);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    REQUIRE_MESSAGE(r.ok(), r.error().message);
    CHECK_FALSE(r->ok());
    CHECK_MESSAGE(r->log.find("# limits: ") != std::string::npos, r->log);
    return std::make_pair(*r, secs);
  };
  // A macro hides the path from the include check; the address-space limit stops the compiler.
  kb::plugin::BuildLimits small;
  small.memory_bytes = 1ull << 30;
  // Pairs, not structured bindings: doctest's messages capture them in lambdas (clang 14 cannot).
  const auto mem_built = build("zero_by_macro", "#define Z \"/dev/zero\"\n#include Z\n", small);
  const auto& mem = mem_built.first;
  const double mem_s = mem_built.second;
  CHECK(mem_s < 60);
  CHECK_MESSAGE(mem.log.find("out of memory under the build's limit of 1 GiB") != std::string::npos, mem.log);
  CHECK_MESSAGE(mem.log.find("kb: the compiler failed") != std::string::npos, mem.log);
  // The wall-time limit kills the compiler's whole process group.
  kb::plugin::BuildLimits quick;
  quick.wall_seconds = 0.2;
  const auto slow_built = build("too_slow",
                              "template <int N> struct F { static constexpr long v = F<N - 1>::v + F<N - 2>::v; };\n"
                              "template <> struct F<1> { static constexpr long v = 1; };\n"
                              "template <> struct F<0> { static constexpr long v = 0; };\n"
                              "#include <dlpack/dlpack.h>\n#include <regex>\n#include <iostream>\n#include <random>\n"
                              "void rmsnorm_run(const DLTensor*, const DLTensor*, DLTensor*) {}\n",
                              quick);
  const auto& slow = slow_built.first;
  const double slow_s = slow_built.second;
  CHECK(slow_s < 20);
  CHECK_MESSAGE(slow.log.find("ran longer than 0.2 s (the build's limit) and was killed") != std::string::npos, slow.log);
  // The output limit: a source whose object file outgrows 64 KiB.
  kb::plugin::BuildLimits tiny_output;
  tiny_output.output_bytes = 64 * 1024;
  const auto big_built = build("big_output",
                            "#include <dlpack/dlpack.h>\nstatic volatile char table[1 << 20] = {1};\n"
                            "void rmsnorm_run(const DLTensor*, const DLTensor*, DLTensor* y) { table[0] = 2; (void)y; }\n",
                            tiny_output);
  const auto& big = big_built.first;
  const double big_s = big_built.second;
  CHECK(big_s < 60);
  CHECK_MESSAGE(big.log.find("64 KiB per file written") != std::string::npos, big.log);
  CHECK_MESSAGE(big.log.find("a file outgrew the build's limit of 64 KiB") != std::string::npos, big.log);
  CHECK_MESSAGE(big.log.find("kb: the compiler failed") != std::string::npos, big.log);
}

TEST_CASE("Solution JSON in languages kb cannot run is refused by name") {
  for (const char* name : {"python_solution", "triton_solution"}) {
    auto p = kb::plugin::load_solution(solution(name), definition(), options());
    REQUIRE_FALSE(p.ok());
    CHECK(p.error().code == kb::Code::unsupported);
    CHECK(p.error().message.find("is not supported: kb builds and runs cpp and cuda solutions only") != std::string::npos);
  }
  kb::Solution s = solution("cpp_good");
  s.spec.language = "tilelang";
  CHECK(kb::plugin::load_solution(s, definition(), options()).error().code == kb::Code::unsupported);
}

TEST_CASE("two builders of one solution at once: one compiles, both load the same library") {
  kb::plugin::Options o = options();
  o.cache_dir = temp_dir("race");
  kb::Solution s = solution("cpp_good");
  kb::plugin::BuildOptions bo;
  bo.cache_dir = o.cache_dir;
  auto d = definition();
  kb::Result<kb::plugin::BuildResult> a = kb::make_error(kb::Code::internal, "not run"), b = a;
  std::thread t1([&] { a = kb::plugin::build_solution(s, d, bo); });
  std::thread t2([&] { b = kb::plugin::build_solution(s, d, bo); });
  t1.join();
  t2.join();
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->ok());
  CHECK(b->ok());
  CHECK(a->library == b->library);
  CHECK(a->cached != b->cached);  // exactly one of them compiled
  // No temporary directories are left behind.
  std::string ls = o.cache_dir + "/solutions";
  int tmp_left = 0;
  if (DIR* dir = ::opendir(ls.c_str())) {
    while (dirent* e = ::readdir(dir))
      if (std::string(e->d_name).find(".tmp.") != std::string::npos) ++tmp_left;
    ::closedir(dir);
  }
  CHECK(tmp_left == 0);
}

TEST_CASE("all trials in one worker request: the timed sets judged again after timing") {
  auto p = kb::plugin::load(KB_TEST_HOSTILE_PLUGIN, options());
  REQUIRE(p.ok());
  auto impls = kb::plugin::implementations(*p);
  kb::BenchOptions timed = bench(3);
  timed.time = true;
  struct Case {
    const char* name;
    kb::EvalStatus status;
    const char* needle;
  } cases[] = {
      {"hostile_good", kb::EvalStatus::passed, "5 timed sets judged after timing"},
      {"hostile_stale", kb::EvalStatus::incorrect_numerical, "trial 1: output \"output\""},  // remembers call 0
      {"hostile_write_input", kb::EvalStatus::runtime_error, "modified input"},
      {"hostile_write_past_output", kb::EvalStatus::runtime_error, "wrote outside output"},
      {"hostile_segfault", kb::EvalStatus::runtime_error, "SIGSEGV"},
      {"hostile_hang", kb::EvalStatus::timeout, "was killed"},
      {"hostile_wrong_shape", kb::EvalStatus::incorrect_shape, "shape"},
      {"hostile_good", kb::EvalStatus::passed, "input sets"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto r = kb::plugin::evaluate_in_worker(definition(), workload(3), find(impls, c.name),
                                            std::string(c.name) == "hostile_hang" ? bench(2) : timed);
    REQUIRE(r.ok());
    CAPTURE(r->evaluation.log);
    CHECK(r->evaluation.status == c.status);
    CHECK(r->evaluation.log.find(c.needle) != std::string::npos);
    if (c.status == kb::EvalStatus::passed) {
      REQUIRE(r->evaluation.performance);
      CHECK(r->evaluation.performance->latency_ms > 0);
      CHECK(r->evaluation.performance->extra->find("\"rotations_checked\":5") != std::string::npos);
    }
  }
}

TEST_CASE("implausible speeds are named against the measured ceilings") {
  // 1 GB in 1 ms is 1000 GB/s: plausible under 3000 GB/s of copy bandwidth, not under 500.
  CHECK(kb::cuda::implausible_speed(1e9, 0, 1.0, 3000, 0).empty());
  CHECK(kb::cuda::implausible_speed(1e9, 0, 1.0, 500, 0).find("copy bandwidth") != std::string::npos);
  // 1e12 FLOP in 1 ms is 1000 TFLOP/s: fine against a 600 TFLOP/s MMA rate (4x margin), not against 100.
  CHECK(kb::cuda::implausible_speed(0, 1e12, 1.0, 0, 600).empty());
  CHECK(kb::cuda::implausible_speed(0, 1e12, 1.0, 0, 100).find("tensor-core") != std::string::npos);
  CHECK(kb::cuda::implausible_speed(1e9, 1e12, 0, 500, 100).empty());  // no latency, no verdict
}
