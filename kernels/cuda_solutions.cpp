// kb's own CUDA solutions, one registration function per op_type folder
// (kernels/<op_type>/cuda/). Compiled only in CUDA builds.
#include "harness/implementation.hpp"

namespace kb::kernels {

void add_gemm_cuda(Registry& r);
void add_rmsnorm_cuda(Registry& r);
void add_rope_cuda(Registry& r);
void add_silu_and_mul_cuda(Registry& r);

void add_cuda_solutions(Registry& r) {
  add_gemm_cuda(r);
  add_rmsnorm_cuda(r);
  add_rope_cuda(r);
  add_silu_and_mul_cuda(r);
}

}  // namespace kb::kernels
