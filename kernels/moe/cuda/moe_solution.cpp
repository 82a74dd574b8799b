// kb_cuda_moe: kb's CUDA solution for op_type "moe", every form of kernels/moe/form.hpp (read
// with read_form / read_sizes, shared with the CPU oracle). Kernels and their precision: moe.cu.
//
// Scratch. The routing lists, the fp32 intermediate [tokens x top_k, I] and the fp32 expert
// outputs [tokens x top_k, H] live in one buffer per (device, stream), as kb's gemm keeps its
// workspace: allocated by the first call on the stream (the harness's correctness run, outside
// any timed region) and grown, outside stream capture only, when a call needs more; a call that
// fits allocates nothing. It is kept until the process exits.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <string>
#include <utility>

#include "cuda/device.hpp"
#include "cuda/runtime.hpp"
#include "harness/implementation.hpp"
#include "harness/per_definition.hpp"
#include "../../common/solution_workspace.hpp"
#include "../form.hpp"
#include "moe_cuda.hpp"

namespace kb::kernels {
namespace {

using moe::Form;
using moe::Weights;

const char* kName = "kb_cuda_moe";

std::optional<MoeDType> dtype_of(DType t) {
  switch (t) {
    case DType::float32: return MoeDType::f32;
    case DType::bfloat16: return MoeDType::bf16;
    case DType::float16: return MoeDType::f16;
    case DType::float8_e4m3fn: return MoeDType::e4m3;
    case DType::float8_e5m2: return MoeDType::e5m2;
    default: return std::nullopt;
  }
}

bool float_dtype(DType t) { return t == DType::float32 || t == DType::bfloat16 || t == DType::float16; }

// What the kernels cannot take beyond what read_form refuses.
std::string check_definition(const Definition& d) {
  auto f = moe::read_form(d);
  if (!f) return f.error().message;
  if (f->weights == Weights::fp8_block && f->block % 32 != 0)
    return fmt::format("BLOCK {} is not a multiple of 32 (the kernels' K step)", f->block);
  for (const auto& in : d.inputs)
    if (!in.is_scalar() && !dtype_of(in.dtype) && in.dtype != DType::int32)
      return fmt::format("input {} is {}", in.name, dtype_name(in.dtype));
  return {};
}

std::string supports(const Definition& d) {
  static PerDefinition<std::string> memo;
  return memo.get(d, check_definition);
}

Result<Form> form_of(const Definition& d) {
  static PerDefinition<Result<Form>> memo;
  return memo.get(d, [](const Definition& def) { return moe::read_form(def); });
}

// ---- per-(device, stream) workspace ---------------------------------------------------------

// The stream's scratch (kernels/common/solution_workspace.hpp), allocated at the size asked for.
Result<void*> workspace(void* stream, std::size_t bytes) {
  static auto* buffers = new StreamWorkspaces;
  return solution_workspace(*buffers, stream, bytes, kName);
}

// ---- the call ---------------------------------------------------------------------------------

Status run(const CudaCall& c) {
  const Definition& d = c.definition;
  if (std::string why = supports(d); !why.empty()) return make_error(Code::unsupported, fmt::format("{}: {}", kName, why));
  auto form = form_of(d);
  if (!form) return form.error();
  const Form& f = *form;
  if (c.inputs.size() != d.inputs.size() || c.outputs.size() != 1)
    return make_error(Code::invalid_argument, fmt::format("{}: {}: wrong number of arguments", d.name, kName));
  std::vector<moe::InputView> views(d.inputs.size());
  for (std::size_t i = 0; i < d.inputs.size(); ++i) {
    views[i].scalar = c.inputs[i].scalar;
    if (const cuda::DeviceTensor* t = c.inputs[i].tensor) {
      views[i].is_tensor = true;
      views[i].dtype = t->dtype;
      views[i].shape = t->shape;
    }
  }
  auto sizes = moe::read_sizes(d, f, views);
  if (!sizes) return sizes.error();
  const moe::Sizes& s = *sizes;
  const cuda::DeviceTensor& out = c.outputs[0];
  if (out.shape != std::vector<std::int64_t>{s.tokens, s.hidden} || !float_dtype(out.dtype))
    return make_error(Code::invalid_argument,
                      fmt::format("{}: {}: the output must be a float tensor [{}, {}]", d.name, kName, s.tokens, s.hidden));

  auto tensor = [&](std::optional<std::size_t> i) -> const cuda::DeviceTensor* { return i ? c.inputs[*i].tensor : nullptr; };
  // A tensor's data and element type (null, f32 when absent); scales and weights must be float.
  auto bind = [&](std::optional<std::size_t> i, const void** data, MoeDType* type) -> Status {
    const cuda::DeviceTensor* t = tensor(i);
    if (!t) return ok_status();
    auto dt = dtype_of(t->dtype);
    if (!dt)
      return make_error(Code::unsupported, fmt::format("{}: {}: {} is {}", d.name, kName, d.inputs[*i].name, dtype_name(t->dtype)));
    *data = t->data;
    *type = *dt;
    return ok_status();
  };

  MoeLaunch m;
  m.tokens = s.tokens;
  m.hidden = s.hidden;
  m.inter = s.inter;
  m.routed_experts = s.routed_experts;
  m.local_experts = s.local_experts;
  m.local_offset = s.local_offset;
  m.top_k = f.top_k;
  m.routing = static_cast<MoeRouting>(static_cast<int>(f.routing));
  m.n_group = f.n_group;
  m.topk_group = f.topk_group;
  m.clamp_weight_sum = f.clamp_weight_sum;
  m.scaling_factor = s.scaling_factor;
  m.weight_on_input = f.weight_on_input;
  m.block = f.weights == Weights::fp8_block ? f.block : 0;
  KB_TRY(bind(f.logits, &m.logits, &m.logits_dtype));
  if (f.routing == moe::Routing::deepseek) KB_TRY(bind(f.bias, &m.bias, &m.bias_dtype));
  if (const cuda::DeviceTensor* ids = tensor(f.topk_ids)) m.topk_ids = ids->as<const std::int32_t>();
  KB_TRY(bind(f.hidden, &m.x, &m.x_dtype));
  KB_TRY(bind(f.hidden_scale, &m.x_scale, &m.x_scale_dtype));
  KB_TRY(bind(f.w13, &m.w13, &m.w13_dtype));
  KB_TRY(bind(f.w13_scale, &m.w13_scale, &m.w13_scale_dtype));
  KB_TRY(bind(f.w2, &m.w2, &m.w2_dtype));
  KB_TRY(bind(f.w2_scale, &m.w2_scale, &m.w2_scale_dtype));
  if (f.weights == Weights::per_expert) {
    KB_TRY(bind(f.up_scale, &m.up_scale, &m.up_scale_dtype));
    KB_TRY(bind(f.gate_scale, &m.gate_scale, &m.gate_scale_dtype));
    KB_TRY(bind(f.out_scale, &m.out_scale, &m.out_scale_dtype));
  }
  m.out = out.data;
  m.out_dtype = *dtype_of(out.dtype);
  m.stream = c.stream;
  {
    auto device = cuda::current_device();
    if (!device) return device.error();
    KB_TRY(cuda::check(cudaDeviceGetAttribute(&m.sm_count, cudaDevAttrMultiProcessorCount, *device),
                       "kb_cuda_moe: reading the SM count"));
    int major = 0, minor = 0;
    KB_TRY(cuda::check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, *device),
                       "kb_cuda_moe: reading the compute capability"));
    KB_TRY(cuda::check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, *device),
                       "kb_cuda_moe: reading the compute capability"));
    m.hopper = major == 9 && minor == 0;
  }
  // fp8 tensor cores for GEMM1 where both operands are e4m3 with block scales and every row of
  // 32-byte K steps is 16-byte aligned.
  auto aligned16 = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  m.fp8_gemm1 = m.block > 0 && m.x_dtype == MoeDType::e4m3 && m.w13_dtype == MoeDType::e4m3 && s.hidden % 32 == 0 &&
                aligned16(m.x) && aligned16(m.w13);
  // The intermediate in 2 bf16 parts where the judge accepts 5% of the elements outside
  // atol = rtol = 1e-2 (fp8 block forms), 3 (fp32's precision) elsewhere.
  m.inter_parts = f.weights == Weights::fp8_block ? 2 : 3;
  if (moe_routing_smem_per_token(m) > 48 * 1024)
    return make_error(Code::unsupported, fmt::format("{}: {}: routing over {} experts needs more than 48 KiB of shared "
                                                     "memory a token", d.name, kName, s.routed_experts));
  if (s.tokens * f.top_k > (std::int64_t{1} << 30))
    return make_error(Code::unsupported, fmt::format("{}: {}: {} tokens x top_k {} exceed the kernels' 32-bit row indices",
                                                     d.name, kName, s.tokens, f.top_k));
  if (s.tokens == 0) return ok_status();
  auto ws = workspace(c.stream, moe_workspace_bytes(m));
  if (!ws) return ws.error();
  m.workspace = *ws;
  return launch_moe(m);
}

}  // namespace

void add_moe_cuda(Registry& r) {
  Implementation impl;
  impl.name = kName;
  impl.author = "kb";
  impl.device = Device::cuda;
  impl.description =
      "MoE, every form: routing on the GPU (a warp per token, per-expert compaction); at decode (at most 4 rows "
      "expected a chosen expert) expert GEMMs that stream each chosen expert's weight rows once with 16-byte "
      "loads and dot them on the CUDA cores (fp32 within a scale block, double across); else grouped GEMMs on "
      "mma.sync fed by a cp.async ring, K split across CTAs when few rows are routed (fp8 block forms: e4m3 m16n8k32 "
      "with per-128-block promotion for GEMM1; else bf16 m16n8k16 on values split into bf16 parts to fp32 "
      "precision), SwiGLU fused into GEMM1, atomics-free combine";
  impl.supports = supports;
  impl.run_cuda = run;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
