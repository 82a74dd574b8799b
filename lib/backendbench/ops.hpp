// The ATen operator interface: what an operator implementation receives (a
// Call: the traced arguments with their tensors materialized) and the table
// entry naming its implementations. The table itself lives in
// kernels/aten/table.cpp, one row per overload ("aten.add.Tensor"), each row
// pointing at a family's CPU oracle (kernels/aten/<family>/) and, once one
// exists, a CUDA kernel of the same signature running on device tensors.
//
// Implementations are called twice by the runner: with `meta` set (tensors
// carry shapes and dtypes only, no storage) to learn the output shapes and
// dtypes, then for real. They never print; a problem comes back as an Error
// ("aten.gather.default: index 7 out of range for dim of size 5").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backendbench/tensor.hpp"
#include "backendbench/trace.hpp"
#include "common/result.hpp"

namespace kb::backendbench {

// One argument: the traced value and, for T(...) and lists of T(...), its tensors.
struct CallArg {
  const Value* value = nullptr;
  std::optional<HostTensor> tensor;  // value is a tensor
  std::vector<HostTensor> tensors;   // value is a list/tuple holding tensors (in order)
};

struct Call {
  std::string_view op;  // canonical overload name, "aten.add.Tensor"
  std::vector<CallArg> positional;
  std::vector<std::pair<std::string, CallArg>> kwargs;
  bool meta = false;    // shapes and dtypes only: compute output specs, touch no data

  // Positional argument `pos`, else the kwarg `name`; null when neither is given.
  const CallArg* find(std::size_t pos, std::string_view name) const;
  CallArg* find(std::size_t pos, std::string_view name);
};

// A random source for index arguments (the runner seeds it per line).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();                         // splitmix64
  double uniform();                             // [0, 1)
  std::int64_t below(std::int64_t n);           // [0, n), n > 0
  // The stream is counter-based: draw k (k = 1, 2, ...) mixes state() + k * 0x9E3779B97F4A7C15.
  std::uint64_t state() const { return state_; }
  void skip(std::uint64_t draws) { state_ += draws * 0x9E3779B97F4A7C15ull; }
 private:
  std::uint64_t state_;
};

// An implementation. Inside kernels/aten it may throw aten::OpError on a bad
// argument; callers go through run_cpu(), which returns the Error instead.
using KernelFn = std::vector<HostTensor> (*)(Call& call);
// Rewrites index arguments of a materialized call into valid ranges
// (BackendBench's random integers are not valid indices).
using PrepareFn = void (*)(Call& call, Rng& rng);  // may throw like KernelFn

struct OpInfo {
  const char* name;         // "aten.add.Tensor"
  const char* family;       // "elementwise", "reduction", ... (kernels/aten/<family>/)
  KernelFn cpu;             // fp64 oracle with PyTorch semantics (outputs rounded to their dtype)
  PrepareFn prepare;        // null when no argument needs valid indices
  // In-place overloads (name ends in "_" before the overload) mutate and return `self`.
  bool inplace() const;
};

// Every implemented overload, in table order.
std::span<const OpInfo> aten_ops();
// The row for a canonical overload name, or null.
const OpInfo* find_aten_op(std::string_view name);
// Runs `info.cpu` (exceptions inside a kernel become Errors naming the op).
// An in-place operator whose `self` has a stride-0 dimension of size > 1 is
// refused as PyTorch refuses it ("unsupported operation: more than one element
// of the written-to tensor refers to a single memory location"); both the CPU
// and the CUDA runs meet this on their meta call, so such a line never passes.
Result<std::vector<HostTensor>> run_cpu(const OpInfo& info, Call& call);
// Runs `info.prepare` when there is one (valid indices for index arguments).
Status prepare_call(const OpInfo& info, Call& call, Rng& rng);

}  // namespace kb::backendbench
