// _cudnn_rnn and _cudnn_rnn_backward for LSTMs (mode 2): the recurrence
// cuDNN runs for torch.nn.LSTM, computed here from its definition.
//
//   _cudnn_rnn(input, weight[], weight_stride0, weight_buf, hx, cx, mode, hidden_size, proj_size,
//              num_layers, batch_first, dropout, train, bidirectional, batch_sizes, dropout_state)
//     -> (output, hy, cy, reserve, weight_buf)
//   _cudnn_rnn_backward(input, weight[], weight_stride0, weight_buf, hx, cx, output, grad_output,
//              grad_hy, grad_cy, mode, ..., dropout_state, reserve, output_mask[4])
//     -> (grad_input, grad_hx, grad_cx, grad_weight[])
//
// Per layer and direction (layer l, direction d; weights at (l * D + d) * weight_stride0:
// w_ih [4H, in], w_hh [4H, H], then with weight_stride0 4 b_ih [4H], b_hh [4H]),
// gates in PyTorch's (and cuDNN's) order i, f, g, o:
//   a = w_ih x_t + b_ih + w_hh h_{t-1} + b_hh
//   i = sigmoid(a_i), f = sigmoid(a_f), g = tanh(a_g), o = sigmoid(a_o)
//   c_t = f c_{t-1} + i g,  h_t = o tanh(c_t)
// the reverse direction running t from the end; a layer's input is the
// previous layer's outputs of both directions side by side. input is
// [B, T, in] with batch_first, else [T, B, in]; output [.., D H], hy and cy
// [L D, B, H]. Computed in double, each output rounded once to its dtype.
//
// What is compared. output, hy and cy are the LSTM's results. reserve is
// cuDNN's private training workspace (its size and bytes are cuDNN's
// choice) and weight_buf cuDNN's packed copy of the weights, laid out by
// cuDNN: neither is a function of the LSTM's definition, so the oracle
// returns them as absent (undefined) and no judgment reads them. (BackendBench
// compares every output against cuDNN's, reserve bytes included, which only
// cuDNN itself can match.)
//
// The backward's reserve holds cuDNN's saved activations and its weight_buf
// and output are the forward's; on BackendBench's random inputs they are not
// consistent with input, hx, cx and the weights, and cuDNN's result is then
// a function of random workspace bytes. The oracle computes what the
// operator means on consistent inputs: it reruns the forward from input,
// hx, cx and the weight list, then back-propagates grad_output, grad_hy and
// grad_cy (None: zero) through time; it reads neither reserve, weight_buf
// nor output. The prepare function makes weight_buf the weights packed back
// to back (w_ih, w_hh, b_ih, b_hh per layer and direction, the order
// PyTorch's get_parameters checks in cuDNN's buffer) when its size is their
// total, as on the traced lines, so a candidate reading weight_buf as cuDNN
// does sees the same weights. output_mask [input, hx, cx, weight] leaves
// a False gradient None (weight: an empty list).
//
// Refused: modes other than LSTM, proj_size > 0, packed sequences
// (batch_sizes), and dropout between layers in training (random).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "../common/args.hpp"
#include "common/parallel.hpp"
#include "../families.hpp"
#include "lstm_args.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;
using Vec = std::vector<double>;

using Spec = LstmSpec;

// A sequence tensor ([B, T, F] batch_first, else [T, B, F]) as [T][B][F] doubles.
Vec seq_values(const HostTensor& t, const Spec& s) {
  Vec v = to_doubles(t);
  if (!s.batch_first) return v;
  const std::int64_t F = t.shape[2];
  Vec r(v.size());
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t k = 0; k < s.T; ++k)
      for (std::int64_t f = 0; f < F; ++f)
        r[static_cast<std::size_t>((k * s.B + b) * F + f)] = v[static_cast<std::size_t>((b * s.T + k) * F + f)];
  return r;
}

void store_seq(HostTensor& out, const Vec& v, const Spec& s) {
  const std::int64_t F = out.shape[2];
  for (std::int64_t k = 0; k < s.T; ++k)
    for (std::int64_t b = 0; b < s.B; ++b)
      for (std::int64_t f = 0; f < F; ++f) {
        const std::int64_t dst = s.batch_first ? (b * s.T + k) * F + f : (k * s.B + b) * F + f;
        out.store(dst, v[static_cast<std::size_t>((k * s.B + b) * F + f)]);
      }
}

double sigmoid(double a) { return 1.0 / (1.0 + std::exp(-a)); }

// One layer and direction: weights as doubles, w_ih and w_hh also transposed
// ([in][4H], [H][4H]) so the gate sums run as contiguous axpys.
struct Cell {
  std::int64_t in, H;
  Vec wih, whh, wihT, whhT, bias;  // bias = b_ih + b_hh (zero without biases)
};

Cell load_cell(const std::vector<HostTensor>& w, const Spec& s, std::int64_t l, std::int64_t d) {
  const std::size_t b = static_cast<std::size_t>((l * s.D + d) * s.stride0);
  Cell c{w[b].shape[1], s.H, to_doubles(w[b]), to_doubles(w[b + 1]), {}, {}, Vec(static_cast<std::size_t>(4 * s.H), 0.0)};
  const std::int64_t G = 4 * s.H;
  c.wihT.resize(c.wih.size());
  c.whhT.resize(c.whh.size());
  for (std::int64_t r = 0; r < G; ++r) {
    for (std::int64_t j = 0; j < c.in; ++j) c.wihT[static_cast<std::size_t>(j * G + r)] = c.wih[static_cast<std::size_t>(r * c.in + j)];
    for (std::int64_t j = 0; j < s.H; ++j) c.whhT[static_cast<std::size_t>(j * G + r)] = c.whh[static_cast<std::size_t>(r * s.H + j)];
  }
  if (s.biases) {
    Vec bi = to_doubles(w[b + 2]), bh = to_doubles(w[b + 3]);
    for (std::size_t r = 0; r < c.bias.size(); ++r) c.bias[r] = bi[r] + bh[r];
  }
  return c;
}

// What one layer and direction keeps for the backward: per processed step k
// (time t = k forward, T - 1 - k reverse) and batch row, the activated gates
// [i f g o], c_t and h_t.
struct Trace {
  Vec gates, c, h;  // [T][B][4H], [T][B][H], [T][B][H], indexed by time t
  Vec h0, c0;       // [B][H]
};

// The oracle's loops are blocked and spread over threads for speed (the
// trace's smallest backward line is ~50 GFLOP in fp64), and every element
// is still summed in the order of the plain loops (bias, then input column
// j ascending, then hidden column j ascending; gradients over steps from the
// last, then batch rows ascending, then gate rows ascending): the result is
// the same bits for any thread count.
constexpr unsigned kLstmThreads = 16;
// Gate rows a block: one block's rows of the transposed weights (808 x 128
// doubles on the trace's lines) stay in cache across the batch rows.
constexpr std::int64_t kGateBlock = 128;
// Batch rows a block in the backward's w^T da products: each weight row is
// read once for the block's rows.
constexpr std::int64_t kBatchBlock = 8;

// acc[0, n) += v * w[0, n): eight elements a step as eight explicit statements, then the tail. GCC -O2 (the
// default build) packs these into vector operations better than it does a plain loop, an inner 8-iteration loop
// or a vector type, and clang's sanitized build (AddressSanitizer and UBSan; kernels/ gets no fuzzer coverage)
// runs them faster than a vector type, so one form serves both compilers.
inline void axpy(double* __restrict acc, const double* __restrict w, double v, std::int64_t n) {
  std::int64_t q = 0;
  for (; q + 8 <= n; q += 8) {
    acc[q + 0] += v * w[q + 0];
    acc[q + 1] += v * w[q + 1];
    acc[q + 2] += v * w[q + 2];
    acc[q + 3] += v * w[q + 3];
    acc[q + 4] += v * w[q + 4];
    acc[q + 5] += v * w[q + 5];
    acc[q + 6] += v * w[q + 6];
    acc[q + 7] += v * w[q + 7];
  }
  for (; q < n; ++q) acc[q] += v * w[q];
}

// Runs one layer and direction over x ([T][B][in]); writes h_t into y ([T][B][D H]) at column d H.
Trace run_cell(const Cell& cell, const Vec& x, const Vec& h0, const Vec& c0, const Spec& s, std::int64_t d, Vec& y) {
  const std::int64_t T = s.T, B = s.B, H = s.H, G = 4 * H, in = cell.in;
  Trace tr{Vec(static_cast<std::size_t>(T * B * G)), Vec(static_cast<std::size_t>(T * B * H)),
           Vec(static_cast<std::size_t>(T * B * H)), h0, c0};
  Vec a(static_cast<std::size_t>(B * G));  // one step's gate pre-activations [B][G]
  const std::int64_t blocks = (G + kGateBlock - 1) / kGateBlock;
  for (std::int64_t k = 0; k < T; ++k) {
    const std::int64_t t = d == 0 ? k : T - 1 - k, tp = d == 0 ? t - 1 : t + 1;
    auto h_prev = [&](std::int64_t b) {
      return k == 0 ? &h0[static_cast<std::size_t>(b * H)] : &tr.h[static_cast<std::size_t>((tp * B + b) * H)];
    };
    parallel_for(blocks, kLstmThreads, [&](std::int64_t blk) {
      const std::int64_t r0 = blk * kGateBlock, n = std::min(kGateBlock, G - r0);
      for (std::int64_t b = 0; b < B; ++b) {
        double* acc = &a[static_cast<std::size_t>(b * G + r0)];
        std::copy_n(&cell.bias[static_cast<std::size_t>(r0)], n, acc);
        const double* xt = &x[static_cast<std::size_t>((t * B + b) * in)];
        for (std::int64_t j = 0; j < in; ++j) axpy(acc, &cell.wihT[static_cast<std::size_t>(j * G + r0)], xt[j], n);
        const double* hp = h_prev(b);
        for (std::int64_t j = 0; j < H; ++j) axpy(acc, &cell.whhT[static_cast<std::size_t>(j * G + r0)], hp[j], n);
      }
    });
    parallel_for(B, kLstmThreads, [&](std::int64_t b) {
      const double* ab = &a[static_cast<std::size_t>(b * G)];
      const double* cp = k == 0 ? &c0[static_cast<std::size_t>(b * H)] : &tr.c[static_cast<std::size_t>((tp * B + b) * H)];
      double* gt = &tr.gates[static_cast<std::size_t>((t * B + b) * G)];
      double* ct = &tr.c[static_cast<std::size_t>((t * B + b) * H)];
      double* ht = &tr.h[static_cast<std::size_t>((t * B + b) * H)];
      for (std::int64_t u = 0; u < H; ++u) {
        const double i = sigmoid(ab[u]), f = sigmoid(ab[H + u]), g = std::tanh(ab[2 * H + u]), o = sigmoid(ab[3 * H + u]);
        gt[u] = i;
        gt[H + u] = f;
        gt[2 * H + u] = g;
        gt[3 * H + u] = o;
        ct[u] = f * cp[u] + i * g;
        ht[u] = o * std::tanh(ct[u]);
        y[static_cast<std::size_t>((t * B + b) * s.D * H + d * H + u)] = ht[u];
      }
    });
  }
  return tr;
}

struct Forward {
  std::vector<Vec> layer_in;           // per layer, its input [T][B][in_l]
  std::vector<Cell> cells;             // per (l, d)
  std::vector<Trace> traces;           // per (l, d)
  Vec y;                               // last layer's output [T][B][D H]
  Vec hy, cy;                          // [L D][B][H]
};

Forward forward(const Spec& s, const std::vector<HostTensor>& w, const HostTensor& x, const HostTensor& hx,
                const HostTensor& cx) {
  Forward f;
  const Vec h0 = to_doubles(hx), c0 = to_doubles(cx);
  const std::size_t BH = static_cast<std::size_t>(s.B * s.H);
  f.hy.resize(h0.size());
  f.cy.resize(c0.size());
  Vec in = seq_values(x, s);
  for (std::int64_t l = 0; l < s.L; ++l) {
    Vec y(static_cast<std::size_t>(s.T * s.B * s.D * s.H));
    for (std::int64_t d = 0; d < s.D; ++d) {
      const std::size_t ld = static_cast<std::size_t>(l * s.D + d);
      f.cells.push_back(load_cell(w, s, l, d));
      Vec hi(h0.begin() + static_cast<std::ptrdiff_t>(ld * BH), h0.begin() + static_cast<std::ptrdiff_t>((ld + 1) * BH));
      Vec ci(c0.begin() + static_cast<std::ptrdiff_t>(ld * BH), c0.begin() + static_cast<std::ptrdiff_t>((ld + 1) * BH));
      f.traces.push_back(run_cell(f.cells.back(), in, hi, ci, s, d, y));
      const std::int64_t last = d == 0 ? s.T - 1 : 0;
      for (std::size_t k = 0; k < BH; ++k) {
        f.hy[ld * BH + k] = s.T ? f.traces.back().h[static_cast<std::size_t>(last) * BH + k] : hi[k];
        f.cy[ld * BH + k] = s.T ? f.traces.back().c[static_cast<std::size_t>(last) * BH + k] : ci[k];
      }
    }
    f.layer_in.push_back(std::move(in));
    in = y;
    f.y = std::move(y);
  }
  return f;
}

// _cudnn_rnn(...) -> (output, hy, cy, reserve, weight_buf)
Out cudnn_rnn(Call& c) {
  const LstmCall call = lstm_call(c, 6);
  const HostTensor &x = call.x, *hx = &call.hx, *cx = &call.cx;
  const Spec& s = call.s;
  HostTensor out = empty_tensor(x.dtype, lstm_output_shape(s), c.meta);
  HostTensor hy = empty_tensor(hx->dtype, hx->shape, c.meta), cy = empty_tensor(cx->dtype, cx->shape, c.meta);
  HostTensor reserve, weight_buf;
  reserve.undefined = weight_buf.undefined = true;
  if (c.meta) return {out, hy, cy, reserve, weight_buf};
  Forward f = forward(s, tensor_list(c, 1, "weight"), x, *hx, *cx);
  store_seq(out, f.y, s);
  for (std::size_t i = 0; i < f.hy.size(); ++i) {
    hy.store(static_cast<std::int64_t>(i), f.hy[i]);
    cy.store(static_cast<std::int64_t>(i), f.cy[i]);
  }
  return {out, hy, cy, reserve, weight_buf};
}

// Back-propagation through one layer and direction. dy: gradient of the
// layer's output [T][B][D H] (column d H); dh, dc: gradients of hy, cy
// ([B][H]) in, of h0, c0 out. Accumulates dx ([T][B][in]) and the weight grads.
// Per step: the gate gradients da of every batch row, then the weight
// gradients by gate-row blocks, then dx_t += w_ih^T da and dh_{t-1} = w_hh^T da
// by blocks of batch rows.
void back_cell(const Cell& cell, const Trace& tr, const Vec& x, const Vec& dy, const Spec& s, std::int64_t d, Vec& dh,
               Vec& dc, Vec& dx, Vec& dwih, Vec& dwhh, Vec& dbias) {
  const std::int64_t T = s.T, B = s.B, H = s.H, G = 4 * H, in = cell.in;
  Vec da(static_cast<std::size_t>(B * G)), dh_prev(static_cast<std::size_t>(B * H), 0.0);
  const std::int64_t gate_blocks = (G + kGateBlock - 1) / kGateBlock;
  const std::int64_t batch_blocks = (B + kBatchBlock - 1) / kBatchBlock;
  for (std::int64_t k = T; k-- > 0;) {
    const std::int64_t t = d == 0 ? k : T - 1 - k, tp = d == 0 ? t - 1 : t + 1;
    auto h_prev = [&](std::int64_t b) {
      return k == 0 ? &tr.h0[static_cast<std::size_t>(b * H)] : &tr.h[static_cast<std::size_t>((tp * B + b) * H)];
    };
    auto x_at = [&](std::int64_t b) { return &x[static_cast<std::size_t>((t * B + b) * in)]; };
    parallel_for(B, kLstmThreads, [&](std::int64_t b) {
      const double* gt = &tr.gates[static_cast<std::size_t>((t * B + b) * G)];
      const double* ct = &tr.c[static_cast<std::size_t>((t * B + b) * H)];
      const double* cp = k == 0 ? &tr.c0[static_cast<std::size_t>(b * H)] : &tr.c[static_cast<std::size_t>((tp * B + b) * H)];
      double* db = &da[static_cast<std::size_t>(b * G)];
      for (std::int64_t u = 0; u < H; ++u) {
        const std::size_t bu = static_cast<std::size_t>(b * H + u);
        const double i = gt[u], f = gt[H + u], g = gt[2 * H + u], o = gt[3 * H + u];
        const double th = std::tanh(ct[u]);
        const double dht = dh[bu] + dy[static_cast<std::size_t>((t * B + b) * s.D * H + d * H + u)];
        const double dct = dc[bu] + dht * o * (1 - th * th);
        db[u] = dct * g * i * (1 - i);
        db[H + u] = dct * cp[u] * f * (1 - f);
        db[2 * H + u] = dct * i * (1 - g * g);
        db[3 * H + u] = dht * th * o * (1 - o);
        dc[bu] = dct * f;
      }
    });
    parallel_for(gate_blocks, kLstmThreads, [&](std::int64_t blk) {
      const std::int64_t r0 = blk * kGateBlock, r1 = std::min(G, r0 + kGateBlock);
      for (std::int64_t b = 0; b < B; ++b) {
        const double* xt = x_at(b);
        const double* hp = h_prev(b);
        for (std::int64_t r = r0; r < r1; ++r) {
          const double g = da[static_cast<std::size_t>(b * G + r)];
          dbias[static_cast<std::size_t>(r)] += g;
          axpy(&dwih[static_cast<std::size_t>(r * in)], xt, g, in);
          axpy(&dwhh[static_cast<std::size_t>(r * H)], hp, g, H);
        }
      }
    });
    std::fill(dh_prev.begin(), dh_prev.end(), 0.0);
    parallel_for(batch_blocks, kLstmThreads, [&](std::int64_t blk) {
      const std::int64_t b0 = blk * kBatchBlock, b1 = std::min(B, b0 + kBatchBlock);
      for (std::int64_t r = 0; r < G; ++r) {
        const double* wi = &cell.wih[static_cast<std::size_t>(r * in)];
        const double* wh = &cell.whh[static_cast<std::size_t>(r * H)];
        for (std::int64_t b = b0; b < b1; ++b) {
          const double g = da[static_cast<std::size_t>(b * G + r)];
          axpy(&dx[static_cast<std::size_t>((t * B + b) * in)], wi, g, in);
          axpy(&dh_prev[static_cast<std::size_t>(b * H)], wh, g, H);
        }
      }
    });
    dh = dh_prev;
  }
}

// _cudnn_rnn_backward(...) -> (grad_input, grad_hx, grad_cx, grad_weight[])
Out cudnn_rnn_backward(Call& c) {
  const LstmCall call = lstm_call(c, 10);
  const HostTensor &x = call.x, *hx = &call.hx, *cx = &call.cx;
  const Spec& s = call.s;
  const std::vector<std::int64_t> out_shape = lstm_output_shape(s);
  const HostTensor* gout = optional_tensor(c, 7, "grad_output");
  const HostTensor* ghy = optional_tensor(c, 8, "grad_hy");
  const HostTensor* gcy = optional_tensor(c, 9, "grad_cy");
  if (gout && gout->shape != out_shape)
    fail(fmt::format("grad_output must be {}, got {}", shape_text(out_shape), shape_text(gout->shape)));
  if (ghy) lstm_check_state(ghy, s, "grad_hy");
  if (gcy) lstm_check_state(gcy, s, "grad_cy");
  const std::array<bool, 4> want = lstm_output_mask(c);
  const auto& w = tensor_list(c, 1, "weight");
  Out outs{empty_tensor(x.dtype, x.shape, c.meta), empty_tensor(hx->dtype, hx->shape, c.meta),
           empty_tensor(cx->dtype, cx->shape, c.meta)};
  for (std::size_t k = 0; k < 3; ++k)
    if (!want[k]) {
      outs[k] = HostTensor{};
      outs[k].undefined = true;
    }
  const std::size_t first_w = outs.size();
  if (want[3])
    for (const HostTensor& t : w) outs.push_back(empty_tensor(t.dtype, t.shape, c.meta));
  if (c.meta) return outs;

  Forward f = forward(s, w, x, *hx, *cx);
  const std::size_t BH = static_cast<std::size_t>(s.B * s.H);
  const Vec ghy_v = ghy ? to_doubles(*ghy) : Vec(static_cast<std::size_t>(s.L * s.D) * BH, 0.0);
  const Vec gcy_v = gcy ? to_doubles(*gcy) : Vec(static_cast<std::size_t>(s.L * s.D) * BH, 0.0);
  Vec dy = gout ? seq_values(*gout, s) : Vec(static_cast<std::size_t>(s.T * s.B * s.D * s.H), 0.0);
  Vec dhx(ghy_v.size()), dcx(gcy_v.size());
  for (std::int64_t l = s.L; l-- > 0;) {
    const Vec& xin = f.layer_in[static_cast<std::size_t>(l)];
    const std::int64_t in_l = l == 0 ? s.in : s.D * s.H;
    Vec dx(static_cast<std::size_t>(s.T * s.B * in_l), 0.0);
    for (std::int64_t d = 0; d < s.D; ++d) {
      const std::size_t ld = static_cast<std::size_t>(l * s.D + d);
      const Cell& cell = f.cells[ld];
      Vec dh(ghy_v.begin() + static_cast<std::ptrdiff_t>(ld * BH), ghy_v.begin() + static_cast<std::ptrdiff_t>((ld + 1) * BH));
      Vec dc(gcy_v.begin() + static_cast<std::ptrdiff_t>(ld * BH), gcy_v.begin() + static_cast<std::ptrdiff_t>((ld + 1) * BH));
      Vec dwih(cell.wih.size(), 0.0), dwhh(cell.whh.size(), 0.0), dbias(static_cast<std::size_t>(4 * s.H), 0.0);
      back_cell(cell, f.traces[ld], xin, dy, s, d, dh, dc, dx, dwih, dwhh, dbias);
      std::copy(dh.begin(), dh.end(), dhx.begin() + static_cast<std::ptrdiff_t>(ld * BH));
      std::copy(dc.begin(), dc.end(), dcx.begin() + static_cast<std::ptrdiff_t>(ld * BH));
      if (want[3]) {
        const std::size_t b = first_w + static_cast<std::size_t>(ld * static_cast<std::size_t>(s.stride0));
        for (std::size_t i = 0; i < dwih.size(); ++i) outs[b].store(static_cast<std::int64_t>(i), dwih[i]);
        for (std::size_t i = 0; i < dwhh.size(); ++i) outs[b + 1].store(static_cast<std::int64_t>(i), dwhh[i]);
        if (s.biases)  // b_ih and b_hh enter the gates as one sum: the same gradient
          for (std::size_t i = 0; i < dbias.size(); ++i) {
            outs[b + 2].store(static_cast<std::int64_t>(i), dbias[i]);
            outs[b + 3].store(static_cast<std::int64_t>(i), dbias[i]);
          }
      }
    }
    dy = std::move(dx);
  }
  if (want[0]) store_seq(outs[0], dy, s);
  for (std::size_t i = 0; i < dhx.size(); ++i) {
    if (want[1]) outs[1].store(static_cast<std::int64_t>(i), dhx[i]);
    if (want[2]) outs[2].store(static_cast<std::int64_t>(i), dcx[i]);
  }
  return outs;
}

// weight_buf <- the weights packed back to back, when its size is their total (see the top of this file).
// Not where the values are left to the device (lines judged by the GPU reference generate their large inputs
// there, HostTensor::device_fill): no reference reads weight_buf.
void prep_backward(Call& c, Rng&) {
  CallArg* wb = c.find(3, "weight_buf");
  if (!wb || !wb->tensor || wb->tensor->is_meta() || wb->tensor->device_fill) return;
  const auto& w = tensor_list(c, 1, "weight");
  for (const HostTensor& t : w)
    if (t.is_meta() || t.device_fill) return;
  std::int64_t total = 0;
  for (const HostTensor& t : w) total += t.numel();
  HostTensor& buf = *wb->tensor;
  if (buf.rank() != 1 || buf.numel() != total) return;
  std::int64_t at = 0;
  for (const HostTensor& t : w) {
    if (t.dtype != buf.dtype) return;
    for (std::int64_t i = 0; i < t.numel(); ++i, ++at) {
      const std::int64_t idx[1] = {at};
      buf.store(buf.index_of(idx), t.at(i));
    }
  }
}

const OpInfo kOps[] = {
    {"aten._cudnn_rnn.default", "rnn", cudnn_rnn, nullptr},
    {"aten._cudnn_rnn_backward.default", "rnn", cudnn_rnn_backward, prep_backward},
};

}  // namespace

std::span<const OpInfo> rnn_ops() { return kOps; }

}  // namespace kb::backendbench::aten
