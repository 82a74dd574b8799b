// kb_cuda_rope: kb's CUDA solution for op_type "rope", the NeoX-style
// rope_with_cos_sin_cache definitions (q, k, cos_sin_cache, positions) ->
// (q_out, k_out), bf16 or fp16 q/k, float32 cache. head_size and rotary_dim
// come from the reference's constants (else the axes of those names) and must
// agree with the tensors. Kernel and launch shape: rope.cu.
#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <string>

#include "harness/implementation.hpp"
#include "harness/per_definition.hpp"
#include "../rope_reference.hpp"
#include "rope_cuda.hpp"

namespace kb::kernels {
namespace {

const char* kName = "kb_cuda_rope";

std::string check_definition(const Definition& d) {
  if (d.op_type != "rope") return fmt::format("op_type {} is not rope", d.op_type);
  const char* names[] = {"q", "k", "cos_sin_cache", "positions"};
  if (d.inputs.size() != 4 || d.outputs.size() != 2) return "expects inputs q, k, cos_sin_cache, positions and outputs q_out, k_out";
  for (std::size_t i = 0; i < 4; ++i)
    if (d.inputs[i].name != names[i] || d.inputs[i].is_scalar())
      return "expects tensor inputs q, k, cos_sin_cache, positions in that order";
  if (d.outputs[0].name != "q_out" || d.outputs[1].name != "k_out") return "expects outputs q_out, k_out";
  const DType t = d.inputs[0].dtype;
  if (t != DType::bfloat16 && t != DType::float16)
    return fmt::format("q is {}; this kernel handles bfloat16 and float16", dtype_name(t));
  if (d.inputs[1].dtype != t || d.outputs[0].dtype != t || d.outputs[1].dtype != t)
    return "q, k, q_out and k_out must share one dtype";
  if (d.inputs[2].dtype != DType::float32)
    return fmt::format("cos_sin_cache is {}; this kernel reads a float32 cache", dtype_name(d.inputs[2].dtype));
  if (d.inputs[3].dtype != DType::int64 && d.inputs[3].dtype != DType::int32)
    return "positions must be int64 or int32";
  RopeReference ref;
  if (std::string why = read_rope_reference(d, ref); !why.empty()) return why;
  if (ref.style != RopeStyle::neox)
    return "the reference slices interleaved (GPT-J) pairs; this kernel rotates NeoX halves";
  auto o = find_oracle(d);  // the rest of the structure: shapes, cache indexing, cos/sin halves
  if (!o) return o.error().message;
  auto hs = rope_constant(d, "head_size");
  auto rd = rope_constant(d, "rotary_dim");
  if (hs && rd && (*rd <= 0 || *rd % 2 != 0 || *rd > *hs))
    return fmt::format("rotary_dim {} must be even and in (0, head_size {}]", *rd, *hs);
  return {};
}

// Per definition, once (harness/per_definition.hpp): reading the reference allocates.
struct Prepared {
  std::string why;  // "" when handled
  RopeReference ref;
  std::optional<std::int64_t> head_size, rotary_dim;
};

Prepared prepared(const Definition& d) {
  static PerDefinition<Prepared> memo;
  return memo.get(d, [](const Definition& def) {
    Prepared p;
    p.why = check_definition(def);
    if (!p.why.empty()) return p;
    (void)read_rope_reference(def, p.ref);
    p.head_size = rope_constant(def, "head_size");
    p.rotary_dim = rope_constant(def, "rotary_dim");
    return p;
  });
}

std::string supports(const Definition& d) { return prepared(d).why; }

Status run(const CudaCall& c) {
  const Definition& d = c.definition;
  const std::string who = std::string(kName) + ": ";
  const Prepared prep = prepared(d);
  if (!prep.why.empty()) return make_error(Code::unsupported, who + prep.why);
  if (c.inputs.size() != 4 || c.outputs.size() != 2) return make_error(Code::invalid_argument, who + "wrong number of arguments");
  for (const auto& a : c.inputs)
    if (!a.tensor) return make_error(Code::invalid_argument, who + "every input must be a tensor");
  const cuda::DeviceTensor& q = *c.inputs[0].tensor;
  const cuda::DeviceTensor& k = *c.inputs[1].tensor;
  const cuda::DeviceTensor& cache = *c.inputs[2].tensor;
  const cuda::DeviceTensor& pos = *c.inputs[3].tensor;
  const cuda::DeviceTensor& q_out = c.outputs[0];
  const cuda::DeviceTensor& k_out = c.outputs[1];
  if (q.shape.size() != 3 || k.shape.size() != 3 || cache.shape.size() != 2 || pos.shape.size() != 1)
    return make_error(Code::invalid_argument, who + "tensor ranks differ from the definition");
  const std::int64_t tokens = q.shape[0], head_size = q.shape[2], rotary_dim = cache.shape[1];
  if (k.shape[0] != tokens || k.shape[2] != head_size || pos.shape[0] != tokens || q_out.shape != q.shape ||
      k_out.shape != k.shape)
    return make_error(Code::invalid_argument, who + "shapes of q, k, positions, q_out and k_out disagree");
  if (auto hs = prep.head_size; hs && *hs != head_size)
    return make_error(Code::invalid_argument, fmt::format("{}q's head size {} is not head_size {}", who, head_size, *hs));
  if (auto rd = prep.rotary_dim; rd && *rd != rotary_dim)
    return make_error(Code::invalid_argument,
                      fmt::format("{}cos_sin_cache's last dim {} is not rotary_dim {}", who, rotary_dim, *rd));
  if (q.dtype != k.dtype || q_out.dtype != q.dtype || k_out.dtype != q.dtype || cache.dtype != DType::float32)
    return make_error(Code::invalid_argument, who + "tensor dtypes differ from the definition's");
  return launch_rope_neox(q.data, k.data, static_cast<const float*>(cache.data), pos.data, pos.dtype, q_out.data,
                          k_out.data, tokens, q.shape[1], k.shape[1], head_size, rotary_dim, cache.shape[0],
                          prep.ref.upcast, q.dtype, c.stream);
}

}  // namespace

void add_rope_cuda(Registry& r) {
  Implementation impl;
  impl.name = kName;
  impl.author = "kb";
  impl.device = Device::cuda;
  impl.description =
      "NeoX rope with a float32 cos/sin cache, bf16/fp16 q/k: 16-byte vectors, one thread per (head, 8 rotated "
      "pairs or 8 copied entries), fp32 math with the reference's separate roundings; scalar fallback otherwise";
  impl.supports = supports;
  impl.run_cuda = run;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
