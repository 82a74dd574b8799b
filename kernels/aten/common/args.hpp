// Helpers shared by the ATen operator families: argument access, PyTorch's
// type promotion and broadcasting, and a strided multi-operand loop.
// Inside kernels/aten a bad argument throws OpError; run_cpu() (table.cpp)
// turns it into an Error, so nothing throws past the operator interface.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "backendbench/ops.hpp"

namespace kb::backendbench::aten {

struct OpError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] void fail(const std::string& message);

// ---- arguments ----
const HostTensor& tensor_arg(const Call& c, std::size_t pos, std::string_view name);
HostTensor& tensor_arg_mut(Call& c, std::size_t pos, std::string_view name);
const HostTensor* optional_tensor(const Call& c, std::size_t pos, std::string_view name);
const std::vector<HostTensor>& tensor_list(const Call& c, std::size_t pos, std::string_view name);
// A list of tensors and Nones (index.Tensor's indices): its entries in order, null for None.
std::vector<const HostTensor*> optional_tensor_list(const Call& c, std::size_t pos, std::string_view name);
bool has_arg(const Call& c, std::size_t pos, std::string_view name);  // given and not None
std::int64_t int_arg(const Call& c, std::size_t pos, std::string_view name, std::optional<std::int64_t> dflt = {});
double number_arg(const Call& c, std::size_t pos, std::string_view name, std::optional<double> dflt = {});
bool bool_arg(const Call& c, std::size_t pos, std::string_view name, std::optional<bool> dflt = {});
// [1, 2] or a single int (dim=1); nullopt when absent or None.
std::optional<std::vector<std::int64_t>> int_list_arg(const Call& c, std::size_t pos, std::string_view name);
std::optional<Dtype> dtype_arg(const Call& c, std::size_t pos, std::string_view name);
std::string string_arg(const Call& c, std::size_t pos, std::string_view name, std::string dflt);

// A "Scalar" argument: a Python number (or a 0-D tensor standing for one).
struct Scalar {
  double value = 0;
  Dtype category = Dtype::i64;  // i64 for ints, f32 (default float) for floats, b8 for bools
};
bool is_scalar_arg(const Call& c, std::size_t pos, std::string_view name);
Scalar scalar_arg(const Call& c, std::size_t pos, std::string_view name, std::optional<double> dflt = {});

// Replaces outputs whose entry in the bool list `output_mask` is False by
// undefined tensors (PyTorch returns None for them).
void apply_output_mask(const Call& c, std::size_t pos, std::vector<HostTensor>& outs);

// ---- dtypes ----
void require_real(const HostTensor& t, std::string_view what);
// PyTorch's result_type over dimensioned tensors, 0-D tensors and wrapped
// Python scalars (each group promoted alone, then combined by category).
struct Operand {
  Dtype dtype;
  enum Kind { dimensioned, zero_dim, scalar } kind;
};
Dtype result_type(const std::vector<Operand>& ops);
Operand operand(const HostTensor& t);
Dtype default_float_if_integral(Dtype d);  // true division, exp, ... on ints give f32

// ---- shapes ----
std::int64_t wrap_dim(std::int64_t dim, std::size_t rank);  // negative dims count from the end
std::vector<std::int64_t> broadcast_shapes(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b);
// Strides of `t` viewed at `shape` (broadcast dims get stride 0).
std::vector<std::int64_t> broadcast_strides(const HostTensor& t, const std::vector<std::int64_t>& shape);
HostTensor view_as_broadcast(const HostTensor& t, const std::vector<std::int64_t>& shape);

// ---- loops ----
// Calls f(offsets) for every index of `shape` in row-major order, where
// offsets[k] is the storage index of operand k (base[k] + sum idx*strides[k]).
template <class F>
void for_each_offset(const std::vector<std::int64_t>& shape, const std::vector<std::vector<std::int64_t>>& strides,
                     std::vector<std::int64_t> base, F&& f) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  if (n == 0) return;
  const std::size_t rank = shape.size(), k = strides.size();
  std::vector<std::int64_t> idx(rank, 0);
  std::vector<std::int64_t>& off = base;
  for (std::int64_t i = 0; i < n; ++i) {
    f(off.data());
    for (std::size_t d = rank; d-- > 0;) {
      if (++idx[d] < shape[d]) {
        for (std::size_t j = 0; j < k; ++j) off[j] += strides[j][d];
        break;
      }
      for (std::size_t j = 0; j < k; ++j) off[j] -= (shape[d] - 1) * strides[j][d];
      idx[d] = 0;
    }
  }
}

// Calls f(bases) once per line along `dim`: bases[k] is the storage index of
// the line's first element in operand k (same shape, strides per operand).
template <class F>
void for_each_line(std::vector<std::int64_t> shape, std::size_t dim, const std::vector<const HostTensor*>& ts, F&& f) {
  std::vector<std::vector<std::int64_t>> strides;
  std::vector<std::int64_t> base;
  for (const HostTensor* t : ts) {
    strides.push_back(t->strides);
    base.push_back(t->offset);
  }
  if (shape.empty()) {
    f(base.data());
    return;
  }
  if (shape[dim] == 0) return;
  shape[dim] = 1;
  for_each_offset(shape, strides, base, f);
}

// out[i] = f(inputs at i...) over out's shape; inputs are broadcast to it.
// Values are loaded as double and f's result stored in out's dtype.
template <class F>
void map_into(HostTensor& out, const std::vector<const HostTensor*>& in, F&& f) {
  std::vector<std::vector<std::int64_t>> strides;
  std::vector<std::int64_t> base;
  strides.push_back(out.strides);
  base.push_back(out.offset);
  for (const HostTensor* t : in) {
    strides.push_back(broadcast_strides(*t, out.shape));
    base.push_back(t->offset);
  }
  double vals[8];
  for_each_offset(out.shape, strides, base, [&](const std::int64_t* off) {
    for (std::size_t j = 0; j < in.size(); ++j) vals[j] = in[j]->load(off[j + 1]);
    out.store(off[0], f(vals));
  });
}

}  // namespace kb::backendbench::aten
