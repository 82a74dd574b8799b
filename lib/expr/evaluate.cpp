// Evaluation with Python semantics over int64 / double / bool. Anything that
// Python would raise on (division by zero, bad index) and anything int64
// cannot represent (overflow) stops evaluation with a reason; the verdict is
// then "unchecked".
#include <array>
#include <cmath>
#include <limits>
#include <new>

#include "expr/ast.hpp"

namespace kb::expr {
namespace detail {
namespace {

using NodeId = std::uint32_t;
constexpr std::int64_t int_min = std::numeric_limits<std::int64_t>::min();

enum class ArithStatus { ok, overflow, zero_division };

// bool takes part in arithmetic as the int 0/1, as in Python.
std::int64_t as_int(const Value& v) { return v.is_boolean() ? (v.b ? 1 : 0) : v.i; }
double as_float(const Value& v) { return v.is_floating() ? v.f : static_cast<double>(as_int(v)); }

ArithStatus int_arith(Op op, std::int64_t a, std::int64_t b, Value& out) {
  std::int64_t r = 0;
  switch (op) {
    case Op::add:
      if (__builtin_add_overflow(a, b, &r)) return ArithStatus::overflow;
      break;
    case Op::sub:
      if (__builtin_sub_overflow(a, b, &r)) return ArithStatus::overflow;
      break;
    case Op::mul:
      if (__builtin_mul_overflow(a, b, &r)) return ArithStatus::overflow;
      break;
    case Op::truediv:
      if (b == 0) return ArithStatus::zero_division;
      out = Value::floating(static_cast<double>(a) / static_cast<double>(b));
      return ArithStatus::ok;
    case Op::floordiv:
      if (b == 0) return ArithStatus::zero_division;
      if (a == int_min && b == -1) return ArithStatus::overflow;
      // C++ truncates toward zero; Python rounds toward negative infinity.
      r = a / b;
      if (a % b != 0 && ((a < 0) != (b < 0))) --r;
      break;
    case Op::mod:
      if (b == 0) return ArithStatus::zero_division;
      if (b == -1) {  // int_min % -1 is undefined in C++; the answer is 0
        r = 0;
        break;
      }
      // Python's remainder takes the sign of the divisor.
      r = a % b;
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      break;
    default: return ArithStatus::overflow;  // not arithmetic; unreachable
  }
  out = Value::integer(r);
  return ArithStatus::ok;
}

ArithStatus float_arith(Op op, double a, double b, Value& out) {
  switch (op) {
    case Op::add: out = Value::floating(a + b); return ArithStatus::ok;
    case Op::sub: out = Value::floating(a - b); return ArithStatus::ok;
    case Op::mul: out = Value::floating(a * b); return ArithStatus::ok;
    case Op::truediv:
      if (b == 0.0) return ArithStatus::zero_division;
      out = Value::floating(a / b);
      return ArithStatus::ok;
    case Op::floordiv:
    case Op::mod: {
      if (b == 0.0) return ArithStatus::zero_division;
      // Python's float divmod: start from fmod (exact), move the remainder
      // to the divisor's sign, and derive the quotient from it so that
      // a == b * q + r holds as closely as floating point allows.
      double mod = std::fmod(a, b);
      double div = (a - mod) / b;
      if (mod != 0.0) {
        if ((b < 0) != (mod < 0)) {
          mod += b;
          div -= 1.0;
        }
      } else {
        mod = std::copysign(0.0, b);
      }
      if (op == Op::mod) {
        out = Value::floating(mod);
        return ArithStatus::ok;
      }
      double q;
      if (div != 0.0) {
        q = std::floor(div);
        if (div - q > 0.5) q += 1.0;  // div is near an integer; round to it
      } else {
        q = std::copysign(0.0, a / b);
      }
      out = Value::floating(q);
      return ArithStatus::ok;
    }
    default: return ArithStatus::overflow;  // unreachable
  }
}

ArithStatus arith(Op op, const Value& a, const Value& b, Value& out) {
  if (a.is_floating() || b.is_floating()) return float_arith(op, as_float(a), as_float(b), out);
  return int_arith(op, as_int(a), as_int(b), out);
}

// Three-way comparison of an int with a double, exact like Python's (no
// rounding of the int to double). f must not be NaN.
int compare_int_float(std::int64_t i, double f) {
  constexpr double two63 = 9223372036854775808.0;
  if (f >= two63) return -1;
  if (f < -two63) return 1;
  const double fl = std::floor(f);
  const auto fi = static_cast<std::int64_t>(fl);  // in range: -2^63 <= fl < 2^63
  if (i < fi) return -1;
  if (i > fi) return 1;
  return f > fl ? -1 : 0;
}

bool compare(Op op, const Value& a, const Value& b) {
  int c = 0;
  if (!a.is_floating() && !b.is_floating()) {
    const std::int64_t x = as_int(a), y = as_int(b);
    c = x < y ? -1 : x > y ? 1 : 0;
  } else if (a.is_floating() && b.is_floating()) {
    if (std::isnan(a.f) || std::isnan(b.f)) return op == Op::ne;  // unordered
    c = a.f < b.f ? -1 : a.f > b.f ? 1 : 0;
  } else if (a.is_floating()) {
    if (std::isnan(a.f)) return op == Op::ne;
    c = -compare_int_float(as_int(b), a.f);
  } else {
    if (std::isnan(b.f)) return op == Op::ne;
    c = compare_int_float(as_int(a), b.f);
  }
  switch (op) {
    case Op::eq: return c == 0;
    case Op::ne: return c != 0;
    case Op::lt: return c < 0;
    case Op::le: return c <= 0;
    case Op::gt: return c > 0;
    case Op::ge: return c >= 0;
    default: return false;
  }
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d > 0) s += ", ";
    s += std::to_string(shape[d]);
  }
  return s + "]";
}

class Evaluator {
 public:
  Evaluator(const Tree& t, const Environment& env) : t_(t), env_(env) {}

  // `report`: this node's falsity is what makes the whole expression false
  // (the root, and operands of and/or reached from it), so a failing
  // comparison here is worth showing to the user.
  Result<Value> eval(NodeId id, bool report) {
    const Node& n = t_.nodes[id];
    switch (n.kind) {
      case NodeKind::literal: return n.value;
      case NodeKind::name: {
        std::optional<Value> v = env_.scalar(n.name);
        if (!v) return fail(n.name + " is not available");
        bind(n.name, *v);
        return *v;
      }
      case NodeKind::negate: {
        auto v = eval(n.children[0], false);
        if (!v.ok()) return v;
        if (v->is_floating()) return Value::floating(-v->f);
        const std::int64_t x = as_int(*v);
        if (x == int_min) return fail(std::string(t_.span(n)) + ": integer overflow (-(" + v->to_string() + "))");
        return Value::integer(-x);
      }
      case NodeKind::plus: {
        auto v = eval(n.children[0], false);
        if (!v.ok()) return v;
        if (v->is_boolean()) return Value::integer(as_int(*v));
        return v;
      }
      case NodeKind::logical_not: {
        auto v = eval(n.children[0], false);
        if (!v.ok()) return v;
        return Value::boolean(!v->truthy());
      }
      case NodeKind::logical_and:
      case NodeKind::logical_or: {
        // Python returns the deciding operand itself, not a bool.
        const bool is_and = n.kind == NodeKind::logical_and;
        Result<Value> v = Value::boolean(is_and);
        for (NodeId c : n.children) {
          // The last operand evaluated decides, so only its failure counts.
          if (report) failed_.clear();
          v = eval(c, report);
          if (!v.ok() || v->truthy() != is_and) return v;
        }
        return v;
      }
      case NodeKind::arith: return eval_arith(n);
      case NodeKind::compare: return eval_compare(n, report);
      case NodeKind::shape_dim: {
        auto shape = tensor_shape(n.name);
        if (!shape.ok()) return shape.error();
        auto index = eval_index(n.children[0], "shape index");
        if (!index.ok()) return index.error();
        const auto rank = static_cast<std::int64_t>(shape->size());
        std::int64_t d = *index;
        if (d < 0) d += rank;
        if (d < 0 || d >= rank) {
          return fail(std::string(t_.span(n)) + ": index " + std::to_string(*index) +
                      " is out of range for shape " + shape_text(*shape));
        }
        const Value v = Value::integer((*shape)[static_cast<std::size_t>(d)]);
        bind(t_.span(n), v);
        return v;
      }
      case NodeKind::length: {
        auto shape = tensor_shape(n.name);
        if (!shape.ok()) return shape.error();
        if (shape->empty()) return fail(std::string(t_.span(n)) + ": len() of a 0-d tensor");
        const Value v = Value::integer(shape->front());
        bind(t_.span(n), v);
        return v;
      }
      case NodeKind::element: return eval_element(n);
    }
    return fail("internal error: unknown expression node");
  }

  // Values read from the Environment, for the "violated" detail.
  std::string bindings_text() const {
    if (bound_ == 0) return {};
    std::string s = " (";
    for (std::size_t k = 0; k < bound_; ++k) {
      if (k > 0) s += ", ";
      s += std::string(bindings_[k].first) + " = " + bindings_[k].second.to_string();
    }
    if (bindings_dropped_) s += ", ...";
    return s + ")";
  }

  // The comparison that came out false, when there is one worth showing.
  const std::string& failed_comparison() const { return failed_; }

 private:
  static Error fail(std::string message) { return make_error(Code::invalid_data, std::move(message)); }

  // Kept as views into the expression's text and values, formatted only for a
  // "violated" detail: an evaluation that holds allocates nothing for them
  // (kb_definition_check_tensors runs on engines' hot path).
  void bind(std::string_view what, const Value& v) {
    for (std::size_t k = 0; k < bound_; ++k) {
      if (bindings_[k].first == what) return;
    }
    if (bound_ >= bindings_.size()) {  // keep the detail readable
      bindings_dropped_ = true;
      return;
    }
    bindings_[bound_++] = {what, v};
  }

  Result<std::vector<std::int64_t>> tensor_shape(const std::string& name) {
    auto shape = env_.shape(name);
    if (!shape) return fail("tensor " + name + " is not available");
    return std::move(*shape);
  }

  Result<std::int64_t> eval_index(NodeId id, const char* what) {
    auto v = eval(id, false);
    if (!v.ok()) return std::move(v).error();
    if (v->is_floating()) {
      return fail(std::string(t_.span(t_.nodes[id])) + ": " + what + " must be an integer, not float (" +
                  v->to_string() + ")");
    }
    return as_int(*v);
  }

  Result<Value> eval_arith(const Node& n) {
    auto acc = eval(n.children[0], false);
    if (!acc.ok()) return acc;
    for (std::size_t k = 0; k < n.ops.size(); ++k) {
      auto rhs = eval(n.children[k + 1], false);
      if (!rhs.ok()) return rhs;
      Value out;
      const ArithStatus s = arith(n.ops[k], *acc, *rhs, out);
      if (s != ArithStatus::ok) {
        // Name the part of the text evaluated so far (chains are left-assoc).
        const Node& first = t_.nodes[n.children[0]];
        const Node& last = t_.nodes[n.children[k + 1]];
        std::string where(std::string_view(t_.text).substr(first.outer_begin, last.outer_end - first.outer_begin));
        return fail(where + (s == ArithStatus::overflow ? ": integer overflow (" : ": division by zero (") +
                    acc->to_string() + " " + std::string(op_text(n.ops[k])) + " " + rhs->to_string() + ")");
      }
      acc = out;
    }
    return acc;
  }

  Result<Value> eval_compare(const Node& n, bool report) {
    auto lhs = eval(n.children[0], false);
    if (!lhs.ok()) return lhs;
    for (std::size_t k = 0; k < n.ops.size(); ++k) {
      auto rhs = eval(n.children[k + 1], false);
      if (!rhs.ok()) return rhs;
      if (!compare(n.ops[k], *lhs, *rhs)) {
        // Python stops a chain at the first false link.
        if (report) {
          failed_ = std::string(t_.span(n)) + ": " + lhs->to_string() + " " + std::string(op_text(n.ops[k])) +
                    " " + rhs->to_string() + " is false";
        }
        return Value::boolean(false);
      }
      lhs = std::move(rhs);
    }
    return Value::boolean(true);
  }

  Result<Value> eval_element(const Node& n) {
    auto shape = tensor_shape(n.name);
    if (!shape.ok()) return shape.error();
    const std::string_view where_text = t_.span(n);
    const auto where = [&] { return std::string(where_text); };
    if (n.children.size() > shape->size()) {
      return fail(where() + ": too many indices for tensor " + n.name + " of shape " + shape_text(*shape));
    }
    if (n.children.size() < shape->size()) {
      return fail(where() + ": " + n.name + " has shape " + shape_text(*shape) + "; index all " +
                  std::to_string(shape->size()) + " dimensions to get a number");
    }
    std::vector<std::int64_t> index;
    index.reserve(n.children.size());
    for (std::size_t d = 0; d < n.children.size(); ++d) {
      auto i = eval_index(n.children[d], "index");
      if (!i.ok()) return i.error();
      const std::int64_t extent = (*shape)[d];
      std::int64_t j = *i;
      if (j < 0) j += extent;  // no overflow: j < 0 and extent >= 0 (or else out of range anyway)
      if (j < 0 || j >= extent) {
        return fail(where() + ": index " + std::to_string(*i) + " is out of range for dimension " + std::to_string(d) +
                    " of shape " + shape_text(*shape));
      }
      index.push_back(j);
    }
    auto e = env_.element(n.name, index);
    if (!e) return fail("contents of tensor " + n.name + " are not available");
    const Value v = Value::integer(*e);
    bind(where_text, v);
    return v;
  }

  const Tree& t_;
  const Environment& env_;
  std::array<std::pair<std::string_view, Value>, 8> bindings_{};
  std::size_t bound_ = 0;
  bool bindings_dropped_ = false;
  std::string failed_;
};

}  // namespace
}  // namespace detail

namespace {

Outcome evaluate_impl(const Expression& expression, const Environment& env) {
  const detail::Tree* tree = expression.tree();
  if (tree == nullptr) return Outcome{Verdict::unchecked, "empty expression", std::nullopt};
  detail::Evaluator ev(*tree, env);
  auto v = ev.eval(tree->root, true);
  if (!v.ok()) return Outcome{Verdict::unchecked, v.error().message, std::nullopt};
  if (v->truthy()) return Outcome{Verdict::holds, {}, *v};
  std::string detail = ev.failed_comparison();
  if (detail.empty()) detail = tree->text + ": evaluated to " + v->to_string();
  detail += ev.bindings_text();
  return Outcome{Verdict::violated, std::move(detail), *v};
}

}  // namespace

Outcome evaluate(const Expression& expression, const Environment& env) noexcept {
  // Building the message can itself fail when memory is short; then the
  // detail stays empty rather than letting anything escape.
  try {
    return evaluate_impl(expression, env);
  } catch (const std::bad_alloc&) {
    try {
      return Outcome{Verdict::unchecked, "out of memory", std::nullopt};
    } catch (...) {
    }
  } catch (...) {
    try {
      return Outcome{Verdict::unchecked, "the Environment threw an exception", std::nullopt};
    } catch (...) {
    }
  }
  return Outcome{};
}

}  // namespace kb::expr
