// kb_cpu_gemm: C = A @ B.T on the CPU with float accumulation, threads over
// rows of B. A (the few token rows) is converted to float once; each B row is
// converted once, into the thread's buffer, and dotted with every row of A
// while it is hot, so B (the weights, N x K) is read once and never copied
// whole. Independent of the oracle (which accumulates in double).
#include <algorithm>
#include <thread>

#include "harness/implementation.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels {

void add_gemm_cpu(Registry& r) {
  Implementation impl;
  impl.name = "kb_cpu_gemm";
  impl.author = "kb";
  impl.device = Device::cpu;
  impl.description = "blocked fp32-accumulating CPU gemm (C = A @ B.T), threads over N";
  impl.supports = [](const Definition& d) -> std::string {
    if (d.op_type != "gemm") return "not a gemm definition";
    if (d.inputs.size() != 2 || d.outputs.size() != 1) return "expects inputs A, B and output C";
    return {};
  };
  impl.run = [](const ImplementationCall& c) -> Status {
    const Tensor& a = *c.inputs[0].tensor;
    const Tensor& b = *c.inputs[1].tensor;
    Tensor& out = c.outputs[0];
    std::int64_t m = a.dim(0), k = a.dim(1), n = b.dim(0);
    std::vector<float> af = to_float(a), cf(static_cast<std::size_t>(m * n));
    auto work = [&](std::int64_t n0, std::int64_t n1) {
      std::vector<float> brow(static_cast<std::size_t>(k));
      for (std::int64_t j = n0; j < n1; ++j) {
        to_float_range(b, j * k, brow);
        for (std::int64_t i = 0; i < m; ++i) {
          const float* arow = &af[static_cast<std::size_t>(i * k)];
          float acc[8] = {};
          std::int64_t p = 0;
          for (; p + 8 <= k; p += 8)
            for (int q = 0; q < 8; ++q) acc[q] += arow[p + q] * brow[static_cast<std::size_t>(p + q)];
          float s = 0;
          for (; p < k; ++p) s += arow[p] * brow[static_cast<std::size_t>(p)];
          for (float v : acc) s += v;
          cf[static_cast<std::size_t>(i * n + j)] = s;
        }
      }
    };
    unsigned threads = std::max(1u, std::min(std::thread::hardware_concurrency(), 16u));
    std::vector<std::thread> pool;
    std::int64_t per = (n + threads - 1) / threads;
    for (unsigned t = 0; t < threads; ++t) {
      std::int64_t n0 = t * per, n1 = std::min(n, n0 + per);
      if (n0 < n1) pool.emplace_back(work, n0, n1);
    }
    for (auto& th : pool) th.join();
    return store_float(cf, out);
  };
  r.add(std::move(impl));
}

}  // namespace kb::kernels
