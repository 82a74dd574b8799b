#include "oracle/gpu_oracle.hpp"

namespace kb {

#if KB_HAVE_CUDA
namespace kernels {
Status gemm_gpu_oracle(const GpuOracleCall& c);
Status rmsnorm_gpu_oracle(const GpuOracleCall& c);
Status silu_and_mul_gpu_oracle(const GpuOracleCall& c);
Status rope_gpu_oracle(const GpuOracleCall& c);
// kernels/attention/gpu_oracle.cu
Status gqa_paged_gpu_oracle(const GpuOracleCall& c);
Status mla_paged_gpu_oracle(const GpuOracleCall& c);
Status gqa_ragged_gpu_oracle(const GpuOracleCall& c);
Status mla_ragged_gpu_oracle(const GpuOracleCall& c);
Status moe_gpu_oracle(const GpuOracleCall& c);        // kernels/moe/gpu_oracle.cu
Status gdn_gpu_oracle(const GpuOracleCall& c);        // kernels/gdn/gpu_oracle.cu
Status mamba_ssu_gpu_oracle(const GpuOracleCall& c);  // kernels/mamba_ssu/gpu_oracle.cu
Status dsa_paged_gpu_oracle(const GpuOracleCall& c);  // kernels/dsa_paged/gpu_oracle.cu
}  // namespace kernels

GpuOracleFn find_gpu_oracle(const Definition& d) {
  if (d.op_type == "gemm") return kernels::gemm_gpu_oracle;
  if (d.op_type == "rmsnorm") return kernels::rmsnorm_gpu_oracle;
  if (d.op_type == "silu_and_mul") return kernels::silu_and_mul_gpu_oracle;
  if (d.op_type == "rope") return kernels::rope_gpu_oracle;
  if (d.op_type == "gqa_paged") return kernels::gqa_paged_gpu_oracle;
  if (d.op_type == "mla_paged") return kernels::mla_paged_gpu_oracle;
  if (d.op_type == "gqa_ragged") return kernels::gqa_ragged_gpu_oracle;
  if (d.op_type == "mla_ragged") return kernels::mla_ragged_gpu_oracle;
  if (d.op_type == "moe") return kernels::moe_gpu_oracle;
  if (d.op_type == "gdn") return kernels::gdn_gpu_oracle;
  if (d.op_type == "mamba_ssu") return kernels::mamba_ssu_gpu_oracle;
  if (d.op_type == "dsa_paged") return kernels::dsa_paged_gpu_oracle;
  return nullptr;
}
#else
GpuOracleFn find_gpu_oracle(const Definition&) { return nullptr; }
#endif

}  // namespace kb
