// kb_cpu_mla_paged: DeepSeek MLA over a paged latent cache on the CPU, decode
// and causal prefill: logits = (q_nope . ckv + q_pe . kpe) * sm_scale, output
// = softmax . ckv, one latent head shared by every query head. The tiled
// online softmax of kernels/attention/online_softmax.hpp with two key parts, the
// ckv block serving as the value block too.
#include "../attention/online_softmax.hpp"

namespace kb::kernels {

void add_mla_paged_cpu(Registry& r) {
  Implementation impl;
  impl.name = "kb_cpu_mla_paged";
  impl.author = "kb";
  impl.device = Device::cpu;
  impl.description = "paged MLA decode / causal prefill (ckv + kpe), tiled online softmax (fp32), threaded";
  impl.supports = [](const Definition& d) -> std::string {
    std::string why = flash::check_signature(
        d, "mla_paged", {"q_nope", "q_pe", "ckv_cache", "kpe_cache", "kv_indptr", "kv_indices", "sm_scale"},
        {"qo_indptr", "kv_last_page_len"});
    if (!why.empty()) return why;
    if (d.find_input("qo_indptr") && d.name.find("causal") == std::string::npos)
      return "prefill without 'causal' in its name: only causal prefill is handled";
    return {};
  };
  impl.run = [](const ImplementationCall& c) -> Status {
    KB_TRY(flash::tensors_passed(c));
    const Tensor* qn = flash::tensor_arg(c, "q_nope");
    const Tensor* qp = flash::tensor_arg(c, "q_pe");
    const Tensor* ckv = flash::tensor_arg(c, "ckv_cache");
    const Tensor* kpe = flash::tensor_arg(c, "kpe_cache");
    if (qn->rank() != 3 || qp->rank() != 3 || ckv->rank() != 3 || kpe->rank() != 3)
      return flash::bad_call(c, "expects q_nope / q_pe [tokens, H, D] and ckv_cache / kpe_cache [pages, page_size, D]");
    const std::int64_t tokens = qn->dim(0), heads = qn->dim(1), d_ckv = qn->dim(2), d_kpe = qp->dim(2);
    const std::int64_t num_pages = ckv->dim(0), page_size = ckv->dim(1);
    if (qp->dim(0) != tokens || qp->dim(1) != heads || ckv->dim(2) != d_ckv || kpe->dim(0) != num_pages ||
        kpe->dim(1) != page_size || kpe->dim(2) != d_kpe || page_size < 1)
      return flash::bad_call(c, "q_nope, q_pe, ckv_cache and kpe_cache disagree in shape");
    auto scale = flash::scale_arg(c, "sm_scale");
    if (!scale) return std::move(scale).error();
    flash::Problem p;
    p.parts = 2;
    p.q[0] = {qn, heads, d_ckv};
    p.q[1] = {qp, heads, d_kpe};
    p.k[0] = {ckv, 1, d_ckv};
    p.k[1] = {kpe, 1, d_kpe};
    p.v = {ckv, 1, d_ckv};  // the same tensor as k[0]: values are the ckv part of each key block
    p.tokens = tokens;
    p.q_heads = heads;
    p.kv_heads = 1;
    p.dv = d_ckv;
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
