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

namespace kb::backendbench::aten::cuda {

// Advanced indexing (index.Tensor, index_put): element i of the indexed shape
// (`shape`, row-major) lies at target offset
//   base + sum_k coord_k * free_stride[k] + sum_t wrap(index_t[coords]) * dim_stride[t]
// where index_t is read at its own offset + sum_k coord_k * index_strides[t][k]
// (its strides broadcast to `shape`, 0 outside its dims) and wrapped by dim_size[t].
struct AdvancedIndex {
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> free_stride;  // per dim of `shape`
  std::int64_t base = 0;
  struct Index {
    DView view;                             // the index tensor (i64 or i32)
    std::vector<std::int64_t> strides;      // per dim of `shape`
    std::int64_t dim_stride = 0, dim_size = 1;
  };
  std::vector<Index> indices;
};

// index.Tensor: out (contiguous, `shape`) = self's elements at the target offsets in self's storage
// (any dtype: elements copied as bytes).
Launch index_gather(const DView& out, const DView& self, const AdvancedIndex& ix);

// index_put: out = self, then at each target (a logical flat index of self's shape: contiguous
// strides, base 0) += values (accumulate) or = values (the last write in row-major order wins).
// `value_strides` are values' strides broadcast to `shape`. Floating dtypes.
Launch index_put(const DView& out, const DView& self, const AdvancedIndex& ix, const DView& values,
                 const std::vector<std::int64_t>& value_strides, bool accumulate);

}  // namespace kb::backendbench::aten::cuda
