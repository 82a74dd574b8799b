// Argument access, type promotion and broadcasting for the ATen operators.
#include "args.hpp"

#include <fmt/format.h>

namespace kb::backendbench::aten {

void fail(const std::string& message) { throw OpError(message); }

namespace {

std::string arg_name(std::size_t pos, std::string_view name) { return fmt::format("argument {} ({})", pos, name); }

const CallArg& need(const Call& c, std::size_t pos, std::string_view name) {
  const CallArg* a = c.find(pos, name);
  if (!a) fail(fmt::format("{} is missing", arg_name(pos, name)));
  return *a;
}

bool is_none(const CallArg* a) { return !a || a->value->kind == Kind::none; }

}  // namespace

const HostTensor& tensor_arg(const Call& c, std::size_t pos, std::string_view name) {
  const CallArg& a = need(c, pos, name);
  if (!a.tensor) fail(fmt::format("{} must be a tensor, got {}", arg_name(pos, name), kind_name(a.value->kind)));
  return *a.tensor;
}

HostTensor& tensor_arg_mut(Call& c, std::size_t pos, std::string_view name) {
  return const_cast<HostTensor&>(tensor_arg(c, pos, name));
}

const HostTensor* optional_tensor(const Call& c, std::size_t pos, std::string_view name) {
  const CallArg* a = c.find(pos, name);
  if (is_none(a)) return nullptr;
  if (!a->tensor) fail(fmt::format("{} must be a tensor or None", arg_name(pos, name)));
  return &*a->tensor;
}

const std::vector<HostTensor>& tensor_list(const Call& c, std::size_t pos, std::string_view name) {
  const CallArg& a = need(c, pos, name);
  if (a.value->kind != Kind::list && a.value->kind != Kind::tuple)
    fail(fmt::format("{} must be a list of tensors", arg_name(pos, name)));
  if (a.tensors.size() != a.value->children.size())
    fail(fmt::format("{} must hold only tensors", arg_name(pos, name)));
  return a.tensors;
}

bool has_arg(const Call& c, std::size_t pos, std::string_view name) { return !is_none(c.find(pos, name)); }

std::int64_t int_arg(const Call& c, std::size_t pos, std::string_view name, std::optional<std::int64_t> dflt) {
  const CallArg* a = c.find(pos, name);
  if (is_none(a)) {
    if (dflt) return *dflt;
    fail(fmt::format("{} is missing", arg_name(pos, name)));
  }
  if (a->value->kind == Kind::boolean) return a->value->text == "True" ? 1 : 0;
  if (a->value->kind != Kind::integer || !a->value->int_value)
    fail(fmt::format("{} must be an int, got {}", arg_name(pos, name), a->value->text));
  return *a->value->int_value;
}

double number_arg(const Call& c, std::size_t pos, std::string_view name, std::optional<double> dflt) {
  return scalar_arg(c, pos, name, dflt).value;
}

bool bool_arg(const Call& c, std::size_t pos, std::string_view name, std::optional<bool> dflt) {
  const CallArg* a = c.find(pos, name);
  if (is_none(a)) {
    if (dflt) return *dflt;
    fail(fmt::format("{} is missing", arg_name(pos, name)));
  }
  if (a->value->kind == Kind::boolean) return a->value->text == "True";
  if (a->value->kind == Kind::integer && a->value->int_value) return *a->value->int_value != 0;
  fail(fmt::format("{} must be a bool, got {}", arg_name(pos, name), a->value->text));
}

std::vector<const HostTensor*> optional_tensor_list(const Call& c, std::size_t pos, std::string_view name) {
  const CallArg* a = c.find(pos, name);
  if (!a) fail(fmt::format("argument {} ({}) is missing", pos, name));
  if (a->value->kind != Kind::list && a->value->kind != Kind::tuple)
    fail(fmt::format("argument {} ({}) must be a list of tensors and Nones", pos, name));
  std::vector<const HostTensor*> out;
  std::size_t k = 0;
  for (const Value& v : a->value->children) {
    if (v.kind == Kind::tensor) out.push_back(&a->tensors[k++]);
    else if (v.kind == Kind::none) out.push_back(nullptr);
    else fail(fmt::format("argument {} ({}) must hold only tensors and Nones", pos, name));
  }
  return out;
}

std::optional<std::vector<std::int64_t>> int_list_arg(const Call& c, std::size_t pos, std::string_view name) {
  const CallArg* a = c.find(pos, name);
  if (is_none(a)) return std::nullopt;
  const Value& v = *a->value;
  if (v.kind == Kind::integer && v.int_value) return std::vector<std::int64_t>{*v.int_value};
  if (v.kind != Kind::list && v.kind != Kind::tuple) fail(fmt::format("{} must be a list of ints", arg_name(pos, name)));
  std::vector<std::int64_t> out;
  for (const Value& e : v.children) {
    if (e.kind != Kind::integer || !e.int_value) fail(fmt::format("{} must be a list of ints", arg_name(pos, name)));
    out.push_back(*e.int_value);
  }
  return out;
}

std::optional<Dtype> dtype_arg(const Call& c, std::size_t pos, std::string_view name) {
  const CallArg* a = c.find(pos, name);
  if (is_none(a)) return std::nullopt;
  if (a->value->kind == Kind::dtype) return a->value->dtype;
  if (a->value->kind == Kind::string)
    if (auto d = dtype_from_name(a->value->str_value)) return d;
  fail(fmt::format("{} must be a dtype, got {}", arg_name(pos, name), a->value->text));
}

std::string string_arg(const Call& c, std::size_t pos, std::string_view name, std::string dflt) {
  const CallArg* a = c.find(pos, name);
  if (is_none(a)) return dflt;
  if (a->value->kind != Kind::string) fail(fmt::format("{} must be a string", arg_name(pos, name)));
  return a->value->str_value;
}

bool is_scalar_arg(const Call& c, std::size_t pos, std::string_view name) {
  const CallArg* a = c.find(pos, name);
  if (!a) return false;
  Kind k = a->value->kind;
  return k == Kind::integer || k == Kind::floating || k == Kind::boolean;
}

Scalar scalar_arg(const Call& c, std::size_t pos, std::string_view name, std::optional<double> dflt) {
  const CallArg* a = c.find(pos, name);
  if (is_none(a)) {
    if (dflt) return Scalar{*dflt, Dtype::f32};
    fail(fmt::format("{} is missing", arg_name(pos, name)));
  }
  const Value& v = *a->value;
  switch (v.kind) {
    case Kind::integer:
      if (!v.int_value) fail(fmt::format("{}: integer {} does not fit int64", arg_name(pos, name), v.text));
      return Scalar{static_cast<double>(*v.int_value), Dtype::i64};
    case Kind::floating: return Scalar{v.float_value, Dtype::f32};
    case Kind::boolean: return Scalar{v.text == "True" ? 1.0 : 0.0, Dtype::b8};
    default: break;
  }
  fail(fmt::format("{} must be a number, got {}", arg_name(pos, name), v.text));
}

void apply_output_mask(const Call& c, std::size_t pos, std::vector<HostTensor>& outs) {
  const CallArg* mask = c.find(pos, "output_mask");
  if (!mask || mask->value->kind != Kind::list || mask->value->children.size() != outs.size())
    fail(fmt::format("output_mask must be a list of {} bools", outs.size()));
  for (std::size_t k = 0; k < outs.size(); ++k) {
    const Value& m = mask->value->children[k];
    if (m.kind != Kind::boolean) fail("output_mask must hold bools");
    if (m.text == "False") {
      outs[k] = HostTensor{};
      outs[k].undefined = true;
    }
  }
}

void require_real(const HostTensor& t, std::string_view what) {
  if (is_complex(t.dtype)) fail(fmt::format("{}: complex dtype {} is not supported", what, dtype_abbrev(t.dtype)));
}

Operand operand(const HostTensor& t) {
  return Operand{t.dtype, t.rank() == 0 ? Operand::zero_dim : Operand::dimensioned};
}

namespace {
struct Maybe {
  bool set = false;
  Dtype d = Dtype::b8;
};
Maybe promote_maybe(Maybe a, Dtype b) {
  if (!a.set) return {true, b};
  return {true, promote_types(a.d, b)};
}
Dtype to_complex(Dtype d) {
  return d == Dtype::f16 ? Dtype::c32 : d == Dtype::f64 ? Dtype::c128 : Dtype::c64;
}
Maybe combine(Maybe higher, Maybe lower) {
  if (!higher.set) return lower;
  if (!lower.set) return higher;
  if (is_complex(higher.d)) return higher;
  if (is_complex(lower.d)) return is_floating(higher.d) ? Maybe{true, to_complex(higher.d)} : lower;
  if (is_floating(higher.d)) return higher;
  if (higher.d == Dtype::b8 || is_floating(lower.d)) return {true, promote_types(higher.d, lower.d)};
  return higher;
}
}  // namespace

Dtype result_type(const std::vector<Operand>& ops) {
  Maybe dim, zero, wrapped;
  for (const Operand& o : ops) {
    if (o.kind == Operand::dimensioned) dim = promote_maybe(dim, o.dtype);
    else if (o.kind == Operand::zero_dim) zero = promote_maybe(zero, o.dtype);
    else wrapped = promote_maybe(wrapped, o.dtype);
  }
  Maybe r = combine(dim, combine(zero, wrapped));
  return r.set ? r.d : Dtype::f32;
}

Dtype default_float_if_integral(Dtype d) { return is_floating(d) || is_complex(d) ? d : Dtype::f32; }

std::int64_t wrap_dim(std::int64_t dim, std::size_t rank) {
  const std::int64_t r = std::max<std::int64_t>(static_cast<std::int64_t>(rank), 1);
  if (dim < -r || dim >= r) fail(fmt::format("dim {} out of range for a tensor of rank {}", dim, rank));
  return dim < 0 ? dim + r : dim;
}

std::vector<std::int64_t> broadcast_shapes(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
  std::size_t n = std::max(a.size(), b.size());
  std::vector<std::int64_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    std::int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1)
      fail(fmt::format("shapes {} and {} do not broadcast (dim {}: {} vs {})", shape_text(a), shape_text(b), i, x, y));
    out[i] = x == 1 ? y : x;
  }
  return out;
}

std::vector<std::int64_t> broadcast_strides(const HostTensor& t, const std::vector<std::int64_t>& shape) {
  if (t.rank() > shape.size()) fail(fmt::format("cannot broadcast {} to {}", shape_text(t.shape), shape_text(shape)));
  std::vector<std::int64_t> s(shape.size(), 0);
  std::size_t lead = shape.size() - t.rank();
  for (std::size_t i = 0; i < t.rank(); ++i) {
    if (t.shape[i] == shape[lead + i]) s[lead + i] = t.strides[i];
    else if (t.shape[i] == 1) s[lead + i] = 0;
    else fail(fmt::format("cannot broadcast {} to {}", shape_text(t.shape), shape_text(shape)));
  }
  return s;
}

HostTensor view_as_broadcast(const HostTensor& t, const std::vector<std::int64_t>& shape) {
  HostTensor v = t;
  v.strides = broadcast_strides(t, shape);
  v.shape = shape;
  return v;
}

}  // namespace kb::backendbench::aten
