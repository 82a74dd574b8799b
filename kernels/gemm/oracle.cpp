// PLACEHOLDER while the gemm oracle is written: refuses every definition.
#include "oracle/oracle.hpp"

namespace kb::kernels {
namespace {
std::string supports(const Definition&) { return "oracle for gemm not written yet"; }
Status run(const OracleCall&) { return make_error(Code::unsupported, "oracle for gemm not written yet"); }
}  // namespace
extern const OracleEntry gemm_oracle{"gemm", "gemm", supports, run};
}  // namespace kb::kernels
