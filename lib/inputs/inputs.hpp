// Turning a workload into tensors: random inputs with FlashInfer-Bench's
// distributions (seeded), scalars, safetensors blobs, and valid index
// structures (CSR indptr/indices, last-page lengths, positions, sampling
// probabilities) built from the axes and constraints where a workload names
// none or names blobs that are absent. Constraints are then checked on the
// tensors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "oracle/oracle.hpp"
#include "schema/model.hpp"
#include "tensor/tensor.hpp"

namespace kb {

struct MaterializeOptions {
  std::uint64_t seed = 0;                   // recorded in the trace; same seed, same bits
  std::optional<std::string> dataset_root;  // resolves safetensors paths
};

struct Materialized {
  AxisValues axes;                // every axis, definition order
  std::vector<Tensor> tensors;    // one per definition input (empty storage for scalars)
  std::vector<Arg> args;          // views over `tensors` / scalars, definition order
  std::vector<std::string> notes; // what kb generated or substituted, for the evaluation log
};

// Binds every axis (const from the definition, var from the workload).
Result<AxisValues> bind_axes(const Definition& d, const Workload& w);

// Builds the inputs of one call. Materialized::args point into ::tensors, so
// keep the object in place (it is movable: the pointers are refreshed by
// rebind_args()).
Result<Materialized> materialize(const Definition& d, const Workload& w, const MaterializeOptions& opt);
void rebind_args(Materialized& m);

// Allocates the definition's outputs for bound axes (zero-filled).
Result<std::vector<Tensor>> allocate_outputs(const Definition& d, const AxisValues& axes);

// Shape of a tensor spec under bound axes ({} for a scalar).
std::vector<std::int64_t> bound_shape(const TensorSpec& t, const AxisValues& axes);

// Checks every constraint of the definition against materialized inputs.
// Violations are errors; constraints that still cannot be decided are
// returned as notes.
Result<std::vector<std::string>> check_constraints_on(const Definition& d, const Materialized& m);

}  // namespace kb
