// The sampling oracle's filtered distributions, for judging sampling
// solutions by distribution (support and total variation distance) rather
// than element-wise.
#pragma once

#include <vector>

#include "common/result.hpp"
#include "oracle/oracle.hpp"

namespace kb {

// For each row of `probs`, the distribution the definition's reference samples
// from: top-k / top-p filtered by the reference's own rules and renormalised
// (a one-hot row at the argmax where top_p <= 0). One vector of vocab_size
// probabilities (summing to 1) per row. Errors as the oracle's run().
Result<std::vector<std::vector<double>>> sampling_distribution(const OracleCall& call);

}  // namespace kb
