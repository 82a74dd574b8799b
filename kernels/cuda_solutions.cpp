// kb's own CUDA solutions, one registration function per op_type folder
// (kernels/<op_type>/cuda/). Compiled only in CUDA builds.
#include "harness/implementation.hpp"

namespace kb::kernels {

void add_gdn_cuda(Registry& r);
void add_dsa_paged_cuda(Registry& r);
void add_gemm_cuda(Registry& r);
void add_gqa_paged_cuda(Registry& r);
void add_gqa_paged_prefill_cuda(Registry& r);
void add_gqa_ragged_cuda(Registry& r);
void add_mla_paged_cuda(Registry& r);
void add_mla_paged_prefill_cuda(Registry& r);
void add_mamba_ssu_cuda(Registry& r);
void add_mla_ragged_cuda(Registry& r);
void add_moe_cuda(Registry& r);
void add_rmsnorm_cuda(Registry& r);
void add_rope_cuda(Registry& r);
void add_sampling_cuda(Registry& r);
void add_silu_and_mul_cuda(Registry& r);

void add_cuda_solutions(Registry& r) {
  add_dsa_paged_cuda(r);
  add_gemm_cuda(r);
  add_gqa_paged_cuda(r);
  add_gqa_paged_prefill_cuda(r);
  add_gqa_ragged_cuda(r);
  add_mla_paged_cuda(r);
  add_mla_paged_prefill_cuda(r);
  add_mla_ragged_cuda(r);
  add_moe_cuda(r);
  add_rmsnorm_cuda(r);
  add_rope_cuda(r);
  add_sampling_cuda(r);
  add_silu_and_mul_cuda(r);
  add_gdn_cuda(r);
  add_mamba_ssu_cuda(r);
}

}  // namespace kb::kernels
