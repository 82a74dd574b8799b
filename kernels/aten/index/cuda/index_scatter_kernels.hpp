// CUDA launchers of the accumulating index operators (index_scatter_kernels.cu):
// scatter_add(_), index_add(_), embedding_dense_backward and nll_loss's forward
// and backward. Plans (index_cuda.cpp) check arguments and every index on the
// host first; the kernels trust them (negative indices count from the end).
//
// Accumulation goes through a contiguous scratch in the accumulation type
// (fp32, or fp64 for f64 and the GPU reference) with atomics, then one
// rounding into the output: the order of additions varies from run to run,
// within fp32 rounding of the oracle's fp64 sums.
#pragma once

#include "../../common/device.hpp"

namespace kb::backendbench::aten::cuda {

// out = self; out[pos with pos[dim] = index[pos]] += src[pos] over index's positions.
Launch scatter_add(const DView& out, const DView& self, std::int64_t dim, const DView& index, const DView& src);

// out = self; out[.., index[j], ..] += alpha * source[.., j, ..] (index 0-D or 1-D).
Launch index_add(const DView& out, const DView& self, std::int64_t dim, const DView& index, const DView& source,
                 double alpha);

// out [num_weights, D] = sum over indices i of grad[i, :] into row indices[i], rows equal to
// padding_idx skipped, each divided by its row's count with scale_grad_by_freq.
Launch embedding_dense_backward(const DView& out, const DView& grad, const DView& indices, std::int64_t padding_idx,
                                bool scale_grad_by_freq);

// nll_loss_forward: out (reduction 0 and batched: [N]; else a scalar) and total_weight.
Launch nll_loss_forward(const DView& out, const DView& total_weight, const DView& self, const DView& target,
                        const DView* weight, std::int64_t reduction, std::int64_t ignore_index, bool batched);

// nll_loss_backward: out (self's shape, zero but at each target) = -weight * grad (/ total_weight for mean).
Launch nll_loss_backward(const DView& out, const DView& grad, const DView& target, const DView* weight,
                         const DView& total_weight, std::int64_t reduction, std::int64_t ignore_index, bool batched,
                         std::int64_t classes);

}  // namespace kb::backendbench::aten::cuda
