// The element kernels around cuFFT for _fft_c2c (fft_kernels.cu): a complex
// tensor of any strides to and from a contiguous work buffer of
// complex<float> or complex<double> (`wide`). Enqueued on `stream`.
#pragma once

#include "../../common/device.hpp"

namespace kb::backendbench::aten::cuda {

// work (contiguous, x's shape) = x (c32, c64 or c128, any strides), widened.
Status fft_load(void* work, bool wide, const DView& x, void* stream);
// out (contiguous, c32/c64/c128) = work * scale, each part rounded once.
Status fft_store(const DView& out, const void* work, bool wide, double scale, void* stream);

}  // namespace kb::backendbench::aten::cuda
