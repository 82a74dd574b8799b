// The run() of kb's two ragged causal-prefill solutions (kb_cuda_gqa_ragged_prefill and
// kb_cuda_mla_ragged_prefill): both take q / k / v in ragged layout with CSR qo_indptr / kv_indptr and
// launch through launch_gqa_prefill (prefill_gqa.cu; dispatch.cuh picks the kernel by head dims). Each solution
// keeps its own supports() (op_type, head dims) and registration.
#pragma once

#include <fmt/format.h>

#include <string>

#include "launch.hpp"
#include "solution_args.hpp"
#include "harness/implementation.hpp"

namespace kb::kernels {

inline Status run_ragged_prefill(const CudaCall& c, const char* kName, std::string (*supports)(const Definition&)) {
  using namespace attention_args;
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
      !shape_is(out.shape, {total_q, hq, dvo}) ||
      (lse && !shape_is(lse->shape, {total_q, hq})))
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


}  // namespace kb::kernels
