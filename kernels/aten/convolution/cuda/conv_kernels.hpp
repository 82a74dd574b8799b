// kb's CUDA convolution kernels (conv_kernels.cu) behind plain-C++ launchers.
//
// Every form is one of three products of the non-transposed convolution
// x[N][Ci][in...] (*) w[Co][Ci/G][k...] = y[N][Co][out...], with input
// position i_d = o_d * stride_d - pad_d + t_d * dil_d for output position o
// and tap t:
//   forward:         y  = conv(x, w)                    (the "out" side)
//   backward data:   gx = the adjoint of conv in x (gy)  (the "in" side)
//   backward weight: gw = sum over n, o of gy * x
// The plans (convolution_cuda.cpp) map the call's tensors onto these sides
// (a transposed convolution's forward is backward data, and so on). Views of
// any strides; 1 to 3 spatial dims. Sums in fp32 for f16/bf16/f32, in fp64
// for f64 and in the GPU reference mode (cuda::reference_mode), one rounding
// to the output dtype. Throws OpError on sizes the kernels do not take.
#pragma once

#include <cstdint>

#include "../../common/device.hpp"

namespace kb::backendbench::aten::cuda {

// The non-transposed convolution's sizes; dims past `rank` are unused.
struct ConvShape {
  int rank = 2;  // spatial dims, 1 to 3
  std::int64_t n = 1, ci = 1, co = 1, groups = 1;
  std::int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  std::int64_t stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dil[3] = {1, 1, 1};
};

// y [N][Co][out] = conv(x [N][Ci][in], w [Co][Ci/G][k]) (+ bias [Co] when given).
Launch conv_forward(const ConvShape& s, const DView& y, const DView& x, const DView& w, const DView* bias);
// gx [N][Ci][in] = the adjoint of conv in x applied to gy [N][Co][out] (+ bias [Ci] when given).
Launch conv_backward_data(const ConvShape& s, const DView& gx, const DView& gy, const DView& w, const DView* bias);
// gw [Co][Ci/G][k] = sum over n and o of gy [N][Co][out] * x [N][Ci][in] at the taps.
Launch conv_backward_weight(const ConvShape& s, const DView& gw, const DView& gy, const DView& x);

}  // namespace kb::backendbench::aten::cuda
