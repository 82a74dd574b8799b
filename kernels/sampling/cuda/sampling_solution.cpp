// kb_cuda_sampling: kb's CUDA solution for op_type "sampling" (top_k /
// top_p / top_k_top_p sampling_from_probs). Rejection sampling with a rising
// pivot, no sort, each row held in a thread-block cluster's shared memory
// (one CTA streaming it where it does not fit): sampling.cu.
#include <fmt/format.h>

#include <string>

#include "harness/implementation.hpp"
#include "harness/per_definition.hpp"
#include "sampling_cuda.hpp"

namespace kb::kernels {
namespace {

const char* kName = "kb_cuda_sampling";

bool float_dtype(DType t) { return t == DType::float32 || t == DType::float16 || t == DType::bfloat16; }
bool int_dtype(DType t) { return t == DType::int32 || t == DType::int64; }

std::string check_definition(const Definition& d) {
  if (d.op_type != "sampling") return fmt::format("op_type {} is not sampling", d.op_type);
  auto probs = input_index(d, "probs");
  auto top_k = input_index(d, "top_k");
  auto top_p = input_index(d, "top_p");
  if (!probs || (!top_k && !top_p) || d.inputs.size() != 1 + (top_k ? 1u : 0u) + (top_p ? 1u : 0u))
    return "expects inputs probs and top_k and/or top_p, nothing else";
  const TensorSpec& pr = d.inputs[*probs];
  if (pr.is_scalar() || pr.rank() != 2 || !float_dtype(pr.dtype))
    return "expects probs [batch_size, vocab_size] of float32, float16 or bfloat16";
  if (d.outputs.size() != 1 || d.outputs[0].name != "samples" || d.outputs[0].is_scalar() ||
      d.outputs[0].rank() != 1 || !int_dtype(d.outputs[0].dtype))
    return "expects one output samples [batch_size] of int64 or int32";
  if (top_k && (d.inputs[*top_k].is_scalar() || d.inputs[*top_k].rank() != 1 || !int_dtype(d.inputs[*top_k].dtype)))
    return "expects top_k [batch_size] of int32 or int64";
  if (top_p &&
      (d.inputs[*top_p].is_scalar() || d.inputs[*top_p].rank() != 1 || !float_dtype(d.inputs[*top_p].dtype)))
    return "expects top_p [batch_size] of float32, float16 or bfloat16";
  // The kernel implements the oracle's rules (top-k first, then top-p on the
  // renormalised row, ties by index); the oracle checks the reference states them.
  auto o = find_oracle(d);
  if (!o) return o.error().message;
  return {};
}

// Once per definition (harness/per_definition.hpp): find_oracle reads the reference, which allocates.
std::string supports(const Definition& d) {
  static PerDefinition<std::string> memo;
  return memo.get(d, check_definition);
}

Status bad(const std::string& what) { return make_error(Code::invalid_argument, std::string(kName) + ": " + what); }

Status run(const CudaCall& c) {
  const Definition& d = c.definition;
  if (std::string why = supports(d); !why.empty()) return make_error(Code::unsupported, std::string(kName) + ": " + why);
  if (c.inputs.size() != d.inputs.size() || c.outputs.size() != 1) return bad("wrong number of inputs or outputs");
  for (const auto& a : c.inputs)
    if (!a.tensor) return bad("every input must be a tensor");
  const cuda::DeviceTensor& probs = *c.inputs[*input_index(d, "probs")].tensor;
  const cuda::DeviceTensor& out = c.outputs[0];
  if (probs.shape.size() != 2 || out.shape.size() != 1 || out.shape[0] != probs.shape[0])
    return bad("probs must be [batch, vocab] and samples [batch]");
  SamplingArgs a;
  a.probs = probs.data;
  a.probs_dtype = probs.dtype;
  a.batch = probs.shape[0];
  a.vocab = probs.shape[1];
  a.samples = out.data;
  a.samples_dtype = out.dtype;
  a.seed = c.seed;
  if (auto i = input_index(d, "top_k")) {
    const cuda::DeviceTensor& t = *c.inputs[*i].tensor;
    if (t.shape != std::vector<std::int64_t>{a.batch}) return bad("top_k must have batch_size entries");
    a.top_k = t.data;
    a.top_k_dtype = t.dtype;
  }
  if (auto i = input_index(d, "top_p")) {
    const cuda::DeviceTensor& t = *c.inputs[*i].tensor;
    if (t.shape != std::vector<std::int64_t>{a.batch}) return bad("top_p must have batch_size entries");
    a.top_p = t.data;
    a.top_p_dtype = t.dtype;
  }
  return launch_sampling(a, c.stream);
}

}  // namespace

void add_sampling_cuda(Registry& r) {
  Implementation impl;
  impl.name = kName;
  impl.author = "kb";
  impl.device = Device::cuda;
  impl.description =
      "top-k / top-p sampling, no sort, each row read once into a thread-block cluster's shared memory (one CTA "
      "streaming rows too large for it): Philox draws, inverse CDF by scan, rejection with a "
      "rising pivot (exact bisection after 32 rounds), radix select for the top-k mass";
  impl.supports = supports;
  impl.run_cuda = run;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
