// kb's CUDA kernels for the ATen operators, behind plain-C++ launchers.
//
// The elementwise engine: out = op(in0, in1, in2) over out's shape, inputs
// broadcast through 0-strides, any strides (dims merged where all operands
// allow, so contiguous tensors run as one flat loop), every real dtype
// loaded and stored with PyTorch's conversions, computed in fp32 for
// f16/bf16/f32 (PyTorch's opmath) and in fp64 when an operand is f64 or an
// integer type. One kernel with a switch on the op (uniform across a warp)
// serves every elementwise operator, copies, fills and type conversions.
//
// Row kernels (softmax, layer_norm), reductions, batch_norm and cuBLASLt
// matmuls are declared here too; each throws OpError on bad arguments.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "device.hpp"

namespace kb::backendbench::aten::cuda {

enum class EOp : int {
  copy, fill, add, sub, rsub, mul, div, div_trunc, div_floor, minimum, maximum, bit_and, pow,
  eq, ne, lt, le, gt, ge,
  neg, abs, sgn, exp, sqrt, rsqrt, reciprocal, erf, sin, cos, log2, tanh, sigmoid, relu, silu, gelu, gelu_tanh,
  hardswish, hardsigmoid, leaky_relu, hardtanh, elu, clamp, isinf, isnan, bit_not, logical_not,
  threshold_bw, sigmoid_bw, tanh_bw, silu_bw, gelu_bw, gelu_tanh_bw, hardswish_bw, hardsigmoid_bw, leaky_relu_bw,
  hardtanh_bw, where, masked_fill, addcmul,
};

// An elementwise input: a device view or a constant (a Python scalar).
struct EIn {
  DView view;
  bool is_const = false;
  double value = 0;
};
inline EIn constant(double v) { return EIn{DView{}, true, v}; }
inline EIn input(const DView& v) { return EIn{v, false, 0}; }

// The GPU reference (for lines too large for the CPU oracle; see run.hpp): plans
// made while it is on compute in fp64 everywhere, rounding once to the output
// dtype as the oracles do, with 64-bit indexing and no unrolled fast path, and
// matmuls in fp64 through cuBLASLt. Set by the runner's thread around a plan.
void set_reference_mode(bool on);
bool reference_mode();

// Plans out = op(ins) (params p, e.g. alpha, slope, clamp bounds). Throws OpError.
Launch elementwise(EOp op, const DView& out, std::vector<EIn> ins, std::array<double, 4> p = {});
inline Launch fill(const DView& out, double v) { return elementwise(EOp::fill, out, {}, {v, 0, 0, 0}); }
inline Launch copy(const DView& dst, const DView& src) { return elementwise(EOp::copy, dst, {input(src)}); }

// Device memory for scratch and outputs, freed when the last owner goes.
std::shared_ptr<void> device_alloc(std::size_t bytes);
// A contiguous device tensor (owns its memory through `keep`).
DView device_empty(Dtype dtype, const std::vector<std::int64_t>& shape);
std::vector<std::int64_t> contiguous(const std::vector<std::int64_t>& shape);

// Reductions: out[kept] = op over `dims` of x (out is the keepdim-free or
// keepdim view; reduced dims are listed). mean divides by the count.
enum class ROp : int { sum, mean, amax, amin, any };
Launch reduce(ROp op, const DView& out, const DView& x, const std::vector<std::int64_t>& dims, bool keepdim);

// Softmax family along `dim` (any strides).
Launch softmax(const DView& out, const DView& x, std::int64_t dim, bool log);
Launch softmax_backward(const DView& out, const DView& grad, const DView& y, std::int64_t dim, bool log);

// native_layer_norm over the last `norm_dims` dims: out, mean, rstd (contiguous outputs).
Launch layer_norm(const DView& out, const DView& mean, const DView& rstd, const DView& x, const DView* w,
                  const DView* b, std::int64_t norm_dims, double eps);

// native_layer_norm_backward: grads that are undefined are skipped.
Launch layer_norm_backward(const DView& gx, const DView& gw, const DView& gb, const DView& g, const DView& x,
                           const DView& mean, const DView& rstd, const DView* w, std::int64_t norm_dims);

// native_batch_norm (training statistics or running ones) over dim 1.
Launch batch_norm(const DView& out, const DView& save_mean, const DView& save_invstd, const DView& x,
                  const DView* w, const DView* b, const DView* running_mean, const DView* running_var, bool training,
                  double momentum, double eps);
// native_batch_norm_backward; grads that are undefined are skipped.
Launch batch_norm_backward(const DView& gx, const DView& gw, const DView& gb, const DView& g, const DView& x,
                           const DView* w, const DView* running_mean, const DView* running_var,
                           const DView* save_mean, const DView* save_invstd, bool training, double eps);

// out (contiguous) at coordinate c = src at sum(c * src_strides) + index[sum(c * index_strides)] * gather_stride:
// index_select, gather and embedding. Strides are per output dim (0 where a dim does not apply);
// negative indices count from `bound`.
Launch gather(const DView& out, const DView& src, const std::vector<std::int64_t>& src_strides, const DView& index,
              const std::vector<std::int64_t>& index_strides, std::int64_t gather_stride, std::int64_t bound);

// out[b] = alpha * a[b] @ m[b] + beta * out[b] through cuBLASLt (rank 2 or 3
// views, any strides: transposed layouts are passed as such, others copied).
Launch matmul(const DView& out, const DView& a, const DView& m, double alpha, double beta);

}  // namespace kb::backendbench::aten::cuda
