// kb_cuda_gqa_paged_prefill: kb's CUDA solution for gqa_paged causal prefill
// definitions (with qo_indptr): bf16 q / k_cache / v_cache, int32 page
// tables, any page size (1 and 64 shipped), with or without
// kv_last_page_len, head_dim one of kGqaHeadDims (64, 96, 128, 192, 256),
// any group. Kernels: kernels/attention/prefill_wgmma.cuh (head_dim 128),
// prefill.cuh (the others); launcher: kernels/attention/prefill_gqa.cu.
#include <fmt/format.h>

#include <string>

#include "../../attention/launch.hpp"
#include "../../attention/paged_call.hpp"
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

// k_cache and v_cache [pages, page_size, kv_heads, head_dim], head_dim q's.
bool gqa_cache_fits(const PagedCall& p) {
  const auto& k = p.cache[0]->shape;
  return p.cache[1]->shape == k && k[3] == p.q[0]->shape[2];
}

Status run(const CudaCall& c) {
  if (Status st = check_call(c, kName, supports); !st) return st;
  auto p = bind_paged_call(c, kName, {"q"}, {"k_cache", "v_cache"}, 4, gqa_cache_fits);
  if (!p) return p.error();
  GqaPrefillArgs a;
  a.q = p->q[0]->data;
  a.k = p->cache[0]->data;
  a.v = p->cache[1]->data;
  a.num_kv_heads = p->cache[0]->shape[2];
  a.head_dim_qk = a.head_dim_vo = p->q[0]->shape[2];
  a.paged = true;
  set_paged_fields(*p, a);
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
