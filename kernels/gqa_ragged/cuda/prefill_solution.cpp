// kb_cuda_gqa_ragged_prefill: kb's CUDA solution for gqa_ragged causal prefill definitions: bf16
// q / k / v in ragged layout (rows of every sequence contiguous, CSR
// qo_indptr / kv_indptr, int32), head_dim one of kGqaHeadDims (64, 96, 128, 192, 256), any group. Kernels:
// kernels/attention/prefill_wgmma.cuh (head_dim 128), prefill.cuh (the others); launcher: kernels/attention/prefill_gqa.cu.
#include <fmt/format.h>

#include <string>

#include "../../attention/launch.hpp"
#include "../../attention/ragged_prefill_run.hpp"
#include "../../attention/solution_args.hpp"
#include "harness/implementation.hpp"

namespace kb::kernels {
namespace {

using namespace attention_args;

const char* kName = "kb_cuda_gqa_ragged_prefill";

std::string supports(const Definition& d) {
  if (d.op_type != "gqa_ragged") return fmt::format("op_type {} is not gqa_ragged", d.op_type);
  if (std::string why = check_signature(d, {"q", "k", "v"}, {"qo_indptr", "kv_indptr"}); !why.empty()) return why;
  if (const Axis* a = d.find_axis("head_dim"); a && a->kind == AxisKind::const_ && !gqa_head_dim_supported(a->value))
    return fmt::format("head_dim {}: this kernel handles {}", a->value, kGqaHeadDimsText);
  if (std::string why = check_head_groups(d); !why.empty()) return why;
  auto o = find_oracle(d);
  if (!o) return "no oracle for this definition: " + o.error().message;
  return {};
}

Status run(const CudaCall& c) { return run_ragged_prefill(c, kName, supports); }

}  // namespace

void add_gqa_ragged_cuda(Registry& r) {
  Implementation impl;
  impl.name = kName;
  impl.author = "kb";
  impl.device = Device::cuda;
  impl.description =
      "causal prefill on Hopper tensor cores (wgmma bf16, fp32 online softmax in base 2; kernels/attention/prefill_wgmma.cuh): a device "
      "plan of (sequence, 128-token tile) items, heaviest tiles first; per (item, query head) a producer warpgroup "
      "feeding two consumer warpgroups 128-key tiles, K / V by TMA, masks only on diagonal tiles; "
      "head dims other than 128 on the mma.sync kernel of kernels/attention/prefill.cuh";
  impl.supports = supports;
  impl.run_cuda = run;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
