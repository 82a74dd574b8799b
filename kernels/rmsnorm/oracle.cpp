// PLACEHOLDER while the rmsnorm oracle is written: refuses every definition.
#include "oracle/oracle.hpp"

namespace kb::kernels {
namespace {
std::string supports(const Definition&) { return "oracle for rmsnorm not written yet"; }
Status run(const OracleCall&) { return make_error(Code::unsupported, "oracle for rmsnorm not written yet"); }
}  // namespace
extern const OracleEntry rmsnorm_oracle{"rmsnorm", "rmsnorm", supports, run};
}  // namespace kb::kernels
