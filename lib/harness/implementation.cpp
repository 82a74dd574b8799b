#include "harness/implementation.hpp"

#include "oracle/gpu_oracle.hpp"

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
  impl.trusted = true;
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

Implementation gpu_reference_implementation() {
  Implementation impl;
  impl.name = "reference_cuda";
  impl.author = "kb";
  impl.device = Device::cuda;
  impl.description = "kb's GPU oracle: plain CUDA kernels (fp32 values; double or fp32 sums), for large workloads";
  impl.trusted = true;
  impl.supports = [](const Definition& d) {
    return find_gpu_oracle(d) ? std::string() : "kb has no GPU oracle for op_type " + d.op_type;
  };
  impl.run_cuda = [](const CudaCall& c) -> Status {
    GpuOracleFn fn = find_gpu_oracle(c.definition);
    if (!fn) return make_error(Code::unsupported, "kb has no GPU oracle for op_type " + c.definition.op_type);
    return fn(GpuOracleCall{c.definition, c.axes, c.inputs, c.outputs, c.stream});
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
    Registry own;
    for (Implementation impl : r.all()) {
      impl.trusted = true;
      own.add(std::move(impl));
    }
    return own;
  }();
  return registry;
}

}  // namespace kb
