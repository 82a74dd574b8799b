// PLACEHOLDER while the gqa_paged oracle is written: refuses every definition.
#include "oracle/oracle.hpp"

namespace kb::kernels {
namespace {
std::string supports(const Definition&) { return "oracle for gqa_paged not written yet"; }
Status run(const OracleCall&) { return make_error(Code::unsupported, "oracle for gqa_paged not written yet"); }
}  // namespace
extern const OracleEntry gqa_paged_oracle{"gqa_paged", "gqa_paged", supports, run};
}  // namespace kb::kernels
