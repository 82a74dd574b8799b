// mla_ragged oracle: causal prefill over ragged q, k [.., qk_dim] and
// v [.., vo_dim] (DeepSeek MLA prefill: qk_dim 192 = 128 nope + 64 rope,
// vo_dim 128, as many kv heads as query heads). Same math as gqa_ragged,
// with the value dim read from v: kernels/attention/oracle.cpp.
#include "../attention/oracle.hpp"

namespace kb::kernels {
namespace {
std::string supports(const Definition& d) { return attention::supports_ragged(d); }
Status run(const OracleCall& c) { return attention::run_ragged(c); }
}  // namespace
extern const OracleEntry mla_ragged_oracle{"mla_ragged", "mla_ragged causal prefill", supports, run};
}  // namespace kb::kernels
