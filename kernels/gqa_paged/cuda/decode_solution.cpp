// kb_cuda_gqa_paged_decode: kb's CUDA solution for gqa_paged decode
// definitions (no qo_indptr): bf16 q / k_cache / v_cache, int32 page tables,
// page size any (1 and 64 shipped), with or without kv_last_page_len,
// head_dim one of kGqaHeadDims (64, 96, 128, 192, 256), group 1..16. Kernel:
// kernels/attention/decode.cuh.
#include <fmt/format.h>

#include <string>

#include "../../attention/launch.hpp"
#include "../../attention/paged_call.hpp"
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

// k_cache and v_cache [pages, page_size, kv_heads, head_dim], head_dim q's.
bool gqa_cache_fits(const PagedCall& p) {
  const auto& k = p.cache[0]->shape;
  return p.cache[1]->shape == k && k[3] == p.q[0]->shape[2];
}

Status run(const CudaCall& c) {
  if (Status st = check_call(c, kName, supports); !st) return st;
  auto p = bind_paged_call(c, kName, {"q"}, {"k_cache", "v_cache"}, 4, gqa_cache_fits);
  if (!p) return p.error();
  GqaPagedDecodeArgs a;
  a.q = p->q[0]->data;
  a.k_cache = p->cache[0]->data;
  a.v_cache = p->cache[1]->data;
  a.num_kv_heads = p->cache[0]->shape[2];
  a.head_dim = p->q[0]->shape[2];
  set_paged_fields(*p, a);
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
