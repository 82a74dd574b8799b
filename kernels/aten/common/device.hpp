// The CUDA side of the ATen operators, as plan functions see it. No CUDA
// types here: plan functions are plain C++ (.cpp) and reach kernels through
// the launchers in cuda_engine.hpp; only the *.cu files include CUDA headers.
//
// A CUDA operator is a plan function: given the host Call (scalars, shapes,
// strides; its tensors' data already copied to the device), the device base
// pointer of each tensor and the outputs the runner allocated (contiguous,
// shapes and dtypes from the oracle's meta call; in-place ops get `self`), it
// checks arguments (throwing OpError like the oracles), allocates any scratch
// and returns a Launch: the work of one operator call, enqueued on a stream
// with no host-side setup left. The runner calls the Launch once to judge it
// and again to time it. A plan may also replace an output by a view of an
// input (split, unbind, _unsafe_view of a contiguous tensor), as PyTorch
// returns views there.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "backendbench/ops.hpp"
#include "common/result.hpp"

namespace kb::backendbench::aten {

// A strided view of device memory: element (i...) is at
// base + (offset + sum i*strides) * element size.
struct DView {
  Dtype dtype = Dtype::f32;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  std::int64_t offset = 0;
  void* base = nullptr;
  bool undefined = false;  // an output returned as None
  std::shared_ptr<void> keep;  // device memory the view needs alive (scratch outputs)
  std::int64_t numel() const;
};

// Device base pointers of the Call's tensors (keyed by the host tensor).
class DeviceArgs {
 public:
  void set(const HostTensor* t, void* base) { base_[t] = base; }
  void* base(const HostTensor& t) const;  // throws OpError when the tensor was not uploaded
  DView view(const HostTensor& t) const;
 private:
  std::map<const HostTensor*, void*> base_;
};

using Launch = std::function<Status(void* stream)>;
// May throw OpError (like the oracles); the runner turns it into an Error.
using CudaPlanFn = Launch (*)(Call& call, const DeviceArgs& dev, std::vector<DView>& outs);

struct CudaOpInfo {
  const char* name;  // the row of table.cpp it implements
  CudaPlanFn plan;
};

// Sequential launches as one.
Launch sequence(std::vector<Launch> parts);

}  // namespace kb::backendbench::aten
