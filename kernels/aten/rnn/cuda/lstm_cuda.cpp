// CUDA plans for _cudnn_rnn and _cudnn_rnn_backward on LSTMs: the oracle's
// argument checks (lstm_args.hpp; lstm.cpp says what the operators compute
// and what is compared), then per layer and direction:
//  * forward: the input projection of every step, x w_ih^T + b_ih + b_hh, as
//    one matmul over all T x B rows; per step the recurrent product h_{t-1}
//    w_hh^T added to the step's gates (a matmul with beta 1) and the cell
//    (lstm_kernels.cu), which keeps the activations, c_t and h_t;
//  * backward: the forward again from input, hx, cx and the weights (as the
//    oracle does: reserve, weight_buf and output are not read), then per step
//    from the last the cell's gradient (the gates' gradients over the
//    activations) and dh_{t-1} = dgates w_hh; after the walk, one matmul or
//    reduction each over all steps: the layer input's gradient dgates w_ih
//    (both directions summed), dw_ih = dgates^T x, dw_hh = dgates^T h_{t-1},
//    and the biases' gradient, the column sums of dgates (b_ih and b_hh enter
//    the gates as one sum).
// The products run on cuBLASLt (cuda::matmul). Working dtype f32 (PyTorch's
// opmath for f16/bf16/f32), f64 for f64 inputs and the GPU reference
// (cuda::reference_mode); every output is rounded once to its dtype.
#include <fmt/format.h>

#include <array>
#include <utility>

#include "../../common/args.hpp"
#include "../../common/cuda_engine.hpp"
#include "../../cuda_families.hpp"
#include "../lstm_args.hpp"
#include "lstm_kernels.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;
using cuda::EOp;

// `shape` elements of contiguous `buf` from its element `first`, contiguous.
DView slice(const DView& buf, std::int64_t first, std::vector<std::int64_t> shape) {
  DView v = buf;
  v.strides = cuda::contiguous(shape);
  v.shape = std::move(shape);
  v.offset = buf.offset + first;
  return v;
}

// A 2-D view as a batch of one for cuda::matmul, transposed or not (no copy).
DView mat(DView v, bool transpose = false) {
  if (transpose) {
    std::swap(v.shape[0], v.shape[1]);
    std::swap(v.strides[0], v.strides[1]);
  }
  v.shape.insert(v.shape.begin(), 1);
  v.strides.insert(v.strides.begin(), 0);
  return v;
}

// A sequence tensor ([B, T, F] batch_first, else [T, B, F]) as a [T, B, F] view.
DView time_major(DView v, bool batch_first) {
  if (batch_first) {
    std::swap(v.shape[0], v.shape[1]);
    std::swap(v.strides[0], v.strides[1]);
  }
  return v;
}

// Layer and direction `ld` of a state tensor [L D, B, H] (any strides), as [B, H].
DView state_of(const DView& v, std::int64_t ld) {
  DView r = v;
  r.offset = v.offset + ld * v.strides[0];
  r.shape = {v.shape[1], v.shape[2]};
  r.strides = {v.strides[1], v.strides[2]};
  return r;
}

// What the forward keeps of one layer and direction, in the working dtype.
struct LayerRun {
  DView w_ih, w_hh;  // [4H, in_l], [4H, H]
  DView gates;       // [T, B, 4H]: the activations (i, f, g, o) by time
  DView c, h;        // [T, B, H] by time
  DView c0, h0;      // [B, H]
};

struct ForwardRun {
  std::vector<DView> layer_in;   // per layer, its input [T, B, in_l]
  std::vector<LayerRun> layers;  // per layer and direction (l D + d)
  DView y;                       // the last layer's output [T, B, D H]
};

// Plans the forward into `steps`.
ForwardRun plan_forward(const LstmSpec& s, Dtype wt, const DeviceArgs& dev, const std::vector<HostTensor>& w,
                        const DView& x, const DView& hx, const DView& cx, std::vector<Launch>& steps) {
  const std::int64_t T = s.T, B = s.B, H = s.H, G = 4 * H, TB = T * B;
  ForwardRun f;
  DView in = cuda::device_empty(wt, {T, B, s.in});
  steps.push_back(cuda::copy(in, time_major(x, s.batch_first)));
  for (std::int64_t l = 0; l < s.L; ++l) {
    const std::int64_t in_l = s.in_of(l);
    DView y = cuda::device_empty(wt, {T, B, s.D * H});
    for (std::int64_t d = 0; d < s.D; ++d) {
      const std::int64_t ld = l * s.D + d;
      const std::size_t wb = static_cast<std::size_t>(ld * s.stride0);
      LayerRun r;
      r.w_ih = cuda::device_empty(wt, {G, in_l});
      r.w_hh = cuda::device_empty(wt, {G, H});
      r.gates = cuda::device_empty(wt, {T, B, G});
      r.c = cuda::device_empty(wt, {T, B, H});
      r.h = cuda::device_empty(wt, {T, B, H});
      r.c0 = cuda::device_empty(wt, {B, H});
      r.h0 = cuda::device_empty(wt, {B, H});
      steps.push_back(cuda::copy(r.w_ih, dev.view(w[wb])));
      steps.push_back(cuda::copy(r.w_hh, dev.view(w[wb + 1])));
      steps.push_back(cuda::copy(r.h0, state_of(hx, ld)));
      steps.push_back(cuda::copy(r.c0, state_of(cx, ld)));
      const DView all_gates = slice(r.gates, 0, {TB, G});
      steps.push_back(cuda::matmul(mat(all_gates), mat(slice(in, 0, {TB, in_l})), mat(r.w_ih, true), 1.0, 0.0));
      if (s.biases) {
        DView bias = cuda::device_empty(wt, {G});
        steps.push_back(cuda::elementwise(EOp::add, bias, {cuda::input(dev.view(w[wb + 2])),
                                                           cuda::input(dev.view(w[wb + 3]))}, {1.0, 0, 0, 0}));
        DView rows = bias;  // the bias broadcast over the T x B rows
        rows.shape = {TB, G};
        rows.strides = {0, 1};
        steps.push_back(cuda::elementwise(EOp::add, all_gates, {cuda::input(all_gates), cuda::input(rows)},
                                          {1.0, 0, 0, 0}));
      }
      for (std::int64_t k = 0; k < T; ++k) {
        const std::int64_t t = d == 0 ? k : T - 1 - k, tp = d == 0 ? t - 1 : t + 1;
        const DView h_prev = k == 0 ? r.h0 : slice(r.h, tp * B * H, {B, H});
        const DView c_prev = k == 0 ? r.c0 : slice(r.c, tp * B * H, {B, H});
        const DView g_t = slice(r.gates, t * B * G, {B, G});
        steps.push_back(cuda::matmul(mat(g_t), mat(h_prev), mat(r.w_hh, true), 1.0, 1.0));
        steps.push_back(cuda::lstm_cell_forward(g_t, c_prev, slice(r.c, t * B * H, {B, H}),
                                                slice(r.h, t * B * H, {B, H}), slice(y, t * B * s.D * H, {B, s.D * H}),
                                                s.D * H, d * H));
      }
      f.layers.push_back(std::move(r));
    }
    f.layer_in.push_back(in);
    in = y;
    f.y = y;
  }
  return f;
}

// The last step's state of a layer and direction (h0 / c0 when there are no steps).
DView last_state(const DView& all, const DView& first, const LstmSpec& s, std::int64_t d) {
  if (s.T == 0) return first;
  const std::int64_t t = d == 0 ? s.T - 1 : 0;
  return slice(all, t * s.B * s.H, {s.B, s.H});
}

Dtype working_dtype(const HostTensor& x) {
  return x.dtype == Dtype::f64 || cuda::reference_mode() ? Dtype::f64 : Dtype::f32;
}

// _cudnn_rnn(...) -> (output, hy, cy, reserve, weight_buf); reserve and weight_buf are returned undefined.
Launch cudnn_rnn(Call& c, const DeviceArgs& dev, Outs& o) {
  const LstmCall call = lstm_call(c, 6);
  const LstmSpec& s = call.s;
  if (o.size() < 3) fail("internal: _cudnn_rnn needs output, hy and cy");
  std::vector<Launch> steps;
  const ForwardRun f = plan_forward(s, working_dtype(call.x), dev, tensor_list(c, 1, "weight"), dev.view(call.x),
                                    dev.view(call.hx), dev.view(call.cx), steps);
  steps.push_back(cuda::copy(time_major(o[0], s.batch_first), f.y));
  for (std::int64_t l = 0; l < s.L; ++l)
    for (std::int64_t d = 0; d < s.D; ++d) {
      const std::int64_t ld = l * s.D + d;
      const LayerRun& r = f.layers[static_cast<std::size_t>(ld)];
      steps.push_back(cuda::copy(state_of(o[1], ld), last_state(r.h, r.h0, s, d)));
      steps.push_back(cuda::copy(state_of(o[2], ld), last_state(r.c, r.c0, s, d)));
    }
  return sequence(std::move(steps));
}

// _cudnn_rnn_backward(...) -> (grad_input, grad_hx, grad_cx, grad_weight[]); unwanted gradients are undefined.
Launch cudnn_rnn_backward(Call& c, const DeviceArgs& dev, Outs& o) {
  const LstmCall call = lstm_call(c, 10);
  const LstmSpec& s = call.s;
  const HostTensor* gout = optional_tensor(c, 7, "grad_output");
  const HostTensor* ghy = optional_tensor(c, 8, "grad_hy");
  const HostTensor* gcy = optional_tensor(c, 9, "grad_cy");
  if (gout && gout->shape != lstm_output_shape(s))
    fail(fmt::format("grad_output must be {}, got {}", shape_text(lstm_output_shape(s)), shape_text(gout->shape)));
  if (ghy) lstm_check_state(ghy, s, "grad_hy");
  if (gcy) lstm_check_state(gcy, s, "grad_cy");
  const std::array<bool, 4> want = lstm_output_mask(c);
  const auto& w = tensor_list(c, 1, "weight");
  if (o.size() < 3 + (want[3] ? w.size() : 0)) fail("internal: _cudnn_rnn_backward's outputs are missing");

  const Dtype wt = working_dtype(call.x);
  const std::int64_t T = s.T, B = s.B, H = s.H, G = 4 * H, TB = T * B, DH = s.D * H;
  std::vector<Launch> steps;
  ForwardRun f = plan_forward(s, wt, dev, w, dev.view(call.x), dev.view(call.hx), dev.view(call.cx), steps);
  DView dy = cuda::device_empty(wt, {T, B, DH});  // the gradient of the layer's output
  if (gout) steps.push_back(cuda::copy(dy, time_major(dev.view(*gout), s.batch_first)));
  else steps.push_back(cuda::fill(dy, 0.0));
  for (std::int64_t l = s.L; l-- > 0;) {
    const std::int64_t in_l = s.in_of(l);
    const bool need_dx = l > 0 || want[0];
    DView dx = cuda::device_empty(wt, {T, B, in_l});  // the gradient of the layer's input
    for (std::int64_t d = 0; d < s.D; ++d) {
      const std::int64_t ld = l * s.D + d;
      const std::size_t wb = static_cast<std::size_t>(ld * s.stride0);
      LayerRun& r = f.layers[static_cast<std::size_t>(ld)];
      DView dh = cuda::device_empty(wt, {B, H}), dc = cuda::device_empty(wt, {B, H});
      if (ghy) steps.push_back(cuda::copy(dh, state_of(dev.view(*ghy), ld)));
      else steps.push_back(cuda::fill(dh, 0.0));
      if (gcy) steps.push_back(cuda::copy(dc, state_of(dev.view(*gcy), ld)));
      else steps.push_back(cuda::fill(dc, 0.0));
      for (std::int64_t k = T; k-- > 0;) {
        const std::int64_t t = d == 0 ? k : T - 1 - k, tp = d == 0 ? t - 1 : t + 1;
        const DView g_t = slice(r.gates, t * B * G, {B, G});
        const DView c_prev = k == 0 ? r.c0 : slice(r.c, tp * B * H, {B, H});
        steps.push_back(cuda::lstm_cell_backward(g_t, slice(r.c, t * B * H, {B, H}), c_prev, dh,
                                                 slice(dy, t * B * DH, {B, DH}), DH, d * H, dc));
        steps.push_back(cuda::matmul(mat(dh), mat(g_t), mat(r.w_hh), 1.0, 0.0));  // dh_{t-1} = dgates_t w_hh
      }
      if (want[1]) steps.push_back(cuda::copy(state_of(o[1], ld), dh));
      if (want[2]) steps.push_back(cuda::copy(state_of(o[2], ld), dc));
      const DView dgates = slice(r.gates, 0, {TB, G});  // the gates' gradients of every step now
      if (need_dx)
        steps.push_back(cuda::matmul(mat(slice(dx, 0, {TB, in_l})), mat(dgates), mat(r.w_ih), 1.0, d == 0 ? 0.0 : 1.0));
      if (!want[3]) continue;
      // h_{t-1} of every step t, by time: h0 at the direction's first step, else the neighbouring step's h.
      DView h_prev = cuda::device_empty(wt, {T, B, H});
      if (T > 0) {
        const std::int64_t first = d == 0 ? 0 : T - 1;
        steps.push_back(cuda::copy(slice(h_prev, first * B * H, {B, H}), r.h0));
        if (T > 1) {
          const std::int64_t n = (T - 1) * B * H;
          steps.push_back(d == 0 ? cuda::copy(slice(h_prev, B * H, {n}), slice(r.h, 0, {n}))
                                 : cuda::copy(slice(h_prev, 0, {n}), slice(r.h, B * H, {n})));
        }
      }
      DView dw_ih = cuda::device_empty(wt, {G, in_l}), dw_hh = cuda::device_empty(wt, {G, H});
      const DView& layer_in = f.layer_in[static_cast<std::size_t>(l)];
      steps.push_back(cuda::matmul(mat(dw_ih), mat(dgates, true), mat(slice(layer_in, 0, {TB, in_l})), 1.0, 0.0));
      steps.push_back(cuda::matmul(mat(dw_hh), mat(dgates, true), mat(slice(h_prev, 0, {TB, H})), 1.0, 0.0));
      steps.push_back(cuda::copy(o[3 + wb], dw_ih));
      steps.push_back(cuda::copy(o[3 + wb + 1], dw_hh));
      if (s.biases) {
        DView dbias = cuda::device_empty(wt, {G});
        steps.push_back(cuda::reduce(cuda::ROp::sum, dbias, dgates, {0}, false));
        steps.push_back(cuda::copy(o[3 + wb + 2], dbias));
        steps.push_back(cuda::copy(o[3 + wb + 3], dbias));
      }
    }
    dy = dx;
  }
  if (want[0]) steps.push_back(cuda::copy(time_major(o[0], s.batch_first), dy));
  return sequence(std::move(steps));
}

const CudaOpInfo kOps[] = {
    {"aten._cudnn_rnn.default", cudnn_rnn},
    {"aten._cudnn_rnn_backward.default", cudnn_rnn_backward},
};

}  // namespace

std::span<const CudaOpInfo> rnn_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
