// kb_cpu_mla_ragged: causal DeepSeek MLA prefill in its ragged form (qk 192 =
// 128 nope + 64 rope, vo 128, as many kv heads as query heads) on the CPU, as
// the tiled online softmax of kernels/attention/online_softmax.hpp
// (flash::run_ragged), fp32, threaded.
#include "../attention/online_softmax.hpp"

namespace kb::kernels {

void add_mla_ragged_cpu(Registry& r) {
  Implementation impl;
  impl.name = "kb_cpu_mla_ragged";
  impl.author = "kb";
  impl.device = Device::cpu;
  impl.description = "ragged MLA causal prefill (qk 192, vo 128), tiled online softmax (fp32), threaded";
  impl.supports = [](const Definition& d) -> std::string {
    std::string why = flash::check_signature(d, "mla_ragged", {"q", "k", "v", "qo_indptr", "kv_indptr", "sm_scale"}, {});
    if (!why.empty()) return why;
    if (d.name.find("causal") == std::string::npos) return "no 'causal' in its name: only causal prefill is handled";
    return {};
  };
  impl.run = flash::run_ragged;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
