// The CUDA rows each ATen family contributes (kernels/aten/<family>/cuda/):
// overload name -> plan function (common/device.hpp). Compiled only in CUDA
// builds; every name here also has a CPU oracle row in table.cpp.
#pragma once

#include <span>
#include <string_view>

#include "common/device.hpp"

namespace kb::backendbench::aten {

std::span<const CudaOpInfo> elementwise_cuda_ops();
std::span<const CudaOpInfo> reduction_cuda_ops();
std::span<const CudaOpInfo> softmax_cuda_ops();
std::span<const CudaOpInfo> layer_norm_cuda_ops();
std::span<const CudaOpInfo> batch_norm_cuda_ops();
std::span<const CudaOpInfo> matmul_cuda_ops();
std::span<const CudaOpInfo> copy_cuda_ops();
std::span<const CudaOpInfo> index_cuda_ops();
std::span<const CudaOpInfo> convolution_cuda_ops();
std::span<const CudaOpInfo> embedding_bag_cuda_ops();
std::span<const CudaOpInfo> pooling_cuda_ops();
std::span<const CudaOpInfo> factory_cuda_ops();
std::span<const CudaOpInfo> upsample_cuda_ops();
std::span<const CudaOpInfo> division_cuda_ops();
std::span<const CudaOpInfo> scan_cuda_ops();
std::span<const CudaOpInfo> padding_cuda_ops();
std::span<const CudaOpInfo> group_norm_cuda_ops();
std::span<const CudaOpInfo> fold_cuda_ops();
std::span<const CudaOpInfo> topk_cuda_ops();            // reduction/cuda/topk_cuda.cpp
std::span<const CudaOpInfo> grid_sampler_cuda_ops();
std::span<const CudaOpInfo> spectral_cuda_ops();        // spectral/cuda/fft_cuda.cpp
std::span<const CudaOpInfo> sparse_cuda_ops();          // sparse/cuda/sparse_coo_cuda.cpp
std::span<const CudaOpInfo> rnn_cuda_ops();             // rnn/cuda/lstm_cuda.cpp

// All of them (cuda_table.cpp); null when the overload has no CUDA kernel.
std::span<const CudaOpInfo> cuda_ops();
const CudaOpInfo* find_cuda_op(std::string_view name);

}  // namespace kb::backendbench::aten
