// Turning a workload into tensors: random inputs with FlashInfer-Bench's
// distributions (seeded), scalars, safetensors blobs, and valid index
// structures (CSR indptr/indices, last-page lengths, positions, sampling
// probabilities) built from the axes and constraints where a workload names
// none or names blobs that are absent. Constraints are then checked on the
// tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "inputs/random.hpp"
#include "oracle/oracle.hpp"
#include "schema/model.hpp"
#include "tensor/tensor.hpp"

namespace kb {

struct MaterializeOptions {
  std::uint64_t seed = 0;                   // recorded in the trace; same seed, same bits
  std::optional<std::string> dataset_root;  // resolves safetensors paths
  // Seeded random floating-point inputs (the large ones: caches, weights,
  // activations) get no host storage and no values (Tensor::shape_only);
  // Materialized::deferred holds their recipes, for the device generator
  // (inputs/device_fill.hpp) or fill_deferred(). Integer and boolean inputs,
  // index structures, blobs and scalars are made on the host as always: the
  // constraints and the cost model read integer values.
  bool defer_random_floats = false;
};

struct Materialized {
  AxisValues axes;                // every axis, definition order
  std::vector<Tensor> tensors;    // one per definition input (empty storage for scalars and deferred inputs)
  std::vector<Arg> args;          // views over `tensors` / scalars, definition order
  std::vector<std::string> notes; // what kb generated or substituted, for the evaluation log
  // Per input: set while its values are not on the host (defer_random_floats);
  // its tensor then has shape and size but no storage.
  std::vector<std::optional<RandomRecipe>> deferred;
};

// Binds every axis (const from the definition, var from the workload).
Result<AxisValues> bind_axes(const Definition& d, const Workload& w);

// Builds the inputs of one call. Materialized::args point into ::tensors, so
// keep the object in place (it is movable: the pointers are refreshed by
// rebind_args()).
Result<Materialized> materialize(const Definition& d, const Workload& w, const MaterializeOptions& opt);
void rebind_args(Materialized& m);

// Host storage and values for every deferred input (the bytes a
// materialize() without deferral gives it); afterwards nothing is deferred.
// `only`, when given, picks the inputs (by index) to fill; the others stay deferred.
Status fill_deferred(Materialized& m, const std::function<bool(std::size_t input)>& only = {});

// The host generator: fills t (any dtype) with the random values of `key`
// (random::stream_key(seed, name)), on several threads.
void fill_random(Tensor& t, std::uint64_t key);

// Allocates the definition's outputs for bound axes (zero-filled).
Result<std::vector<Tensor>> allocate_outputs(const Definition& d, const AxisValues& axes);

// Shape of a tensor spec under bound axes ({} for a scalar).
std::vector<std::int64_t> bound_shape(const TensorSpec& t, const AxisValues& axes);

// Checks every constraint of the definition against materialized inputs, then
// every index input against its rule (check_index_inputs). Violations are
// errors; constraints that still cannot be decided are returned as notes.
Result<std::vector<std::string>> check_constraints_on(const Definition& d, const Materialized& m);

// A trial's inputs made ready to call: rebind_args, then check_constraints_on.
// With `log`, the generation notes and the constraints left undecided are
// appended to it (an evaluation logs its first trial's).
Status ready_trial(const Definition& d, Materialized& m, std::string* log);

// ---- Index inputs ------------------------------------------------------------
// The inputs kb builds as index structures (see StructureBuilder) point into
// other tensors; given values (a blob, a caller's tensor) must keep them valid:
//   indptr (`*indptr`, `cu_seqlens*`)   starts at 0, never decreases, every entry
//                                       in [0, AXIS] where `AXIS == T[-1].item()`
//   rank-1 `*indices`                   pages: in [0, num_pages)
//   `X_indices` of a pool input X       rows of X: in [0, X.shape[0]) (mamba_ssu:
//                                       -1 pads an unused batch row)
//   rank-2 `*indices`                   cache tokens: in [0, num_pages * page_size), or -1
//   block_table                         pages: in [0, num_pages)
//   seq_lens                            in [0, max_num_pages * page_size]
//   kv_last_page_len                    in [0, page_size]
//   positions                           in [0, max_seq_len)
// An indptr's last entry equal to its total is the definition's constraint
// `AXIS == T[-1].item()`, checked with the other constraints.
// `kb bench` (check_constraints_on) and `kb validate` (safetensors blobs) apply
// this one rule.

// An integer input's values, row-major.
struct IndexValues {
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> values;
};
// Values of an integer tensor (int8..int64) from its bytes; nullopt for other dtypes
// or when the bytes do not hold the shape.
std::optional<IndexValues> index_values(DType dtype, std::vector<std::int64_t> shape, std::span<const std::byte> bytes);

// Is input `i` of `d` one of the index inputs above?
bool is_index_input(const Definition& d, std::size_t i);

struct IndexProblem {
  std::size_t input = 0;  // definition input order
  std::string message;    // "kv_indices[3] = 9 is outside [0, 8) (num_pages) (and 2 more entries)"
};
// Each index input that `values` gives (nullptr: not given, skipped) against
// its rule; one problem per input, naming its first bad entry and how many
// more there are.
std::vector<IndexProblem> check_index_inputs(const Definition& d, const AxisValues& axes,
                                             const std::function<const IndexValues*(std::size_t)>& values);

}  // namespace kb
