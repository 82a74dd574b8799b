// kb_cuda_gqa_paged_prefill: kb's CUDA solution for gqa_paged causal prefill
// definitions (with qo_indptr): bf16 q / k_cache / v_cache, int32 page
// tables, any page size (1 and 64 shipped), with or without
// kv_last_page_len, head_dim 128, any group. Kernel:
// kernels/common/prefill.cuh; launcher: prefill.cu.
#include <fmt/format.h>

#include <string>
#include <variant>

#include "harness/implementation.hpp"
#include "prefill_cuda.hpp"

namespace kb::kernels {
namespace {

const char* kName = "kb_cuda_gqa_paged_prefill";

std::string check_dtype(const Definition& d, const char* name, DType want) {
  const TensorSpec* s = d.find_tensor(name);
  if (!s) return fmt::format("no tensor {}", name);
  if (s->dtype != want) return fmt::format("{} is {}; this kernel needs {}", name, dtype_name(s->dtype), dtype_name(want));
  return {};
}

std::string supports(const Definition& d) {
  if (d.op_type != "gqa_paged") return fmt::format("op_type {} is not gqa_paged", d.op_type);
  if (!d.find_input("qo_indptr")) return "decode (no qo_indptr): this kernel is prefill only";
  for (const char* n : {"q", "k_cache", "v_cache", "qo_indptr", "kv_indptr", "kv_indices", "sm_scale"})
    if (!d.find_input(n)) return fmt::format("input {} is missing", n);
  if (!d.find_output("output")) return "output 'output' is missing";
  for (const auto& s : d.inputs)
    if (s.name != "q" && s.name != "k_cache" && s.name != "v_cache" && s.name != "qo_indptr" && s.name != "kv_indptr" &&
        s.name != "kv_indices" && s.name != "kv_last_page_len" && s.name != "sm_scale")
      return fmt::format("input {} is not one this kernel understands", s.name);
  for (const auto& s : d.outputs)
    if (s.name != "output" && s.name != "lse") return fmt::format("output {} is not one this kernel produces", s.name);
  for (const char* n : {"q", "k_cache", "v_cache", "output"})
    if (auto why = check_dtype(d, n, DType::bfloat16); !why.empty()) return why;
  for (const char* n : {"qo_indptr", "kv_indptr", "kv_indices"})
    if (auto why = check_dtype(d, n, DType::int32); !why.empty()) return why;
  if (d.find_input("kv_last_page_len"))
    if (auto why = check_dtype(d, "kv_last_page_len", DType::int32); !why.empty()) return why;
  if (d.find_output("lse"))
    if (auto why = check_dtype(d, "lse", DType::float32); !why.empty()) return why;
  if (!d.find_input("sm_scale")->is_scalar()) return "sm_scale must be a scalar (shape null)";
  if (const Axis* a = d.find_axis("head_dim"); a && a->kind == AxisKind::const_ && a->value != 128)
    return fmt::format("head_dim {}: this kernel handles 128", a->value);
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
  const cuda::DeviceTensor* k = tensor("k_cache");
  const cuda::DeviceTensor* v = tensor("v_cache");
  const cuda::DeviceTensor* qo = tensor("qo_indptr");
  const cuda::DeviceTensor* indptr = tensor("kv_indptr");
  const cuda::DeviceTensor* indices = tensor("kv_indices");
  const cuda::DeviceTensor* last = tensor("kv_last_page_len");
  if (!q || !k || !v || !qo || !indptr || !indices || (input_index(d, "kv_last_page_len") && !last))
    return make_error(Code::invalid_argument, std::string(kName) + ": every input but sm_scale must be a tensor");
  auto scale = scalar_of(c.inputs[*input_index(d, "sm_scale")]);
  if (!scale) return scale.error();
  const cuda::DeviceTensor& out = c.outputs[*output_index(d, "output")];
  const cuda::DeviceTensor* lse = output_index(d, "lse") ? &c.outputs[*output_index(d, "lse")] : nullptr;

  if (q->shape.size() != 3 || k->shape.size() != 4 || v->shape != k->shape || qo->shape.size() != 1 ||
      indptr->shape.size() != 1 || indices->shape.size() != 1)
    return make_error(Code::invalid_argument, std::string(kName) + ": tensor ranks differ from the definition's");
  const std::int64_t total_q = q->shape[0], hq = q->shape[1], dim = q->shape[2];
  const std::int64_t batch = qo->shape[0] - 1;
  const std::int64_t pages = k->shape[0], ps = k->shape[1], hkv = k->shape[2];
  if (batch < 0 || k->shape[3] != dim || indptr->shape[0] != batch + 1 || out.shape != q->shape ||
      (lse && lse->shape != std::vector<std::int64_t>{total_q, hq}) ||
      // FlashInfer-Bench's ps64 prefill definitions size kv_last_page_len [len_indptr] (batch + 1; the
      // reference reads the first batch entries); decode ones [batch_size]. Accept both.
      (last && (last->shape.size() != 1 || (last->shape[0] != batch && last->shape[0] != batch + 1))))
    return make_error(Code::invalid_argument, fmt::format("{}: shapes disagree (q [{}, {}, {}], k_cache [{}, {}, {}, {}])",
                                                          kName, total_q, hq, dim, pages, ps, hkv, k->shape[3]));
  if (q->dtype != DType::bfloat16 || k->dtype != DType::bfloat16 || v->dtype != DType::bfloat16 ||
      out.dtype != DType::bfloat16 || qo->dtype != DType::int32 || indptr->dtype != DType::int32 ||
      indices->dtype != DType::int32 || (last && last->dtype != DType::int32) || (lse && lse->dtype != DType::float32))
    return make_error(Code::invalid_argument, std::string(kName) + ": tensor dtypes differ from the definition's");

  GqaPrefillArgs a;
  a.q = q->data;
  a.k = k->data;
  a.v = v->data;
  a.qo_indptr = qo->as<const std::int32_t>();
  a.kv_indptr = indptr->as<const std::int32_t>();
  a.kv_indices = indices->as<const std::int32_t>();
  a.kv_last_page_len = last ? last->as<const std::int32_t>() : nullptr;
  a.output = out.data;
  a.lse = lse ? lse->as<float>() : nullptr;
  a.batch = batch;
  a.total_q = total_q;
  a.num_qo_heads = hq;
  a.num_kv_heads = hkv;
  a.head_dim_qk = a.head_dim_vo = dim;
  a.paged = true;
  a.page_size = ps;
  a.num_kv_indices = indices->shape[0];
  a.kv_rows = pages;
  a.sm_scale = *scale;
  return launch_gqa_prefill(a, c.stream);
}

}  // namespace

void add_gqa_paged_prefill_cuda(Registry& r) {
  Implementation impl;
  impl.name = kName;
  impl.author = "kb";
  impl.device = Device::cuda;
  impl.description =
      "FlashAttention-2 style causal prefill on tensor cores (mma.sync bf16, fp32 online softmax in base 2): a device "
      "plan of (sequence, 128-token tile) items, heaviest tiles first; one CTA (8 warps x 16 rows) per (item, query "
      "head), 64-key tiles of the paged cache streamed by cp.async with page ids looked up a tile ahead, causal tiles "
      "skipped and masks only on the diagonal";
  impl.supports = supports;
  impl.run_cuda = run;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
