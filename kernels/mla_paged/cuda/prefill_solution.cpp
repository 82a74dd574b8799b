// kb_cuda_mla_paged_prefill: kb's CUDA solution for mla_paged causal prefill
// definitions (with qo_indptr): bf16 q_nope / q_pe / ckv_cache / kpe_cache,
// int32 page tables, any page size, with or without kv_last_page_len,
// ckv 512 + kpe 64, any number of query heads. Kernel:
// kernels/attention/prefill.cuh; launcher: kernels/attention/prefill_mla.cu.
#include <fmt/format.h>

#include <string>

#include "../../attention/launch.hpp"
#include "../../attention/paged_call.hpp"
#include "../../attention/solution_args.hpp"
#include "harness/implementation.hpp"

namespace kb::kernels {
namespace {

using namespace attention_args;

const char* kName = "kb_cuda_mla_paged_prefill";

std::string supports(const Definition& d) {
  if (d.op_type != "mla_paged") return fmt::format("op_type {} is not mla_paged", d.op_type);
  if (!d.find_input("qo_indptr")) return "decode (no qo_indptr): this kernel is prefill only";
  if (std::string why = check_signature(d, {"q_nope", "q_pe", "ckv_cache", "kpe_cache"}, {"qo_indptr", "kv_indptr", "kv_indices"}, {"kv_last_page_len"}); !why.empty()) return why;
  if (const Axis* a = d.find_axis("head_dim_ckv"); a && a->kind == AxisKind::const_ && a->value != 512)
    return fmt::format("head_dim_ckv {}: this kernel handles 512", a->value);
  if (const Axis* a = d.find_axis("head_dim_kpe"); a && a->kind == AxisKind::const_ && a->value != 64)
    return fmt::format("head_dim_kpe {}: this kernel handles 64", a->value);
  auto o = find_oracle(d);
  if (!o) return "no oracle for this definition: " + o.error().message;
  return {};
}

// ckv_cache [pages, page_size, head_dim_ckv] and kpe_cache [.., head_dim_kpe], the dims of q_nope and q_pe.
bool mla_cache_fits(const PagedCall& p) {
  return p.cache[0]->shape[2] == p.q[0]->shape[2] && p.cache[1]->shape[2] == p.q[1]->shape[2];
}

Status run(const CudaCall& c) {
  if (Status st = check_call(c, kName, supports); !st) return st;
  auto p = bind_paged_call(c, kName, {"q_nope", "q_pe"}, {"ckv_cache", "kpe_cache"}, 3, mla_cache_fits);
  if (!p) return p.error();
  MlaPagedPrefillArgs a;
  a.q_nope = p->q[0]->data;
  a.q_pe = p->q[1]->data;
  a.ckv_cache = p->cache[0]->data;
  a.kpe_cache = p->cache[1]->data;
  a.head_dim_ckv = p->q[0]->shape[2];
  a.head_dim_kpe = p->q[1]->shape[2];
  set_paged_fields(*p, a);
  return launch_mla_paged_prefill(a, c.stream);
}

}  // namespace

void add_mla_paged_prefill_cuda(Registry& r) {
  Implementation impl;
  impl.name = kName;
  impl.author = "kb";
  impl.device = Device::cuda;
  impl.description =
      "MLA causal prefill on tensor cores (mma.sync bf16, fp32 online softmax in base 2): a device plan of (sequence, "
      "4-token tile) items, heaviest first; one CTA per item and 16 query heads (64 rows = 4 tokens x 16 heads sharing "
      "the latent KV), 8 warps (4 along rows x 2 along the 512 value columns), 32-key tiles of ckv+kpe streamed by "
      "cp.async, causal tiles skipped";
  impl.supports = supports;
  impl.run_cuda = run;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
