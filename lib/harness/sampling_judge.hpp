// Judging sampling solutions by distribution, not element by element (a
// random sampler's samples never match the oracle's draws).
//
// The rule is FlashInfer-Bench's (support, then total variation distance),
// sized for a CPU: the harness calls the solution `draws` times on the same
// inputs, each call with its own seed, and collects one sample per row per
// call. Then
//
//  1. support: every sample must be a token the reference can draw, i.e. one
//     of positive probability after the definition's top-k / top-p masking
//     (kb's sampling oracle, sampling_distribution()). Two allowances, both
//     about rules the reference leaves open or computes in float32:
//       - ties: a token whose input probability equals that of a kept token
//         is interchangeable with it (torch's sort leaves the order of equal
//         values unspecified); it is counted as that kept token;
//       - the top-p boundary: tokens kept when p is raised by `top_p_slack`
//         (default 0.01) are accepted. A float32 running sum over 128k
//         sorted probabilities can be off by up to n * 2^-24 * 1 ~ 0.008, so
//         a faithful float32 implementation may keep a token or two more or
//         fewer than the oracle's double-precision cdf does. (FlashInfer-Bench
//         allows 0.05.) These tokens count towards the distance as mass where
//         the reference has none.
//     A sample outside both is INCORRECT_NUMERICAL at once.
//  2. distance: per row, the total variation distance (TVD) between the
//     samples' frequencies and the reference distribution, over B bins of
//     the reference's support. With N draws, a correct sampler's empirical
//     TVD over B bins satisfies
//         E[TVD] <= 1/2 * sum_b sqrt(q_b (1 - q_b) / N) <= 1/2 * sqrt((B - 1) / N)
//     (Jensen, then Cauchy-Schwarz), and since one sample moves the TVD by at
//     most 1/N, McDiarmid's inequality gives
//         P(TVD > E[TVD] + t) <= exp(-2 N t^2),  t = sqrt(ln(1 / delta) / (2 N)).
//     The threshold for a row is therefore 1/2 sqrt((B - 1) / N) + t, which a
//     correct sampler exceeds with probability below delta (default 1e-6 per
//     row and trial). It never exceeds FlashInfer-Bench's 0.2: B is capped at
//     the largest number of bins for which it stays under `tvd_threshold`
//     (about 160 bins at N = 2000, 55 at N = 1000). When the support has more
//     tokens than that (top-p over a flat row keeps thousands), tokens are
//     merged into bins of about equal reference mass in order of decreasing
//     probability; merging can only lower the TVD, so the test stays sound,
//     and it still sees the shape of the distribution (a sampler that always
//     returns the argmax puts all its mass in the first bin). Where the
//     support is small each token is its own bin and the threshold is tighter
//     (5 tokens at N = 1000: 0.10).
//     A row over its threshold is INCORRECT_NUMERICAL.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "oracle/oracle.hpp"
#include "schema/model.hpp"
#include "tensor/tensor.hpp"

namespace kb {

struct SamplingOptions {
  int draws = 1000;                       // solution calls per trial, one sample per row each
  double tvd_threshold = 0.2;             // cap on the per-row threshold (FlashInfer-Bench's value)
  double false_failure_probability = 1e-6;  // per row and trial, for a correct sampler
  double top_p_slack = 1e-2;              // see above
};

// Definitions judged by distribution: op_type "sampling".
bool judged_by_distribution(const Definition& d);

// The smallest number of draws for which a two-bin TVD test fits under
// opt.tvd_threshold.
int minimum_sampling_draws(const SamplingOptions& opt);

struct SamplingVerdict {
  EvalStatus status = EvalStatus::passed;  // passed, incorrect_shape, incorrect_dtype or incorrect_numerical
  std::string detail;                      // first problem, or a one-line summary when passed
  double max_tvd = 0;                      // over rows
  double tvd_threshold = 0;                // threshold of the row with the largest TVD
  double max_abs = 0;                      // max |frequency - probability| over rows and bins
  double max_rel = 0;                      // that over (probability + 1e-8)
  int max_bins = 0;                        // most bins any row used
};

// One trial's distribution test. Build it from the trial's inputs, feed it
// every call's outputs with add(), then finish().
class SamplingJudge {
 public:
  static Result<SamplingJudge> create(const Definition& d, const AxisValues& axes, std::span<const Arg> inputs,
                                      const SamplingOptions& opt);

  // Checks one call's outputs (definition order): shape, dtype, vocabulary
  // range and support. Returns the first problem, or nullopt.
  std::optional<SamplingVerdict> add(std::span<const Tensor> outputs);
  // The TVD test over everything added so far.
  SamplingVerdict finish() const;

  std::int64_t rows() const { return static_cast<std::int64_t>(rows_.size()); }
  std::int64_t draws_added() const { return draws_; }
  // The seed of call `draw` of a trial whose seed is `trial_seed`: distinct,
  // well-mixed 64-bit values.
  static std::uint64_t draw_seed(std::uint64_t trial_seed, int draw);
  // How the test is set up, for the evaluation log.
  std::string describe() const;

 private:
  struct Row {
    std::vector<std::int32_t> bin_of_token;  // -1: not allowed; bins() + 0: allowed, reference mass 0
    std::vector<double> bin_mass;            // reference probability of each bin
    std::vector<std::int64_t> counts;        // bin_mass.size() + 1 entries (the last: mass-0 tokens)
    std::int64_t support = 0;                // tokens of positive reference probability
  };
  SamplingJudge() = default;
  std::string output_name_;
  std::vector<std::int64_t> shape_;
  DType dtype_ = DType::int64;
  std::int64_t vocab_ = 0;
  std::vector<Row> rows_;
  std::int64_t draws_ = 0;
  SamplingOptions opt_;
  int max_bins_ = 0;
};

}  // namespace kb
