// The definition's own PyTorch `reference` as the judge's reference
// (`kb bench --reference torch`): for definitions kb has no oracle for, and as
// a cross-check of the oracles.
//
// kb writes the call's inputs to a safetensors file in a fresh temporary
// directory, with a small JSON description (input order, scalar values,
// output names, shapes and dtypes) and the reference source, and runs a
// runner script (embedded here, so nothing outside the installed kb is
// needed) in a `python3` subprocess. The runner reads the safetensors header
// with `json` and the tensors with `torch.frombuffer` (no `safetensors`
// package), maps kb dtypes to torch dtypes (a clear error where the installed
// torch lacks one, e.g. float8 before torch 2.1, float4 always), executes the
// source, calls `run(*inputs)` under torch.no_grad() on the CPU (or on CUDA
// tensors of the options' device, where torch has CUDA), turns the
// returned tensor / tuple / list into the definition's outputs in order
// (checking count and shape, casting to the declared dtype), and writes them
// to a safetensors file that kb reads back. Every failure (python3 missing,
// torch missing, an exception in the reference, a timeout, a wrong output
// count or shape) is an Error naming the definition, with the last lines of
// the Python traceback.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "oracle/oracle.hpp"
#include "schema/model.hpp"
#include "tensor/tensor.hpp"

namespace kb {

// Where the judge's reference outputs come from.
enum class ReferenceSource {
  native,  // kb's CPU (or GPU) oracles
  torch,   // the definition's PyTorch reference in a python3 subprocess
};
const char* reference_source_name(ReferenceSource s) noexcept;

// The interpreter: $KB_PYTHON if set, else "python3" (looked up on PATH
// unless it contains '/').
std::string default_python();

struct TorchReferenceOptions {
  std::string python = default_python();
  double timeout_s = 600;          // per call of the reference
  // Where run() gets its tensors: "cpu", or "cuda:N" (device N as this process numbers them; the subprocess
  // inherits CUDA_VISIBLE_DEVICES). A torch without CUDA runs on the CPU and says so in a note.
  std::string device = "cpu";
  // How many calls of run() are timed (after one warm-up call when more than one); reference_ms is
  // their median. Each call's wall time, synchronized on CUDA: Python's own overhead included, as a
  // user calling the reference pays it.
  int timed_runs = 1;
};

struct TorchRun {
  std::string torch_version;
  double reference_ms = 0;          // wall time of a run() call inside Python (CUDA: synchronized); median of timed_runs
  std::string device = "cpu";       // where it ran: "cpu" or "cuda:N"
  std::vector<std::string> notes;   // e.g. an output cast to the declared dtype
};

// The installed torch's version, or why python3 / torch cannot be used.
// Cached per python path for the life of the process.
Result<std::string> torch_version(const TorchReferenceOptions& opt);

// Runs d.reference on `inputs` (definition order) and stores its outputs into
// `outputs` (definition order, allocated by the caller with the definition's
// shapes and dtypes).
Result<TorchRun> run_torch_reference(const Definition& d, std::span<const Arg> inputs, std::span<Tensor> outputs,
                                     const TorchReferenceOptions& opt);

// The embedded runner script.
std::string_view torch_runner_script() noexcept;

}  // namespace kb
