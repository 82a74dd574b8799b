// CPU oracle for op_type "gemm": C = A @ B.T with A [M, K], B [N, K] and
// C [M, N] (the FlashInfer-Bench gemm definitions and kb's bundled ones).
//
// Every product a*b is exact in double (24-bit mantissas), and each output
// element is a double sum in a fixed order (four interleaved partial sums
// over k, added lane 0..3, then the k % 4 tail), rounded once to float and
// then to C's dtype with round-to-nearest-even. The order does not depend on
// the thread count, so the result is the same on any machine.
//
// B is never converted whole (28672 x 4096 would be 470 MB as float): each
// worker converts blocks of 4 rows of B to double and runs them against all
// rows of A (converted once), k in tiles of 1024 so A's tile stays in cache
// (the tiling does not change any lane's order). Workers take contiguous
// ranges of B's rows. M = 64, N = 28672, K = 4096 takes ~1.4 s on 2 cores.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "oracle/oracle.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels {
namespace {

bool gemm_dtype(DType t) { return t == DType::float32 || t == DType::float16 || t == DType::bfloat16; }

std::string supports(const Definition& d) {
  if (d.op_type != "gemm") return fmt::format("op_type {} is not gemm", d.op_type);
  if (d.inputs.size() != 2 || d.outputs.size() != 1)
    return "gemm oracle expects two inputs (A [M, K], B [N, K]) and one output (C [M, N])";
  const TensorSpec& a = d.inputs[0];
  const TensorSpec& b = d.inputs[1];
  const TensorSpec& c = d.outputs[0];
  if (a.is_scalar() || b.is_scalar() || c.is_scalar() || a.rank() != 2 || b.rank() != 2 || c.rank() != 2)
    return "gemm oracle expects rank-2 tensors A, B and C";
  const auto& as = *a.shape;
  const auto& bs = *b.shape;
  const auto& cs = *c.shape;
  // A [M, K], B [N, K], C [M, N]: C = A @ B.T.
  if (as[1] != bs[1] || cs[0] != as[0] || cs[1] != bs[0])
    return fmt::format("gemm oracle handles C = A @ B.T with A [M, K], B [N, K], C [M, N]; got A [{}, {}], B [{}, {}], C [{}, {}]",
                       as[0], as[1], bs[0], bs[1], cs[0], cs[1]);
  if (as[0] == as[1] || bs[0] == bs[1])
    return "gemm oracle needs distinct axis names for M, N and K";
  if (!gemm_dtype(a.dtype) || !gemm_dtype(b.dtype) || !gemm_dtype(c.dtype))
    return fmt::format("gemm oracle handles float32/float16/bfloat16 only (A {}, B {}, C {})", dtype_name(a.dtype),
                       dtype_name(b.dtype), dtype_name(c.dtype));
  const std::string& r = d.reference;
  bool product = r.find("matmul") != std::string::npos || r.find(" @ ") != std::string::npos ||
                 r.find(".mm(") != std::string::npos;
  bool transposed = r.find(b.name + ".T") != std::string::npos || r.find(".t()") != std::string::npos ||
                    r.find(b.name + ".transpose(0, 1)") != std::string::npos ||
                    r.find(b.name + ".mT") != std::string::npos;
  if (!product || !transposed)
    return "gemm oracle: the reference is not recognisably matmul(A, B.T)";
  for (const char* extra : {"bias", "alpha", "beta", "scale", "relu", "gelu", "silu"})
    if (r.find(extra) != std::string::npos)
      return fmt::format("gemm oracle computes plain A @ B.T; the reference mentions '{}'", extra);
  return {};
}

// float value of every float16 bit pattern (built once).
const std::vector<float>& half_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (std::uint32_t i = 0; i < 65536; ++i) t[i] = half_to_float(static_cast<std::uint16_t>(i));
    return t;
  }();
  return table;
}

// Elements [begin, begin + n) of a float32/float16/bfloat16 tensor as double.
void row_to_double(const Tensor& t, std::int64_t begin, std::int64_t n, double* out) {
  switch (t.dtype()) {
    case DType::float32: {
      const float* p = t.data<float>() + begin;
      for (std::int64_t i = 0; i < n; ++i) out[i] = p[i];
      break;
    }
    case DType::float16: {
      const std::uint16_t* p = t.data<std::uint16_t>() + begin;
      const float* table = half_table().data();
      for (std::int64_t i = 0; i < n; ++i) out[i] = table[p[i]];
      break;
    }
    case DType::bfloat16: {
      const std::uint16_t* p = t.data<std::uint16_t>() + begin;
      for (std::int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(p[i]);
      break;
    }
    default:
      for (std::int64_t i = 0; i < n; ++i) out[i] = element_as_double(t, begin + i);
  }
}

constexpr std::int64_t kRows = 4;  // rows of B per block

// Adds a[k] * b[j * K + k] for k in [k0, k1) (k0 a multiple of 4) to the
// four lane sums acc[j][k % 4] of each row j < rows of the block. Splitting k
// into tiles does not change the order of any lane's additions.
void accumulate(const double* a, const double* b, std::int64_t K, std::int64_t rows, std::int64_t k0,
                std::int64_t k1, double (*acc)[4]) {
  std::int64_t k4 = k0 + (k1 - k0) / 4 * 4;
  if (rows == kRows) {
    const double* b0 = b;
    const double* b1 = b + K;
    const double* b2 = b + 2 * K;
    const double* b3 = b + 3 * K;
    double s[kRows][4];
    for (int j = 0; j < kRows; ++j)
      for (int l = 0; l < 4; ++l) s[j][l] = acc[j][l];
    for (std::int64_t k = k0; k < k4; k += 4) {
      for (int l = 0; l < 4; ++l) {
        double av = a[k + l];
        s[0][l] += av * b0[k + l];
        s[1][l] += av * b1[k + l];
        s[2][l] += av * b2[k + l];
        s[3][l] += av * b3[k + l];
      }
    }
    for (int j = 0; j < kRows; ++j)
      for (int l = 0; l < 4; ++l) acc[j][l] = s[j][l];
  } else {
    for (std::int64_t j = 0; j < rows; ++j)
      for (std::int64_t k = k0; k < k4; k += 4)
        for (int l = 0; l < 4; ++l) acc[j][l] += a[k + l] * b[j * K + k + l];
  }
}

// The dot product of the lanes, then the k % 4 tail.
double finish(const double* a, const double* brow, std::int64_t K, const double* lanes) {
  double s = ((lanes[0] + lanes[1]) + lanes[2]) + lanes[3];
  for (std::int64_t k = K - K % 4; k < K; ++k) s += a[k] * brow[k];
  return s;
}

constexpr std::int64_t kTile = 1024;  // k per tile: a tile of A (M x kTile doubles) stays in cache

Status run_checked(const OracleCall& call) {
  const Definition& d = call.definition;
  if (std::string why = supports(d); !why.empty()) return make_error(Code::unsupported, d.name + ": " + why);
  if (call.inputs.size() != 2 || call.outputs.size() != 1 || !call.inputs[0].tensor || !call.inputs[1].tensor)
    return make_error(Code::invalid_argument, d.name + ": gemm oracle needs tensors A, B and one output C");
  const Tensor& A = *call.inputs[0].tensor;
  const Tensor& B = *call.inputs[1].tensor;
  Tensor& C = call.outputs[0];
  if (A.rank() != 2 || B.rank() != 2 || C.rank() != 2)
    return make_error(Code::invalid_argument, d.name + ": gemm oracle: A, B and C must be rank 2");
  const std::int64_t M = A.dim(0), K = A.dim(1), N = B.dim(0);
  if (B.dim(1) != K || C.dim(0) != M || C.dim(1) != N)
    return make_error(Code::invalid_argument,
                      fmt::format("{}: gemm oracle: shapes A [{}, {}], B [{}, {}], C [{}, {}] do not fit C = A @ B.T",
                                  d.name, M, K, B.dim(0), B.dim(1), C.dim(0), C.dim(1)));
  if (A.dtype() != d.inputs[0].dtype || B.dtype() != d.inputs[1].dtype || C.dtype() != d.outputs[0].dtype)
    return make_error(Code::invalid_argument, d.name + ": gemm oracle: tensor dtypes differ from the definition");

  if (A.dtype() == DType::float16 || B.dtype() == DType::float16) (void)half_table();  // built before any worker
  std::vector<double> a(static_cast<std::size_t>(M * K));
  for (std::int64_t m = 0; m < M; ++m) row_to_double(A, m * K, K, a.data() + m * K);
  std::vector<double> c(static_cast<std::size_t>(M * N), 0.0);

  const std::int64_t blocks = (N + kRows - 1) / kRows;
  // Buffers are allocated here, so no worker can fail.
  double flops = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  std::int64_t threads = flops < 4e6 ? 1 : std::min<std::int64_t>(hw, blocks);
  const auto workers = static_cast<std::size_t>(std::max<std::int64_t>(threads, 1));
  std::vector<std::vector<double>> buffers(workers, std::vector<double>(static_cast<std::size_t>(kRows * K)));
  std::vector<std::vector<double>> sums(workers, std::vector<double>(static_cast<std::size_t>(M * kRows * 4)));
  auto work = [&](std::int64_t t) {
    std::int64_t first_block = blocks * t / threads, last_block = blocks * (t + 1) / threads;
    std::vector<double>& b = buffers[static_cast<std::size_t>(t)];
    std::vector<double>& acc = sums[static_cast<std::size_t>(t)];
    auto lanes = reinterpret_cast<double(*)[kRows][4]>(acc.data());
    const std::int64_t kmain = K - K % 4;
    for (std::int64_t blk = first_block; blk < last_block; ++blk) {
      std::int64_t n0 = blk * kRows;
      std::int64_t rows = std::min(kRows, N - n0);
      row_to_double(B, n0 * K, rows * K, b.data());
      std::fill(acc.begin(), acc.end(), 0.0);
      for (std::int64_t k0 = 0; k0 < kmain; k0 += kTile) {
        std::int64_t k1 = std::min(kmain, k0 + kTile);
        for (std::int64_t m = 0; m < M; ++m) accumulate(a.data() + m * K, b.data(), K, rows, k0, k1, lanes[m]);
      }
      for (std::int64_t m = 0; m < M; ++m)
        for (std::int64_t j = 0; j < rows; ++j)
          c[static_cast<std::size_t>(m * N + n0 + j)] = finish(a.data() + m * K, b.data() + j * K, K, lanes[m][j]);
    }
  };

  // Threads only pay off on big products; each writes its own columns of c.
  if (threads <= 1) {
    threads = 1;
    work(0);
  } else {
    std::vector<std::thread> pool;
    std::int64_t launched = 0;
    try {
      pool.reserve(static_cast<std::size_t>(threads));
      for (; launched < threads; ++launched)
        pool.emplace_back(work, launched);
    } catch (const std::system_error&) {
      // No more threads: this one does the ranges not handed out.
    }
    for (std::int64_t t = launched; t < threads; ++t) work(t);
    for (auto& th : pool) th.join();
  }

  std::vector<float> cf(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) cf[i] = static_cast<float>(c[i]);
  return store_float(cf, C);
}

Status run(const OracleCall& call) {
  try {
    return run_checked(call);
  } catch (const std::bad_alloc&) {
    return make_error(Code::out_of_memory, call.definition.name + ": gemm oracle: out of memory");
  }
}

}  // namespace
extern const OracleEntry gemm_oracle{"gemm", "gemm (C = A @ B.T)", supports, run};
}  // namespace kb::kernels
