// kb's CUDA kernels for the LSTM cell's pointwise steps (see lstm_kernels.hpp).
// One thread an (row, hidden unit): it reads and writes only its own four
// gates, so the activations and their gradients overwrite the gates in place.
#include "../../common/cuda_typed.cuh"
#include "lstm_kernels.hpp"

namespace kb::backendbench::aten::cuda {
namespace {

using namespace typed;

__device__ __forceinline__ float sigmoid_of(float a) { return 1.f / (1.f + expf(-a)); }
__device__ __forceinline__ double sigmoid_of(double a) { return 1.0 / (1.0 + exp(-a)); }

template <class W>
__global__ void cell_forward_kernel(W* gates, const W* c_prev, W* c, W* h, W* y, long long y_stride, long long y_col,
                                    long long H, long long n) {
  KB_GRID_LOOP(e, n) {
    const long long b = e / H, u = e % H;
    W* g = gates + b * 4 * H;
    const W i = sigmoid_of(g[u]), f = sigmoid_of(g[H + u]), gg = tanh(g[2 * H + u]), o = sigmoid_of(g[3 * H + u]);
    g[u] = i;
    g[H + u] = f;
    g[2 * H + u] = gg;
    g[3 * H + u] = o;
    const W cn = f * c_prev[e] + i * gg;
    const W hn = o * tanh(cn);
    c[e] = cn;
    h[e] = hn;
    y[b * y_stride + y_col + u] = hn;
  }
}

template <class W>
__global__ void cell_backward_kernel(W* gates, const W* c, const W* c_prev, const W* dh, const W* dy,
                                     long long dy_stride, long long dy_col, W* dc, long long H, long long n) {
  KB_GRID_LOOP(e, n) {
    const long long b = e / H, u = e % H;
    W* g = gates + b * 4 * H;
    const W i = g[u], f = g[H + u], gg = g[2 * H + u], o = g[3 * H + u];
    const W th = tanh(c[e]);
    const W dht = dh[e] + dy[b * dy_stride + dy_col + u];
    const W dct = dc[e] + dht * o * (W(1) - th * th);
    g[u] = dct * gg * i * (W(1) - i);
    g[H + u] = dct * c_prev[e] * f * (W(1) - f);
    g[2 * H + u] = dct * i * (W(1) - gg * gg);
    g[3 * H + u] = dht * th * o * (W(1) - o);
    dc[e] = dct * f;
  }
}

// The views' common working dtype, checked: f32 or f64, all contiguous.
Dtype working_dtype(std::initializer_list<const DView*> views, const char* what) {
  const Dtype dt = (*views.begin())->dtype;
  if (dt != Dtype::f32 && dt != Dtype::f64) fail(std::string(what) + ": the working dtype must be f32 or f64");
  for (const DView* v : views)
    if (v->dtype != dt || v->strides != contiguous(v->shape))
      fail(std::string(what) + ": views must share the working dtype and be contiguous");
  return dt;
}

template <class W>
W* at(const DView& v) {
  return static_cast<W*>(v.base) + v.offset;
}

}  // namespace

Launch lstm_cell_forward(const DView& gates, const DView& c_prev, const DView& c, const DView& h, const DView& y,
                         std::int64_t y_stride, std::int64_t y_col) {
  const Dtype dt = working_dtype({&gates, &c_prev, &c, &h, &y}, "lstm_cell_forward");
  const long long n = c.numel(), H = c.shape.back();
  return [=](void* stream) -> Status {
    if (n > 0) {
      if (dt == Dtype::f32)
        cell_forward_kernel<float><<<grid_for(n), kThreads, 0, stream_of(stream)>>>(
            at<float>(gates), at<float>(c_prev), at<float>(c), at<float>(h), at<float>(y), y_stride, y_col, H, n);
      else
        cell_forward_kernel<double><<<grid_for(n), kThreads, 0, stream_of(stream)>>>(
            at<double>(gates), at<double>(c_prev), at<double>(c), at<double>(h), at<double>(y), y_stride, y_col, H, n);
    }
    return launched("lstm_cell_forward");
  };
}

Launch lstm_cell_backward(const DView& gates, const DView& c, const DView& c_prev, const DView& dh, const DView& dy,
                          std::int64_t dy_stride, std::int64_t dy_col, const DView& dc) {
  const Dtype dt = working_dtype({&gates, &c, &c_prev, &dh, &dy, &dc}, "lstm_cell_backward");
  const long long n = c.numel(), H = c.shape.back();
  return [=](void* stream) -> Status {
    if (n > 0) {
      if (dt == Dtype::f32)
        cell_backward_kernel<float><<<grid_for(n), kThreads, 0, stream_of(stream)>>>(
            at<float>(gates), at<float>(c), at<float>(c_prev), at<float>(dh), at<float>(dy), dy_stride, dy_col,
            at<float>(dc), H, n);
      else
        cell_backward_kernel<double><<<grid_for(n), kThreads, 0, stream_of(stream)>>>(
            at<double>(gates), at<double>(c), at<double>(c_prev), at<double>(dh), at<double>(dy), dy_stride, dy_col,
            at<double>(dc), H, n);
    }
    return launched("lstm_cell_backward");
  };
}

}  // namespace kb::backendbench::aten::cuda
