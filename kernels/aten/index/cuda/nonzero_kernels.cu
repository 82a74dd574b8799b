// kb's CUDA nonzero (see nonzero_kernels.hpp): a flag per element (nonzero
// or NaN, as the oracle), their exclusive prefix sum (CUB's device scan, part
// of the CUDA toolkit) giving each flagged element its output row, then the
// rows written with the element's coordinates.
#include <cub/device/device_scan.cuh>

#include "../../common/cuda_typed.cuh"
#include "nonzero_kernels.hpp"

namespace kb::backendbench::aten::cuda {
namespace {

using namespace typed;

__global__ void flag_kernel(int* flags, const void* x, Dtype dt, Strided xs, long long n) {
  KB_GRID_LOOP(i, n) {
    const double v = load_any_f64(x, dt, offset_of(xs, i));
    flags[i] = (v != 0 || v != v) ? 1 : 0;
  }
}

// total = pos[n - 1] + flags[n - 1]
__global__ void total_kernel(long long* total, const int* flags, const int* pos, long long n) {
  *total = n ? static_cast<long long>(pos[n - 1]) + flags[n - 1] : 0;
}

__global__ void write_kernel(long long* out, const int* flags, const int* pos, Strided xs, long long n,
                             long long count) {
  KB_GRID_LOOP(i, n) {
    if (!flags[i] || pos[i] >= count) continue;
    long long r = i;
    long long* row = out + static_cast<long long>(pos[i]) * xs.rank;
    for (int d = xs.rank - 1; d >= 0; --d) {
      row[d] = r % xs.shape[d];
      r /= xs.shape[d];
    }
  }
}

// The flags, their prefix sums, CUB's scratch and the count, sized for n elements.
struct Work {
  std::shared_ptr<void> flags, pos, temp, total;
  std::size_t temp_bytes = 0;
  Work(long long n) {
    if (n > 0x7fffffffLL) fail("nonzero: more than 2^31 - 1 elements are not supported on CUDA");
    const auto m = static_cast<std::size_t>(n > 0 ? n : 1);
    flags = device_alloc(sizeof(int) * m);
    pos = device_alloc(sizeof(int) * m);
    total = device_alloc(sizeof(long long));
    cudaError_t e = cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, static_cast<int*>(flags.get()),
                                                  static_cast<int*>(pos.get()), static_cast<int>(m));
    if (e != cudaSuccess) fail(std::string("nonzero: sizing the scan: ") + cudaGetErrorString(e));
    temp = device_alloc(temp_bytes ? temp_bytes : 1);
  }
  // Enqueues the flags, the scan and the count on `st`.
  Status count(const DView& x, const Strided& xs, long long n, cudaStream_t st) const {
    int* f = static_cast<int*>(flags.get());
    int* p = static_cast<int*>(pos.get());
    if (n > 0) {
      flag_kernel<<<grid_for(n), kThreads, 0, st>>>(f, x.base, x.dtype, xs, n);
      std::size_t bytes = temp_bytes;
      if (cudaError_t e = cub::DeviceScan::ExclusiveSum(temp.get(), bytes, f, p, static_cast<int>(n), st); e != cudaSuccess)
        return make_error(Code::cuda_error, std::string("nonzero scan: ") + cudaGetErrorString(e));
    }
    total_kernel<<<1, 1, 0, st>>>(static_cast<long long*>(total.get()), f, p, n);
    return launched("nonzero count");
  }
  Result<long long> read_total(cudaStream_t st) const {
    long long t = 0;
    if (cudaError_t e = cudaMemcpyAsync(&t, total.get(), sizeof t, cudaMemcpyDeviceToHost, st); e != cudaSuccess)
      return make_error(Code::cuda_error, std::string("nonzero: reading the count: ") + cudaGetErrorString(e));
    if (cudaError_t e = cudaStreamSynchronize(st); e != cudaSuccess)
      return make_error(Code::cuda_error, std::string("nonzero: ") + cudaGetErrorString(e));
    return t;
  }
};

}  // namespace

std::int64_t nonzero_count(const DView& x) {
  const long long n = x.numel();
  Work w(n);
  // The inputs may still be arriving on the runner's stream.
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) fail(std::string("nonzero: ") + cudaGetErrorString(e));
  if (auto st = w.count(x, strided(x), n, cudaStreamPerThread); !st) fail(st.error().message);
  auto t = w.read_total(cudaStreamPerThread);
  if (!t) fail(t.error().message);
  return *t;
}

Launch nonzero(const DView& out, const DView& x, std::int64_t count) {
  if (out.dtype != Dtype::i64) fail("nonzero: the output must be i64");
  const long long n = x.numel();
  auto w = std::make_shared<Work>(n);
  const Strided xs = strided(x);
  const DView xv = x;
  long long* o = ptr<long long>(out);
  return [=](void* s) -> Status {
    cudaStream_t st = stream_of(s);
    if (auto r = w->count(xv, xs, n, st); !r) return r;
    if (n > 0 && count > 0)
      write_kernel<<<grid_for(n), kThreads, 0, st>>>(o, static_cast<const int*>(w->flags.get()),
                                                    static_cast<const int*>(w->pos.get()), xs, n, count);
    if (auto r = launched("nonzero"); !r) return r;
    // PyTorch's nonzero waits for its count too; a different count than planned means the input changed.
    auto t = w->read_total(st);
    if (!t) return t.error();
    if (*t != count)
      return make_error(Code::internal, "nonzero: the input's count of nonzero elements changed since the plan");
    return ok_status();
  };
}

}  // namespace kb::backendbench::aten::cuda
