// Outside solutions: shared libraries exporting kb_plugin_entry_v1 (kb.h,
// "Plugins") and Solution JSON built from C++/CUDA sources (build.hpp). Each
// becomes an Implementation whose calls run in the plugin's worker process
// (lib/worker/); kb::plugin::evaluate() judges one with the harness and adds
// what only the worker saw to the record.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "harness/harness.hpp"
#include "harness/implementation.hpp"
#include "plugin/build.hpp"
#include "schema/model.hpp"
#include "worker/worker.hpp"

namespace kb::plugin {

struct Options {
  double timeout_s = 30;      // per call (TIMEOUT past it)
  double load_timeout_s = 0;  // starting a worker and loading the library; <= 0: max(timeout_s, 10)
  std::string worker_path;  // "" = $KB_WORKER or the kb-worker built/installed with kb
  std::string cache_dir;    // Solution JSON builds; "" = default_cache_dir()
  int cuda_device = -1;     // the worker's CUDA device (kb bench: the one it runs on); -1: the worker's default
  BuildLimits build_limits;  // each compiler run of a Solution JSON build
};

// A loaded library and its worker; shared by the Implementations of its solutions.
class Plugin {
 public:
  std::string path;  // the library (for a Solution JSON: the built one, or "" when the build failed)
  std::vector<worker::SolutionInfo> solutions;
  // Solution JSON whose build failed: the compiler's output (COMPILE_ERROR).
  std::optional<std::string> build_error;
  std::string build_note;  // "built in 2.1 s" / "reused the cached build" (Solution JSON)
  std::mutex mutex;        // serializes calls on the worker
  std::unique_ptr<worker::Worker> worker;
};

// One solution of a plugin: what its Implementation's calls and evaluate() share.
class Session {
 public:
  std::shared_ptr<Plugin> plugin;
  std::size_t index = 0;
  // Per evaluation (reset by evaluate()):
  bool timed_out = false;
  std::optional<EvalStatus> verdict;  // INCORRECT_SHAPE / INCORRECT_DTYPE reported by the worker
  std::vector<double> call_ms;        // the worker's timing of each successful call
  Status run(const ImplementationCall& call);
};

// Starts a worker for the library at `path` and reads its table. Errors name the path.
Result<std::shared_ptr<Plugin>> load(const std::string& path, const Options& options);

// A Solution JSON (language cpp or cuda): built, or found in the cache, and
// loaded. A failed build is not an error: the Plugin has build_error and one
// solution, whose evaluations are COMPILE_ERROR. Errors: unsupported (python,
// triton, tilelang; cuda without nvcc), invalid_data (its definition is not
// `d`), and load()'s.
Result<std::shared_ptr<Plugin>> load_solution(const Solution& s, const Definition& d, const Options& options);

// The Implementations of a plugin's solutions (device as the table says).
std::vector<Implementation> implementations(const std::shared_ptr<Plugin>& p);

// kb::evaluate() for any implementation; for outside ones also: TIMEOUT,
// COMPILE_ERROR, INCORRECT_SHAPE/DTYPE seen by the worker, the worker's own
// timing, and the solution's captured stdout/stderr in the log.
Result<EvaluationResult> evaluate(const Definition& d, const Workload& w, const Implementation& impl,
                                  const BenchOptions& opt);

// How CUDA outside solutions are judged (evaluate() calls it for them; tests
// call it for CPU ones too): every trial's inputs in one worker request, the
// stream check (CUDA), timing in the worker rotating through the trials
// (CUDA: events, cold L2), and every trial's outputs judged after the checked
// calls and again after timing; implausible speeds flagged. Not for sampling.
Result<EvaluationResult> evaluate_in_worker(const Definition& d, const Workload& w, const Implementation& impl,
                                            const BenchOptions& opt);

// Languages kb can build ("cpp", "cuda"); "" when `language` is one, else why not.
std::string unsupported_language(const std::string& language);

// $KB_CACHE_DIR, else $XDG_CACHE_HOME/kb, else $HOME/.cache/kb, else /tmp/kb-cache-<uid>.
std::string default_cache_dir();

}  // namespace kb::plugin
