// The CUDA operator table: every family's CUDA rows (cuda_families.hpp).
#include <vector>

#include "cuda_families.hpp"

namespace kb::backendbench::aten {

std::span<const CudaOpInfo> cuda_ops() {
  static const std::vector<CudaOpInfo> table = [] {
    std::vector<CudaOpInfo> all;
    for (auto fam : {elementwise_cuda_ops(), reduction_cuda_ops(), softmax_cuda_ops(), layer_norm_cuda_ops(),
                     batch_norm_cuda_ops(), matmul_cuda_ops(), copy_cuda_ops(), index_cuda_ops(),
                     convolution_cuda_ops(), embedding_bag_cuda_ops(), pooling_cuda_ops(), factory_cuda_ops(),
                     upsample_cuda_ops(), division_cuda_ops(), scan_cuda_ops(),
                     padding_cuda_ops(), group_norm_cuda_ops(), fold_cuda_ops(), topk_cuda_ops(),
                     grid_sampler_cuda_ops(), spectral_cuda_ops(), sparse_cuda_ops(), rnn_cuda_ops()})
      all.insert(all.end(), fam.begin(), fam.end());
    return all;
  }();
  return table;
}

const CudaOpInfo* find_cuda_op(std::string_view name) {
  for (const CudaOpInfo& o : cuda_ops())
    if (name == o.name) return &o;
  return nullptr;
}

}  // namespace kb::backendbench::aten
