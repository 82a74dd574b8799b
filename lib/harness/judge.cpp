#include "harness/judge.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "common/parallel.hpp"
#include "json/json.hpp"
#include "tensor/convert.hpp"

namespace kb {

namespace {
// FlashInfer-Bench LowBitEvaluator's required matched ratio.
constexpr double kLowBitRatio = 0.95;
}  // namespace

namespace {

// One range of elements' share of a comparison: its counts, maxima and first mismatch.
struct RangeComparison {
  std::int64_t mismatched = 0, nonfinite_mismatched = 0;
  double max_abs = 0, max_rel = 0;
  std::int64_t first = -1;  // index of the first mismatch, -1 without one
  double first_got = 0, first_expected = 0;
};

RangeComparison compare_range(const Tensor& got, const Tensor& expected, const Tolerance& tol, std::int64_t begin,
                              std::int64_t end) {
  RangeComparison c;
  for (std::int64_t i = begin; i < end; ++i) {
    double x = element_as_double(got, i), y = element_as_double(expected, i);
    bool bad;
    if (!std::isfinite(y) || !std::isfinite(x)) {
      bad = !(std::isnan(x) && std::isnan(y)) && !(x == y);  // same inf, or both NaN
      c.nonfinite_mismatched += bad;
    } else {
      double abs = std::fabs(x - y), rel = abs / (std::fabs(y) + 1e-8);
      c.max_abs = std::max(c.max_abs, abs);
      c.max_rel = std::max(c.max_rel, rel);
      bad = abs > tol.atol && rel > tol.rtol;
    }
    if (bad && c.mismatched++ == 0) {
      c.first = i;
      c.first_got = x;
      c.first_expected = y;
    }
  }
  return c;
}

// Elements a thread compares at the least: below it a thread costs more than it saves.
constexpr std::int64_t kElementsPerThread = std::int64_t{1} << 21;

}  // namespace

Comparison compare(const Tensor& got, const Tensor& expected, const Tolerance& tol) {
  Comparison c;
  if (got.shape() != expected.shape()) {
    c.verdict = Comparison::Verdict::wrong_shape;
    c.detail = fmt::format("shape [{}], expected [{}]", fmt::join(got.shape(), ", "), fmt::join(expected.shape(), ", "));
    return c;
  }
  if (got.dtype() != expected.dtype()) {
    c.verdict = Comparison::Verdict::wrong_dtype;
    c.detail = fmt::format("dtype {}, expected {}", dtype_name(got.dtype()), dtype_name(expected.dtype()));
    return c;
  }
  c.total = got.numel();
  // Ranges on several threads (an attention prefill's output has 1e8 elements); counts add, maxima
  // combine and the first mismatch is the lowest index, so the result does not depend on the split.
  const std::int64_t threads = std::clamp<std::int64_t>(
      std::min<std::int64_t>(c.total / kElementsPerThread, std::max(1u, std::thread::hardware_concurrency())), 1, 16);
  std::vector<RangeComparison> parts(static_cast<std::size_t>(threads));
  const std::int64_t chunk = (c.total + threads - 1) / threads;
  parallel_for(threads, static_cast<unsigned>(threads), [&](std::int64_t k) {
    parts[static_cast<std::size_t>(k)] =
        compare_range(got, expected, tol, std::min(c.total, k * chunk), std::min(c.total, (k + 1) * chunk));
  });
  for (const RangeComparison& p : parts) {
    c.mismatched += p.mismatched;
    c.nonfinite_mismatched += p.nonfinite_mismatched;
    c.max_abs = std::max(c.max_abs, p.max_abs);
    c.max_rel = std::max(c.max_rel, p.max_rel);
    if (p.first >= 0 && c.detail.empty())
      c.detail = fmt::format("element {}: {} where the reference has {}", p.first, p.first_got, p.first_expected);
  }
  double matched = c.matched_ratio();
  if (matched < tol.required_matched_ratio) {
    c.verdict = Comparison::Verdict::wrong_values;
    c.detail = fmt::format("{} of {} elements outside atol={} rtol={} (matched {:.4f} < {}); first: {}", c.mismatched,
                           c.total, tol.atol, tol.rtol, matched, tol.required_matched_ratio, c.detail);
  }
  return c;
}

TolerancePolicy::TolerancePolicy() {
  default_ = {1e-2, 1e-2, 1.0};
  name_contains_.push_back({"moe_fp8_block_scale", {std::nullopt, std::nullopt, kLowBitRatio}});
}

void TolerancePolicy::apply(Tolerance& t, const Partial& p) {
  if (p.atol) t.atol = *p.atol;
  if (p.rtol) t.rtol = *p.rtol;
  if (p.ratio) t.required_matched_ratio = *p.ratio;
}

bool is_low_bit(const Definition& d) {
  if (d.op_type == "dsa_paged") return false;
  for (const TensorSpec& t : d.inputs)
    if (t.dtype == DType::float8_e4m3fn || t.dtype == DType::float8_e5m2 || t.dtype == DType::float4_e2m1) return true;
  for (const std::string& tag : d.tags)
    if (tag.starts_with("quantization:float8_") || tag.starts_with("quantization:float4_")) return true;
  return false;
}

Tolerance TolerancePolicy::for_definition(std::string_view op_type, std::string_view name) const {
  return resolve(op_type, name, false);
}

Tolerance TolerancePolicy::for_definition(const Definition& d) const { return resolve(d.op_type, d.name, is_low_bit(d)); }

Tolerance TolerancePolicy::resolve(std::string_view op_type, std::string_view name, bool low_bit) const {
  Tolerance t;
  apply(t, default_);
  for (const auto& [k, p] : op_type_)
    if (k == op_type) apply(t, p);
  if (low_bit) apply(t, {std::nullopt, std::nullopt, kLowBitRatio});
  for (const auto& [k, p] : name_contains_)
    if (name.find(k) != std::string_view::npos) apply(t, p);
  for (const auto& [k, p] : definition_)
    if (k == name) apply(t, p);
  apply(t, {atol, rtol, required_matched_ratio});
  return t;
}

Result<TolerancePolicy> TolerancePolicy::load(const std::string& path) {
  auto text = json::read_text_file(path);
  if (!text) return text.error();
  return parse(*text, path);
}

const char* tolerance_range_error(ToleranceField field, double value) {
  if (field == ToleranceField::required_matched_ratio)
    return value >= 0 && value <= 1 ? nullptr : "a fraction from 0 to 1";
  return value >= 0 && std::isfinite(value) ? nullptr : "a non-negative number";
}

Result<TolerancePolicy> TolerancePolicy::parse(std::string_view text, const std::string& path) {
  auto doc = json::parse(text, path);
  if (!doc) return doc.error();
  TolerancePolicy policy;
  json::Object root;
  if (doc->root().get_object().get(root) != simdjson::SUCCESS)
    return make_error(Code::invalid_data, fmt::format("{}: expected an object", path));
  auto read_partial = [&](json::Element e, const std::string& where) -> Result<Partial> {
    json::Object o;
    if (e.get_object().get(o) != simdjson::SUCCESS)
      return make_error(Code::invalid_data, fmt::format("{}: {}: expected an object", path, where));
    Partial p;
    for (auto field : o) {
      ToleranceField which;
      if (field.key == "atol") which = ToleranceField::atol;
      else if (field.key == "rtol") which = ToleranceField::rtol;
      else if (field.key == "required_matched_ratio") which = ToleranceField::required_matched_ratio;
      else return make_error(Code::invalid_data, fmt::format("{}: {}.{}: unknown tolerance", path, where, field.key));
      double v;
      // A value that is not a number is out of every range: the same message as one out of range.
      if (field.value.get_double().get(v) != simdjson::SUCCESS) v = std::numeric_limits<double>::quiet_NaN();
      if (const char* expected = tolerance_range_error(which, v))
        return make_error(Code::invalid_data, fmt::format("{}: {}.{}: expected {}", path, where, field.key, expected));
      (which == ToleranceField::atol ? p.atol : which == ToleranceField::rtol ? p.rtol : p.ratio) = v;
    }
    return p;
  };
  for (auto field : root) {
    std::string key(field.key);
    if (key == "default") {
      auto p = read_partial(field.value, key);
      if (!p) return p.error();
      policy.default_ = {p->atol ? p->atol : policy.default_.atol, p->rtol ? p->rtol : policy.default_.rtol,
                         p->ratio ? p->ratio : policy.default_.ratio};
    } else if (key == "op_type" || key == "name_contains" || key == "definition") {
      json::Object group;
      if (field.value.get_object().get(group) != simdjson::SUCCESS)
        return make_error(Code::invalid_data, fmt::format("{}: {}: expected an object", path, key));
      for (auto entry : group) {
        auto p = read_partial(entry.value, key + "." + std::string(entry.key));
        if (!p) return p.error();
        auto& section = key == "op_type" ? policy.op_type_ : key == "name_contains" ? policy.name_contains_ : policy.definition_;
        section.emplace_back(std::string(entry.key), *p);
      }
    } else {
      return make_error(Code::invalid_data,
                        fmt::format("{}: {}: unknown section (expected default, op_type, name_contains, definition)", path, key));
    }
  }
  return policy;
}

}  // namespace kb
