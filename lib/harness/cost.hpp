// The ideal cost of one call: the bytes it must move and the FLOPs it must
// do, from which achieved bytes/s and FLOP/s follow (measurement.hpp). The
// model reads the call's inputs, not only its axes: which pages a sequence
// reads, how many keys a causal query sees, which experts tokens are routed
// to are values of the index tensors (or, where the call routes itself, of
// the routing logits).
//
// bytes: every input element the call reads, counted once, plus every output
//   element, written once. kb hands a solution fresh output buffers, so every
//   output element is written (and an input that an output copies, such as a
//   state pool, is read whole). Gathered inputs count only what the call's
//   indices reach: the KV-cache pages and the slots of a last page a sequence
//   reads, the cos/sin rows of the positions given, the weights of the experts
//   tokens are routed to, the state slots in use. Index tensors count the
//   entries the call reads. Python scalars count 0. Re-reads are not counted
//   (a KV page read by each query tile, a weight read by each token tile): the
//   count is what a kernel with unbounded on-chip memory would move.
// flops: a multiply-add is 2; an add, multiply, divide or transcendental
//   (exp, rsqrt, sigmoid, softplus) is 1; comparisons, sorts, selections and
//   index arithmetic are 0. Attention and MoE count their matrix products only
//   (softmax, SwiGLU and routing are lower order); the formula of every op type
//   is in docs/cost_model.md, next to its code here.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "common/result.hpp"
#include "harness/measurement.hpp"  // CostBasis
#include "inputs/inputs.hpp"
#include "oracle/oracle.hpp"

namespace kb {

struct CallCost {
  double bytes = 0;
  double flops = 0;
  CostBasis basis = CostBasis::exact;  // measurement.hpp: recorded as "cost_basis"
};

// The cost of calling `d` on `inputs` (definition input order; an absent
// optional input has neither tensor nor scalar). One dispatch by op type;
// every count is generic over the definition's constants. Errors
// (Code::invalid_data): an input the model needs is missing, or an index
// value points outside the tensor it indexes.
Result<CallCost> ideal_cost(const Definition& d, const AxisValues& axes, std::span<const Arg> inputs);

// Whether the model reads the values of `d`'s float input `input`, not only
// its size: MoE's routing_logits and routing_bias where the call routes
// itself (the experts it picks are what the model counts). A caller that
// keeps random inputs off the host (gpu_eval's deferred inputs) fills these
// there; without their values the cost is an upper bound. Integer (index)
// inputs are always on the host and not listed here.
bool cost_reads_values(const Definition& d, std::string_view input);

// Host values for the deferred inputs of `m` whose values the model reads
// (the bytes materialize() without deferral gives them; small: MoE's routing
// logits are tokens x experts floats), so that a call whose large inputs stay
// on the device is still counted exactly. The deferred recipe is dropped; a
// caller that generates on the device keeps its own copy of the recipes.
Status fill_cost_inputs(const Definition& d, Materialized& m);

// The mean cost of calls timed in rotation over several input sets (one
// sample per set in turn): mean bytes and FLOPs, the weakest basis.
CallCost mean_cost(std::span<const CallCost> costs);

}  // namespace kb
