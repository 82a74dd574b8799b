// CUDA launchers of the embedding-bag operators (embedding_bag_kernels.cu).
// Plans (embedding_bag_cuda.cpp) check arguments and index ranges on the
// host first; the kernels trust them.
#pragma once

#include "../../common/device.hpp"

namespace kb::backendbench::aten::cuda {

// _embedding_bag: one CTA per bag (mode 0 sum, 1 mean, 2 max); outputs as the
// oracle gives them (out [bags, D], offset2bag [N], bag_size [offsets],
// max_indices [bags, D] in max mode). `bags` excludes include_last_offset's
// last offset, whose bag_size entry is written 0.
Launch embedding_bag(const DView& out, const DView& offset2bag, const DView& bag_size, const DView& max_indices,
                     const DView& weight, const DView& indices, const DView& offsets, const DView* per_sample_weights,
                     std::int64_t mode, std::int64_t bags, std::int64_t padding_idx);

// _embedding_bag_per_sample_weights_backward: out[i] = <grad[offset2bag[i]], weight[indices[i]]>
// (0 where indices[i] == padding_idx), one warp per index.
Launch embedding_bag_per_sample_weights_backward(const DView& out, const DView& grad, const DView& weight,
                                                 const DView& indices, const DView& offset2bag,
                                                 std::int64_t padding_idx);

}  // namespace kb::backendbench::aten::cuda
