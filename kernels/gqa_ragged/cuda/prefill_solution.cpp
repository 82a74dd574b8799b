// kb_cuda_gqa_ragged_prefill: kb's CUDA solution for gqa_ragged causal prefill definitions: bf16
// q / k / v in ragged layout (rows of every sequence contiguous, CSR
// qo_indptr / kv_indptr, int32), head_dim 128, any group. Kernel: kernels/common/prefill.cuh;
// launcher: kernels/gqa_paged/cuda/prefill.cu.
#include <fmt/format.h>

#include <string>
#include <variant>

#include "../../gqa_paged/cuda/prefill_cuda.hpp"
#include "harness/implementation.hpp"

namespace kb::kernels {
namespace {

const char* kName = "kb_cuda_gqa_ragged_prefill";

std::string check_dtype(const Definition& d, const char* name, DType want) {
  const TensorSpec* s = d.find_tensor(name);
  if (!s) return fmt::format("no tensor {}", name);
  if (s->dtype != want) return fmt::format("{} is {}; this kernel needs {}", name, dtype_name(s->dtype), dtype_name(want));
  return {};
}

bool const_is(const Definition& d, const char* axis, std::int64_t want) {
  const Axis* a = d.find_axis(axis);
  return !a || a->kind != AxisKind::const_ || a->value == want;
}

std::string supports(const Definition& d) {
  if (d.op_type != "gqa_ragged") return fmt::format("op_type {} is not gqa_ragged", d.op_type);
  for (const char* n : {"q", "k", "v", "qo_indptr", "kv_indptr", "sm_scale"})
    if (!d.find_input(n)) return fmt::format("input {} is missing", n);
  if (!d.find_output("output")) return "output 'output' is missing";
  for (const auto& s : d.inputs)
    if (s.name != "q" && s.name != "k" && s.name != "v" && s.name != "qo_indptr" && s.name != "kv_indptr" &&
        s.name != "sm_scale")
      return fmt::format("input {} is not one this kernel understands", s.name);
  for (const auto& s : d.outputs)
    if (s.name != "output" && s.name != "lse") return fmt::format("output {} is not one this kernel produces", s.name);
  for (const char* n : {"q", "k", "v", "output"})
    if (auto why = check_dtype(d, n, DType::bfloat16); !why.empty()) return why;
  for (const char* n : {"qo_indptr", "kv_indptr"})
    if (auto why = check_dtype(d, n, DType::int32); !why.empty()) return why;
  if (d.find_output("lse"))
    if (auto why = check_dtype(d, "lse", DType::float32); !why.empty()) return why;
  if (!d.find_input("sm_scale")->is_scalar()) return "sm_scale must be a scalar (shape null)";
  if (!const_is(d, "head_dim", 128)) return "head_dim: this kernel handles 128";
  const Axis* hq = d.find_axis("num_qo_heads");
  const Axis* hkv = d.find_axis("num_kv_heads");
  if (hq && hkv && hq->kind == AxisKind::const_ && hkv->kind == AxisKind::const_ &&
      (hkv->value < 1 || hq->value % hkv->value != 0))
    return fmt::format("{} query heads over {} kv heads", hq->value, hkv->value);
  auto o = find_oracle(d);
  if (!o) return "no oracle for this definition: " + o.error().message;
  return {};
}

Result<double> scalar_of(const cuda::DeviceArg& a) {
  if (!a.scalar) return make_error(Code::invalid_argument, std::string(kName) + ": sm_scale must be a scalar");
  if (const auto* v = std::get_if<double>(&*a.scalar)) return *v;
  if (const auto* v = std::get_if<std::int64_t>(&*a.scalar)) return static_cast<double>(*v);
  return make_error(Code::invalid_argument, std::string(kName) + ": sm_scale must be a number");
}

Status run(const CudaCall& c) {
  const Definition& d = c.definition;
  if (std::string why = supports(d); !why.empty()) return make_error(Code::unsupported, std::string(kName) + ": " + why);
  if (c.inputs.size() != d.inputs.size() || c.outputs.size() != d.outputs.size())
    return make_error(Code::invalid_argument, std::string(kName) + ": wrong number of arguments");
  auto tensor = [&](const char* n) -> const cuda::DeviceTensor* {
    auto i = input_index(d, n);
    return i ? c.inputs[*i].tensor : nullptr;
  };
  const cuda::DeviceTensor* q = tensor("q");
  const cuda::DeviceTensor* k = tensor("k");
  const cuda::DeviceTensor* v = tensor("v");
  const cuda::DeviceTensor* qo = tensor("qo_indptr");
  const cuda::DeviceTensor* kvp = tensor("kv_indptr");
  if (!q || !k || !v || !qo || !kvp)
    return make_error(Code::invalid_argument, std::string(kName) + ": every input but sm_scale must be a tensor");
  auto scale = scalar_of(c.inputs[*input_index(d, "sm_scale")]);
  if (!scale) return scale.error();
  const cuda::DeviceTensor& out = c.outputs[*output_index(d, "output")];
  const cuda::DeviceTensor* lse = output_index(d, "lse") ? &c.outputs[*output_index(d, "lse")] : nullptr;

  if (q->shape.size() != 3 || k->shape.size() != 3 || v->shape.size() != 3 || qo->shape.size() != 1 ||
      kvp->shape.size() != 1)
    return make_error(Code::invalid_argument, std::string(kName) + ": tensor ranks differ from the definition's");
  const std::int64_t total_q = q->shape[0], hq = q->shape[1], dqk = q->shape[2];
  const std::int64_t total_kv = k->shape[0], hkv = k->shape[1], dvo = v->shape[2];
  const std::int64_t batch = qo->shape[0] - 1;
  if (batch < 0 || k->shape[2] != dqk || v->shape[0] != total_kv || v->shape[1] != hkv || kvp->shape[0] != batch + 1 ||
      out.shape != std::vector<std::int64_t>{total_q, hq, dvo} ||
      (lse && lse->shape != std::vector<std::int64_t>{total_q, hq}))
    return make_error(Code::invalid_argument, fmt::format("{}: shapes disagree (q [{}, {}, {}], k [{}, {}, {}], v [.., {}])",
                                                          kName, total_q, hq, dqk, total_kv, hkv, k->shape[2], dvo));
  if (q->dtype != DType::bfloat16 || k->dtype != DType::bfloat16 || v->dtype != DType::bfloat16 ||
      out.dtype != DType::bfloat16 || qo->dtype != DType::int32 || kvp->dtype != DType::int32 ||
      (lse && lse->dtype != DType::float32))
    return make_error(Code::invalid_argument, std::string(kName) + ": tensor dtypes differ from the definition's");

  GqaPrefillArgs a;
  a.q = q->data;
  a.k = k->data;
  a.v = v->data;
  a.qo_indptr = qo->as<const std::int32_t>();
  a.kv_indptr = kvp->as<const std::int32_t>();
  a.output = out.data;
  a.lse = lse ? lse->as<float>() : nullptr;
  a.batch = batch;
  a.total_q = total_q;
  a.num_qo_heads = hq;
  a.num_kv_heads = hkv;
  a.head_dim_qk = dqk;
  a.head_dim_vo = dvo;
  a.paged = false;
  a.kv_rows = total_kv;
  a.sm_scale = *scale;
  return launch_gqa_prefill(a, c.stream);
}

}  // namespace

void add_gqa_ragged_cuda(Registry& r) {
  Implementation impl;
  impl.name = kName;
  impl.author = "kb";
  impl.device = Device::cuda;
  impl.description =
      "FlashAttention-2 style causal prefill on tensor cores (mma.sync bf16, fp32 online softmax in base 2): a device "
      "plan of (sequence, 128-token tile) items, heaviest tiles first; one CTA (8 warps x 16 rows) per (item, query "
      "head), 64-key tiles of the ragged K / V streamed by cp.async, causal tiles skipped and masks only on the "
      "diagonal";
  impl.supports = supports;
  impl.run_cuda = run;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
