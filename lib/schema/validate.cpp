#include "schema/validate.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <filesystem>
#include <set>

#include "common/limits.hpp"
#include "common/path_component.hpp"
#include "expr/expr.hpp"
#include "json/json.hpp"
#include "safetensors/safetensors.hpp"

namespace kb {
namespace {

std::string sub(const std::string& base, std::string_view key) { return json::member_path(base, key); }
std::string idx(const std::string& base, std::size_t i) { return json::index_path(base, i); }

// A name that becomes a component of OUT/traces/<author>/<op_type>/<definition>.jsonl
// must be a single path component; an empty name is reported by its own rule.
void check_file_name(const std::string& name, const std::string& origin, const std::string& path,
                     Diagnostics& diags) {
  if (name.empty()) return;
  if (std::string why = path_component_problem(name); !why.empty())
    diags.error(origin, path,
                fmt::format("{} is not usable as a file name: it {} (kb writes traces to "
                            "OUT/traces/<author>/<op_type>/<definition>.jsonl)",
                            quote_name(name), why));
}

// Constraint text for messages, cut short when very long.
std::string brief_text(const std::string& s) { return s.size() <= 120 ? s : s.substr(0, 117) + "..."; }

// Names a Python `def run(...)` can take and a constraint can mention.
bool is_python_identifier(std::string_view n) {
  if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0]))) return false;
  for (unsigned char c : n)
    if (!(std::isalnum(c) || c == '_')) return false;
  static const std::set<std::string_view> kKeywords = {
      "False", "None",   "True",    "and",      "as",       "assert", "async", "await",  "break",
      "class", "continue", "def",   "del",      "elif",     "else",   "except", "finally", "for",
      "from",  "global", "if",      "import",   "in",       "is",     "lambda", "nonlocal", "not",
      "or",    "pass",   "raise",   "return",   "try",      "while",  "with",   "yield"};
  return !kKeywords.count(n);
}

std::string value_text(const ScalarValue& v) {
  return std::visit(
      [](auto x) -> std::string {
        using V = decltype(x);
        if constexpr (std::is_same_v<V, bool>) return x ? "true" : "false";
        else return fmt::format("{}", x);
      },
      v);
}

// Is a scalar's value representable in its dtype (finite floats stay finite)?
bool scalar_fits(const ScalarValue& v, DType t) {
  double x = std::visit([](auto y) { return static_cast<double>(y); }, v);
  switch (t) {
    case DType::int64: return true;
    case DType::int32: return x >= -2147483648.0 && x <= 2147483647.0;
    case DType::int16: return x >= -32768 && x <= 32767;
    case DType::int8: return x >= -128 && x <= 127;
    case DType::float32: return std::fabs(x) <= 3.4028234663852886e38;
    case DType::float16: return std::fabs(x) <= 65504.0;
    case DType::bfloat16: return std::fabs(x) <= 3.3895313892515355e38;
    case DType::float8_e4m3fn: return std::fabs(x) <= 448.0;
    case DType::float8_e5m2: return std::fabs(x) <= 57344.0;
    case DType::float4_e2m1: return std::fabs(x) <= 6.0;
    case DType::bool_: return true;
  }
  return true;
}

expr::Value to_expr_value(const ScalarValue& v) {
  if (auto* i = std::get_if<std::int64_t>(&v)) return expr::Value::integer(*i);
  if (auto* f = std::get_if<double>(&v)) return expr::Value::floating(*f);
  return expr::Value::boolean(std::get<bool>(v));
}

// A relative path that stays inside its root: no absolute path, no "..".
bool is_safe_relative(std::string_view p) {
  if (p.empty() || p.front() == '/' || p.find('\0') != std::string_view::npos) return false;
  std::size_t start = 0;
  while (start <= p.size()) {
    std::size_t end = p.find('/', start);
    if (end == std::string_view::npos) end = p.size();
    if (p.substr(start, end - start) == "..") return false;
    start = end + 1;
  }
  return true;
}

// Constraint environment of a definition under (optional) workload bindings.
class BindingEnvironment final : public expr::Environment {
 public:
  BindingEnvironment(const Definition& d, const Workload* w, const CheckContext& ctx) : d_(d), w_(w), ctx_(ctx) {}

  std::optional<expr::Value> scalar(std::string_view name) const override {
    if (auto v = axis(name)) return expr::Value::integer(*v);
    if (w_) {
      const TensorSpec* t = d_.find_input(name);
      const InputSpec* in = w_->find_input(name);
      if (t && t->is_scalar() && in && in->kind == InputKind::scalar) return to_expr_value(in->value);
    }
    return std::nullopt;
  }

  std::optional<std::vector<std::int64_t>> shape(std::string_view tensor) const override {
    const TensorSpec* t = d_.find_tensor(tensor);
    if (!t || !t->shape) return std::nullopt;
    std::vector<std::int64_t> out;
    for (const auto& a : *t->shape) {
      auto v = axis(a);
      if (!v) return std::nullopt;
      out.push_back(*v);
    }
    return out;
  }

  // Tensor values exist only for safetensors inputs whose blob is present.
  std::optional<std::int64_t> element(std::string_view tensor, std::span<const std::int64_t> index) const override {
    const auto* data = load(tensor);
    if (!data) return std::nullopt;
    std::int64_t flat = 0;
    for (std::size_t i = 0; i < index.size(); ++i) {
      if (i >= data->shape.size()) return std::nullopt;
      flat = flat * data->shape[i] + index[i];
    }
    if (flat < 0 || static_cast<std::size_t>(flat) >= data->values.size()) return std::nullopt;
    return data->values[static_cast<std::size_t>(flat)];
  }

 private:
  struct Loaded {
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> values;
  };

  std::optional<std::int64_t> axis(std::string_view name) const {
    const Axis* a = d_.find_axis(name);
    if (!a) return std::nullopt;
    if (a->kind == AxisKind::const_) return a->value;
    if (w_)
      if (const std::int64_t* v = w_->find_axis(name)) return *v;
    return std::nullopt;
  }

  const Loaded* load(std::string_view tensor) const {
    for (const auto& [name, l] : cache_)
      if (name == tensor) return l ? &*l : nullptr;
    cache_.emplace_back(std::string(tensor), read_blob(tensor));
    return cache_.back().second ? &*cache_.back().second : nullptr;
  }

  std::optional<Loaded> read_blob(std::string_view tensor) const {
    if (!w_ || !ctx_.dataset_root) return std::nullopt;
    const InputSpec* in = w_->find_input(tensor);
    if (!in || in->kind != InputKind::safetensors) return std::nullopt;
    auto file = safetensors::read_file((std::filesystem::path(*ctx_.dataset_root) / in->path).string());
    if (!file) return std::nullopt;
    const auto* info = file->header.find(in->tensor_key);
    if (!info) return std::nullopt;
    auto bytes = file->bytes(*info);
    Loaded l;
    l.shape = info->shape;
    auto read_all = [&](auto proto) {
      using T = decltype(proto);
      std::size_t n = bytes.size() / sizeof(T);
      l.values.resize(n);
      for (std::size_t i = 0; i < n; ++i) {
        T x;
        std::memcpy(&x, bytes.data() + i * sizeof(T), sizeof(T));
        l.values[i] = static_cast<std::int64_t>(x);
      }
    };
    switch (info->dtype) {
      case DType::int64: read_all(std::int64_t{}); break;
      case DType::int32: read_all(std::int32_t{}); break;
      case DType::int16: read_all(std::int16_t{}); break;
      case DType::int8: read_all(std::int8_t{}); break;
      case DType::bool_: read_all(std::uint8_t{}); break;
      default: return std::nullopt;  // float tensors are not indexed by constraints
    }
    return l;
  }

  const Definition& d_;
  const Workload* w_;
  const CheckContext& ctx_;
  mutable std::vector<std::pair<std::string, std::optional<Loaded>>> cache_;
};

void tally_add(ConstraintTally* t, expr::Verdict v) {
  if (!t) return;
  if (v == expr::Verdict::holds) ++t->held;
  else if (v == expr::Verdict::violated) ++t->violated;
  else ++t->unchecked;
}

// Evaluates the constraints under the given bindings and tallies the verdicts;
// without a workload, only those over const axes (the rest are skipped). One
// that reads no tensor data and no scalar input must be decidable: an
// unchecked verdict there is an error.
void check_constraints(const Definition& d, const Workload* w, const CheckContext& ctx, Diagnostics& diags,
                       ConstraintTally* tally) {
  const bool report_unchecked = ctx.report_unchecked;
  BindingEnvironment env(d, w, ctx);
  for (std::size_t i = 0; i < d.constraints.size(); ++i) {
    auto parsed = expr::parse(d.constraints[i]);
    if (!parsed) continue;  // reported by validate_definition
    // Shapes follow from the axes, so a constraint that reads no tensor data
    // and no scalar input is decidable once its axes are known.
    bool decidable = !parsed->needs_tensor_data();
    for (const auto& n : parsed->scalar_names()) decidable &= d.find_axis(n) != nullptr;
    if (!w) {
      // Without a workload only constraints over const axes can be decided.
      bool all_const = decidable;
      auto is_const = [&](const std::string& n) {
        const Axis* a = d.find_axis(n);
        return a && a->kind == AxisKind::const_;
      };
      for (const auto& n : parsed->scalar_names()) all_const &= is_const(n);
      for (const auto& n : parsed->tensor_names()) {
        const TensorSpec* t = d.find_tensor(n);
        if (t && t->shape)
          for (const auto& ax : *t->shape) all_const &= is_const(ax);
      }
      if (!all_const) continue;
    }
    auto out = expr::evaluate(*parsed, env);
    tally_add(tally, out.verdict);
    std::string where = idx(sub(ctx.path, d.constraints_key), i);
    if (out.verdict == expr::Verdict::violated) {
      diags.error(ctx.origin, w ? sub(ctx.path, "axes") : where,
                  fmt::format("constraint `{}` violated: {}", brief_text(d.constraints[i]), out.detail));
    } else if (out.verdict == expr::Verdict::unchecked && (report_unchecked || decidable)) {
      // A constraint over axes and shapes must be decidable once axes are
      // bound: unchecked means it is ill-formed (index out of range, / 0).
      if (decidable)
        diags.error(ctx.origin, w ? sub(ctx.path, "axes") : where,
                    fmt::format("constraint `{}` cannot be evaluated: {}", brief_text(d.constraints[i]), out.detail));
      else
        diags.note(ctx.origin, w ? ctx.path : where,
                   fmt::format("constraint `{}` unchecked: {}", brief_text(d.constraints[i]), out.detail));
    }
  }
}

}  // namespace

bool has_top_level_run(std::string_view src) {
  // Line by line, skipping the inside of triple-quoted strings; a top-level
  // definition starts in column 0: `def run(` or `async def run(`, with any
  // spacing Python allows.
  std::string_view open_quote;  // """ or ''' while inside a triple-quoted string
  std::size_t pos = 0;
  while (pos < src.size()) {
    std::size_t end = src.find('\n', pos);
    if (end == std::string_view::npos) end = src.size();
    std::string_view line = src.substr(pos, end - pos);
    pos = end + 1;
    bool starts_inside = !open_quote.empty();
    // Track triple quotes on this line (good enough for references).
    for (std::size_t i = 0; i + 2 < line.size() + 0 && i + 3 <= line.size(); ++i) {
      std::string_view q = line.substr(i, 3);
      if (q != "\"\"\"" && q != "'''") continue;
      if (open_quote.empty()) open_quote = q;
      else if (open_quote == q) open_quote = {};
      else continue;
      i += 2;
    }
    if (starts_inside) continue;
    std::string_view l = line;
    auto word = [&](std::string_view w) {
      if (l.substr(0, w.size()) != w) return false;
      std::size_t k = w.size();
      if (k < l.size() && l[k] != ' ' && l[k] != '\t') return false;
      while (k < l.size() && (l[k] == ' ' || l[k] == '\t')) ++k;
      l = l.substr(k);
      return true;
    };
    if (word("async") && l.empty()) continue;
    if (!word("def")) continue;
    if (l.substr(0, 3) != "run") continue;
    l = l.substr(3);
    while (!l.empty() && (l[0] == ' ' || l[0] == '\t')) l = l.substr(1);
    if (!l.empty() && l[0] == '(') return true;
  }
  return false;
}

bool is_iso8601(std::string_view s) {
  // YYYY-MM-DDTHH:MM:SS[.fraction][Z|+HH:MM|-HH:MM]; a space may stand for T.
  auto digits = [&](std::size_t at, std::size_t n) {
    if (at + n > s.size()) return false;
    for (std::size_t i = at; i < at + n; ++i)
      if (s[i] < '0' || s[i] > '9') return false;
    return true;
  };
  if (!digits(0, 4) || s.size() < 19 || s[4] != '-' || !digits(5, 2) || s[7] != '-' || !digits(8, 2) ||
      (s[10] != 'T' && s[10] != ' ') || !digits(11, 2) || s[13] != ':' || !digits(14, 2) || s[16] != ':' ||
      !digits(17, 2))
    return false;
  int month = (s[5] - '0') * 10 + (s[6] - '0'), day = (s[8] - '0') * 10 + (s[9] - '0');
  int hour = (s[11] - '0') * 10 + (s[12] - '0'), minute = (s[14] - '0') * 10 + (s[15] - '0');
  int second = (s[17] - '0') * 10 + (s[18] - '0');
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return false;
  std::size_t i = 19;
  if (i < s.size() && s[i] == '.') {
    std::size_t j = i + 1;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    if (j == i + 1) return false;
    i = j;
  }
  if (i == s.size()) return true;
  if (s[i] == 'Z') return i + 1 == s.size();
  if (s[i] == '+' || s[i] == '-')
    return s.size() == i + 6 && digits(i + 1, 2) && s[i + 3] == ':' && digits(i + 4, 2);
  return false;
}

std::optional<std::int64_t> element_count(const TensorSpec& spec, const Definition& d, const Workload* w) {
  if (!spec.shape) return 1;
  std::int64_t n = 1;
  for (const auto& name : *spec.shape) {
    const Axis* a = d.find_axis(name);
    if (!a) return std::nullopt;
    std::int64_t v;
    if (a->kind == AxisKind::const_) v = a->value;
    else if (const std::int64_t* b = w ? w->find_axis(name) : nullptr) v = *b;
    else return std::nullopt;
    if (v < 0) return std::nullopt;
    if (v != 0 && n > std::numeric_limits<std::int64_t>::max() / v) return std::nullopt;
    n *= v;
  }
  return n;
}

void validate_definition(const Definition& d, const CheckContext& ctx, Diagnostics& diags,
                         ConstraintTally* tally) {
  const std::string& p = ctx.path;
  const std::string& o = ctx.origin;
  std::size_t errors_before = diags.error_count();
  if (d.name.empty()) diags.error(o, sub(p, "name"), "must not be empty");
  check_file_name(d.name, o, sub(p, "name"), diags);
  check_file_name(d.op_type, o, sub(p, "op_type"), diags);
  if (d.op_type.empty()) {
    if (d.dialect == Dialect::seed001) diags.warning(o, sub(p, "op_type"), "missing (seed-001 dialect has none)");
    else diags.error(o, sub(p, "op_type"), "must not be empty");
  }
  for (const auto& a : d.axes) {
    std::string ap = sub(sub(p, "axes"), a.name);
    if (!is_python_identifier(a.name))
      diags.error(o, ap, "axis name must be a Python identifier (constraints refer to it by name)");
    // seed-001's parent nests a var axis in another var axis (tokens within sequences): a const axis
    // or the axis itself cannot be one.
    if (a.parent) {
      const Axis* parent = d.find_axis(*a.parent);
      if (!parent)
        diags.error(o, sub(ap, "parent"), fmt::format("unknown axis \"{}\"", *a.parent));
      else if (parent == &a)
        diags.error(o, sub(ap, "parent"), "an axis cannot be its own parent");
      else if (parent->kind == AxisKind::const_)
        diags.error(o, sub(ap, "parent"),
                    fmt::format("\"{}\" is a const axis ({}); a parent must be another var axis", *a.parent, parent->value));
      else {
        // Nesting is a tree: following parents from here must end at an axis without one.
        const Axis* up = parent;
        for (std::size_t steps = 0; up && up->parent && up != &a && steps < d.axes.size(); ++steps)
          up = d.find_axis(*up->parent);
        if (up == &a)
          diags.error(o, sub(ap, "parent"), fmt::format("\"{}\" leads back to \"{}\": parents form a cycle", *a.parent, a.name));
      }
    }
    if (a.kind == AxisKind::const_ && a.value < 0) diags.error(o, sub(ap, "value"), "must be non-negative");
  }
  if (d.outputs.empty()) diags.error(o, sub(p, "outputs"), "a definition needs at least one output");

  auto check_specs = [&](const std::vector<TensorSpec>& specs, std::string_view group) {
    for (const auto& t : specs) {
      std::string tp = sub(sub(p, group), t.name);
      if (!is_python_identifier(t.name))
        diags.error(o, tp, "tensor name must be a Python identifier (it is a parameter of `run`)");
      if (!t.shape) continue;
      if (t.shape->size() > limits::max_tensor_rank)
        diags.error(o, sub(tp, "shape"),
                    fmt::format("rank {} exceeds the limit of {}", t.shape->size(), limits::max_tensor_rank));
      for (std::size_t i = 0; i < t.shape->size(); ++i)
        if (!d.find_axis((*t.shape)[i]))
          diags.error(o, idx(sub(tp, "shape"), i), fmt::format("unknown axis \"{}\"", (*t.shape)[i]));
      // A shape of const axes alone has a fixed size: refuse absurd ones now.
      bool all_const = true;
      for (const auto& s : *t.shape) {
        const Axis* a = d.find_axis(s);
        all_const &= a && a->kind == AxisKind::const_;
      }
      if (all_const) {
        auto n = element_count(t, d, nullptr);
        if (!n || *n > limits::max_tensor_elements)
          diags.error(o, sub(tp, "shape"),
                      fmt::format("const axes give more than {} elements", limits::max_tensor_elements));
      }
    }
  };
  check_specs(d.inputs, "inputs");
  check_specs(d.outputs, "outputs");
  for (const auto& t : d.outputs)
    if (d.find_input(t.name))
      diags.error(o, sub(sub(p, "outputs"), t.name), "name is also an input (input and output names must differ)");

  if (!has_top_level_run(d.reference))
    diags.error(o, sub(p, "reference"), "has no top-level `def run(...)`");

  for (std::size_t i = 0; i < d.tags.size(); ++i)
    if (d.tags[i].empty()) diags.error(o, idx(sub(p, "tags"), i), "empty tag");

  for (std::size_t i = 0; i < d.constraints.size(); ++i) {
    std::string cp = idx(sub(p, d.constraints_key), i);
    auto parsed = expr::parse(d.constraints[i]);
    if (!parsed) {
      diags.error(o, cp, fmt::format("`{}`: {}", brief_text(d.constraints[i]), parsed.error().message));
      continue;
    }
    for (const auto& n : parsed->scalar_names()) {
      const TensorSpec* t = d.find_tensor(n);
      if (!d.find_axis(n) && !(t && t->is_scalar()))
        diags.error(o, cp, fmt::format("`{}`: unknown name \"{}\" (not an axis or scalar input)", brief_text(d.constraints[i]), n));
    }
    for (const auto& n : parsed->tensor_names()) {
      const TensorSpec* t = d.find_tensor(n);
      if (!t || t->is_scalar())
        diags.error(o, cp, fmt::format("`{}`: \"{}\" is not a tensor of this definition", brief_text(d.constraints[i]), n));
    }
  }
  if (diags.error_count() == errors_before) check_constraints(d, nullptr, ctx, diags, tally);
}

void validate_workload(const Workload& w, const CheckContext& ctx, Diagnostics& diags) {
  const std::string& p = ctx.path;
  if (w.uuid.empty()) diags.error(ctx.origin, sub(p, "uuid"), "must not be empty");
  for (const auto& [name, in] : w.inputs) {
    if (in.kind != InputKind::safetensors) continue;
    std::string ip = sub(sub(p, "inputs"), name);
    if (!is_safe_relative(in.path))
      diags.error(ctx.origin, sub(ip, "path"),
                  fmt::format("\"{}\" must be a relative path inside the dataset (no leading '/', no '..')", in.path));
    if (in.tensor_key.empty()) diags.error(ctx.origin, sub(ip, "tensor_key"), "must not be empty");
  }
}

void validate_workload_against(const Workload& w, const Definition& d, const CheckContext& ctx,
                               Diagnostics& diags, ConstraintTally* tally) {
  const std::string& p = ctx.path;
  const std::string& o = ctx.origin;
  std::size_t errors_before = diags.error_count();
  std::string ap = sub(p, "axes");
  for (const auto& [name, v] : w.axes) {
    const Axis* a = d.find_axis(name);
    if (!a) diags.error(o, sub(ap, name), fmt::format("definition {} has no axis \"{}\"", d.name, name));
    else if (a->kind == AxisKind::const_)
      diags.error(o, sub(ap, name), fmt::format("axis is const ({}) in {}; workloads bind var axes only", a->value, d.name));
  }
  for (const auto& a : d.axes)
    if (a.kind == AxisKind::var && !w.find_axis(a.name))
      diags.error(o, ap, fmt::format("var axis \"{}\" of {} is not bound", a.name, d.name));

  std::string ip = sub(p, "inputs");
  for (const auto& [name, in] : w.inputs)
    if (!d.find_input(name))
      diags.error(o, sub(ip, name),
                  fmt::format("definition {} has no input \"{}\"{}", d.name, name,
                              d.find_output(name) ? " (it is an output)" : ""));
  for (const auto& t : d.inputs) {
    const InputSpec* in = w.find_input(t.name);
    std::string tp = sub(ip, t.name);
    if (!in) {
      if (!t.optional) diags.error(o, ip, fmt::format("input \"{}\" of {} is missing", t.name, d.name));
      continue;
    }
    if (t.is_scalar()) {
      if (in->kind != InputKind::scalar) {
        diags.error(o, sub(tp, "type"), fmt::format("\"{}\" is a scalar ({}): its input must be {{\"type\": \"scalar\"}}",
                                                    t.name, dtype_name(t.dtype)));
        continue;
      }
    } else if (in->kind == InputKind::scalar && t.rank() != 0) {
      diags.error(o, sub(tp, "type"),
                  fmt::format("\"{}\" is a rank-{} tensor: a scalar value cannot stand for it", t.name, t.rank()));
      continue;
    }
    if (in->kind == InputKind::scalar) {
      const ScalarValue& v = in->value;
      bool ok = dtype_is_float(t.dtype) ? !std::holds_alternative<bool>(v)
                : t.dtype == DType::bool_ ? std::holds_alternative<bool>(v)
                                          : std::holds_alternative<std::int64_t>(v);
      if (!ok)
        diags.error(o, sub(tp, "value"),
                    fmt::format("{} does not fit dtype {} (expected {})", value_text(v), dtype_name(t.dtype),
                                dtype_is_float(t.dtype) ? "a number" : t.dtype == DType::bool_ ? "a boolean" : "an integer"));
      if (auto* f = std::get_if<double>(&v); f && !std::isfinite(*f))
        diags.error(o, sub(tp, "value"), "must be finite");
      if (ok && !scalar_fits(v, t.dtype))
        diags.error(o, sub(tp, "value"), fmt::format("{} does not fit dtype {}", value_text(v), dtype_name(t.dtype)));
    }
  }
  if (diags.error_count() != errors_before) return;  // bindings broken: sizes and constraints meaningless

  // Sizes: refuse absurd tensors here, before anything tries to allocate them.
  auto check_size = [&](const TensorSpec& t, std::string_view group) {
    auto n = element_count(t, d, &w);
    if (!n || *n > limits::max_tensor_elements)
      diags.error(o, ap,
                  fmt::format("{} \"{}\" would hold {} elements, over the limit of {}", group, t.name,
                              n ? fmt::format("{}", *n) : std::string("more than 2^63"), limits::max_tensor_elements));
  };
  for (const auto& t : d.inputs) check_size(t, "input");
  for (const auto& t : d.outputs) check_size(t, "output");
  if (diags.error_count() != errors_before) return;

  // Blobs: present ones must hold the tensor the definition describes.
  if (ctx.dataset_root) {
    for (const auto& t : d.inputs) {
      const InputSpec* in = w.find_input(t.name);
      if (!in || in->kind != InputKind::safetensors || !is_safe_relative(in->path)) continue;
      std::string tp = sub(ip, t.name);
      auto file = std::filesystem::path(*ctx.dataset_root) / in->path;
      std::error_code ec;
      if (!std::filesystem::exists(file, ec)) {
        std::string msg = fmt::format("blob {} not found{}", in->path,
                                      ctx.strict ? "" : " (kb will generate valid values for it)");
        if (ctx.strict) diags.error(o, sub(tp, "path"), msg);
        else diags.warning(o, sub(tp, "path"), msg, "missing-blob");
        continue;
      }
      auto header = safetensors::read_header(file.string());
      if (!header) {
        diags.error(o, sub(tp, "path"), header.error().message);
        continue;
      }
      const auto* info = header->find(in->tensor_key);
      if (!info) {
        diags.error(o, sub(tp, "tensor_key"), fmt::format("{} has no tensor \"{}\"", in->path, in->tensor_key));
        continue;
      }
      if (info->dtype != t.dtype)
        diags.error(o, sub(tp, "tensor_key"), fmt::format("blob tensor \"{}\" is {}, the definition says {}",
                                                          in->tensor_key, dtype_name(info->dtype), dtype_name(t.dtype)));
      std::vector<std::int64_t> want;
      if (t.shape)
        for (const auto& s : *t.shape) {
          const Axis* a = d.find_axis(s);
          want.push_back(a->kind == AxisKind::const_ ? a->value : *w.find_axis(s));
        }
      if (info->shape != want)
        diags.error(o, sub(tp, "tensor_key"),
                    fmt::format("blob tensor \"{}\" has shape [{}], the axes give [{}]", in->tensor_key,
                                fmt::join(info->shape, ", "), fmt::join(want, ", ")));
    }
  }
  check_constraints(d, &w, ctx, diags, tally);
}

void validate_evaluation(const Evaluation& e, const CheckContext& ctx, Diagnostics& diags) {
  const std::string& p = ctx.path;
  const std::string& o = ctx.origin;
  std::string_view st = eval_status_name(e.status);
  bool wants_correctness = e.status == EvalStatus::passed || e.status == EvalStatus::incorrect_numerical;
  bool wants_performance = e.status == EvalStatus::passed;
  if (wants_correctness && !e.correctness)
    diags.error(o, sub(p, "correctness"), fmt::format("required when status is {}", st));
  if (!wants_correctness && e.correctness)
    diags.error(o, sub(p, "correctness"), fmt::format("must be absent when status is {}", st));
  if (wants_performance && !e.performance)
    diags.error(o, sub(p, "performance"), fmt::format("required when status is {}", st));
  if (!wants_performance && e.performance)
    diags.error(o, sub(p, "performance"), fmt::format("must be absent when status is {}", st));
  if (e.environment.hardware.empty()) diags.error(o, sub(sub(p, "environment"), "hardware"), "must not be empty");
  if (e.timestamp.empty()) diags.error(o, sub(p, "timestamp"), "must not be empty");
  else if (!is_iso8601(e.timestamp))  // FlashInfer-Bench only recommends ISO 8601
    diags.warning(o, sub(p, "timestamp"), fmt::format("\"{}\" is not an ISO 8601 date-time", e.timestamp));
  if (e.correctness) {
    std::string cp = sub(p, "correctness");
    for (auto [name, v] : {std::pair{"max_relative_error", e.correctness->max_relative_error},
                           std::pair{"max_absolute_error", e.correctness->max_absolute_error}})
      if (v < 0) diags.error(o, sub(cp, name), fmt::format("must be non-negative or NaN, got {}", v));
  }
  if (e.performance) {
    std::string pp = sub(p, "performance");
    for (auto [name, v] : {std::pair{"latency_ms", e.performance->latency_ms},
                           std::pair{"reference_latency_ms", e.performance->reference_latency_ms},
                           std::pair{"speedup_factor", e.performance->speedup_factor}})
      if (!(v >= 0) || !std::isfinite(v))
        diags.error(o, sub(pp, name), fmt::format("must be a finite non-negative number, got {}", v));
  }
}

void validate_trace(const Trace& t, const CheckContext& ctx, Diagnostics& diags) {
  if (t.definition.empty()) diags.error(ctx.origin, sub(ctx.path, "definition"), "must not be empty");
  CheckContext wc = ctx;
  wc.path = sub(ctx.path, "workload");
  validate_workload(t.workload, wc, diags);
  if (t.solution && t.solution->empty()) diags.error(ctx.origin, sub(ctx.path, "solution"), "must not be empty (use null)");
  if (t.evaluation) {
    if (!t.solution)
      diags.error(ctx.origin, sub(ctx.path, "solution"), "an evaluated trace must name its solution");
    CheckContext ec = ctx;
    ec.path = sub(ctx.path, "evaluation");
    validate_evaluation(*t.evaluation, ec, diags);
  }
}

void validate_solution(const Solution& s, const CheckContext& ctx, Diagnostics& diags) {
  const std::string& p = ctx.path;
  const std::string& o = ctx.origin;
  for (auto [field, value] : {std::pair{"name", &s.name}, std::pair{"definition", &s.definition},
                              std::pair{"author", &s.author}})
    if (value->empty()) diags.error(o, sub(p, field), "must not be empty");
    else check_file_name(*value, o, sub(p, field), diags);
  std::string sp = sub(p, "spec");
  static const std::set<std::string_view> kLanguages = {"python", "triton", "cpp", "cuda", "tilelang"};
  if (!kLanguages.count(s.spec.language))
    diags.error(o, sub(sp, "language"),
                fmt::format("unknown language \"{}\" (known: python triton cpp cuda tilelang)", s.spec.language));
  std::string_view ep = s.spec.entry_point;
  std::size_t sep = ep.find("::");
  std::string_view entry_file;
  if (sep == std::string_view::npos || sep == 0 || sep + 2 >= ep.size())
    diags.error(o, sub(sp, "entry_point"), fmt::format("\"{}\" is not of the form \"file::symbol\"", ep));
  else
    entry_file = ep.substr(0, sep);
  std::set<std::string_view> paths;
  std::string srcp = sub(p, "sources");
  if (s.sources.empty()) diags.error(o, srcp, "a solution needs at least one source file");
  for (std::size_t i = 0; i < s.sources.size(); ++i) {
    const auto& f = s.sources[i];
    if (!is_safe_relative(f.path))
      diags.error(o, sub(idx(srcp, i), "path"),
                  fmt::format("\"{}\" must be a relative path (no leading '/', no '..')", f.path));
    if (!paths.insert(f.path).second) diags.error(o, sub(idx(srcp, i), "path"), fmt::format("duplicate path \"{}\"", f.path));
  }
  if (!entry_file.empty() && !s.sources.empty() && !paths.count(entry_file))
    diags.error(o, sub(sp, "entry_point"), fmt::format("entry file \"{}\" is not among the sources", entry_file));
}

}  // namespace kb
