// kb_cuda_mla_ragged_prefill: kb's CUDA solution for mla_ragged causal prefill definitions: bf16
// q / k / v in ragged layout (rows of every sequence contiguous, CSR
// qo_indptr / kv_indptr, int32), qk_dim 192 / vo_dim 128 (DeepSeek MLA prefill without absorption), any group. Kernel: kernels/common/prefill.cuh;
// launcher: kernels/gqa_paged/cuda/prefill.cu.
#include <fmt/format.h>

#include <string>

#include "../../gqa_paged/cuda/prefill_cuda.hpp"
#include "../../common/attention_solution_args.hpp"
#include "harness/implementation.hpp"

namespace kb::kernels {
namespace {

using namespace attention_args;

const char* kName = "kb_cuda_mla_ragged_prefill";

std::string supports(const Definition& d) {
  if (d.op_type != "mla_ragged") return fmt::format("op_type {} is not mla_ragged", d.op_type);
  if (std::string why = check_signature(d, {"q", "k", "v"}, {"qo_indptr", "kv_indptr"}); !why.empty()) return why;
  if (!const_is(d, "qk_dim", 192) || !const_is(d, "vo_dim", 128)) return "qk_dim / vo_dim: this kernel handles 192 / 128";
  if (std::string why = check_head_groups(d); !why.empty()) return why;
  auto o = find_oracle(d);
  if (!o) return "no oracle for this definition: " + o.error().message;
  return {};
}

Status run(const CudaCall& c) {
  if (Status st = check_call(c, kName, supports); !st) return st;
  const cuda::DeviceTensor* q = input_tensor(c, "q");
  const cuda::DeviceTensor* k = input_tensor(c, "k");
  const cuda::DeviceTensor* v = input_tensor(c, "v");
  const cuda::DeviceTensor* qo = input_tensor(c, "qo_indptr");
  const cuda::DeviceTensor* kvp = input_tensor(c, "kv_indptr");
  if (!q || !k || !v || !qo || !kvp)
    return make_error(Code::invalid_argument, std::string(kName) + ": every input but sm_scale must be a tensor");
  auto scale = sm_scale(c, kName);
  if (!scale) return scale.error();
  const cuda::DeviceTensor& out = *output_tensor(c, "output");
  const cuda::DeviceTensor* lse = output_tensor(c, "lse");

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

void add_mla_ragged_cuda(Registry& r) {
  Implementation impl;
  impl.name = kName;
  impl.author = "kb";
  impl.device = Device::cuda;
  impl.description =
      "FlashAttention-2 style causal prefill on tensor cores (mma.sync bf16, fp32 online softmax in base 2): a device "
      "plan of (sequence, 128-token tile) items, heaviest tiles first; one CTA (8 warps x 16 rows) per (item, query "
      "head), 32-key tiles of the ragged K / V streamed by cp.async, causal tiles skipped and masks only on the "
      "diagonal";
  impl.supports = supports;
  impl.run_cuda = run;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
