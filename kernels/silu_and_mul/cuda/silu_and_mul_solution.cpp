// kb_cuda_silu_and_mul: kb's CUDA solution for op_type "silu_and_mul",
// bf16 or fp16. Kernel and launch shape: silu_and_mul.cu.
#include <fmt/format.h>

#include <string>

#include "harness/implementation.hpp"
#include "harness/per_definition.hpp"
#include "silu_and_mul_cuda.hpp"

namespace kb::kernels {
namespace {

const char* kName = "kb_cuda_silu_and_mul";

std::string check_definition(const Definition& d) {
  if (d.op_type != "silu_and_mul") return fmt::format("op_type {} is not silu_and_mul", d.op_type);
  if (d.inputs.size() != 1 || d.outputs.size() != 1 || d.inputs[0].rank() != 2 || d.outputs[0].rank() != 2)
    return "expects one input x [tokens, 2*d] and one output [tokens, d]";
  const DType t = d.inputs[0].dtype;
  if (t != DType::bfloat16 && t != DType::float16)
    return fmt::format("x is {}; this kernel handles bfloat16 and float16", dtype_name(t));
  if (d.outputs[0].dtype != t)
    return fmt::format("the output is {} but x is {}; this kernel needs one dtype", dtype_name(d.outputs[0].dtype),
                       dtype_name(t));
  if (d.reference.find("sigmoid") == std::string::npos && d.reference.find("silu") == std::string::npos)
    return "the reference is not recognisably silu(gate) * up (neither sigmoid nor silu in it)";
  auto o = find_oracle(d);
  if (!o) return o.error().message;
  return {};
}

// Once per definition (harness/per_definition.hpp): find_oracle reads the reference, which allocates.
std::string supports(const Definition& d) {
  static PerDefinition<std::string> memo;
  return memo.get(d, check_definition);
}

Status run(const CudaCall& c) {
  const Definition& d = c.definition;
  if (std::string why = supports(d); !why.empty()) return make_error(Code::unsupported, std::string(kName) + ": " + why);
  if (c.inputs.size() != 1 || c.outputs.size() != 1 || !c.inputs[0].tensor)
    return make_error(Code::invalid_argument, std::string(kName) + ": expects one input tensor and one output");
  const cuda::DeviceTensor& x = *c.inputs[0].tensor;
  const cuda::DeviceTensor& out = c.outputs[0];
  if (x.shape.size() != 2 || out.shape.size() != 2 || x.shape[0] != out.shape[0] || x.shape[1] != 2 * out.shape[1])
    return make_error(Code::invalid_argument, std::string(kName) + ": x must be [tokens, 2*d] and out [tokens, d]");
  if (x.dtype != d.inputs[0].dtype || out.dtype != x.dtype)
    return make_error(Code::invalid_argument, std::string(kName) + ": tensor dtypes differ from the definition's");
  return launch_silu_and_mul(x.data, out.data, out.shape[0], out.shape[1], x.dtype, c.stream);
}

}  // namespace

void add_silu_and_mul_cuda(Registry& r) {
  Implementation impl;
  impl.name = kName;
  impl.author = "kb";
  impl.device = Device::cuda;
  impl.description =
      "silu(gate) * up, bf16/fp16: 16-byte vectors, two rows a thread, 2-D grid-stride loop, fp32 math (gate * sigmoid(gate) * up) "
      "rounded once; scalar fallback when d % 8 != 0";
  impl.supports = supports;
  impl.run_cuda = run;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
