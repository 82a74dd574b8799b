// kb's CUDA gemm solutions (see gemm_cuda.hpp): parse the call, pick the
// kernel, report why not in words.
#include "gemm_cuda.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <string>

#include "cublaslt_gemm.hpp"
#include "gemv.hpp"
#include "gemv_or_cublaslt.hpp"
#include "long_k.hpp"
#include "long_k_race.hpp"
#include "oracle/oracle.hpp"

namespace kb::kernels {

extern const OracleEntry gemm_oracle;  // kernels/gemm/oracle.cpp

namespace {

using gemm_cuda::GemmProblem;

static_assert(kCudaGemmGemvMaxM <= gemm_cuda::kGemvMaxM, "the gemv kernel is instantiated for M <= 16 only");

// Definition-level checks shared by the three solutions: a plain C = A @ B.T
// (the oracle's own test) with A, B and C all float16 or all bfloat16.
std::string gemm_supports(const Definition& d) {
  if (std::string why = gemm_oracle.supports(d); !why.empty()) return why;
  const DType t = d.inputs[0].dtype;
  if (t != DType::float16 && t != DType::bfloat16)
    return fmt::format("kb's CUDA gemm handles float16 and bfloat16, not {}", dtype_name(t));
  if (d.inputs[1].dtype != t || d.outputs[0].dtype != t)
    return fmt::format("kb's CUDA gemm needs A, B and C of one dtype (A {}, B {}, C {})", dtype_name(t),
                       dtype_name(d.inputs[1].dtype), dtype_name(d.outputs[0].dtype));
  return {};
}

std::string gemv_supports(const Definition& d) {
  if (std::string why = gemm_supports(d); !why.empty()) return why;
  // K is the second axis of A; refuse here when it is a constant the kernel
  // cannot take (a var K is checked per call).
  const std::string& k_name = (*d.inputs[0].shape)[1];
  if (const Axis* k = d.find_axis(k_name); k && k->kind == AxisKind::const_ && k->value % gemm_cuda::kGemvKMultiple != 0)
    return fmt::format("kb_cuda_gemv reads rows as 16-byte vectors and needs K % {} == 0 (K = {})",
                       gemm_cuda::kGemvKMultiple, k->value);
  return {};
}

std::string lt_supports(const Definition& d) {
  if (std::string why = gemm_supports(d); !why.empty()) return why;
  return gemm_cuda::cublaslt_unavailable();
}

Result<GemmProblem> parse(const CudaCall& c) {
  if (c.inputs.size() != 2 || c.outputs.size() != 1 || !c.inputs[0].tensor || !c.inputs[1].tensor)
    return make_error(Code::invalid_argument, "gemm expects tensors A, B and one output C");
  const cuda::DeviceTensor& a = *c.inputs[0].tensor;
  const cuda::DeviceTensor& b = *c.inputs[1].tensor;
  const cuda::DeviceTensor& out = c.outputs[0];
  if (a.shape.size() != 2 || b.shape.size() != 2 || out.shape.size() != 2)
    return make_error(Code::invalid_argument, "gemm expects rank-2 A, B and C");
  if (a.shape[1] != b.shape[1] || out.shape[0] != a.shape[0] || out.shape[1] != b.shape[0])
    return make_error(Code::invalid_argument,
                      fmt::format("gemm expects A [M, K], B [N, K], C [M, N]; got A [{}, {}], B [{}, {}], C [{}, {}]",
                                  a.shape[0], a.shape[1], b.shape[0], b.shape[1], out.shape[0], out.shape[1]));
  if (a.dtype != b.dtype || a.dtype != out.dtype || (a.dtype != DType::float16 && a.dtype != DType::bfloat16))
    return make_error(Code::invalid_argument, fmt::format("gemm expects A, B, C all float16 or all bfloat16 (got {}, {}, {})",
                                                          dtype_name(a.dtype), dtype_name(b.dtype),
                                                          dtype_name(out.dtype)));
  GemmProblem p;
  p.dtype = a.dtype;
  p.M = a.shape[0];
  p.K = a.shape[1];
  p.N = b.shape[0];
  p.A = a.data;
  p.B = b.data;
  p.C = out.data;
  p.stream = c.stream;
  if (p.M < 0 || p.N < 0 || p.K < 0) return make_error(Code::invalid_argument, "gemm: negative extent");
  const auto need = [](std::int64_t r, std::int64_t k) { return static_cast<std::size_t>(r * k) * 2; };
  if ((p.M * p.K > 0 && (!p.A || a.nbytes < need(p.M, p.K))) || (p.N * p.K > 0 && (!p.B || b.nbytes < need(p.N, p.K))) ||
      (p.M * p.N > 0 && (!p.C || out.nbytes < need(p.M, p.N))))
    return make_error(Code::invalid_argument, "gemm: a tensor's buffer is null or smaller than its shape");
  return p;
}

// "" when the gemv kernel can run p, else why not.
std::string gemv_unsupported(const GemmProblem& p) {
  if (p.M < 1 || p.M > gemm_cuda::kGemvMaxM)
    return fmt::format("kb_cuda_gemv handles 1 <= M <= {} (the decode regime), this call has M = {}; "
                       "kb_cuda_gemm or kb_cublaslt_gemm handle any M",
                       gemm_cuda::kGemvMaxM, p.M);
  if (p.K % gemm_cuda::kGemvKMultiple != 0)
    return fmt::format("kb_cuda_gemv needs K % {} == 0 (K = {})", gemm_cuda::kGemvKMultiple, p.K);
  if ((reinterpret_cast<std::uintptr_t>(p.A) | reinterpret_cast<std::uintptr_t>(p.B)) % 16 != 0)
    return "kb_cuda_gemv needs A and B 16-byte aligned";
  if (p.N > (std::int64_t{1} << 30) || p.K > (std::int64_t{1} << 30))
    return fmt::format("kb_cuda_gemv handles N, K up to 2^30 (N = {}, K = {})", p.N, p.K);
  return {};
}

// The gemv kernel on p with gemv_plan's plan; with `cublaslt_where_faster`
// (kb_cuda_gemm), the gemv plan or cuBLASLt that ran fastest on this
// problem's first call (the race of gemv_or_cublaslt.hpp; the static rule,
// GemvPlan::cublaslt_instead, where there was no race).
Status run_gemv(const GemmProblem& p, bool cublaslt_where_faster) {
  auto scratch = gemm_cuda::stream_scratch(p.stream);
  if (!scratch) return scratch.error();
  gemm_cuda::GemvPlan plan;
  int e = gemm_cuda::gemv_plan(p, gemm_cuda::gemv_scratch_bytes(*scratch), &plan);
  if (e == 0 && cublaslt_where_faster) {
    auto choice = gemm_cuda::gemm_small_m_choice(p, **scratch, plan);
    if (!choice) return choice.error();
    if (choice->cublaslt) return gemm_cuda::cublaslt_gemm(p);
    plan = choice->plan;
  }
  if (e == 0) e = gemm_cuda::gemv_launch(p, *scratch, plan);
  if (e != 0) {
    const auto err = static_cast<cudaError_t>(e);
    return make_error(Code::cuda_error,
                      fmt::format("kb gemv kernel launch (M={} N={} K={}): {} ({})", p.M, p.N, p.K,
                                  cudaGetErrorString(err), cudaGetErrorName(err)));
  }
  return ok_status();
}

Status run_cuda_gemm(const CudaCall& c) {
  auto p = parse(c);
  if (!p) return p.error();
  if (p->M == 0 || p->N == 0) return ok_status();
  if (p->M <= kCudaGemmGemvMaxM && gemv_unsupported(*p).empty()) return run_gemv(*p, true);
  if (p->K > gemm_cuda::kLongK && p->M > 0) {
    auto form = gemm_cuda::gemm_long_k_choice(*p);
    if (!form) return form.error();
    return gemm_cuda::run_long_k(*p, *form);
  }
  return gemm_cuda::cublaslt_gemm(*p);
}

Status run_cublaslt_gemm(const CudaCall& c) {
  auto p = parse(c);
  if (!p) return p.error();
  return gemm_cuda::cublaslt_gemm(*p);
}

Status run_cuda_gemv(const CudaCall& c) {
  auto p = parse(c);
  if (!p) return p.error();
  if (p->M == 0 || p->N == 0) return ok_status();  // nothing to compute
  if (std::string why = gemv_unsupported(*p); !why.empty()) return make_error(Code::unsupported, why);
  return run_gemv(*p, false);
}

}  // namespace

void add_gemm_cuda(Registry& r) {
  Implementation gemm;
  gemm.name = "kb_cuda_gemm";
  gemm.author = "kb";
  gemm.device = Device::cuda;
  gemm.description = fmt::format(
      "C = A @ B.T, float16/bfloat16, fp32 accumulation: M <= {} -> kb's gemv kernel (tensor-core mma.sync, "
      "streams B once; 16 or 32 rows a block, plain or bulk-copy loads, split-K or not) or cuBLASLt, whichever ran "
      "fastest in cold samples on the shape's first call (tuning gemm_race=0, "
      "or a first call under stream capture: cuBLASLt at M > 8 where the weight is 8 MiB or more or the gemv's last "
      "wave of blocks would be short), else cuBLASLt (TN, the heuristic's "
      "best 16 algorithms timed on first use per shape, the fastest cached); K > 20480: cuBLASLt's K chunks through "
      "an fp32 buffer (as one batch or one by one) or kb's Hopper kernel (single CTAs, clusters of 2, or 128 x 168 tiles), which "
      "promotes the tensor-core sum to a "
      "second fp32 sum every 14336 of K (both for accuracy), whichever ran fastest on the shape's first call "
      "(tuning gemm_race=0, or a first call under stream capture: the chunks, one by one on outputs of at most two "
      "128 x 128 tiles)",
      kCudaGemmGemvMaxM);
  gemm.supports = lt_supports;
  gemm.run_cuda = run_cuda_gemm;
  r.add(std::move(gemm));

  Implementation lt;
  lt.name = "kb_cublaslt_gemm";
  lt.author = "kb";
  lt.device = Device::cuda;
  lt.description = "C = A @ B.T through cublasLtMatmul (TN, fp32 compute, 32 MiB workspace per stream, the "
                   "heuristic's best 16 algorithms timed on first use per shape, the fastest cached; "
                   "KB_CUBLASLT_AUTOTUNE=0: the heuristic's first; K > 20480 summed in K chunks through an fp32 "
                   "buffer, for accuracy); cuBLASLt opened at run time";
  lt.supports = lt_supports;
  lt.run_cuda = run_cublaslt_gemm;
  r.add(std::move(lt));

  Implementation gemv;
  gemv.name = "kb_cuda_gemv";
  gemv.author = "kb";
  gemv.device = Device::cuda;
  gemv.description = fmt::format(
      "kb's skinny-GEMM kernel for M <= {} (decode): mma.sync m16n8k16 with fp32 accumulation, 16-byte weight "
      "loads, split-K across warps and blocks; answers unsupported for larger M",
      gemm_cuda::kGemvMaxM);
  gemv.supports = gemv_supports;
  gemv.run_cuda = run_cuda_gemv;
  r.add(std::move(gemv));
}

}  // namespace kb::kernels
