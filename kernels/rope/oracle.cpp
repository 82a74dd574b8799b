// PLACEHOLDER while the rope oracle is written: refuses every definition.
#include "oracle/oracle.hpp"

namespace kb::kernels {
namespace {
std::string supports(const Definition&) { return "oracle for rope not written yet"; }
Status run(const OracleCall&) { return make_error(Code::unsupported, "oracle for rope not written yet"); }
}  // namespace
extern const OracleEntry rope_oracle{"rope", "rope", supports, run};
}  // namespace kb::kernels
