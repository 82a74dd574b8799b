// kb_cuda_mla_paged_decode: kb's CUDA solution for mla_paged decode
// definitions (no qo_indptr): bf16 q_nope / q_pe / ckv_cache / kpe_cache,
// int32 page tables, any page size, with or without kv_last_page_len,
// ckv 512 + kpe 64, any number of query heads. Kernel:
// kernels/attention/decode.cuh.
#include <fmt/format.h>

#include <string>

#include "../../attention/launch.hpp"
#include "../../attention/solution_args.hpp"
#include "harness/implementation.hpp"

namespace kb::kernels {
namespace {

using namespace attention_args;

const char* kName = "kb_cuda_mla_paged_decode";

std::string supports(const Definition& d) {
  if (d.op_type != "mla_paged") return fmt::format("op_type {} is not mla_paged", d.op_type);
  if (d.find_input("qo_indptr")) return "prefill (qo_indptr): this kernel is decode only";
  if (std::string why = check_signature(d, {"q_nope", "q_pe", "ckv_cache", "kpe_cache"}, {"kv_indptr", "kv_indices"}, {"kv_last_page_len"}); !why.empty()) return why;
  if (const Axis* a = d.find_axis("head_dim_ckv"); a && a->kind == AxisKind::const_ && a->value != 512)
    return fmt::format("head_dim_ckv {}: this kernel handles 512", a->value);
  if (const Axis* a = d.find_axis("head_dim_kpe"); a && a->kind == AxisKind::const_ && a->value != 64)
    return fmt::format("head_dim_kpe {}: this kernel handles 64", a->value);
  auto o = find_oracle(d);
  if (!o) return "no oracle for this definition: " + o.error().message;
  return {};
}

Status run(const CudaCall& c) {
  const Definition& d = c.definition;
  if (Status st = check_call(c, kName, supports); !st) return st;
  const cuda::DeviceTensor* qn = input_tensor(c, "q_nope");
  const cuda::DeviceTensor* qp = input_tensor(c, "q_pe");
  const cuda::DeviceTensor* ckv = input_tensor(c, "ckv_cache");
  const cuda::DeviceTensor* kpe = input_tensor(c, "kpe_cache");
  const cuda::DeviceTensor* indptr = input_tensor(c, "kv_indptr");
  const cuda::DeviceTensor* indices = input_tensor(c, "kv_indices");
  const cuda::DeviceTensor* last = input_tensor(c, "kv_last_page_len");
  if (!qn || !qp || !ckv || !kpe || !indptr || !indices || (input_index(d, "kv_last_page_len") && !last))
    return make_error(Code::invalid_argument, std::string(kName) + ": every input but sm_scale must be a tensor");
  auto scale = sm_scale(c, kName);
  if (!scale) return scale.error();
  const cuda::DeviceTensor& out = *output_tensor(c, "output");
  const cuda::DeviceTensor* lse = output_tensor(c, "lse");

  if (qn->shape.size() != 3 || qp->shape.size() != 3 || ckv->shape.size() != 3 || kpe->shape.size() != 3 ||
      indptr->shape.size() != 1 || indices->shape.size() != 1)
    return make_error(Code::invalid_argument, std::string(kName) + ": tensor ranks differ from the definition's");
  const std::int64_t batch = qn->shape[0], hq = qn->shape[1], dckv = qn->shape[2], dkpe = qp->shape[2];
  const std::int64_t pages = ckv->shape[0], ps = ckv->shape[1];
  if (qp->shape[0] != batch || qp->shape[1] != hq || ckv->shape[2] != dckv || kpe->shape[0] != pages ||
      kpe->shape[1] != ps || kpe->shape[2] != dkpe || indptr->shape[0] != batch + 1 || out.shape != qn->shape ||
      (lse && !shape_is(lse->shape, {batch, hq})) || (last && !shape_is(last->shape, {batch})))
    return make_error(Code::invalid_argument,
                      fmt::format("{}: shapes disagree (q_nope [{}, {}, {}], ckv_cache [{}, {}, {}])", kName, batch, hq,
                                  dckv, pages, ps, ckv->shape[2]));
  if (qn->dtype != DType::bfloat16 || qp->dtype != DType::bfloat16 || ckv->dtype != DType::bfloat16 ||
      kpe->dtype != DType::bfloat16 || out.dtype != DType::bfloat16 || indptr->dtype != DType::int32 ||
      indices->dtype != DType::int32 || (last && last->dtype != DType::int32) || (lse && lse->dtype != DType::float32))
    return make_error(Code::invalid_argument, std::string(kName) + ": tensor dtypes differ from the definition's");

  MlaPagedDecodeArgs a;
  a.q_nope = qn->data;
  a.q_pe = qp->data;
  a.ckv_cache = ckv->data;
  a.kpe_cache = kpe->data;
  a.kv_indptr = indptr->as<const std::int32_t>();
  a.kv_indices = indices->as<const std::int32_t>();
  a.kv_last_page_len = last ? last->as<const std::int32_t>() : nullptr;
  a.output = out.data;
  a.lse = lse ? lse->as<float>() : nullptr;
  a.batch = batch;
  a.num_qo_heads = hq;
  a.head_dim_ckv = dckv;
  a.head_dim_kpe = dkpe;
  a.page_size = ps;
  a.num_pages = pages;
  a.num_kv_indices = indices->shape[0];
  a.sm_scale = *scale;
  return launch_mla_paged_decode(a, c.stream);
}

}  // namespace

void add_mla_paged_cuda(Registry& r) {
  Implementation impl;
  impl.name = kName;
  impl.author = "kb";
  impl.device = Device::cuda;
  impl.description =
      "MLA flash-decoding on tensor cores (mma.sync bf16, fp32 online softmax in base 2): one CTA per (sequence, "
      "16 query heads, split) over the shared latent cache, 64-key tiles of ckv+kpe streamed by cp.async, splits "
      "chosen from shapes to fill the GPU and merged by their lse";
  impl.supports = supports;
  impl.run_cuda = run;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
