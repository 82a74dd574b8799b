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
};

Comparison compare(const Tensor& got, const Tensor& expected, const Tolerance& tol);

// Tolerances per op_type and per definition, with FlashInfer-Bench's
// precedence: definition over op_type over the defaults; flags on top.
// File format (JSON):
//   {"default": {"atol": 0.01, "rtol": 0.01, "required_matched_ratio": 1.0},
//    "op_type": {"moe": {"required_matched_ratio": 0.95}},
//    "definition": {"rmsnorm_h128": {"atol": 0.02}}}
class TolerancePolicy {
 public:
  TolerancePolicy();  // built-in: 1e-2 / 1e-2 / 1.0, moe matched ratio 0.95
  static Result<TolerancePolicy> load(const std::string& path);
  Tolerance for_definition(std::string_view op_type, std::string_view name) const;
  // Command-line values applied after everything else.
  std::optional<double> atol, rtol, required_matched_ratio;

 private:
  struct Partial {
    std::optional<double> atol, rtol, ratio;
  };
  static void apply(Tolerance& t, const Partial& p);
  Partial default_;
  std::vector<std::pair<std::string, Partial>> op_type_, definition_;
};

}  // namespace kb
