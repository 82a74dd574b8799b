// kb_cpu_gqa_paged: grouped-query attention over a paged NHD cache (k_cache,
// v_cache [num_pages, page_size, num_kv_heads, head_dim]) on the CPU, decode
// and causal prefill, any page size, with or without kv_last_page_len. A tiled
// online softmax in fp32 (kernels/attention/online_softmax.hpp), reading keys
// through the page table block by block; the oracle instead gathers keys and
// materializes every logit in double.
#include "../attention/online_softmax.hpp"

namespace kb::kernels {

void add_gqa_paged_cpu(Registry& r) {
  Implementation impl;
  impl.name = "kb_cpu_gqa_paged";
  impl.author = "kb";
  impl.device = Device::cpu;
  impl.description = "paged GQA decode / causal prefill, tiled online softmax (fp32), threads over sequences x kv heads";
  impl.supports = [](const Definition& d) -> std::string {
    std::string why = flash::check_signature(d, "gqa_paged", {"q", "k_cache", "v_cache", "kv_indptr", "kv_indices", "sm_scale"},
                                             {"qo_indptr", "kv_last_page_len"});
    if (!why.empty()) return why;
    if (d.find_input("qo_indptr") && d.name.find("causal") == std::string::npos)
      return "prefill without 'causal' in its name: only causal prefill is handled";
    return {};
  };
  impl.run = [](const ImplementationCall& c) -> Status {
    KB_TRY(flash::tensors_passed(c));
    const Tensor* q = flash::tensor_arg(c, "q");
    const Tensor* kc = flash::tensor_arg(c, "k_cache");
    const Tensor* vc = flash::tensor_arg(c, "v_cache");
    if (q->rank() != 3 || kc->rank() != 4 || vc->rank() != 4)
      return flash::bad_call(c, "expects q [tokens, H_q, D], k_cache / v_cache [pages, page_size, H_kv, D]");
    const std::int64_t num_pages = kc->dim(0), page_size = kc->dim(1), kv_heads = kc->dim(2), d = q->dim(2);
    if (kc->dim(3) != d || vc->dim(0) != num_pages || vc->dim(1) != page_size || vc->dim(2) != kv_heads)
      return flash::bad_call(c, "q, k_cache and v_cache disagree in shape");
    if (page_size < 1 || kv_heads < 1 || q->dim(1) % kv_heads != 0)
      return flash::bad_call(c, fmt::format("page_size {} / {} query heads over {} kv heads do not fit", page_size,
                                            q->dim(1), kv_heads));
    auto scale = flash::scale_arg(c, "sm_scale");
    if (!scale) return std::move(scale).error();
    flash::Problem p;
    p.parts = 1;
    p.q[0] = {q, q->dim(1), d};
    p.k[0] = {kc, kv_heads, d};
    p.v = {vc, kv_heads, vc->dim(3)};
    p.tokens = q->dim(0);
    p.q_heads = q->dim(1);
    p.kv_heads = kv_heads;
    p.dv = vc->dim(3);
    p.sm_scale = *scale;
    p.page_size = page_size;
    std::vector<std::int64_t> table;
    KB_TRY(flash::paged_sequences(c, p, flash::tensor_arg(c, "qo_indptr"), flash::tensor_arg(c, "kv_indptr"),
                                  flash::tensor_arg(c, "kv_indices"), flash::tensor_arg(c, "kv_last_page_len"), num_pages,
                                  table));
    std::vector<float> out, lse;
    KB_TRY(flash::attend(p, out, lse));
    return flash::store_outputs(c, p, out, lse);
  };
  r.add(std::move(impl));
}

}  // namespace kb::kernels
