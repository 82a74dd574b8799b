// The parent's side of an isolated worker: a kb-worker process that loads one
// plugin and runs its solutions on tensors in shared memory, fed and watched
// by kb. A crash (the signal is named), a hang past the time limit (the
// worker is killed), a write past a buffer (guard bytes) or into an input are
// reported as values; the next call starts a fresh worker. Nothing here
// throws or prints; the worker's stdout/stderr are captured, bounded.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "cuda/timing.hpp"
#include "schema/dtype.hpp"
#include "schema/model.hpp"

namespace kb::worker {

struct Options {
  double timeout_s = 30;       // per call
  double load_timeout_s = 0;   // starting the worker and loading the plugin; <= 0: max(timeout_s, 10)
  std::string worker_path;  // "" = find_worker_executable("")
  std::size_t max_output_bytes = 16 * 1024;  // captured stdout/stderr kept per take_output()
  int cuda_device = -1;  // the CUDA device the worker runs CUDA solutions on (made current at the first); -1: its default
};

// Where kb-worker is: `explicit_path` if set, else $KB_WORKER, else the one
// built with kb, else the installed one. io_error when none exists.
Result<std::string> find_worker_executable(const std::string& explicit_path);

// "SIGSEGV (segmentation fault)".
std::string signal_description(int sig);

struct SolutionInfo {
  std::string definition, name, author;
  std::optional<std::string> description;
  bool cuda = false;
  bool operator==(const SolutionInfo&) const = default;
};

// One argument of a call as the parent holds it.
struct InArg {
  bool is_tensor = true;
  DType dtype = DType::float32;
  std::vector<std::int64_t> shape;
  const std::byte* data = nullptr;
  std::size_t nbytes = 0;
  std::optional<ScalarValue> scalar;  // when !is_tensor
};
struct OutArg {
  DType dtype = DType::float32;
  std::vector<std::int64_t> shape;
  std::byte* data = nullptr;  // kb's buffer: copied in (poisoned) before, copied back after
  std::size_t nbytes = 0;
};

enum class Outcome {
  ok,
  failed,       // the solution reported an error, or broke a rule (guard bytes, inputs written)
  unsupported,  // the solution declined the shapes
  crashed,      // the worker died (signal or exit)
  timed_out,    // the call outran the limit; the worker was killed
  wrong_shape,  // the solution rewrote an output's shape (INCORRECT_SHAPE)
  wrong_dtype,  // the solution rewrote an output's dtype (INCORRECT_DTYPE)
};

struct CallResult {
  Outcome outcome = Outcome::ok;
  std::string message;  // "" for ok
  double call_ms = 0;   // the worker's own timing of the run function
};

// kOpEvaluate (protocol.hpp): the trials' argument sets in one request, so the
// worker can check the solution's stream discipline and time it rotating
// through the sets (CUDA: events, cold L2) with every set's outputs returned
// twice: after the checked calls and after timing.
//
// The timed pass runs on `timed_inputs` when given: inputs drawn fresh (other
// seeds), so a solution that caches results by a fingerprint of its inputs
// meets inputs it has not seen. CPU solutions are timed once per set (every
// sample a first visit, so such a cache never hits); CUDA solutions rotate.
struct SetArgs {
  std::vector<InArg> inputs;
  std::vector<OutArg> outputs;        // after the checked call (poison copied in)
  std::vector<InArg> timed_inputs;    // the timed pass's inputs (same layout); empty: `inputs`
  std::vector<OutArg> timed_outputs;  // after timing (same shapes; used when timing)
  const std::vector<InArg>& pass_inputs(std::size_t pass) const {
    return pass == 1 && !timed_inputs.empty() ? timed_inputs : inputs;
  }
};
// A random floating-point input drawn again on the device before every
// timed call (time, CUDA): element j of the draw of call n is random::unit of
// `dtype` under random::fresh_key(key, EvaluateOptions::fresh_salt, n), the
// bytes kb's host generator gives the same key (inputs/random.hpp).
struct FreshInput {
  std::uint64_t key = 0;
  DType dtype = DType::float32;
  std::int64_t numel = 0;
};
struct EvaluateOptions {
  bool time = false;
  // With time, CUDA: per input, its fresh draws (nullopt: as sent; empty
  // vector: every timed call on the sets as sent, rotating). The outputs of
  // `kept_calls` timed calls picked at random come back (EvaluateResult::kept).
  std::vector<std::optional<FreshInput>> fresh_inputs;
  std::uint64_t fresh_salt = 0;
  std::size_t kept_calls = 4;
  bool stream_check = false;  // CUDA solutions
  bool cupti = false;         // with time, CUDA: also the kernels alone from CUPTI's records (kb bench --cupti)
  int timing_warmup = 0;       // with time, CUDA: the timer's minimums (cuda::TimingOptions); 0: its defaults
  int timing_min_samples = 0;
};
struct WorkerTiming {
  cuda::TimingResult timer;  // CUDA: the worker's time_gpu result; CPU: wall-clock median, min, max, samples
  cuda::Ceilings ceilings;   // measured by the worker (CUDA), zero if not
  double mma_tflops = 0;     // measured by the worker (CUDA)
  // EvaluateOptions::cupti: CUPTI's kernel time in the worker, or why it could not record.
  std::optional<Result<cuda::KernelTimingResult>> cupti;
};
enum class StreamCheck { not_checked, same, other, inconclusive };
// A timed call whose outputs were kept (fresh inputs): its serial (the draw
// its fresh inputs came from), its input set, and its outputs' bytes.
struct KeptCall {
  std::uint64_t serial = 0;
  int set = -1;
  std::vector<std::vector<std::byte>> outputs;
};
struct EvaluateResult {
  CallResult call;     // outcome of the whole request; message names the set/pass
  int failed_set = -1; // the set whose call or checks failed
  bool while_timing = false;
  StreamCheck stream = StreamCheck::not_checked;
  std::optional<WorkerTiming> timing;
  std::string detail;  // the worker's lines for the log
  int cuda_device = -1;    // CUDA solutions: the device the worker ran them on
  std::string pci_bus_id;  // and its PCI bus id
  std::vector<KeptCall> kept;    // fresh inputs: the kept timed calls
  std::uint64_t fresh_calls = 0; // fresh inputs: how many calls ran on fresh draws
};

class Worker {
 public:
  // Starts a worker for `plugin_path` and loads it. Errors: io_error (cannot
  // start), not_found (dlopen or entry symbol), abi_mismatch, invalid_data
  // (malformed table, or the worker crashed/hung while loading). Messages
  // start with the plugin's path.
  static Result<std::unique_ptr<Worker>> start(const std::string& plugin_path, const Options& options);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  const std::vector<SolutionInfo>& solutions() const { return solutions_; }
  const std::string& plugin_path() const { return plugin_path_; }

  // Runs solution `index` on copies of the arguments in shared memory; on ok,
  // the outputs' bytes are copied back. A dead worker is restarted first
  // (its table must not have changed).
  CallResult call(std::size_t index, std::span<const InArg> inputs, std::span<const OutArg> outputs,
                  std::span<const std::string> input_names, std::span<const std::string> output_names);

  // All sets in one request (same shapes in every set; at most 64 sets).
  // Guards and inputs are checked for both passes; outputs copied back.
  EvaluateResult evaluate(std::size_t index, std::span<const SetArgs> sets, std::span<const std::string> input_names,
                          std::span<const std::string> output_names, const EvaluateOptions& options);

  // What the worker wrote to stdout/stderr since the last take (bounded), and
  // notes on restarts; clears it.
  std::string take_output();
  // Number of worker processes started so far.
  std::size_t starts() const { return starts_; }
  pid_t pid() const { return pid_; }

 private:
  Worker() = default;
  Status spawn_and_load();
  // A worker process to send to: a new one (noted in the captured output) after the last died.
  Status ensure_running();
  void kill_worker();
  void drain_output(bool block_until_eof);
  // Waits for `n` bytes on the control socket until the deadline, draining output.
  enum class Wait { ok, eof, timeout };
  Wait receive(void* p, std::size_t n, double deadline_s);
  std::string describe_exit();  // after the process is gone: "killed by SIGSEGV (...)"
  bool ensure_shm(std::size_t size);

  std::string plugin_path_;
  Options options_;
  std::string executable_;
  std::vector<SolutionInfo> solutions_;
  pid_t pid_ = -1;
  int control_ = -1;
  int output_ = -1;
  int shm_fd_ = -1;
  void* shm_ = nullptr;
  std::size_t shm_size_ = 0;
  int exit_status_ = 0;  // waitpid status of the last worker that ended
  std::string captured_;
  std::size_t dropped_ = 0;
  std::size_t starts_ = 0;
};

}  // namespace kb::worker
