// BackendBench's judgment and score (see score.hpp).
#include "backendbench/score.hpp"

#include <fmt/format.h>

#include <cmath>
#include <complex>
#include <cstring>

namespace kb::backendbench {

const char* verdict_name(Verdict v) noexcept {
  switch (v) {
    case Verdict::passed: return "PASSED";
    case Verdict::incorrect_count: return "INCORRECT_COUNT";
    case Verdict::incorrect_dtype: return "INCORRECT_DTYPE";
    case Verdict::incorrect_shape: return "INCORRECT_SHAPE";
    case Verdict::incorrect_numerical: return "INCORRECT_NUMERICAL";
  }
  return "?";
}

std::string numerical_failure_detail(std::size_t output, std::int64_t element, double actual, double expected) {
  return fmt::format("output {}: element {} is {}, expected {}", output, element, actual, expected);
}

Judgment judge_signature(const std::vector<HostTensor>& expected, const std::vector<HostTensor>& actual) {
  Judgment j;
  if (expected.size() != actual.size()) {
    j.verdict = Verdict::incorrect_count;
    j.detail = fmt::format("{} outputs, expected {}", actual.size(), expected.size());
    return j;
  }
  for (std::size_t k = 0; k < expected.size(); ++k) {
    const HostTensor& e = expected[k];
    const HostTensor& a = actual[k];
    if (e.undefined != a.undefined) {
      j.verdict = Verdict::incorrect_count;
      j.detail = fmt::format("output {}: {}, expected {}", k, a.undefined ? "None" : "a tensor", e.undefined ? "None" : "a tensor");
      return j;
    }
    if (e.undefined) continue;
    if (e.dtype != a.dtype) {
      j.verdict = Verdict::incorrect_dtype;
      j.detail = fmt::format("output {}: dtype {}, expected {}", k, dtype_abbrev(a.dtype), dtype_abbrev(e.dtype));
      return j;
    }
    if (e.shape != a.shape) {
      j.verdict = Verdict::incorrect_shape;
      j.detail = fmt::format("output {}: shape {}, expected {}", k, shape_text(a.shape), shape_text(e.shape));
      return j;
    }
  }
  return j;
}

namespace {

// torch.isclose on complex values, as torch.testing.assert_close applies it:
// equal values match (infinities included), a NaN part on both sides matches
// (equal_nan), else |a - e| <= atol + rtol * |e| with the complex modulus.
void judge_complex(std::size_t k, const HostTensor& e, const HostTensor& a, double atol, double rtol, Judgment& j) {
  auto has_nan = [](std::complex<double> v) { return std::isnan(v.real()) || std::isnan(v.imag()); };
  const std::int64_t n = e.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::complex<double> ev = e.at_complex(i), av = a.at_complex(i);
    if (has_nan(ev) && has_nan(av)) continue;
    double abs_err = 0;
    bool ok = ev == av;
    if (!ok) {
      abs_err = std::abs(av - ev);
      ok = std::isfinite(abs_err) && abs_err <= atol + rtol * std::abs(ev);
      if (!std::isfinite(abs_err)) abs_err = INFINITY;
    }
    j.max_abs_error = std::max(j.max_abs_error, abs_err);
    if (std::abs(ev) != 0 && std::isfinite(std::abs(ev)))
      j.max_rel_error = std::max(j.max_rel_error, abs_err / std::abs(ev));
    if (!ok && j.verdict == Verdict::passed) {
      j.verdict = Verdict::incorrect_numerical;
      j.detail = fmt::format("output {}: element {} is ({}, {}), expected ({}, {})", k, i, av.real(), av.imag(),
                             ev.real(), ev.imag());
    }
  }
}

}  // namespace

Judgment judge(const std::vector<HostTensor>& expected, const std::vector<HostTensor>& actual, double atol,
               double rtol) {
  Judgment j = judge_signature(expected, actual);
  if (j.verdict != Verdict::passed) return j;
  for (std::size_t k = 0; k < expected.size(); ++k) {
    const HostTensor& e = expected[k];
    const HostTensor& a = actual[k];
    if (e.undefined) continue;
    const std::int64_t n = e.numel();
    if (is_complex(e.dtype)) {
      judge_complex(k, e, a, atol, rtol, j);
      continue;
    }
    for (std::int64_t i = 0; i < n; ++i) {
      double ev = e.at(i), av = a.at(i);
      if (std::isnan(ev) && std::isnan(av)) continue;
      bool ok;
      double abs_err;
      if (std::isinf(ev) || std::isinf(av)) {
        ok = ev == av;
        abs_err = ok ? 0.0 : INFINITY;
      } else {
        abs_err = std::fabs(av - ev);
        ok = abs_err <= atol + rtol * std::fabs(ev);  // false for NaN against a number
        if (std::isnan(abs_err)) abs_err = INFINITY;
      }
      j.max_abs_error = std::max(j.max_abs_error, abs_err);
      if (ev != 0) j.max_rel_error = std::max(j.max_rel_error, abs_err / std::fabs(ev));
      if (!ok && j.verdict == Verdict::passed) {
        j.verdict = Verdict::incorrect_numerical;
        j.detail = numerical_failure_detail(k, i, av, ev);
      }
    }
  }
  return j;
}

bool identical(const std::vector<HostTensor>& a, const std::vector<HostTensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (a[k].undefined != b[k].undefined) return false;
    if (a[k].undefined) continue;
    if (a[k].dtype != b[k].dtype || a[k].shape != b[k].shape) return false;
    if (is_complex(a[k].dtype)) {
      for (std::int64_t i = 0; i < a[k].numel(); ++i) {
        std::complex<double> x = a[k].at_complex(i), y = b[k].at_complex(i);
        for (auto [p, q] : {std::pair{x.real(), y.real()}, std::pair{x.imag(), y.imag()}})
          if (!(std::isnan(p) && std::isnan(q)) && std::memcmp(&p, &q, sizeof p) != 0) return false;
      }
      continue;
    }
    for (std::int64_t i = 0; i < a[k].numel(); ++i) {
      double x = a[k].at(i), y = b[k].at(i);
      if (std::isnan(x) && std::isnan(y)) continue;
      if (std::memcmp(&x, &y, sizeof x) != 0) return false;
    }
  }
  return true;
}

OpScore score_op(const std::string& op, const std::vector<LineScore>& lines) {
  OpScore s;
  s.op = op;
  s.lines = lines.size();
  double log_sum = 0;
  for (const LineScore& l : lines) {
    if (l.passed) ++s.passed;
    double sp = l.passed && l.speedup && *l.speedup > 0 ? *l.speedup : 1.0;
    log_sum += std::log(sp);
  }
  s.score = lines.empty() ? 1.0 : std::exp(log_sum / static_cast<double>(lines.size()));
  return s;
}

Summary summarize(const std::vector<OpScore>& ops, const std::vector<double>& ps) {
  Summary s;
  s.ops = ops.size();
  if (ops.empty()) {
    for (double p : ps) s.perf_at.emplace_back(p, 0.0);
    return s;
  }
  double log_sum = 0;
  std::size_t correct = 0;
  for (const OpScore& o : ops) {
    log_sum += std::log(o.score);
    if (o.fully_correct()) ++correct;
  }
  const double n = static_cast<double>(ops.size());
  s.geomean = std::exp(log_sum / n);
  s.fraction_correct = static_cast<double>(correct) / n;
  for (double p : ps) {
    std::size_t k = 0;
    for (const OpScore& o : ops)
      if (o.fully_correct() && o.score > p) ++k;
    s.perf_at.emplace_back(p, static_cast<double>(k) / n);
  }
  return s;
}

}  // namespace kb::backendbench
