// kb's own CPU solutions, one registration function per op_type folder. They
// are independent code (not the oracle again), so judging them on a machine
// without a GPU means something.
#include "harness/implementation.hpp"

namespace kb::kernels {

void add_gemm_cpu(Registry& r);
void add_rmsnorm_cpu(Registry& r);
void add_silu_and_mul_cpu(Registry& r);
void add_sampling_cpu(Registry& r);
void add_rope_cpu(Registry& r);
void add_gqa_paged_cpu(Registry& r);
void add_gqa_ragged_cpu(Registry& r);
void add_mla_paged_cpu(Registry& r);
void add_mla_ragged_cpu(Registry& r);
void add_moe_cpu(Registry& r);
void add_gdn_cpu(Registry& r);
void add_mamba_ssu_cpu(Registry& r);
void add_dsa_paged_cpu(Registry& r);

void add_cpu_solutions(Registry& r) {
  add_gemm_cpu(r);
  add_rmsnorm_cpu(r);
  add_silu_and_mul_cpu(r);
  add_sampling_cpu(r);
  add_rope_cpu(r);
  add_gqa_paged_cpu(r);
  add_gqa_ragged_cpu(r);
  add_mla_paged_cpu(r);
  add_mla_ragged_cpu(r);
  add_moe_cpu(r);
  add_gdn_cpu(r);
  add_mamba_ssu_cpu(r);
  add_dsa_paged_cpu(r);
}

}  // namespace kb::kernels
