// What a mixture-of-experts definition computes, read from its inputs and its
// PyTorch `reference` (the specification). Every MoE form shipped with
// FlashInfer-Bench is one choice from each of:
//
//   routing   deepseek      s = sigmoid(logits); pick with s + bias: n_group groups scored by the sum of their two
//                           best, the best topk_group groups kept, top_k experts among them; weight =
//                           s / sum(s over the chosen) * routed_scaling_factor (s without bias)
//             renormalize   top_k of the logits, softmax over the chosen logits
//             sigmoid_top_k top_k of sigmoid(logits), weight = that sigmoid (routing_bias ignored, as the kernel does)
//             packed        pre-routed topk_ids: expert = id >> 16 (int16), weight = bfloat16 bits id & 0xFFFF
//   weights   fp8_block     fp8 e4m3 activations and weights, each with float32 scales per BLOCK x BLOCK tile
//                           (activations: per token and BLOCK columns, stored [H/BLOCK, T])
//             per_expert    fp8 e4m3 (or float) activations and weights; GEMM1's halves and GEMM2's output
//                           multiplied by per-expert float32 scalars
//             plain         float weights used as given
//   placement the routing weight multiplies the expert's input (weight_on_input) or its output
//
// and for every form: g1 = x @ W13[e].T, up = g1[:, :I], gate = g1[:, I:], c = silu(gate) * up,
// o = c @ W2[e].T, output[t] = sum over the token's chosen local experts, rounded once to the output dtype.
// Constants (TOP_K, N_GROUP, TOPK_GROUP, BLOCK) are the reference's own; sizes come from the tensors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "oracle/oracle.hpp"

namespace kb::kernels::moe {

enum class Routing { deepseek, renormalize, sigmoid_top_k, packed };
enum class Weights { fp8_block, per_expert, plain };

struct Form {
  Routing routing = Routing::renormalize;
  Weights weights = Weights::plain;
  bool weight_on_input = false;
  std::int64_t top_k = 0;
  std::int64_t n_group = 1, topk_group = 1;  // deepseek
  bool clamp_weight_sum = false;              // deepseek: sum.clamp(min=1e-20) rather than sum + 1e-20
  std::int64_t block = 0;                     // fp8_block
  // Input indices (definition order); absent where the form has no such input.
  std::optional<std::size_t> logits, bias, topk_ids, hidden, hidden_scale, w13, w13_scale, w2, w2_scale;
  std::optional<std::size_t> up_scale, gate_scale, out_scale;  // per_expert
  std::optional<std::size_t> local_offset, scaling_factor;
};

// The form, or why the definition is not one kb computes (a message naming the part).
Result<Form> read_form(const Definition& d);

// Sizes of one call, taken from the tensors and checked against one another.
struct Sizes {
  std::int64_t tokens = 0, hidden = 0, inter = 0;
  std::int64_t local_experts = 0;   // W13's first axis
  std::int64_t routed_experts = 0;  // routing_logits' second axis (packed: local_experts)
  std::int64_t local_offset = 0;    // global id of local expert 0
  double scaling_factor = 1.0;      // deepseek
};
Result<Sizes> read_sizes(const Definition& d, const Form& f, std::span<const Arg> inputs);
// The same from the inputs' dtypes, shapes and scalar values alone (device tensors).
struct InputView {
  bool is_tensor = false;
  DType dtype = DType::float32;
  std::vector<std::int64_t> shape;
  std::optional<ScalarValue> scalar;
};
Result<Sizes> read_sizes(const Definition& d, const Form& f, std::span<const InputView> inputs);

// The oracle's routing (routing.cpp), shared by the CPU and GPU oracles.
struct Choice {
  std::int64_t expert;  // global id (packed: as given, possibly outside the local experts)
  double weight;
};
// Token t's top_k choices; reads only routing_logits, routing_bias or topk_ids of `inputs`
// (host tensors), checked by read_sizes.
std::vector<Choice> route(const Form& f, const Sizes& s, std::span<const Arg> inputs, std::int64_t t);
// Elements [begin, begin + n) of a float or fp8 host tensor as float32.
void row_as_float(const Tensor& t, std::int64_t begin, std::int64_t n, float* out);

}  // namespace kb::kernels::moe
