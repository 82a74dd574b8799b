// Judging one output against the oracle's: shape, then dtype, then values by
// FlashInfer-Bench's rule (an element fails only when |x-y| > atol AND
// |x-y| / (|y| + 1e-8) > rtol; the output fails when the matched fraction is
// below the required ratio). Non-finite values compare by position: an lse of
// -inf where the reference has -inf is correct, NaN where it is finite is not.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/result.hpp"
#include "schema/model.hpp"
#include "tensor/tensor.hpp"

namespace kb {

struct Tolerance {
  double atol = 1e-2;
  double rtol = 1e-2;
  double required_matched_ratio = 1.0;
};

struct Comparison {
  enum class Verdict { match, wrong_shape, wrong_dtype, wrong_values } verdict = Verdict::match;
  double max_abs = 0;  // over finite pairs
  double max_rel = 0;
  std::int64_t mismatched = 0;
  std::int64_t nonfinite_mismatched = 0;  // of `mismatched`
  std::int64_t total = 0;
  std::string detail;  // first mismatch, for the log
  // The fraction of elements within tolerance (1 for an empty tensor).
  double matched_ratio() const {
    return total ? 1.0 - static_cast<double>(mismatched) / static_cast<double>(total) : 1.0;
  }
};

Comparison compare(const Tensor& got, const Tensor& expected, const Tolerance& tol);

// The matched ratio a trace records (correctness.extra.matched_ratio): the
// lowest seen, where the tolerance requires a ratio below 1; else none.
inline std::optional<double> recorded_matched_ratio(const Tolerance& tol, double lowest) {
  return tol.required_matched_ratio < 1.0 ? std::optional<double>(lowest) : std::nullopt;
}

// A definition whose kernels compute from low-bit values: an input stored as
// fp8 or fp4, or a tag declaring such a quantization ("quantization:float8_*",
// "quantization:float4_*", as FlashInfer-Bench's definitions of kernels that
// take MxFP4 weights say while their reference holds float32 weights). Their
// references sum thousands of products of unit-scale random values in fp32,
// so outputs near zero sit below fp32's own rounding noise: every element
// within 1e-2 is more than the reference itself meets against an exact sum
// (docs/performance/moe.md). The DSA top-k indexer is not one: its own judge
// (dsa_judge.hpp) compares selected scores.
bool is_low_bit(const Definition& d);

// The range a tolerance value must lie in: atol and rtol non-negative and
// finite, a required matched ratio from 0 to 1. Returns what the value should
// have been ("a non-negative number", "a fraction from 0 to 1") when it is out
// of range, nullptr when it is in range; the tolerance file and kb bench's
// flags both check through it.
enum class ToleranceField { atol, rtol, required_matched_ratio };
const char* tolerance_range_error(ToleranceField field, double value);

// Tolerances per op_type, per part of a definition's name and per
// definition, with FlashInfer-Bench's precedence: definition over name_contains
// over op_type over the defaults; flags on top. File format (JSON):
//   {"default": {"atol": 0.01, "rtol": 0.01, "required_matched_ratio": 1.0},
//    "op_type": {"gemm": {"atol": 0.02}},
//    "name_contains": {"moe_fp8_block_scale": {"required_matched_ratio": 0.95}},
//    "definition": {"rmsnorm_h128": {"atol": 0.02}}}
// name_contains applies to every definition whose name contains the key (in
// file order, later entries over earlier ones).
class TolerancePolicy {
 public:
  // Built-in: 1e-2 / 1e-2 / 1.0; FlashInfer-Bench's low-bit rule, matched
  // ratio 0.95, for the definitions named moe_fp8_block_scale* (its
  // LowBitEvaluator's selection) and, through for_definition(Definition),
  // every definition that is_low_bit().
  TolerancePolicy();
  static Result<TolerancePolicy> load(const std::string& path);
  // The same from the file's text; `path` names it in messages ("path: section.key: what").
  static Result<TolerancePolicy> parse(std::string_view text, const std::string& path);
  Tolerance for_definition(std::string_view op_type, std::string_view name) const;
  // The same, with the low-bit rule for a definition that is_low_bit(), applied
  // where the built-in name rule is (a file's sections and the flags still
  // override it).
  Tolerance for_definition(const Definition& d) const;
  // Command-line values applied after everything else.
  std::optional<double> atol, rtol, required_matched_ratio;

 private:
  struct Partial {
    std::optional<double> atol, rtol, ratio;
  };
  static void apply(Tolerance& t, const Partial& p);
  Tolerance resolve(std::string_view op_type, std::string_view name, bool low_bit) const;
  Partial default_;
  std::vector<std::pair<std::string, Partial>> op_type_, name_contains_, definition_;
};

}  // namespace kb
