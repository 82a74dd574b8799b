// mla_paged oracle: multi-head latent attention (absorbed) over paged caches
// ckv_cache [num_pages, page_size, head_dim_ckv] and kpe_cache [num_pages,
// page_size, head_dim_kpe]: logits = (q_nope . ckv + q_pe . kpe) * sm_scale,
// output = softmax . ckv. Decode and causal prefill, any page size, with or
// without kv_last_page_len. The math lives in kernels/attention/oracle.cpp.
#include "../attention/oracle.hpp"

namespace kb::kernels {
namespace {
std::string supports(const Definition& d) { return attention::supports_paged(d, attention::PagedKind::mla); }
Status run(const OracleCall& c) { return attention::run_paged(c, attention::PagedKind::mla); }
}  // namespace
extern const OracleEntry mla_paged_oracle{"mla_paged", "mla_paged decode/causal prefill", supports, run};
}  // namespace kb::kernels
