// kb_definition_check_tensors: a caller's DLPack tensors against a
// definition's signature (counts, dtypes, ranks, axes, devices, layout) and
// then its constraints, evaluated over what the tensors say.
//
// Hot-path rules: no allocation on success except what constraints over
// tensor shapes need (expr::Environment::shape returns a vector), no device
// memory touched, no GPU synchronization. Messages are built only on failure.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <limits>
#include <memory>

#include "capi.hpp"
#include "common/limits.hpp"
#include "schema/dtype.hpp"

using kb::capi::fail;
using kb::capi::SmallBuf;

namespace {

using kb::DType;
using kb::expr::Value;

// DLPack type codes dlpack.h 0.6 lacks (named in kb.h).
constexpr std::uint8_t kCodeBool = KB_DLPACK_BOOL;
constexpr std::uint8_t kCodeF8E4M3 = KB_DLPACK_FLOAT8_E4M3FN;
constexpr std::uint8_t kCodeF8E5M2 = KB_DLPACK_FLOAT8_E5M2;
constexpr std::uint8_t kCodeF4E2M1 = KB_DLPACK_FLOAT4_E2M1FN;

DLDataType make_type(std::uint8_t code, std::uint8_t bits, std::uint16_t lanes) {
  DLDataType t;
  t.code = code;
  t.bits = bits;
  t.lanes = lanes;
  return t;
}

DLDataType expected_dlpack(DType t) {
  switch (t) {
    case DType::float32: return make_type(kDLFloat, 32, 1);
    case DType::float16: return make_type(kDLFloat, 16, 1);
    case DType::bfloat16: return make_type(kDLBfloat, 16, 1);
    case DType::float8_e4m3fn: return make_type(kCodeF8E4M3, 8, 1);
    case DType::float8_e5m2: return make_type(kCodeF8E5M2, 8, 1);
    case DType::float4_e2m1: return make_type(kCodeF4E2M1, 4, 2);
    case DType::int64: return make_type(kDLInt, 64, 1);
    case DType::int32: return make_type(kDLInt, 32, 1);
    case DType::int16: return make_type(kDLInt, 16, 1);
    case DType::int8: return make_type(kDLInt, 8, 1);
    case DType::bool_: return make_type(kCodeBool, 8, 1);
  }
  return make_type(0, 0, 0);
}

bool dtype_matches(DType t, DLDataType got) {
  DLDataType e = expected_dlpack(t);
  if (t == DType::float4_e2m1)  // torch float4_e2m1fn_x2 is {17, 4, 2}; also accept one lane
    return got.code == e.code && got.bits == 4 && (got.lanes == 1 || got.lanes == 2);
  return got.code == e.code && got.bits == e.bits && got.lanes == e.lanes;
}

// A Python scalar passed as a 0-D tensor: float scalars as float32/float64,
// int scalars as any signed integer width, bool as bool.
bool scalar_dtype_ok(DType spec, DLDataType got) {
  if (dtype_matches(spec, got)) return true;
  if (got.lanes != 1) return false;
  if (kb::dtype_is_float(spec)) return got.code == kDLFloat && (got.bits == 32 || got.bits == 64);
  if (kb::dtype_is_integer(spec))
    return got.code == kDLInt && (got.bits == 8 || got.bits == 16 || got.bits == 32 || got.bits == 64);
  return false;
}

std::string dlpack_type_text(DLDataType d) {
  for (int i = 0; i < kb::dtype_count; ++i)
    if (dtype_matches(static_cast<DType>(i), d)) return std::string(kb::dtype_name(static_cast<DType>(i)));
  if (d.lanes == 1) {
    if (d.code == kDLFloat && d.bits == 64) return "float64";
    if (d.code == kDLUInt && (d.bits == 8 || d.bits == 16 || d.bits == 32 || d.bits == 64))
      return fmt::format("uint{}", d.bits);
  }
  return fmt::format("DLPack type {{code {}, bits {}, lanes {}}}", d.code, d.bits, d.lanes);
}

// DLPack's device types (dlpack.h 1.x): a value outside them is not a device a
// caller can mean, and is refused before the field is used as DLDeviceType.
bool is_dlpack_device_type(std::int64_t t) {
  return (t >= 1 && t <= 4) || (t >= 7 && t <= 17);
}

std::string device_text(const DLTensor& x) {
  switch (kb::capi::device_type_of(x)) {
    case kDLCPU: return "the CPU";
    case kDLCUDA: return fmt::format("CUDA device {}", x.device.device_id);
    case kDLCUDAHost: return "CUDA host memory";
    default: return fmt::format("device type {}", kb::capi::device_type_of(x));
  }
}

bool host_readable(const DLTensor& x) {
  const std::int64_t t = kb::capi::device_type_of(x);
  return t == kDLCPU || t == kDLCUDAHost;
}

// Reads an integer or bool element at `offset` elements past data + byte_offset.
std::optional<std::int64_t> read_integer(const DLTensor& x, std::int64_t offset) {
  if (!x.data || x.dtype.lanes != 1) return std::nullopt;
  const char* p = static_cast<const char*>(x.data) + x.byte_offset;
  auto load = [&](auto proto) -> std::int64_t {
    using T = decltype(proto);
    T v;
    std::memcpy(&v, p + offset * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
    return static_cast<std::int64_t>(v);
  };
  if (x.dtype.code == kDLInt) {
    switch (x.dtype.bits) {
      case 8: return load(std::int8_t{});
      case 16: return load(std::int16_t{});
      case 32: return load(std::int32_t{});
      case 64: return load(std::int64_t{});
      default: return std::nullopt;
    }
  }
  if (x.dtype.code == kCodeBool && x.dtype.bits == 8) return load(std::uint8_t{}) != 0 ? 1 : 0;
  return std::nullopt;
}

// The value of a Python scalar passed as a 0-D host tensor.
std::optional<Value> read_scalar(const DLTensor& x) {
  if (!x.data || x.ndim != 0 || !host_readable(x) || x.dtype.lanes != 1) return std::nullopt;
  const char* p = static_cast<const char*>(x.data) + x.byte_offset;
  if (x.dtype.code == kDLFloat && x.dtype.bits == 32) {
    float v;
    std::memcpy(&v, p, sizeof v);
    return Value::floating(v);
  }
  if (x.dtype.code == kDLFloat && x.dtype.bits == 64) {
    double v;
    std::memcpy(&v, p, sizeof v);
    return Value::floating(v);
  }
  if (x.dtype.code == kCodeBool && x.dtype.bits == 8) return Value::boolean(*read_integer(x, 0) != 0);
  if (auto i = read_integer(x, 0)) return Value::integer(*i);
  return std::nullopt;  // half-precision scalars: value not read (constraints stay unchecked)
}

// Where a var axis got its value: tensor index (inputs then outputs) and dim.
struct Binding {
  std::int64_t value = -1;
  std::int32_t tensor = -1;  // -1 unbound, -2 const axis
  std::int32_t dim = 0;
};

// The call being checked: the definition and the caller's tensor arrays.
struct Call {
  const kb_definition& h;
  const DLTensor* const* inputs;
  std::size_t n_inputs;
  const DLTensor* const* outputs;
  std::size_t n_outputs;

  std::size_t count() const { return n_inputs + n_outputs; }
  const DLTensor* tensor(std::size_t k) const { return k < n_inputs ? inputs[k] : outputs[k - n_inputs]; }
  const kb::TensorSpec& spec(std::size_t k) const {
    return k < n_inputs ? h.def.inputs[k] : h.def.outputs[k - n_inputs];
  }
  // `input "q"` / `output "lse"`
  std::string label(std::size_t k) const {
    return fmt::format("{} \"{}\"", k < n_inputs ? "input" : "output", spec(k).name);
  }
  std::optional<std::size_t> find(std::string_view name) const {
    for (std::size_t k = 0; k < count(); ++k)
      if (spec(k).name == name) return k;
    return std::nullopt;
  }
};

// Constraint environment over a call whose tensors passed the signature checks.
class CallEnvironment final : public kb::expr::Environment {
 public:
  CallEnvironment(const Call& call, const SmallBuf<Binding, 32>& axes) : call_(call), axes_(axes) {}

  std::optional<Value> scalar(std::string_view name) const override {
    const auto& axes = call_.h.def.axes;
    for (std::size_t a = 0; a < axes.size(); ++a) {
      if (axes[a].name != name) continue;
      if (axes_[a].tensor == -1) return std::nullopt;
      return Value::integer(axes_[a].value);
    }
    auto k = call_.find(name);
    if (!k || !call_.spec(*k).is_scalar()) return std::nullopt;
    const DLTensor* x = call_.tensor(*k);
    if (!x) return std::nullopt;
    return read_scalar(*x);
  }

  std::optional<std::vector<std::int64_t>> shape(std::string_view name) const override {
    auto k = call_.find(name);
    if (!k || call_.spec(*k).is_scalar()) return std::nullopt;
    const DLTensor* x = call_.tensor(*k);
    if (!x) return std::nullopt;
    return std::vector<std::int64_t>(x->shape, x->shape + x->ndim);
  }

  std::optional<std::int64_t> element(std::string_view name, std::span<const std::int64_t> index) const override {
    auto k = call_.find(name);
    if (!k || call_.spec(*k).is_scalar()) return std::nullopt;
    const DLTensor* x = call_.tensor(*k);
    if (!x || !x->data || !host_readable(*x)) return std::nullopt;
    if (index.size() != static_cast<std::size_t>(x->ndim)) return std::nullopt;
    // Strides are compact row-major or size-1 dims (checked), so the
    // compact formula is right unless explicit strides say otherwise.
    std::int64_t offset = 0, compact = 1;
    for (std::int32_t d = x->ndim - 1; d >= 0; --d) {
      std::int64_t i = index[static_cast<std::size_t>(d)];
      if (i < 0 || i >= x->shape[d]) return std::nullopt;
      offset += i * (x->strides ? x->strides[d] : compact);
      compact *= x->shape[d];
    }
    return read_integer(*x, offset);
  }

 private:
  const Call& call_;
  const SmallBuf<Binding, 32>& axes_;
};

// True when `e` reads elements of a tensor that is not in host memory (or
// missing): evaluating it could only end "unchecked", and building that
// verdict's message allocates, on engines' hot path.
bool reads_device_data(const Call& c, const kb::expr::Expression& e) {
  for (const std::string& name : e.data_tensor_names()) {
    auto k = c.find(name);
    const DLTensor* x = k ? c.tensor(*k) : nullptr;
    if (!x || !x->data || !host_readable(*x)) return true;
  }
  return false;
}

kb_status invalid(const Call& c, std::string_view message) {
  return fail(KB_ERROR_INVALID_ARGUMENT, fmt::format("{}: {}", c.h.def.name, message));
}

std::string names_of(const std::vector<kb::TensorSpec>& ts) {
  std::vector<std::string_view> names;
  for (const auto& t : ts) names.push_back(t.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string dims_text(const std::int64_t* v, std::int32_t n) {
  return fmt::format("[{}]", fmt::join(v, v + n, ", "));
}

void fill_axes(const Call& c, const SmallBuf<Binding, 32>& axes, kb_check_result* out) {
  std::size_t n = c.h.def.axes.size();
  if (!out->axis_values || out->axis_capacity < n) return;
  for (std::size_t a = 0; a < n; ++a) out->axis_values[a] = axes[a].tensor == -1 ? -1 : axes[a].value;
}

// The bytes [data + byte_offset, data + byte_offset + extent) must be addresses:
// a byte_offset (or extent) that wraps past the end of the address space would
// make kb read or write below data. Checked before any pointer arithmetic.
kb_status check_extent(const Call& c, std::size_t k, const DLTensor& x, std::int64_t extent) {
  const auto base = reinterpret_cast<std::uintptr_t>(x.data);
  std::uintptr_t first = 0, end = 0;
  if (x.byte_offset > std::numeric_limits<std::uintptr_t>::max() ||
      __builtin_add_overflow(base, static_cast<std::uintptr_t>(x.byte_offset), &first) ||
      __builtin_add_overflow(first, static_cast<std::uintptr_t>(extent), &end))
    return invalid(c, fmt::format("{}: byte_offset {} plus its extent of {} bytes overflows the address space "
                                  "past data",
                                  c.label(k), x.byte_offset, extent));
  return KB_OK;
}

kb_status check(const Call& c, kb_check_result* out) {
  const kb::Definition& d = c.h.def;
  if (out) {
    out->axis_count = d.axes.size();
    out->constraints_held = 0;
    out->constraints_unchecked = 0;
  }
  if (c.n_inputs != d.inputs.size())
    return invalid(c, fmt::format("expected {} inputs ({}), got {}", d.inputs.size(), names_of(d.inputs),
                                  c.n_inputs));
  if (c.n_outputs != d.outputs.size())
    return invalid(c, fmt::format("expected {} outputs ({}), got {}", d.outputs.size(), names_of(d.outputs),
                                  c.n_outputs));

  SmallBuf<Binding, 32> axes(d.axes.size());
  for (std::size_t a = 0; a < d.axes.size(); ++a) {
    axes[a] = Binding{};
    if (d.axes[a].kind == kb::AxisKind::const_) axes[a] = Binding{d.axes[a].value, -2, 0};
  }

  std::optional<std::size_t> first_cpu, first_cuda;
  for (std::size_t k = 0; k < c.count(); ++k) {
    const kb::TensorSpec& spec = c.spec(k);
    const DLTensor* x = c.tensor(k);
    if (x && !is_dlpack_device_type(kb::capi::device_type_of(*x)))
      return invalid(c, fmt::format("{}: device.device_type is {}, not a DLPack device type", c.label(k),
                                    kb::capi::device_type_of(*x)));

    if (spec.is_scalar()) {
      if (!x) continue;  // value unknown
      if (x->ndim != 0)
        return invalid(c, fmt::format("{} is a scalar: pass NULL or a 0-D tensor, not a tensor of rank {}",
                                      c.label(k), x->ndim));
      if (!host_readable(*x))
        return invalid(c, fmt::format("{} is a scalar: its 0-D tensor must be in host memory (kDLCPU or "
                                      "kDLCUDAHost), not on {}",
                                      c.label(k), device_text(*x)));
      if (!scalar_dtype_ok(spec.dtype, x->dtype))
        return invalid(c, fmt::format("{}: dtype is {} but the definition says {}", c.label(k),
                                      dlpack_type_text(x->dtype), kb::dtype_name(spec.dtype)));
      if (!x->data) return invalid(c, fmt::format("{}: data is NULL", c.label(k)));
      if (kb_status s = check_extent(c, k, *x, (std::int64_t{x->dtype.bits} * x->dtype.lanes + 7) / 8); s != KB_OK)
        return s;
      continue;
    }

    if (!x) {
      if (spec.optional) continue;  // passed as None: binds nothing
      return invalid(c, fmt::format("{} is NULL (only optional tensors and Python scalars may be NULL)",
                                    c.label(k)));
    }

    // dtype
    if (!dtype_matches(spec.dtype, x->dtype))
      return invalid(c, fmt::format("{}: dtype is {} but the definition says {}", c.label(k),
                                    dlpack_type_text(x->dtype), kb::dtype_name(spec.dtype)));

    // rank
    const auto& shape_names = *spec.shape;
    if (x->ndim < 0) return invalid(c, fmt::format("{}: ndim is {}", c.label(k), x->ndim));
    if (static_cast<std::size_t>(x->ndim) > kb::limits::max_tensor_rank)
      return fail(KB_ERROR_LIMIT, fmt::format("{}: {}: rank {} exceeds the limit of {}", d.name, c.label(k), x->ndim,
                                              kb::limits::max_tensor_rank));
    if (static_cast<std::size_t>(x->ndim) != shape_names.size())
      return invalid(c, fmt::format("{}: rank is {} but the definition's shape [{}] has rank {}", c.label(k),
                                    x->ndim, fmt::join(shape_names, ", "), shape_names.size()));
    if (x->ndim > 0 && !x->shape) return invalid(c, fmt::format("{}: shape is NULL", c.label(k)));

    // axes: const values, then consistent var bindings
    std::int64_t elements = 1;
    const auto& dim_axis = c.h.dim_axis[k];
    for (std::int32_t dim = 0; dim < x->ndim; ++dim) {
      std::int64_t n = x->shape[dim];
      if (n < 0) return invalid(c, fmt::format("{}: dim {} is {}", c.label(k), dim, n));
      if (__builtin_mul_overflow(elements, n, &elements))
        return invalid(c, fmt::format("{}: shape {}: the product of its dims overflows int64", c.label(k),
                                      dims_text(x->shape, x->ndim)));
      if (elements > kb::limits::max_tensor_elements)
        return fail(KB_ERROR_LIMIT, fmt::format("{}: {}: shape {} has more than {} elements", d.name, c.label(k),
                                                dims_text(x->shape, x->ndim), kb::limits::max_tensor_elements));
      int a = dim_axis[static_cast<std::size_t>(dim)];
      if (a < 0)
        return fail(KB_ERROR_INVALID_DATA, fmt::format("{}: {}: axis {} is not declared", d.name, c.label(k),
                                                       shape_names[static_cast<std::size_t>(dim)]));
      const kb::Axis& axis = d.axes[static_cast<std::size_t>(a)];
      Binding& b = axes[static_cast<std::size_t>(a)];
      if (axis.kind == kb::AxisKind::const_) {
        if (n != axis.value)
          return invalid(c, fmt::format("{}: dim {} is {} but axis {} is const {}", c.label(k), dim, n, axis.name,
                                        axis.value));
      } else if (b.tensor == -1) {
        b = Binding{n, static_cast<std::int32_t>(k), dim};
      } else if (b.value != n) {
        return invalid(c, fmt::format("{}: axis {} is {} here but {} in {} dim {}", c.label(k), axis.name, n,
                                      b.value, c.label(static_cast<std::size_t>(b.tensor)), b.dim));
      }
    }

    // device
    switch (kb::capi::device_type_of(*x)) {
      case kDLCPU:
        if (first_cuda)
          return invalid(c, fmt::format("{} is on the CPU but {} is on {} (CPU and CUDA tensors cannot be mixed)",
                                        c.label(k), c.label(*first_cuda), device_text(*c.tensor(*first_cuda))));
        if (!first_cpu) first_cpu = k;
        break;
      case kDLCUDA:
        if (first_cpu)
          return invalid(c, fmt::format("{} is on {} but {} is on the CPU (CPU and CUDA tensors cannot be mixed)",
                                        c.label(k), device_text(*x), c.label(*first_cpu)));
        if (first_cuda && c.tensor(*first_cuda)->device.device_id != x->device.device_id)
          return invalid(c, fmt::format("{} is on {} but {} is on {}", c.label(k), device_text(*x),
                                        c.label(*first_cuda), device_text(*c.tensor(*first_cuda))));
        if (!first_cuda) first_cuda = k;
        break;
      case kDLCUDAHost:
        break;
      default:
        return fail(KB_ERROR_UNSUPPORTED,
                    fmt::format("{}: {} is on {}; kb supports kDLCPU, kDLCUDA and kDLCUDAHost", d.name, c.label(k),
                                device_text(*x)));
    }

    // layout: compact row-major (size-1 dims may have any stride)
    if (x->strides && elements > 0) {
      std::int64_t expected = 1;
      for (std::int32_t dim = x->ndim - 1; dim >= 0; --dim) {
        if (x->shape[dim] != 1 && x->strides[dim] != expected) {
          std::vector<std::int64_t> want(static_cast<std::size_t>(x->ndim));
          std::int64_t e = 1;
          for (std::int32_t i = x->ndim - 1; i >= 0; --i) {
            want[static_cast<std::size_t>(i)] = e;
            e *= x->shape[i];
          }
          return invalid(c, fmt::format("{}: strides {} are not compact row-major for shape {} (expected {})",
                                        c.label(k), dims_text(x->strides, x->ndim), dims_text(x->shape, x->ndim),
                                        dims_text(want.data(), x->ndim)));
        }
        expected *= x->shape[dim];
      }
    }

    if (elements > 0 && !x->data) return invalid(c, fmt::format("{}: data is NULL", c.label(k)));
    if (kb_status s = check_extent(c, k, *x, kb::dtype_storage_bytes(spec.dtype, elements)); s != KB_OK) return s;
  }

  if (out) fill_axes(c, axes, out);

  // constraints
  CallEnvironment env(c, axes);
  for (std::size_t i = 0; i < d.constraints.size(); ++i) {
    const auto& parsed = c.h.constraints[i];
    if (c.h.holds_for_every_call[i]) {  // const axes only, held at load: the same for every call
      if (out) ++out->constraints_held;
      continue;
    }
    if (!parsed || reads_device_data(c, *parsed)) {
      if (out) ++out->constraints_unchecked;
      continue;
    }
    auto outcome = kb::expr::evaluate(*parsed, env);
    switch (outcome.verdict) {
      case kb::expr::Verdict::holds:
        if (out) ++out->constraints_held;
        break;
      case kb::expr::Verdict::unchecked:
        if (out) ++out->constraints_unchecked;
        break;
      case kb::expr::Verdict::violated: {
        // The detail restates the expression first; say it once.
        std::string_view detail = outcome.detail;
        std::string prefix = d.constraints[i] + ": ";
        if (detail.substr(0, prefix.size()) == prefix) detail.remove_prefix(prefix.size());
        return invalid(c, fmt::format("constraint \"{}\" violated: {}", d.constraints[i], detail));
      }
    }
  }
  return KB_OK;
}

}  // namespace

extern "C" {

KB_API kb_status kb_dtype_to_dlpack(kb_dtype dtype, DLDataType* out) {
  KB_CAPI_REQUIRE(out);
  const std::int64_t v = kb::capi::enum_bits(dtype);
  if (v < 0 || v >= kb::dtype_count)
    return kb::capi::guarded(__func__, [&] {
      return fail(KB_ERROR_INVALID_ARGUMENT, fmt::format("kb_dtype_to_dlpack: {} is not a kb_dtype", v));
    });
  *out = expected_dlpack(static_cast<DType>(static_cast<int>(v)));
  return KB_OK;
}

KB_API kb_status kb_definition_check_tensors(const kb_definition* def, const DLTensor* const* inputs,
                                             size_t n_inputs, const DLTensor* const* outputs, size_t n_outputs,
                                             kb_check_result* out) {
  KB_CAPI_REQUIRE(def);
  if (n_inputs > 0) KB_CAPI_REQUIRE(inputs);
  if (n_outputs > 0) KB_CAPI_REQUIRE(outputs);
  if (out) KB_CAPI_REQUIRE_STRUCT(out, kb_check_result, "KB_CHECK_RESULT_INIT");
  return kb::capi::guarded(__func__, [&] { return check(Call{*def, inputs, n_inputs, outputs, n_outputs}, out); });
}

}  // extern "C"
