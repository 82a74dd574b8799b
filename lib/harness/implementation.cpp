#include "harness/implementation.hpp"

namespace kb {

// kernels/<op_type>/cpu.cpp files add kb's own CPU solutions here.
namespace kernels {
void add_cpu_solutions(Registry& r);
#if KB_HAVE_CUDA
void add_cuda_solutions(Registry& r);  // kernels/cuda_solutions.cpp
#endif
}  // namespace kernels

const char* device_name(Device d) noexcept { return d == Device::cuda ? "cuda" : "cpu"; }

const Implementation* Registry::find(std::string_view name) const {
  for (const auto& i : impls_)
    if (i.name == name) return &i;
  return nullptr;
}

Implementation reference_implementation() {
  Implementation impl;
  impl.name = "reference";
  impl.author = "kb";
  impl.device = Device::cpu;
  impl.description = "kb's CPU oracle (fp32 math), faithful to the definition's PyTorch reference";
  impl.supports = [](const Definition& d) {
    auto o = find_oracle(d);
    return o ? std::string() : o.error().message;
  };
  impl.run = [](const ImplementationCall& c) -> Status {
    auto o = find_oracle(c.definition);
    if (!o) return o.error();
    return (*o)->run(OracleCall{c.definition, c.axes, c.inputs, c.outputs, c.seed});
  };
  return impl;
}

const Registry& builtin_registry() {
  static const Registry registry = [] {
    Registry r;
    kernels::add_cpu_solutions(r);
#if KB_HAVE_CUDA
    kernels::add_cuda_solutions(r);
#endif
    return r;
  }();
  return registry;
}

}  // namespace kb
