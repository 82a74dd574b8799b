// kb_cpu_gqa_ragged: causal grouped-query attention (GQA) over ragged
// q / k / v on the CPU, as the tiled online softmax of
// kernels/attention/online_softmax.hpp (flash::run_ragged), fp32, threaded.
#include "../attention/online_softmax.hpp"

namespace kb::kernels {

void add_gqa_ragged_cpu(Registry& r) {
  Implementation impl;
  impl.name = "kb_cpu_gqa_ragged";
  impl.author = "kb";
  impl.device = Device::cpu;
  impl.description = "ragged GQA causal prefill, tiled online softmax (fp32), threaded";
  impl.supports = [](const Definition& d) -> std::string {
    std::string why = flash::check_signature(d, "gqa_ragged", {"q", "k", "v", "qo_indptr", "kv_indptr", "sm_scale"}, {});
    if (!why.empty()) return why;
    if (d.name.find("causal") == std::string::npos) return "no 'causal' in its name: only causal prefill is handled";
    return {};
  };
  impl.run = flash::run_ragged;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
