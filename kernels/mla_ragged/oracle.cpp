// PLACEHOLDER while the mla_ragged oracle is written: refuses every definition.
#include "oracle/oracle.hpp"

namespace kb::kernels {
namespace {
std::string supports(const Definition&) { return "oracle for mla_ragged not written yet"; }
Status run(const OracleCall&) { return make_error(Code::unsupported, "oracle for mla_ragged not written yet"); }
}  // namespace
extern const OracleEntry mla_ragged_oracle{"mla_ragged", "mla_ragged", supports, run};
}  // namespace kb::kernels
