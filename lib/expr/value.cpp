// Value helpers, MapEnvironment and small name tables.
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "expr/ast.hpp"
#include "expr/expr.hpp"

namespace kb::expr {
namespace {

// Python's float repr: shortest round-trip digits, fixed notation when the
// decimal point falls within [-4, 16), otherwise "1e-05" / "1.5e+16".
std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  if (ec != std::errc()) return "?";
  std::string_view s(buf, static_cast<std::size_t>(end - buf));  // "-1.2345e+05"
  std::string out;
  if (!s.empty() && s[0] == '-') {
    out += '-';
    s.remove_prefix(1);
  }
  const std::size_t epos = s.find('e');
  std::string digits;
  for (char c : s.substr(0, epos)) {
    if (c != '.') digits += c;
  }
  int exp10 = 0;
  std::from_chars(s.data() + epos + 1 + (s[epos + 1] == '+' ? 1 : 0), s.data() + s.size(), exp10);
  const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  const int n = static_cast<int>(digits.size());
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(static_cast<std::size_t>(-decpt), '0') + digits;
    } else if (decpt >= n) {
      out += digits + std::string(static_cast<std::size_t>(decpt - n), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<std::size_t>(decpt)) + "." + digits.substr(static_cast<std::size_t>(decpt));
    }
    return out;
  }
  out += digits[0];
  if (n > 1) out += "." + digits.substr(1);
  out += exp10 < 0 ? "e-" : "e+";
  const std::string e = std::to_string(std::abs(exp10));
  if (e.size() < 2) out += '0';
  out += e;
  return out;
}

}  // namespace

bool Value::truthy() const noexcept {
  switch (kind) {
    case Kind::integer: return i != 0;
    case Kind::floating: return f != 0.0;  // NaN is true, as in Python
    case Kind::boolean: return b;
  }
  return false;
}

std::string Value::to_string() const {
  switch (kind) {
    case Kind::integer: return std::to_string(i);
    case Kind::floating: return float_repr(f);
    case Kind::boolean: return b ? "True" : "False";
  }
  return "?";
}

bool operator==(const Value& a, const Value& b) noexcept {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::integer: return a.i == b.i;
    case Value::Kind::floating:
      return (std::isnan(a.f) && std::isnan(b.f)) ||
             (a.f == b.f && std::signbit(a.f) == std::signbit(b.f));
    case Value::Kind::boolean: return a.b == b.b;
  }
  return false;
}

const char* verdict_name(Verdict v) noexcept {
  switch (v) {
    case Verdict::holds: return "holds";
    case Verdict::violated: return "violated";
    case Verdict::unchecked: return "unchecked";
  }
  return "unknown";
}

void MapEnvironment::set_scalar(std::string name, Value v) { scalars_[std::move(name)] = v; }

void MapEnvironment::set_tensor(std::string name, std::vector<std::int64_t> shape,
                                std::optional<std::vector<std::int64_t>> data) {
  tensors_[std::move(name)] = Tensor{std::move(shape), std::move(data)};
}

std::optional<Value> MapEnvironment::scalar(std::string_view name) const {
  auto it = scalars_.find(name);
  if (it == scalars_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::vector<std::int64_t>> MapEnvironment::shape(std::string_view tensor) const {
  auto it = tensors_.find(tensor);
  if (it == tensors_.end()) return std::nullopt;
  return it->second.shape;
}

std::optional<std::int64_t> MapEnvironment::element(std::string_view tensor,
                                                    std::span<const std::int64_t> index) const {
  auto it = tensors_.find(tensor);
  if (it == tensors_.end() || !it->second.data) return std::nullopt;
  const auto& shape = it->second.shape;
  const auto& data = *it->second.data;
  if (index.size() != shape.size()) return std::nullopt;
  // Row-major offset; any inconsistency between shape and data means "not available".
  std::uint64_t offset = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (index[d] < 0 || index[d] >= shape[d]) return std::nullopt;
    std::uint64_t next = 0;
    if (__builtin_mul_overflow(offset, static_cast<std::uint64_t>(shape[d]), &next) ||
        __builtin_add_overflow(next, static_cast<std::uint64_t>(index[d]), &next)) {
      return std::nullopt;
    }
    offset = next;
  }
  if (offset >= data.size()) return std::nullopt;
  return data[offset];
}

namespace detail {

std::string_view op_text(Op op) noexcept {
  switch (op) {
    case Op::add: return "+";
    case Op::sub: return "-";
    case Op::mul: return "*";
    case Op::truediv: return "/";
    case Op::floordiv: return "//";
    case Op::mod: return "%";
    case Op::eq: return "==";
    case Op::ne: return "!=";
    case Op::lt: return "<";
    case Op::le: return "<=";
    case Op::gt: return ">";
    case Op::ge: return ">=";
  }
  return "?";
}

}  // namespace detail
}  // namespace kb::expr
