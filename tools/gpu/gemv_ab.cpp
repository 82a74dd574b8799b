// kb's gemv under its row balances, or with its rows per block forced,
// side by side (kernels/gemm/cuda/gemv.hpp, GemvBalance and gemv_plan's
// rows): for each N x K weight and M, every variant timed by kb's own
// method (lib/cuda/timing.hpp: cold samples, L2 flushed, graph-captured,
// median), in alternating rounds so that clock and thermal drift fall on all
// of them alike; then every variant's output checked on a sample against an
// fp64 reference within a rounding bound, and against the first variant
// (bit-identical when both plans split K the same way). Built as
// build*/tests/gpu/test_gemv_ab so that tools/gpu/prepare.sh carries it; not a
// test (without arguments it exits 77).
//
// usage: test_gemv_ab --shapes 7168x5120,4096x4096 [--m 1,8,16] [--rounds 2] [--variants off,sm,wave]
//                     [--dtype bfloat16|float16]
// Variants: off (kb's plan), sm, wave (the balances, plain kernel, rows by
// kb's rule); plain (kb's plan with the plain kernel); r16, r32 (no balance,
// plain kernel, 16 or 32 rows per block whatever the rule); bulk, b16, b32
// (the bulk kernel: rows by the rule, 16, 32); b16u, b32u (the same, K not
// split whatever the plan says). --balances is the
// same option under its earlier name. Any variant may end in +clean or
// +write (timed with that L2 flush, timing.hpp's L2Flush) or +warm (no
// flush), to compare the flushes side by side. The first variant is the reference
// of the output check.
// Prints one markdown table: latency in us per round and balance, % of the
// measured copy bandwidth (weight bytes read / median time / copy bytes/s)
// of each balance's best round, and the check.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../../kernels/gemm/cuda/gemv.hpp"
#include "cuda/timing.hpp"
#include "tensor/convert.hpp"

namespace {

using namespace kb;
using kb::kernels::gemm_cuda::GemmProblem;
using kb::kernels::gemm_cuda::GemvBalance;
using kb::kernels::gemm_cuda::GemvKernel;
using kb::kernels::gemm_cuda::GemvPlan;
using kb::kernels::gemm_cuda::kGemvScratchBytes;
using kb::kernels::gemm_cuda::StreamScratch;

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return false;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

struct Variant {
  std::string name;
  GemvBalance balance = GemvBalance::off;
  int rows = 0;  // 0: kb's rule
  GemvKernel kernel = GemvKernel::rule;
  bool unsplit = false;  // the plan's K split undone (one block along K)
  // Timed with the clean or the write L2 flush (name ends in "+clean",
  // "+write") or warm, without a flush ("+warm"); otherwise the default
  // (KB_L2_FLUSH; lib/cuda/timing.hpp L2Flush).
  bool clean = false, write = false, warm = false;
};

std::string describe(const GemvPlan& plan) {
  return fmt::format("{}x{}{}/{}{}", plan.row_blocks, plan.splits, plan.balanced ? "b" : "", plan.rows_per_block,
                     plan.bulk ? " bulk" : "");
}

// Uniform values in [-1, 1), rounded to the dtype, deterministic.
void fill(std::vector<std::uint16_t>& v, DType t, std::uint64_t seed) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& e : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const float f = static_cast<float>(static_cast<double>(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    e = t == DType::bfloat16 ? float_to_bf16(f) : float_to_half(f);
  }
}

float to_float(std::uint16_t bits, DType t) {
  return t == DType::bfloat16 ? bf16_to_float(bits) : half_to_float(bits);
}

}  // namespace

int main(int argc, char** argv) {
  std::string shapes_arg, m_arg = "1,8,16", variants_arg = "off,sm,wave", dtype_arg = "bfloat16";
  int rounds = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--shapes") shapes_arg = v;
    else if (k == "--m") m_arg = v;
    else if (k == "--rounds") rounds = std::max(1, std::atoi(v.c_str()));
    else if (k == "--variants" || k == "--balances") variants_arg = v;
    else if (k == "--dtype") dtype_arg = v;
    else {
      std::fprintf(stderr, "test_gemv_ab: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (shapes_arg.empty()) {
    std::printf("skipped: test_gemv_ab is a benchmark driver (usage at the top of tools/gpu/gemv_ab.cpp)\n");
    return 77;
  }
  const DType t = dtype_arg == "float16" ? DType::float16 : DType::bfloat16;
  std::vector<Variant> balances;
  for (const auto& named : split(variants_arg, ',')) {
    const std::size_t plus = named.find('+');
    const std::string b = named.substr(0, plus), how = plus == std::string::npos ? "" : named.substr(plus + 1);
    if (!how.empty() && how != "clean" && how != "write" && how != "warm") {
      std::fprintf(stderr, "test_gemv_ab: unknown flush %s in %s (+clean, +write, +warm)\n", how.c_str(), named.c_str());
      return 2;
    }
    if (b == "off") balances.push_back({b, GemvBalance::off, 0});
    else if (b == "plain") balances.push_back({b, GemvBalance::off, 0, GemvKernel::plain});
    else if (b == "sm") balances.push_back({b, GemvBalance::sm, 0});
    else if (b == "wave") balances.push_back({b, GemvBalance::wave, 0});
    else if (b == "r16") balances.push_back({b, GemvBalance::off, 16, GemvKernel::plain});
    else if (b == "r32") balances.push_back({b, GemvBalance::off, 32, GemvKernel::plain});
    else if (b == "bulk") balances.push_back({b, GemvBalance::off, 0, GemvKernel::bulk});
    else if (b == "b16") balances.push_back({b, GemvBalance::off, 16, GemvKernel::bulk});
    else if (b == "b32") balances.push_back({b, GemvBalance::off, 32, GemvKernel::bulk});
    else if (b == "b16u") balances.push_back({b, GemvBalance::off, 16, GemvKernel::bulk, true});
    else if (b == "b32u") balances.push_back({b, GemvBalance::off, 32, GemvKernel::bulk, true});
    else {
      std::fprintf(stderr, "test_gemv_ab: unknown variant %s (off, plain, sm, wave, r16, r32, bulk, b16, b32, b16u, b32u)\n", b.c_str());
      return 2;
    }
    balances.back().name = named;
    balances.back().clean = how == "clean";
    balances.back().write = how == "write";
    balances.back().warm = how == "warm";
  }
  std::vector<int> ms;
  for (const auto& m : split(m_arg, ',')) ms.push_back(std::atoi(m.c_str()));

  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count < 1) {
    std::printf("skipped: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  if (!ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties")) return 1;
  cudaStream_t stream = nullptr;
  if (!ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate")) return 1;
  auto ceilings = cuda::measure_ceilings(stream);
  if (!ceilings) {
    std::fprintf(stderr, "measure_ceilings: %s\n", ceilings.error().message.c_str());
    return 1;
  }
  const double copy_gbs = ceilings->copy_bandwidth_gbs;
  std::printf("device: %s, %d SMs; copy bandwidth %.0f GB/s (read + write); empty kernel %.2f us; %s\n\n", prop.name,
              prop.multiProcessorCount, copy_gbs, ceilings->empty_kernel_ms * 1e3, dtype_arg.c_str());

  // Split-K scratch: one per balance, so no launch sees another's counters.
  std::vector<void*> scratch_mem(balances.size(), nullptr);
  std::vector<StreamScratch> scratch(balances.size());
  for (std::size_t b = 0; b < balances.size(); ++b) {
    if (!ok(cudaMalloc(&scratch_mem[b], kGemvScratchBytes), "cudaMalloc scratch") ||
        !ok(cudaMemset(scratch_mem[b], 0, kGemvScratchBytes), "cudaMemset scratch"))
      return 1;
    scratch[b].gemv_scratch = scratch_mem[b];
    scratch[b].gemv_bytes = kGemvScratchBytes;
  }

  std::string header = "| N x K | M |";
  std::string rule = "| --- | ---: |";
  for (const Variant& b : balances) header += fmt::format(" plan {} |", b.name), rule += " --- |";
  for (const Variant& b : balances) header += fmt::format(" {} us |", b.name), rule += " --- |";
  for (const Variant& b : balances) header += fmt::format(" {} % copy |", b.name), rule += " ---: |";
  header += " check |";
  rule += " --- |";
  std::printf("%s\n%s\n", header.c_str(), rule.c_str());

  int failures = 0;
  std::uint64_t seed = 1;
  for (const auto& shape : split(shapes_arg, ',')) {
    const auto nk = split(shape, 'x');
    if (nk.size() != 2) {
      std::fprintf(stderr, "test_gemv_ab: shape %s is not NxK\n", shape.c_str());
      return 2;
    }
    const std::int64_t N = std::atoll(nk[0].c_str()), K = std::atoll(nk[1].c_str());
    std::vector<std::uint16_t> a_host(static_cast<std::size_t>(16 * K)), b_host(static_cast<std::size_t>(N * K));
    fill(a_host, t, seed++);
    fill(b_host, t, seed++);
    void *A = nullptr, *B = nullptr;
    std::vector<void*> C(balances.size(), nullptr);
    if (!ok(cudaMalloc(&A, a_host.size() * 2), "cudaMalloc A") || !ok(cudaMalloc(&B, b_host.size() * 2), "cudaMalloc B"))
      return 1;
    for (auto& c : C)
      if (!ok(cudaMalloc(&c, static_cast<std::size_t>(16 * N) * 2), "cudaMalloc C")) return 1;
    if (!ok(cudaMemcpy(A, a_host.data(), a_host.size() * 2, cudaMemcpyHostToDevice), "copy A") ||
        !ok(cudaMemcpy(B, b_host.data(), b_host.size() * 2, cudaMemcpyHostToDevice), "copy B"))
      return 1;
    const double weight_bytes = static_cast<double>(N) * K * 2;

    for (int M : ms) {
      std::vector<GemvPlan> plans(balances.size());
      std::vector<GemmProblem> problems(balances.size());
      for (std::size_t b = 0; b < balances.size(); ++b) {
        problems[b] = GemmProblem{t, M, N, K, A, B, C[b], stream};
        if (kb::kernels::gemm_cuda::gemv_plan(problems[b], kGemvScratchBytes, balances[b].balance, balances[b].rows,
                                                balances[b].kernel, &plans[b]) != 0) {
          std::fprintf(stderr, "gemv_plan failed for %s M=%d\n", shape.c_str(), M);
          return 1;
        }
        if (balances[b].unsplit) plans[b].splits = 1;  // a valid launch: one block along K covers all of it
      }
      // rounds x balances medians, in the order they ran
      std::vector<std::vector<double>> us(balances.size());
      for (int r = 0; r < rounds; ++r)
        for (std::size_t b = 0; b < balances.size(); ++b) {
          cuda::TimingOptions o;
          if (balances[b].clean) o.l2_flush = cuda::L2Flush::clean;
          if (balances[b].write) o.l2_flush = cuda::L2Flush::write;
          if (balances[b].warm) o.flush_l2 = false;
          auto timed = cuda::time_gpu(
              [&](int, void*) -> Status {
                const int e = kb::kernels::gemm_cuda::gemv_launch(problems[b], &scratch[b], plans[b]);
                if (e != 0) return Error{Code::cuda_error, cudaGetErrorString(static_cast<cudaError_t>(e))};
                return ok_status();
              },
              stream, o);
          if (!timed) {
            std::fprintf(stderr, "%s M=%d %s: %s\n", shape.c_str(), M, balances[b].name.c_str(),
                         timed.error().message.c_str());
            return 1;
          }
          us[b].push_back(timed->median_ms * 1e3);
        }
      // One more call each, C poisoned first, compared with the first balance's output.
      std::vector<std::vector<std::uint16_t>> out(balances.size(), std::vector<std::uint16_t>(M * N));
      for (std::size_t b = 0; b < balances.size(); ++b) {
        if (!ok(cudaMemsetAsync(C[b], 0xff, static_cast<std::size_t>(M * N) * 2, stream), "poison C")) return 1;
        if (kb::kernels::gemm_cuda::gemv_launch(problems[b], &scratch[b], plans[b]) != 0) return 1;
        if (!ok(cudaMemcpyAsync(out[b].data(), C[b], out[b].size() * 2, cudaMemcpyDeviceToHost, stream), "copy C") ||
            !ok(cudaStreamSynchronize(stream), "sync"))
          return 1;
      }
      // Each variant against an fp64 dot product on a sample of outputs (every m, about 512 n), within a
      // worst-case bound that holds for any summation order: fp32 accumulation losing at most one fp32 ulp
      // per addition (tensor cores may truncate), |err| <= K * 2^-23 * sum |a b| to first order, plus half an
      // ulp of the output's dtype for the final rounding (the bound is K^2 / 3.4e7 on these inputs). A lost
      // 64-wide step (about 2.7 here) falls outside it up to K = 8192, a lost or doubled half of K up to
      // K = 28672. Then against the first variant: the same split and warps must be bit-identical.
      std::string check;
      const double unit = t == DType::bfloat16 ? std::ldexp(1.0, -7) : std::ldexp(1.0, -10);  // ulp(1) of the dtype
      const std::int64_t n_step = std::max<std::int64_t>(1, N / 512) | 1;  // odd: every row of a tile gets sampled
      // The sampled n (every n_step-th and the last), their fp64 references and magnitudes, once for all variants.
      std::vector<std::int64_t> sample_n;
      for (std::int64_t n = 0; n < N; n += n_step) sample_n.push_back(n);
      if (sample_n.back() != N - 1) sample_n.push_back(N - 1);
      std::vector<double> ref(sample_n.size() * M), mag(sample_n.size() * M);
      {
        std::vector<double> a(static_cast<std::size_t>(M * K)), row(static_cast<std::size_t>(K));
        for (std::size_t i = 0; i < a.size(); ++i) a[i] = to_float(a_host[i], t);
        for (std::size_t j = 0; j < sample_n.size(); ++j) {
          for (std::int64_t k = 0; k < K; ++k) row[k] = to_float(b_host[sample_n[j] * K + k], t);
          for (int m = 0; m < M; ++m) {
            double r = 0, g = 0;
            for (std::int64_t k = 0; k < K; ++k) {
              const double p = a[m * K + k] * row[k];  // exact: a product of two 8- or 11-bit significands
              r += p;
              g += std::fabs(p);
            }
            ref[j * M + m] = r;
            mag[j * M + m] = g;
          }
        }
      }
      for (std::size_t b = 0; b < balances.size(); ++b) {
        std::size_t differ = 0, out_of_bound = 0;
        double worst = 0;  // largest |err| / bound
        for (std::size_t j = 0; j < sample_n.size(); ++j)
          for (int m = 0; m < M; ++m) {
            const double r = ref[j * M + m];
            const double got = to_float(out[b][static_cast<std::size_t>(m) * N + sample_n[j]], t);
            const double accumulation = static_cast<double>(K) * std::ldexp(1.0, -23) * mag[j * M + m];
            const double bound = accumulation + 0.5 * unit * (std::fabs(r) + accumulation) + std::ldexp(1.0, -133);
            const double err = std::fabs(got - r);
            if (!(err <= bound)) ++out_of_bound;  // NaN fails too
            worst = std::max(worst, err / bound);
          }
        std::size_t unwritten = 0;  // every output, not only the sample: C was poisoned with NaN (0xffff)
        for (std::size_t i = 0; i < out[b].size(); ++i) {
          unwritten += std::isnan(to_float(out[b][i], t));
          if (b > 0) differ += out[b][i] != out[0][i];
        }
        // Same split and warps: each output sums the same partials in the same order.
        const bool same_split = b > 0 && plans[b].splits == plans[0].splits && plans[b].warps == plans[0].warps;
        const bool bad = out_of_bound > 0 || unwritten > 0 || (same_split && differ > 0);
        if (bad) ++failures;
        check += fmt::format("{}{}: err <= {:.2g} of bound{}{}{}{}", check.empty() ? "" : "; ", balances[b].name,
                             worst, out_of_bound ? fmt::format(", {} over it", out_of_bound) : "",
                             unwritten ? fmt::format(", {} NaN", unwritten) : "",
                             b > 0 && differ ? fmt::format(", {} differ from {}", differ, balances[0].name) : "",
                             bad ? " FAILED" : "");
      }
      std::string row = fmt::format("| {} x {} | {} |", N, K, M);
      for (const auto& plan : plans) row += " " + describe(plan) + " |";
      for (const auto& v : us) {
        std::string cell;
        for (double x : v) cell += fmt::format("{}{:.1f}", cell.empty() ? "" : " / ", x);
        row += " " + cell + " |";
      }
      for (const auto& v : us) {
        const double best = *std::min_element(v.begin(), v.end());
        row += fmt::format(" {:.1f} |", 100.0 * weight_bytes / (best * 1e-6) / (copy_gbs * 1e9));
      }
      row += " " + check + " |";
      std::printf("%s\n", row.c_str());
      std::fflush(stdout);
    }
    cudaFree(A);
    cudaFree(B);
    for (auto* c : C) cudaFree(c);
  }
  std::printf("\nplan: row blocks x splits, b = balanced, / rows per block. %s\n", failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}
