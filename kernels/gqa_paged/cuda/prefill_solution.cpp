// kb_cuda_gqa_paged_prefill: kb's CUDA solution for gqa_paged causal prefill
// definitions (with qo_indptr): bf16 q / k_cache / v_cache, int32 page
// tables, any page size (1 and 64 shipped), with or without
// kv_last_page_len, head_dim one of kGqaHeadDims (64, 96, 128, 192, 256),
// any group. Kernels: kernels/attention/prefill_wgmma.cuh (head_dim 128),
// prefill.cuh (the others); launcher: kernels/attention/prefill_gqa.cu.
#include <fmt/format.h>

#include <string>

#include "../../attention/launch.hpp"
#include "../../attention/solution_args.hpp"
#include "harness/implementation.hpp"

namespace kb::kernels {
namespace {

using namespace attention_args;

const char* kName = "kb_cuda_gqa_paged_prefill";

std::string supports(const Definition& d) {
  if (d.op_type != "gqa_paged") return fmt::format("op_type {} is not gqa_paged", d.op_type);
  if (!d.find_input("qo_indptr")) return "decode (no qo_indptr): this kernel is prefill only";
  if (std::string why = check_signature(d, {"q", "k_cache", "v_cache"}, {"qo_indptr", "kv_indptr", "kv_indices"}, {"kv_last_page_len"}); !why.empty()) return why;
  if (const Axis* a = d.find_axis("head_dim"); a && a->kind == AxisKind::const_ && !gqa_head_dim_supported(a->value))
    return fmt::format("head_dim {}: this kernel handles {}", a->value, kGqaHeadDimsText);
  if (std::string why = check_head_groups(d); !why.empty()) return why;
  auto o = find_oracle(d);
  if (!o) return "no oracle for this definition: " + o.error().message;
  return {};
}

Status run(const CudaCall& c) {
  const Definition& d = c.definition;
  if (Status st = check_call(c, kName, supports); !st) return st;
  const cuda::DeviceTensor* q = input_tensor(c, "q");
  const cuda::DeviceTensor* k = input_tensor(c, "k_cache");
  const cuda::DeviceTensor* v = input_tensor(c, "v_cache");
  const cuda::DeviceTensor* qo = input_tensor(c, "qo_indptr");
  const cuda::DeviceTensor* indptr = input_tensor(c, "kv_indptr");
  const cuda::DeviceTensor* indices = input_tensor(c, "kv_indices");
  const cuda::DeviceTensor* last = input_tensor(c, "kv_last_page_len");
  if (!q || !k || !v || !qo || !indptr || !indices || (input_index(d, "kv_last_page_len") && !last))
    return make_error(Code::invalid_argument, std::string(kName) + ": every input but sm_scale must be a tensor");
  auto scale = sm_scale(c, kName);
  if (!scale) return scale.error();
  const cuda::DeviceTensor& out = *output_tensor(c, "output");
  const cuda::DeviceTensor* lse = output_tensor(c, "lse");

  if (q->shape.size() != 3 || k->shape.size() != 4 || v->shape != k->shape || qo->shape.size() != 1 ||
      indptr->shape.size() != 1 || indices->shape.size() != 1)
    return make_error(Code::invalid_argument, std::string(kName) + ": tensor ranks differ from the definition's");
  const std::int64_t total_q = q->shape[0], hq = q->shape[1], dim = q->shape[2];
  const std::int64_t batch = qo->shape[0] - 1;
  const std::int64_t pages = k->shape[0], ps = k->shape[1], hkv = k->shape[2];
  if (batch < 0 || k->shape[3] != dim || indptr->shape[0] != batch + 1 || out.shape != q->shape ||
      (lse && !shape_is(lse->shape, {total_q, hq})) ||
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
      "causal prefill on Hopper tensor cores (wgmma bf16, fp32 online softmax in base 2; kernels/attention/prefill_wgmma.cuh): a device "
      "plan of (sequence, 128-token tile) items, heaviest tiles first; per (item, query head) a producer warpgroup "
      "feeding two consumer warpgroups 128-key tiles, K / V by TMA for page sizes that are multiples of 64, by a cp.async gather otherwise, masks only on diagonal tiles; "
      "head dims other than 128 on the mma.sync kernel of kernels/attention/prefill.cuh";
  impl.supports = supports;
  impl.run_cuda = run;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
