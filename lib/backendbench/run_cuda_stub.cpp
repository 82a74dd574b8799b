// Builds without CUDA: `kb backendbench run --device cuda` says so.
#include "backendbench/run.hpp"

namespace kb::backendbench {

bool cuda_runs_available() { return false; }
bool has_cuda_kernel(std::string_view) { return false; }
Result<RunReport> run_cuda_trace(const TraceFile&, const RunOptions&, const CudaRunOptions&) {
  return make_error(Code::unsupported, "--device cuda: this kb was built without CUDA");
}

}  // namespace kb::backendbench
