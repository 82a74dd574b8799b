// gqa_paged oracle: grouped-query attention over a paged NHD KV cache
// (k_cache, v_cache [num_pages, page_size, num_kv_heads, head_dim]), decode
// (one query per sequence) and causal prefill (qo_indptr), any page size,
// with or without kv_last_page_len. The math lives in kernels/attention/oracle.cpp.
#include "../attention/oracle.hpp"

namespace kb::kernels {
namespace {
std::string supports(const Definition& d) { return attention::supports_paged(d, attention::PagedKind::gqa); }
Status run(const OracleCall& c) { return attention::run_paged(c, attention::PagedKind::gqa); }
}  // namespace
extern const OracleEntry gqa_paged_oracle{"gqa_paged", "gqa_paged decode/causal prefill", supports, run};
}  // namespace kb::kernels
