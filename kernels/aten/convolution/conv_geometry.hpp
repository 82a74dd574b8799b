// The geometry of an ATen convolution call, shared by the CPU oracle
// (convolution.cpp) and the CUDA plans (cuda/convolution_cuda.cpp): sizes of
// the non-transposed convolution both forms reduce to, parsed and checked
// from the call's arguments (OpError on bad ones).
#pragma once

#include <cstdint>
#include <vector>

#include "../common/args.hpp"

namespace kb::backendbench::aten {

// The non-transposed convolution's sizes: "in" is x's spatial side, "out" y's.
struct ConvGeometry {
  std::int64_t n = 1, ci = 1, co = 1, groups = 1;
  std::vector<std::int64_t> in, out, k, stride, pad, dil;
  std::int64_t in_count() const { return product(in); }
  std::int64_t out_count() const { return product(out); }
  std::int64_t k_count() const { return product(k); }
  static std::int64_t product(const std::vector<std::int64_t>& v) {
    std::int64_t p = 1;
    for (auto x : v) p *= x;
    return p;
  }
};

// The parameters shared by convolution and convolution_backward, from the
// argument positions of stride (then padding, dilation, transposed,
// output_padding, groups), with x the convolution's input and w its weight.
struct ConvParams {
  ConvGeometry g;
  bool transposed = false;
  std::vector<std::int64_t> x_shape, y_shape;  // the call's input and output
};

ConvParams conv_params(const Call& c, const HostTensor& x, const HostTensor& w, std::size_t at);

}  // namespace kb::backendbench::aten
