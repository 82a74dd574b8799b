// The arguments of _cudnn_rnn and _cudnn_rnn_backward for LSTMs, one
// definition for the CPU oracle (lstm.cpp) and the CUDA plans
// (cuda/lstm_cuda.cpp): the shapes, the refusals, the states and the
// backward's output mask. lstm.cpp's header says what the operators compute.
#pragma once

#include <fmt/format.h>

#include <array>

#include "../common/args.hpp"

namespace kb::backendbench::aten {

struct LstmSpec {
  std::int64_t T, B, in, H, L, D, stride0;  // steps, batch, input size, hidden size, layers, directions
  bool batch_first, biases;
  // The input size of layer l: the input's, then both directions' hidden states side by side.
  std::int64_t in_of(std::int64_t l) const { return l == 0 ? in : D * H; }
};

// The spec of a call whose input is x; `first_scalar` is the position of `mode` (forward 6, backward 10).
inline LstmSpec lstm_spec(const Call& c, const HostTensor& x, std::size_t first_scalar) {
  const std::size_t m = first_scalar;
  const std::int64_t mode = int_arg(c, m, "mode");
  if (mode != 2) fail(fmt::format("mode {} is not supported (only 2, LSTM)", mode));
  LstmSpec s{};
  s.H = int_arg(c, m + 1, "hidden_size");
  if (int_arg(c, m + 2, "proj_size") != 0) fail("proj_size > 0 (LSTM projections) is not supported");
  s.L = int_arg(c, m + 3, "num_layers");
  s.batch_first = bool_arg(c, m + 4, "batch_first");
  const double dropout = number_arg(c, m + 5, "dropout");
  const bool train = bool_arg(c, m + 6, "train");
  s.D = bool_arg(c, m + 7, "bidirectional") ? 2 : 1;
  auto bs = int_list_arg(c, m + 8, "batch_sizes");
  if (bs && !bs->empty()) fail("packed sequences (batch_sizes) are not supported");
  if (train && dropout > 0 && s.L > 1) fail("dropout between layers in training is random; not supported");
  if (s.H <= 0 || s.L <= 0) fail(fmt::format("hidden_size {} and num_layers {} must be positive", s.H, s.L));
  if (x.rank() != 3) fail(fmt::format("input must be 3-D, got {}", shape_text(x.shape)));
  s.T = s.batch_first ? x.shape[1] : x.shape[0];
  s.B = s.batch_first ? x.shape[0] : x.shape[1];
  s.in = x.shape[2];
  s.stride0 = int_arg(c, 2, "weight_stride0");
  if (s.stride0 != 2 && s.stride0 != 4) fail(fmt::format("weight_stride0 {} must be 2 or 4", s.stride0));
  s.biases = s.stride0 == 4;
  const auto& w = tensor_list(c, 1, "weight");
  if (static_cast<std::int64_t>(w.size()) != s.L * s.D * s.stride0)
    fail(fmt::format("weight holds {} tensors, expected num_layers * directions * weight_stride0 = {}", w.size(),
                     s.L * s.D * s.stride0));
  for (std::int64_t l = 0; l < s.L; ++l)
    for (std::int64_t d = 0; d < s.D; ++d) {
      const std::size_t b = static_cast<std::size_t>((l * s.D + d) * s.stride0);
      auto want = [&](std::size_t k, std::vector<std::int64_t> shape, const char* what) {
        if (w[b + k].shape != shape)
          fail(fmt::format("layer {} direction {}: {} must be {}, got {}", l, d, what, shape_text(shape),
                           shape_text(w[b + k].shape)));
      };
      want(0, {4 * s.H, s.in_of(l)}, "w_ih");
      want(1, {4 * s.H, s.H}, "w_hh");
      if (s.biases) {
        want(2, {4 * s.H}, "b_ih");
        want(3, {4 * s.H}, "b_hh");
      }
    }
  return s;
}

// hx, cx and the gradients of hy, cy: [L D, B, H].
inline void lstm_check_state(const HostTensor* t, const LstmSpec& s, const char* what) {
  if (!t) fail(fmt::format("{} is required for an LSTM", what));
  const std::vector<std::int64_t> want{s.L * s.D, s.B, s.H};
  if (t->shape != want) fail(fmt::format("{} must be {}, got {}", what, shape_text(want), shape_text(t->shape)));
}

// The input, the spec and the checked initial states of a call (`mode_pos`: forward 6, backward 10).
struct LstmCall {
  const HostTensor& x;
  LstmSpec s;
  const HostTensor& hx;
  const HostTensor& cx;
};
inline LstmCall lstm_call(const Call& c, std::size_t mode_pos) {
  const HostTensor& x = tensor_arg(c, 0, "input");
  const LstmSpec s = lstm_spec(c, x, mode_pos);
  const HostTensor* hx = optional_tensor(c, 4, "hx");
  const HostTensor* cx = optional_tensor(c, 5, "cx");
  lstm_check_state(hx, s, "hx");
  lstm_check_state(cx, s, "cx");
  return LstmCall{x, s, *hx, *cx};
}

// The output's shape: [B, T, D H] with batch_first, else [T, B, D H].
inline std::vector<std::int64_t> lstm_output_shape(const LstmSpec& s) {
  return s.batch_first ? std::vector<std::int64_t>{s.B, s.T, s.D * s.H} : std::vector<std::int64_t>{s.T, s.B, s.D * s.H};
}

// The backward's output_mask (position 21): which of grad_input, grad_hx, grad_cx, grad_weight are wanted.
inline std::array<bool, 4> lstm_output_mask(const Call& c) {
  const CallArg* mask = c.find(21, "output_mask");
  if (!mask || mask->value->kind != Kind::list || mask->value->children.size() != 4)
    fail("output_mask must be a list of 4 bools");
  std::array<bool, 4> want{};
  for (std::size_t k = 0; k < 4; ++k) {
    const Value& m = mask->value->children[k];
    if (m.kind != Kind::boolean) fail("output_mask must hold bools");
    want[k] = m.text == "True";
  }
  return want;
}

}  // namespace kb::backendbench::aten
