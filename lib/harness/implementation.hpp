// Implementations kb can run for a definition: the oracle ("reference"), kb's
// own CPU and CUDA solutions, and outside solutions (plugins and built
// Solution JSON, lib/plugin/), which run in a worker process.
// They all take the definition's inputs and fill its outputs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "cuda/device_tensor.hpp"
#include "oracle/oracle.hpp"

namespace kb {

namespace plugin {
class Session;  // lib/plugin/plugin.hpp
}

enum class Device { cpu, cuda };
const char* device_name(Device d) noexcept;

struct ImplementationCall {
  const Definition& definition;
  const AxisValues& axes;
  std::span<const Arg> inputs;  // definition input order
  // Definition output order, allocated by kb with the definition's shapes and
  // dtypes and poisoned. An implementation fills them in place, or replaces
  // one with a tensor of its own (which kb then checks for shape and dtype).
  std::span<Tensor> outputs;
  std::uint64_t seed = 0;
};

// A call of a CUDA solution: inputs and outputs live on the current device;
// the solution launches on `stream` (a cudaStream_t), allocates nothing and
// does not synchronize. Outputs are pre-allocated and poisoned by kb.
struct CudaCall {
  const Definition& definition;
  const AxisValues& axes;
  std::span<const cuda::DeviceArg> inputs;   // definition input order
  std::span<const cuda::DeviceTensor> outputs;  // definition output order
  void* stream = nullptr;
  // For solutions that draw random numbers (sampling): the same seed gives
  // the same outputs; the harness passes ImplementationCall's seeds.
  std::uint64_t seed = 0;
};

struct Implementation {
  std::string name;    // solution name in traces, e.g. "kb_cpu_gemm"
  std::string author;  // traces/<author>/...
  Device device = Device::cpu;
  std::string description;
  // "" when it handles the definition, else why not.
  std::function<std::string(const Definition&)> supports;
  // Device::cpu implementations set `run`; Device::cuda ones set `run_cuda`.
  std::function<Status(const ImplementationCall&)> run;
  std::function<Status(const CudaCall&)> run_cuda;
  // Set for outside solutions: their calls go to a worker process, and
  // kb::plugin::evaluate() adds what only the worker saw (TIMEOUT, a build's
  // COMPILE_ERROR, the solution's stdout/stderr) to the evaluation.
  std::shared_ptr<plugin::Session> outside;
  // kb's own code (builtin_registry(), the references): it cannot game its
  // timing, so its CUDA timed calls rotate through the trials' input sets.
  // Anything else is timed on inputs drawn fresh before every call, a few
  // calls' outputs judged (harness/gpu_eval.cpp).
  bool trusted = false;
};

class Registry {
 public:
  void add(Implementation impl) { impls_.push_back(std::move(impl)); }
  const std::vector<Implementation>& all() const { return impls_; }
  const Implementation* find(std::string_view name) const;

 private:
  std::vector<Implementation> impls_;
};

// The oracle of a definition as an Implementation named "reference".
Implementation reference_implementation();
// kb's GPU oracle of a definition (oracle/gpu_oracle.hpp) as a CUDA Implementation named
// "reference_cuda": under --reference torch on CUDA it is judged against the definition's PyTorch
// reference run on the same device, the independent cross-check of kb's GPU oracles.
Implementation gpu_reference_implementation();
// kb's built-in implementations (CPU solutions; CUDA ones in CUDA builds).
const Registry& builtin_registry();

}  // namespace kb
