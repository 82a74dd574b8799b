// PLACEHOLDER while the gqa_ragged oracle is written: refuses every definition.
#include "oracle/oracle.hpp"

namespace kb::kernels {
namespace {
std::string supports(const Definition&) { return "oracle for gqa_ragged not written yet"; }
Status run(const OracleCall&) { return make_error(Code::unsupported, "oracle for gqa_ragged not written yet"); }
}  // namespace
extern const OracleEntry gqa_ragged_oracle{"gqa_ragged", "gqa_ragged", supports, run};
}  // namespace kb::kernels
