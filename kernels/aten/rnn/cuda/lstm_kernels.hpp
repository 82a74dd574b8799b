// CUDA launchers of the LSTM cell's pointwise steps (lstm_kernels.cu); the
// gate products around them are cuBLASLt matmuls (cuda_engine.hpp), planned
// by lstm_cuda.cpp. Every view here is contiguous, of one working dtype (f32,
// or f64 for f64 inputs and the GPU reference).
#pragma once

#include "../../common/device.hpp"

namespace kb::backendbench::aten::cuda {

// One step of B rows: gates [B, 4H] holds the pre-activations (i, f, g, o)
// and gets the activations; c = f c_prev + i g, h = o tanh(c) ([B, H] each),
// and h again into y's row b at column y_col (row stride y_stride).
Launch lstm_cell_forward(const DView& gates, const DView& c_prev, const DView& c, const DView& h, const DView& y,
                         std::int64_t y_stride, std::int64_t y_col);

// Its gradient: from the activations in `gates`, c, c_prev, dh (the next
// step's gradient of h) plus dy's row b at column dy_col (row stride
// dy_stride) and dc (the next step's gradient of c), writes the
// pre-activations' gradients over `gates` and the gradient of c_prev over dc.
Launch lstm_cell_backward(const DView& gates, const DView& c, const DView& c_prev, const DView& dh, const DView& dy,
                          std::int64_t dy_stride, std::int64_t dy_col, const DView& dc);

}  // namespace kb::backendbench::aten::cuda
