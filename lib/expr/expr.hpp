// Constraint expressions of FlashInfer-Bench definitions: a small subset of
// Python over axis names and tensor names, e.g.
//   len_indptr == batch_size + 1
//   num_kv_indices == kv_indptr[-1].item()
//   sparse_indices.shape[-1] == topk
// parse() turns the text into an Expression; evaluate() asks an Environment
// for the values it needs and says whether the constraint holds. Semantics
// follow Python (floor division, sign of %, chained comparisons, truthiness);
// int64 overflow, division by zero and bad indices make the result
// "unchecked", never a crash and never a silent pass. Nothing here throws
// across the API or prints.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace kb::expr {

// A Python scalar: int (int64 here), float or bool.
struct Value {
  enum class Kind : std::uint8_t { integer, floating, boolean };
  Kind kind = Kind::integer;
  std::int64_t i = 0;
  double f = 0.0;
  bool b = false;

  static Value integer(std::int64_t v) noexcept { return Value{Kind::integer, v, 0.0, false}; }
  static Value floating(double v) noexcept { return Value{Kind::floating, 0, v, false}; }
  static Value boolean(bool v) noexcept { return Value{Kind::boolean, 0, 0.0, v}; }

  bool is_integer() const noexcept { return kind == Kind::integer; }
  bool is_floating() const noexcept { return kind == Kind::floating; }
  bool is_boolean() const noexcept { return kind == Kind::boolean; }
  // Python bool(): nonzero numbers (and NaN) are true.
  bool truthy() const noexcept;
  // Python repr(): "5", "3.5", "1e-05", "2.0", "True".
  std::string to_string() const;
  // Same kind and same payload (for tests); NaN equals NaN here.
  friend bool operator==(const Value& a, const Value& b) noexcept;
};

// What the evaluator may ask about the world. Each query returns
// std::nullopt when the thing is unknown or not available (yet).
class Environment {
 public:
  virtual ~Environment() = default;
  // Axis values and scalar inputs.
  virtual std::optional<Value> scalar(std::string_view name) const = 0;
  // Shape of a tensor input (or output).
  virtual std::optional<std::vector<std::int64_t>> shape(std::string_view tensor) const = 0;
  // One element of an integer or bool tensor (bool as 0/1). The index has
  // one entry per dimension, each already normalized into [0, shape[d]).
  virtual std::optional<std::int64_t> element(std::string_view tensor,
                                              std::span<const std::int64_t> index) const = 0;
};

// An Environment backed by maps; handy for tests, tools and axis-only checks.
class MapEnvironment final : public Environment {
 public:
  void set_scalar(std::string name, Value v);
  // data, when given, is row-major with exactly product(shape) elements;
  // without it only the shape is known.
  void set_tensor(std::string name, std::vector<std::int64_t> shape,
                  std::optional<std::vector<std::int64_t>> data = std::nullopt);

  std::optional<Value> scalar(std::string_view name) const override;
  std::optional<std::vector<std::int64_t>> shape(std::string_view tensor) const override;
  std::optional<std::int64_t> element(std::string_view tensor,
                                      std::span<const std::int64_t> index) const override;

 private:
  struct Tensor {
    std::vector<std::int64_t> shape;
    std::optional<std::vector<std::int64_t>> data;
  };
  std::map<std::string, Value, std::less<>> scalars_;
  std::map<std::string, Tensor, std::less<>> tensors_;
};

namespace detail {
struct Tree;  // parsed nodes; defined in expr/ast.hpp
}

// A parsed expression. Immutable; copies share the parsed tree.
class Expression {
 public:
  // An empty expression; evaluates to unchecked ("empty expression").
  Expression() = default;

  // The original text, unchanged.
  const std::string& text() const noexcept;
  // Names used as plain values (axes, scalar inputs), first use first, no repeats.
  const std::vector<std::string>& scalar_names() const noexcept;
  // Names used as tensors (x.shape[i], x[i], len(x)), first use first, no repeats.
  const std::vector<std::string>& tensor_names() const noexcept;
  // True if evaluation may ask the Environment about any tensor.
  bool needs_tensors() const noexcept { return !tensor_names().empty(); }
  // True if evaluation may read tensor contents (x[i]), not just shapes.
  bool needs_tensor_data() const noexcept;
  // The tensors whose contents it may read (a subset of tensor_names()).
  const std::vector<std::string>& data_tensor_names() const noexcept;
  // Fully parenthesized form showing how the text was grouped, e.g.
  // "not a == b" -> "(not (a == b))". For diagnostics and tests.
  std::string structure() const;

  const detail::Tree* tree() const noexcept { return tree_.get(); }

 private:
  friend Result<Expression> parse(std::string_view text);
  explicit Expression(std::shared_ptr<const detail::Tree> tree) : tree_(std::move(tree)) {}
  std::shared_ptr<const detail::Tree> tree_;
};

// Parse one expression. Errors:
//   Code::parse_error     "column 14: expected ')' but found end of expression"
//                         (columns are 1-based byte offsets into text)
//   Code::limit_exceeded  text longer than limits::max_expression_chars, or
//                         nesting deeper than limits::max_expression_depth
//   Code::out_of_memory
Result<Expression> parse(std::string_view text);

enum class Verdict : std::uint8_t { holds, violated, unchecked };
const char* verdict_name(Verdict v) noexcept;  // "holds", "violated", "unchecked"

struct Outcome {
  Verdict verdict = Verdict::unchecked;
  // holds: empty. violated: the failing comparison with its values and the
  // values read from the Environment, e.g.
  //   "len_indptr == batch_size + 1: 5 == 4 is false (len_indptr = 5, batch_size = 3)"
  // unchecked: why, e.g. "tensor kv_indptr is not available",
  //   "kv_indptr[-1]: index -1 is out of range for dimension 0 of shape [0]".
  std::string detail;
  // The top-level value when evaluation finished (not for unchecked).
  std::optional<Value> value;
};

// Evaluate with Python semantics; the top-level value decides by Python
// truthiness. Never throws; exceptions from the Environment become unchecked.
Outcome evaluate(const Expression& expression, const Environment& env) noexcept;

}  // namespace kb::expr
