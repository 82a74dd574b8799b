// CPU oracles: one per op_type, the trusted reference every solution is
// judged against. Each lives in kernels/<op_type>/oracle.cpp and computes in
// fp32 (fp64 where accumulation needs it), faithful to the definition's
// PyTorch `reference`, generic over the definition's constants.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "schema/model.hpp"
#include "tensor/tensor.hpp"

namespace kb {

// One argument of a call: a tensor, or a Python scalar (shape null).
struct Arg {
  const Tensor* tensor = nullptr;
  std::optional<ScalarValue> scalar;
};

// Every axis of the definition bound to a value (const and var), in the
// definition's axis order.
struct AxisValues {
  std::vector<std::pair<std::string, std::int64_t>> values;
  std::optional<std::int64_t> get(std::string_view name) const;
};

struct OracleCall {
  const Definition& definition;
  const AxisValues& axes;
  std::span<const Arg> inputs;  // definition input order
  std::span<Tensor> outputs;    // definition output order, allocated with the right shapes and dtypes
  std::uint64_t seed = 0;       // for oracles that sample (sampling)
};

using OracleFn = Status (*)(const OracleCall& call);
// Returns "" when the oracle handles this definition, else why not.
using OracleSupportsFn = std::string (*)(const Definition& d);

struct OracleEntry {
  std::string_view op_type;
  std::string_view name;  // e.g. "gqa_paged decode/prefill"
  OracleSupportsFn supports;
  OracleFn run;
};

// The oracle table (lib/oracle/registry.cpp lists kernels/<op_type>/ oracles).
std::span<const OracleEntry> oracles();
// The oracle for a definition, or Code::unsupported ("no oracle yet for op_type moe").
Result<const OracleEntry*> find_oracle(const Definition& d);

// The experts an MoE call picks where it routes itself (routing_logits, and
// routing_bias for DeepSeek routing), by kernels/moe's routing (the oracle's,
// following the reference's float32 steps): per token its top_k choices as
// global expert ids, and the global ids [local_offset, local_offset +
// local_experts) the call's weights hold. The cost model counts the weights and
// FLOPs of the local choices from it. Code::unsupported where the definition is
// no MoE form kb computes or takes its routing as an input (topk_ids); another
// error where the inputs do not fit the form. The routing inputs must hold values.
struct ExpertChoices {
  std::int64_t tokens = 0, top_k = 0;
  std::int64_t local_offset = 0, local_experts = 0;
  std::vector<std::int64_t> experts;  // [tokens * top_k], token-major
};
Result<ExpertChoices> moe_expert_choices(const Definition& d, std::span<const Arg> inputs);

// Numeric constants the reference code sets at top level of run(), e.g.
// `EPS = 1e-6` or `head_size = 128`: the value of `name = <number>` on its
// own line, or nullopt.
std::optional<double> reference_constant(const Definition& d, std::string_view name);

// Helpers for oracles: the input/output index of a name, the scalar value of
// a scalar input as double.
std::optional<std::size_t> input_index(const Definition& d, std::string_view name);
std::optional<std::size_t> output_index(const Definition& d, std::string_view name);
std::optional<double> scalar_as_double(const Arg& a);

}  // namespace kb
