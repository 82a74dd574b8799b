// GPU faults and anti-gaming on a CUDA device, for outside CUDA solutions (in
// kb-worker) and in-process ones (kb::evaluate -> gpu_eval.cpp, the hostile
// plugin's run functions behind an adapter): a kernel that never ends
// (TIMEOUT, worker killed), an illegal address (RUNTIME_ERROR naming the CUDA
// error, worker replaced), a write past the output (guard bytes), a result
// remembered from an earlier call, or replayed from a device-side cache keyed
// by a fingerprint of the inputs (timed calls on inputs drawn fresh before
// each call, a few of them judged after timing), work on another stream (the
// gated stream check); a good plugin solution and a cuda Solution JSON built
// with nvcc pass after each fault.
// Prints "skipped: no CUDA device" and exits 77 without one.
//
// usage: test_plugin_gpu [KB_WORKER HOSTILE_CUDA.so DATASET CUDA_SOLUTION.json CACHE_DIR]
//   defaults: the build's paths; else files next to this executable
//   (kb-worker, libkb_hostile_cuda_plugin.so) and tests/plugin/... under the working directory.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/cupti.hpp"
#include "cuda/device.hpp"
#include "harness/harness.hpp"
#include "kb/kb.h"
#include "plugin/plugin.hpp"
#include "schema/io.hpp"

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
  std::fflush(stdout);
  if (!ok) ++failures;
}

bool exists(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0;
}

std::string self_dir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string s(buf, static_cast<std::size_t>(n));
  return s.substr(0, s.rfind('/'));
}

std::string pick(int argc, char** argv, int i, const char* built, const std::string& beside) {
  if (argc > i) return argv[i];
  if (exists(built)) return built;
  return beside;
}

kb::Workload workload(std::int64_t batch) {
  kb::Workload w;
  w.uuid = "gpu-batch-" + std::to_string(batch);
  w.axes = {{"batch_size", batch}};
  w.inputs = {{"hidden_states", kb::InputSpec{}}, {"weight", kb::InputSpec{}}};
  return w;
}

std::string status_of(const kb::Result<kb::EvaluationResult>& r) {
  return r ? std::string(kb::eval_status_name(r->evaluation.status)) : "error: " + r.error().message;
}

std::string log_of(const kb::Result<kb::EvaluationResult>& r) {
  if (!r) return r.error().message;
  std::string l = r->evaluation.log;
  return l.size() > 600 ? l.substr(l.size() - 600) : l;
}

// The hostile plugin's solutions as kb's own in-process CUDA solutions.
std::vector<kb::Implementation> in_process(const std::string& so) {
  std::vector<kb::Implementation> out;
  void* lib = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return out;
  auto entry = reinterpret_cast<kb_plugin_entry_v1_fn>(::dlsym(lib, KB_PLUGIN_ENTRY_SYMBOL));
  const kb_plugin_table* t = entry ? entry(KB_PLUGIN_ABI_VERSION) : nullptr;
  for (std::uint32_t i = 0; t && i < t->n_solutions; ++i) {
    const kb_plugin_solution sol = t->solutions[i];
    kb::Implementation impl;
    impl.name = std::string("inproc_") + sol.name;
    impl.author = "kb-tests";
    impl.device = kb::Device::cuda;
    impl.supports = [](const kb::Definition&) { return std::string(); };
    impl.run_cuda = [sol](const kb::CudaCall& c) -> kb::Status {
      std::vector<DLTensor> ts;
      std::vector<std::vector<std::int64_t>> shapes;
      auto add = [&](const kb::cuda::DeviceTensor& d) {
        shapes.push_back(d.shape);
        DLTensor x{};
        x.data = d.data;
        x.device = DLDevice{kDLCUDA, 0};
        x.ndim = static_cast<int>(d.shape.size());
        x.dtype = DLDataType{kDLFloat, 32, 1};
        ts.push_back(x);
      };
      for (const auto& a : c.inputs) add(*a.tensor);
      for (const auto& o : c.outputs) add(o);
      for (std::size_t k = 0; k < ts.size(); ++k) ts[k].shape = shapes[k].data();
      std::vector<kb_plugin_arg> ins(c.inputs.size());
      for (std::size_t k = 0; k < ins.size(); ++k) {
        ins[k].kind = KB_ARG_TENSOR;
        ins[k].tensor = &ts[k];
      }
      char msg[256] = {0};
      kb_plugin_call call{};
      call.struct_size = sizeof call;
      call.definition = sol.definition;
      call.inputs = ins.data();
      call.n_inputs = ins.size();
      call.outputs = ts.data() + ins.size();
      call.n_outputs = c.outputs.size();
      call.stream = c.stream;
      call.message = msg;
      call.message_size = sizeof msg;
      if (sol.run(&call) != KB_PLUGIN_OK) return kb::make_error(kb::Code::invalid_data, msg);
      return kb::ok_status();
    };
    out.push_back(std::move(impl));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  auto n = kb::cuda::device_count();
  if (!n) {
    std::printf("skipped: no CUDA device (%s)\n", n.error().message.c_str());
    return 77;
  }
  const std::string dir = self_dir();
  const std::string worker = pick(argc, argv, 1, KB_TEST_WORKER, dir + "/kb-worker");
  const std::string hostile = pick(argc, argv, 2, KB_TEST_HOSTILE_CUDA_PLUGIN, dir + "/libkb_hostile_cuda_plugin.so");
  const std::string dataset = pick(argc, argv, 3, KB_TEST_DATASET, "tests/plugin/dataset");
  const std::string json = pick(argc, argv, 4, KB_TEST_CUDA_SOLUTION, "tests/plugin/cuda_solutions/cuda_good.json");
  const std::string cache = argc > 5 ? argv[5] : (exists(KB_TEST_BUILD_DIR) ? KB_TEST_BUILD_DIR "/gpu-cache" : "/tmp/kb-plugin-gpu-cache");
  std::printf("worker %s\nplugin %s\ndataset %s\n", worker.c_str(), hostile.c_str(), dataset.c_str());

  auto def = kb::read_definition_file(dataset + "/definitions/rmsnorm/rmsnorm_h64.json");
  if (!def) {
    std::printf("FAIL: %s\n", def.error().message.c_str());
    return 1;
  }
  kb::plugin::Options po;
  po.timeout_s = 5;
  po.load_timeout_s = 60;
  po.worker_path = worker;
  po.cache_dir = cache;
  auto plugin = kb::plugin::load(hostile, po);
  if (!plugin) {
    std::printf("FAIL: loading %s: %s\n", hostile.c_str(), plugin.error().message.c_str());
    return 1;
  }
  auto impls = kb::plugin::implementations(*plugin);
  auto find = [&](const std::string& name) -> const kb::Implementation* {
    for (const auto& i : impls)
      if (i.name == name) return &i;
    return nullptr;
  };
  kb::BenchOptions timed;
  timed.trials = 2;
  kb::BenchOptions untimed = timed;
  untimed.time = false;
  kb::Workload w = workload(8);

  auto run = [&](const std::string& name, const kb::BenchOptions& o) {
    const kb::Implementation* impl = find(name);
    if (!impl) return kb::Result<kb::EvaluationResult>(kb::make_error(kb::Code::not_found, "no " + name));
    return kb::plugin::evaluate(*def, w, *impl, o);
  };
  auto expect = [&](const std::string& name, const kb::BenchOptions& o, const char* status, const char* needle) {
    auto r = run(name, o);
    bool ok = status_of(r) == status && (!needle || log_of(r).find(needle) != std::string::npos ||
                                         (r && r->evaluation.log.find(needle) != std::string::npos));
    check(ok, "outside " + name + ": " + status_of(r) + (ok ? "" : " | " + log_of(r)));
    return r;
  };

  // How many timed calls an evaluation judged after timing on fresh inputs, and how many inputs it drew again
  // before each call (-1: the log does not say).
  auto fresh_counts = [](const kb::Result<kb::EvaluationResult>& r) {
    std::pair<long, long> out{-1, -1};
    if (!r) return out;
    const std::string& l = r->evaluation.log;
    const auto drawn = l.find("on fresh inputs (");
    const auto judged = l.find(" drawn at random judged after timing");
    if (drawn != std::string::npos) out.second = std::strtol(l.c_str() + drawn + 17, nullptr, 10);
    if (judged != std::string::npos) {
      auto at = l.rfind(' ', judged - 1);
      at = l.rfind(',', at);
      std::size_t digits = l.find_first_of("0123456789", at);
      if (digits != std::string::npos && digits < judged) out.first = std::strtol(l.c_str() + digits, nullptr, 10);
    }
    return out;
  };

  // Outside solutions, in kb-worker.
  {
    auto r = expect("hostile_cuda_good", timed, "PASSED", "drawn at random judged after timing");
    const auto [judged, drawn] = fresh_counts(r);
    check(judged >= 3 && drawn == 2,
          "outside hostile_cuda_good: " + std::to_string(judged) + " timed calls judged, " + std::to_string(drawn) +
              " inputs (hidden_states, weight) drawn fresh before each call");
  }
  pid_t before = (*plugin)->worker->pid();
  (void)expect("hostile_cuda_kernel_hang", untimed, "TIMEOUT", "was killed");
  check((*plugin)->worker->pid() != before, "the hung worker was replaced");
  (void)expect("hostile_cuda_good", untimed, "PASSED", nullptr);
  (void)expect("hostile_cuda_illegal_address", untimed, "RUNTIME_ERROR", "cudaErrorIllegalAddress");
  (void)expect("hostile_cuda_good", untimed, "PASSED", nullptr);
  (void)expect("hostile_cuda_write_past_output", untimed, "RUNTIME_ERROR", "wrote outside output");
  (void)expect("hostile_cuda_stale", timed, "INCORRECT_NUMERICAL", nullptr);
  // The fingerprint cache computes correctly whatever it has not seen: its checked calls are right (first, while
  // its cache holds nothing but these inputs' outputs); its timed calls on fresh inputs replay other inputs' outputs.
  (void)expect("hostile_cuda_fingerprint_cache", untimed, "PASSED", nullptr);
  (void)expect("hostile_cuda_fingerprint_cache", timed, "INCORRECT_NUMERICAL", "a timed call's output was wrong");
  (void)expect("hostile_cuda_other_stream", untimed, "RUNTIME_ERROR", "stream other than");
  auto good = expect("hostile_cuda_good", timed, "PASSED", "stream check: outputs untouched");
  if (good && good->evaluation.performance) {
    const auto& extra = good->evaluation.performance->extra.value_or("");
    check(extra.find("\"timing\":\"cuda_events\"") != std::string::npos && extra.find("\"implausible\":\"\"") != std::string::npos,
          "worker timing recorded with CUDA events, nothing implausible: " + extra);
    // The launch floors the worker measured: positive, the one-read kernel not faster than the empty one.
    auto number_after = [&](const std::string& key) {
      const auto at = extra.find("\"" + key + "\":");
      return at == std::string::npos ? -1.0 : std::strtod(extra.c_str() + at + key.size() + 3, nullptr);
    };
    const double empty_ms = number_after("empty_kernel_ms"), one_read_ms = number_after("one_read_kernel_ms");
    check(empty_ms > 0 && one_read_ms >= empty_ms * 0.9,
          "worker launch floors recorded (empty " + std::to_string(empty_ms) + " ms, one read " +
              std::to_string(one_read_ms) + " ms)");
  }

  // --cupti on an outside solution: kb-worker times its kernels alone from
  // CUPTI's records; the span lies inside the events' latency (5% slack for
  // two medians of different sample sets).
  {
    kb::BenchOptions with_cupti = timed;
    with_cupti.cupti = true;
    auto r = expect("hostile_cuda_good", with_cupti, "PASSED", "CUPTI kernel time: ");
    const std::string extra = r && r->evaluation.performance ? r->evaluation.performance->extra.value_or("") : "";
    const auto at = extra.find("\"cupti_kernel_ms\":");
    std::string why;
    if (at == std::string::npos && !kb::cuda::cupti_available(&why)) {
      std::printf("skipped: CUPTI in the worker (CUPTI cannot record here: %s)\n", why.c_str());
    } else {
      const double kernel_ms = at == std::string::npos ? -1 : std::strtod(extra.c_str() + at + 18, nullptr);
      const double latency_ms = r && r->evaluation.performance ? r->evaluation.performance->latency_ms : 0;
      check(kernel_ms > 0 && kernel_ms <= latency_ms * 1.05 && extra.find("\"cupti_graph\":true") != std::string::npos,
            "CUPTI kernel time from the worker: " + std::to_string(kernel_ms) + " ms against the events' " +
                std::to_string(latency_ms) + " ms | " + extra);
    }
  }

  // A cuda Solution JSON, built with nvcc into the cache, judged in the worker.
  auto sj = kb::read_solution_file(json);
  if (!sj) {
    check(false, "reading " + json + ": " + sj.error().message);
  } else {
    auto sp = kb::plugin::load_solution(*sj, *def, po);
    if (!sp) {
      check(false, "cuda Solution JSON: " + sp.error().message);
    } else if ((*sp)->build_error && (*sp)->build_error->find("not found") != std::string::npos) {
      std::printf("skipped: the cuda Solution JSON (no nvcc on this machine: %s)\n", (*sp)->build_note.c_str());
    } else {
      auto simpls = kb::plugin::implementations(*sp);
      auto r = kb::plugin::evaluate(*def, w, simpls.at(0), timed);
      check(status_of(r) == "PASSED", "cuda Solution JSON built with nvcc: " + status_of(r) + " | " + log_of(r));
    }
  }

  // The same kernels in-process: kb's own CUDA evaluation (gpu_eval.cpp).
  auto local = in_process(hostile);
  check(local.size() == 7, "in-process adapters for the hostile plugin");
  for (const auto& impl : local) {
    const char* want = nullptr;
    const char* needle = nullptr;
    // The adapters are not kb's own code (Implementation::trusted is false): timed on fresh inputs.
    if (impl.name == "inproc_hostile_cuda_good") want = "PASSED", needle = "drawn at random judged after timing";
    if (impl.name == "inproc_hostile_cuda_write_past_output") want = "RUNTIME_ERROR", needle = "wrote outside output";
    if (impl.name == "inproc_hostile_cuda_stale") want = "INCORRECT_NUMERICAL", needle = "a timed call's output was wrong";
    if (impl.name == "inproc_hostile_cuda_fingerprint_cache")
      want = "INCORRECT_NUMERICAL", needle = "a timed call's output was wrong";
    if (impl.name == "inproc_hostile_cuda_other_stream") want = "RUNTIME_ERROR", needle = "stream other than";
    if (!want) continue;  // hangs and illegal addresses would end this process: workers exist for them
    auto r = kb::evaluate(*def, w, impl, timed);
    bool ok = status_of(r) == want && r && r->evaluation.log.find(needle) != std::string::npos;
    check(ok, "in-process " + impl.name + ": " + status_of(r) + (ok ? "" : " | " + log_of(r)));
    if (impl.name == "inproc_hostile_cuda_good") {
      const auto [judged, drawn] = fresh_counts(r);
      check(judged >= 3 && drawn == 2, "in-process hostile_cuda_good: " + std::to_string(judged) +
                                           " timed calls judged, " + std::to_string(drawn) + " inputs drawn fresh");
    }
  }
  // The same kernels marked as kb's own (trusted): timed on the rotating trial sets, every rotation judged again.
  // The fingerprint cache passes there, which is why untrusted code is timed on fresh inputs: each rotation's
  // outputs were replayed for that rotation's own inputs, so they are right. Another batch size: the cache starts
  // empty again (it is dropped when the output size changes).
  const kb::Workload w9 = workload(9);
  for (auto impl : local) {
    if (impl.name != "inproc_hostile_cuda_good" && impl.name != "inproc_hostile_cuda_fingerprint_cache") continue;
    impl.trusted = true;
    auto r = kb::evaluate(*def, w9, impl, timed);
    bool ok = status_of(r) == "PASSED" && r && r->evaluation.log.find("rotations re-checked after timing") != std::string::npos;
    check(ok, "in-process " + impl.name + " as trusted code (rotating sets, no fresh inputs): " + status_of(r) +
                  (ok ? "" : " | " + log_of(r)));
  }

  // Two or more GPUs: an illegal address in-process on device 1. CUDA documents a sticky error as leaving the
  // process unusable, device 0 included (cudaStreamCreate there fails with device 1's error), so kb refuses every
  // device afterwards with a clear error, never a crash or a hang. Last: the process stays poisoned.
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices >= 2) {
    const kb::Implementation* bad = nullptr;
    const kb::Implementation* good = nullptr;
    for (const auto& impl : local) {
      if (impl.name == "inproc_hostile_cuda_illegal_address") bad = &impl;
      if (impl.name == "inproc_hostile_cuda_good") good = &impl;
    }
    if (bad && good) {
      (void)cudaSetDevice(1);
      auto r1 = kb::evaluate(*def, w, *bad, untimed);
      const std::string log1 = log_of(r1);
      check(log1.find("sticky error") != std::string::npos,
            "device 1: an illegal address in-process is reported as a sticky error: " + status_of(r1) + " | " + log1);
      auto r2 = kb::evaluate(*def, w, *good, untimed);
      check(!r2 && r2.error().message.find("unusable") != std::string::npos,
            "device 1 afterwards: kb refuses it as unusable: " + status_of(r2) + " | " + log_of(r2));
      (void)cudaSetDevice(0);
      auto r0 = kb::evaluate(*def, w, *good, timed);
      check(!r0 && r0.error().message.find("unusable") != std::string::npos,
            "device 0 afterwards: refused as unusable too (the process is poisoned): " + status_of(r0) + " | " +
                log_of(r0));
    }
  } else {
    std::printf("skipped: a sticky error on one of two devices (%d usable)\n", devices);
  }
  std::printf("%s\n", failures ? (std::to_string(failures) + " failures").c_str() : "all passed");
  return failures ? 1 : 0;
}
