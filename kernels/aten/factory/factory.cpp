// Tensors whose values PyTorch leaves unspecified or draws at random:
// new_empty and new_empty_strided (uninitialized memory: only the shape,
// dtype and strides are defined; kb fills zeros) and bernoulli_.float (each
// element 1 with probability p, else 0, in self's dtype). BackendBench keeps
// all three out of its correctness tests for that reason; their outputs are
// checked by their metadata (and bernoulli_'s by its values lying in {0, 1}),
// never against another implementation's values.
//
// bernoulli_'s draws come from a splitmix64 stream seeded by p's bits, in
// row-major order over self, so a call is repeatable (factory_args.hpp; the
// CUDA kernel draws the same values).
#include <fmt/format.h>

#include "../common/args.hpp"
#include "../families.hpp"
#include "factory_args.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

// new_empty(self, size, dtype=None, layout=None, device=None, pin_memory=None)
Out new_empty(Call& c) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  auto size = size_arg(c, 1, "size");
  return {empty_tensor(dtype_arg(c, 2, "dtype").value_or(self.dtype), size, c.meta)};
}

// new_empty_strided(self, size, stride, dtype=None, layout=None, device=None, pin_memory=None)
Out new_empty_strided(Call& c) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  auto size = size_arg(c, 1, "size");
  auto stride = size_arg(c, 2, "stride");
  if (stride.size() != size.size())
    fail(fmt::format("stride {} must have one entry per dim of size {}", shape_text(stride), shape_text(size)));
  return {empty_strided(dtype_arg(c, 3, "dtype").value_or(self.dtype), size, stride, c.meta)};
}

// bernoulli_.float(self, p=0.5, generator=None)
Out bernoulli_inplace(Call& c) {
  HostTensor& self = tensor_arg_mut(c, 0, "self");
  const double p = bernoulli_p(c);
  if (c.meta) return {self};
  Rng rng(bernoulli_seed(p));
  HostTensor draws = empty_tensor(self.dtype, self.shape);
  for (std::int64_t i = 0; i < draws.numel(); ++i) draws.store(i, rng.uniform() < p ? 1.0 : 0.0);
  map_into(self, {&draws}, [](const double* v) { return v[0]; });
  return {self};
}

const OpInfo kOps[] = {
    {"aten.new_empty.default", "factory", new_empty, nullptr},
    {"aten.new_empty_strided.default", "factory", new_empty_strided, nullptr},
    {"aten.bernoulli_.float", "factory", bernoulli_inplace, nullptr},
};

}  // namespace

std::span<const OpInfo> factory_ops() { return kOps; }

}  // namespace kb::backendbench::aten
