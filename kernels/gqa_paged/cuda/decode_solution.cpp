// kb_cuda_gqa_paged_decode: kb's CUDA solution for gqa_paged decode
// definitions (no qo_indptr): bf16 q / k_cache / v_cache, int32 page tables,
// page size any (1 and 64 shipped), with or without kv_last_page_len,
// head_dim one of kGqaHeadDims (64, 96, 128, 192, 256), group 1..16. Kernel:
// kernels/attention/decode.cuh.
#include <fmt/format.h>

#include <string>

#include "../../attention/launch.hpp"
#include "../../attention/solution_args.hpp"
#include "harness/implementation.hpp"

namespace kb::kernels {
namespace {

using namespace attention_args;

const char* kName = "kb_cuda_gqa_paged_decode";

std::string supports(const Definition& d) {
  if (d.op_type != "gqa_paged") return fmt::format("op_type {} is not gqa_paged", d.op_type);
  if (d.find_input("qo_indptr")) return "prefill (qo_indptr): this kernel is decode only";
  if (std::string why = check_signature(d, {"q", "k_cache", "v_cache"}, {"kv_indptr", "kv_indices"}, {"kv_last_page_len"}); !why.empty()) return why;
  if (const Axis* a = d.find_axis("head_dim"); a && a->kind == AxisKind::const_ && !gqa_decode_supports_head_dim(a->value))
    return fmt::format("head_dim {}: this kernel handles {}", a->value, kGqaHeadDimsText);
  const Axis* hq = d.find_axis("num_qo_heads");
  const Axis* hkv = d.find_axis("num_kv_heads");
  if (hq && hkv && hq->kind == AxisKind::const_ && hkv->kind == AxisKind::const_) {
    if (hkv->value < 1 || hq->value % hkv->value != 0 || hq->value / hkv->value > kGqaDecodeMaxGroup)
      return fmt::format("{} query heads over {} kv heads: the group must be 1..{}", hq->value, hkv->value,
                         kGqaDecodeMaxGroup);
  }
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
  const cuda::DeviceTensor* indptr = input_tensor(c, "kv_indptr");
  const cuda::DeviceTensor* indices = input_tensor(c, "kv_indices");
  const cuda::DeviceTensor* last = input_tensor(c, "kv_last_page_len");
  if (!q || !k || !v || !indptr || !indices || (input_index(d, "kv_last_page_len") && !last))
    return make_error(Code::invalid_argument, std::string(kName) + ": every input but sm_scale must be a tensor");
  auto scale = sm_scale(c, kName);
  if (!scale) return scale.error();
  const cuda::DeviceTensor& out = *output_tensor(c, "output");
  const cuda::DeviceTensor* lse = output_tensor(c, "lse");

  if (q->shape.size() != 3 || k->shape.size() != 4 || v->shape != k->shape || indptr->shape.size() != 1 ||
      indices->shape.size() != 1)
    return make_error(Code::invalid_argument, std::string(kName) + ": tensor ranks differ from the definition's");
  const std::int64_t batch = q->shape[0], hq = q->shape[1], dim = q->shape[2];
  const std::int64_t pages = k->shape[0], ps = k->shape[1], hkv = k->shape[2];
  if (k->shape[3] != dim || indptr->shape[0] != batch + 1 || out.shape != q->shape ||
      (lse && !shape_is(lse->shape, {batch, hq})) || (last && !shape_is(last->shape, {batch})))
    return make_error(Code::invalid_argument, fmt::format("{}: shapes disagree (q [{}, {}, {}], k_cache [{}, {}, {}, {}])",
                                                          kName, batch, hq, dim, pages, ps, hkv, k->shape[3]));
  if (q->dtype != DType::bfloat16 || k->dtype != DType::bfloat16 || v->dtype != DType::bfloat16 ||
      out.dtype != DType::bfloat16 || indptr->dtype != DType::int32 || indices->dtype != DType::int32 ||
      (last && last->dtype != DType::int32) || (lse && lse->dtype != DType::float32))
    return make_error(Code::invalid_argument, std::string(kName) + ": tensor dtypes differ from the definition's");

  GqaPagedDecodeArgs a;
  a.q = q->data;
  a.k_cache = k->data;
  a.v_cache = v->data;
  a.kv_indptr = indptr->as<const std::int32_t>();
  a.kv_indices = indices->as<const std::int32_t>();
  a.kv_last_page_len = last ? last->as<const std::int32_t>() : nullptr;
  a.output = out.data;
  a.lse = lse ? lse->as<float>() : nullptr;
  a.batch = batch;
  a.num_qo_heads = hq;
  a.num_kv_heads = hkv;
  a.head_dim = dim;
  a.page_size = ps;
  a.num_pages = pages;
  a.num_kv_indices = indices->shape[0];
  a.sm_scale = *scale;
  return launch_gqa_paged_decode(a, c.stream);
}

}  // namespace

void add_gqa_paged_cuda(Registry& r) {
  Implementation impl;
  impl.name = kName;
  impl.author = "kb";
  impl.device = Device::cuda;
  impl.description =
      "flash-decoding on tensor cores (mma.sync bf16, fp32 online softmax in base 2): one CTA per (sequence, kv head, "
      "split) with the group's query heads as the 16 mma rows, 64-key tiles streamed by cp.async (16-byte copies, "
      "page ids prefetched a tile ahead), splits chosen from shapes to fill the GPU and merged by their lse";
  impl.supports = supports;
  impl.run_cuda = run;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
