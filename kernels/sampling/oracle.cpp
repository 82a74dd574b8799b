// PLACEHOLDER while the sampling oracle is written: refuses every definition.
#include "oracle/oracle.hpp"

namespace kb::kernels {
namespace {
std::string supports(const Definition&) { return "oracle for sampling not written yet"; }
Status run(const OracleCall&) { return make_error(Code::unsupported, "oracle for sampling not written yet"); }
}  // namespace
extern const OracleEntry sampling_oracle{"sampling", "sampling", supports, run};
}  // namespace kb::kernels
