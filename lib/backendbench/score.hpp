// BackendBench's judgment and score.
//
// Judge: outputs match when their count, dtypes and shapes are equal and every
// element is allclose with atol = rtol = 1e-2 (|a - e| <= atol + rtol * |e|),
// NaN equal to NaN, infinities equal when equal; strides are ignored.
// Complex outputs as torch.isclose compares them: |a - e| <= atol + rtol * |e|
// with the complex modulus, a NaN part on both sides equal.
// Score: per operator, the geometric mean over its lines of baseline time /
// kb time, a failing line counting 1.0; overall, the geometric mean of the
// per-operator scores; the fraction of operators whose every line passed;
// perf@p, the fraction of operators that are fully correct and whose score
// exceeds p.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backendbench/tensor.hpp"

namespace kb::backendbench {

inline constexpr double judge_atol = 1e-2;
inline constexpr double judge_rtol = 1e-2;

enum class Verdict { passed, incorrect_count, incorrect_dtype, incorrect_shape, incorrect_numerical };
const char* verdict_name(Verdict v) noexcept;

struct Judgment {
  Verdict verdict = Verdict::passed;
  double max_abs_error = 0;   // over compared elements (NaN pairs count 0)
  double max_rel_error = 0;
  std::string detail;         // "output 1: dtype f32, expected f16", ...
};

// The count, undefined/defined, dtype and shape checks of judge() alone
// (storage is not read: meta tensors are fine).
Judgment judge_signature(const std::vector<HostTensor>& expected, const std::vector<HostTensor>& actual);
// judge()'s words for the first element that is not allclose.
std::string numerical_failure_detail(std::size_t output, std::int64_t element, double actual, double expected);
// expected: the reference's outputs; actual: the candidate's.
Judgment judge(const std::vector<HostTensor>& expected, const std::vector<HostTensor>& actual,
               double atol = judge_atol, double rtol = judge_rtol);
// Bitwise-equal values (NaN equal to NaN), same dtypes and shapes.
bool identical(const std::vector<HostTensor>& a, const std::vector<HostTensor>& b);

struct LineScore {
  bool passed = false;
  std::optional<double> speedup;  // baseline / kb, when both times are known
};

struct OpScore {
  std::string op;
  std::size_t lines = 0;
  std::size_t passed = 0;
  double score = 1.0;           // geometric mean of speedups (failing or untimed line: 1.0)
  bool fully_correct() const { return lines > 0 && passed == lines; }
};

struct Summary {
  std::size_t ops = 0;
  double geomean = 1.0;          // over operators' scores
  double fraction_correct = 0;   // operators fully correct / operators
  std::vector<std::pair<double, double>> perf_at;  // (p, perf@p)
};

OpScore score_op(const std::string& op, const std::vector<LineScore>& lines);
Summary summarize(const std::vector<OpScore>& ops, const std::vector<double>& ps = {0.0, 1.0, 1.5, 2.0});

}  // namespace kb::backendbench
