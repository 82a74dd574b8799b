// kb_cuda_mla_ragged_prefill: kb's CUDA solution for mla_ragged causal prefill definitions: bf16
// q / k / v in ragged layout (rows of every sequence contiguous, CSR
// qo_indptr / kv_indptr, int32), qk_dim 192 / vo_dim 128 (DeepSeek MLA prefill without absorption), any group. Kernel: kernels/attention/prefill.cuh;
// launcher: kernels/attention/prefill_gqa.cu.
#include <fmt/format.h>

#include <string>

#include "../../attention/ragged_prefill_run.hpp"
#include "../../attention/solution_args.hpp"
#include "harness/implementation.hpp"

namespace kb::kernels {
namespace {

using namespace attention_args;

const char* kName = "kb_cuda_mla_ragged_prefill";

std::string supports(const Definition& d) {
  if (d.op_type != "mla_ragged") return fmt::format("op_type {} is not mla_ragged", d.op_type);
  if (std::string why = check_signature(d, {"q", "k", "v"}, {"qo_indptr", "kv_indptr"}); !why.empty()) return why;
  if (!const_is(d, "qk_dim", 192) || !const_is(d, "vo_dim", 128)) return "qk_dim / vo_dim: this kernel handles 192 / 128";
  if (std::string why = check_head_groups(d); !why.empty()) return why;
  auto o = find_oracle(d);
  if (!o) return "no oracle for this definition: " + o.error().message;
  return {};
}

Status run(const CudaCall& c) { return run_ragged_prefill(c, kName, supports); }

}  // namespace

void add_mla_ragged_cuda(Registry& r) {
  Implementation impl;
  impl.name = kName;
  impl.author = "kb";
  impl.device = Device::cuda;
  impl.description =
      "FlashAttention-2 style causal prefill on tensor cores (mma.sync bf16, fp32 online softmax in base 2): a device "
      "plan of (sequence, 128-token tile) items, heaviest tiles first; one CTA (8 warps x 16 rows) per (item, query "
      "head), 32-key tiles of the ragged K / V streamed by cp.async, causal tiles skipped and masks only on the "
      "diagonal";
  impl.supports = supports;
  impl.run_cuda = run;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
