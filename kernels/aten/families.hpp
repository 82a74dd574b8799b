// The rows each ATen family contributes to the operator table (table.cpp).
// A family is a folder kernels/aten/<family>/ holding its CPU oracles; a CUDA
// kernel for an operator goes beside them and is named in the same row.
#pragma once

#include <span>

#include "backendbench/ops.hpp"

namespace kb::backendbench::aten {

std::span<const OpInfo> elementwise_ops();
std::span<const OpInfo> reduction_ops();
std::span<const OpInfo> softmax_ops();
std::span<const OpInfo> layer_norm_ops();
std::span<const OpInfo> batch_norm_ops();
std::span<const OpInfo> matmul_ops();
std::span<const OpInfo> copy_ops();
std::span<const OpInfo> index_ops();
std::span<const OpInfo> convolution_ops();
std::span<const OpInfo> pooling_ops();
std::span<const OpInfo> upsample_ops();
std::span<const OpInfo> embedding_bag_ops();
std::span<const OpInfo> advanced_index_ops();   // index/advanced.cpp
std::span<const OpInfo> factory_ops();
std::span<const OpInfo> group_norm_ops();
std::span<const OpInfo> padding_ops();
std::span<const OpInfo> fold_ops();
std::span<const OpInfo> grid_sampler_ops();
std::span<const OpInfo> division_ops();         // elementwise/division.cpp
std::span<const OpInfo> norm_topk_ops();        // reduction/norm_topk.cpp
std::span<const OpInfo> inplace_view_ops();     // copy/inplace_view.cpp
std::span<const OpInfo> spectral_ops();         // spectral/fft.cpp
std::span<const OpInfo> sparse_ops();           // sparse/sparse_coo.cpp
std::span<const OpInfo> rnn_ops();              // rnn/lstm.cpp

}  // namespace kb::backendbench::aten
