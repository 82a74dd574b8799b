// gqa_ragged oracle: grouped-query causal prefill over ragged (contiguous
// per sequence) q, k, v with qo_indptr / kv_indptr. The math lives in
// kernels/attention/oracle.cpp.
#include "../attention/oracle.hpp"

namespace kb::kernels {
namespace {
std::string supports(const Definition& d) { return attention::supports_ragged(d); }
Status run(const OracleCall& c) { return attention::run_ragged(c); }
}  // namespace
extern const OracleEntry gqa_ragged_oracle{"gqa_ragged", "gqa_ragged causal prefill", supports, run};
}  // namespace kb::kernels
