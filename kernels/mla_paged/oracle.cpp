// PLACEHOLDER while the mla_paged oracle is written: refuses every definition.
#include "oracle/oracle.hpp"

namespace kb::kernels {
namespace {
std::string supports(const Definition&) { return "oracle for mla_paged not written yet"; }
Status run(const OracleCall&) { return make_error(Code::unsupported, "oracle for mla_paged not written yet"); }
}  // namespace
extern const OracleEntry mla_paged_oracle{"mla_paged", "mla_paged", supports, run};
}  // namespace kb::kernels
