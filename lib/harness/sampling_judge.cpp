#include "harness/sampling_judge.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <new>
#include <numeric>

#include "common/parallel.hpp"
#include "inputs/inputs.hpp"
#include "../../kernels/sampling/sampling_oracle.hpp"  // lib/ has no kernels/ include path
#include "tensor/convert.hpp"

namespace kb {

namespace {

// McDiarmid's margin: P(TVD > E[TVD] + t) <= exp(-2 N t^2) = delta.
double concentration_margin(double draws, double delta) { return std::sqrt(std::log(1.0 / delta) / (2.0 * draws)); }

// The most bins whose threshold 1/2 sqrt((B-1)/N) + t stays under the cap.
std::int64_t max_bins_for(double draws, const SamplingOptions& opt) {
  double room = opt.tvd_threshold - concentration_margin(draws, opt.false_failure_probability);
  if (room <= 0) return 1;
  return 1 + static_cast<std::int64_t>(std::floor(draws * 4.0 * room * room));
}

double row_threshold(std::size_t bins, double draws, const SamplingOptions& opt) {
  double b = static_cast<double>(bins);
  return 0.5 * std::sqrt(std::max(0.0, b - 1.0) / draws) + concentration_margin(draws, opt.false_failure_probability);
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

bool judged_by_distribution(const Definition& d) { return d.op_type == "sampling"; }

int minimum_sampling_draws(const SamplingOptions& opt) {
  for (int n = 1; n < 100000000; n = n < 64 ? n + 1 : n + n / 64)
    if (max_bins_for(n, opt) >= 2) return n;
  return 100000000;
}

std::uint64_t SamplingJudge::draw_seed(std::uint64_t trial_seed, int draw) {
  return splitmix64(splitmix64(trial_seed) ^ splitmix64(0x5a4d504c45ull + static_cast<std::uint64_t>(draw)));
}

Result<SamplingJudge> SamplingJudge::create(const Definition& d, const AxisValues& axes, std::span<const Arg> inputs,
                                            const SamplingOptions& opt) {
  if (!judged_by_distribution(d))
    return make_error(Code::invalid_argument, fmt::format("{}: op_type {} is not judged by distribution", d.name, d.op_type));
  if (opt.draws < minimum_sampling_draws(opt) || !(opt.tvd_threshold > 0 && opt.tvd_threshold < 1) ||
      !(opt.false_failure_probability > 0 && opt.false_failure_probability < 1) || !(opt.top_p_slack >= 0))
    return make_error(Code::invalid_argument,
                      fmt::format("sampling judge: {} draws cannot test a TVD threshold of {} with a false-failure "
                                  "probability of {} (at least {} draws are needed)",
                                  opt.draws, opt.tvd_threshold, opt.false_failure_probability,
                                  minimum_sampling_draws(opt)));
  auto oi = output_index(d, "samples");
  if (!oi || d.outputs.size() != 1 || d.outputs[0].is_scalar() || d.outputs[0].rank() != 1)
    return make_error(Code::unsupported,
                      fmt::format("{}: sampling judge expects a single output samples [batch_size]", d.name));
  auto pi = input_index(d, "probs");
  if (!pi || !inputs[*pi].tensor || inputs[*pi].tensor->rank() != 2)
    return make_error(Code::unsupported, fmt::format("{}: sampling judge expects an input probs [batch_size, vocab_size]", d.name));
  try {
    SamplingJudge j;
    j.opt_ = opt;
    j.output_name_ = d.outputs[0].name;
    j.dtype_ = d.outputs[0].dtype;
    j.shape_ = bound_shape(d.outputs[0], axes);
    const Tensor& probs = *inputs[*pi].tensor;
    const std::int64_t batch = probs.dim(0), V = probs.dim(1);
    j.vocab_ = V;
    if (j.shape_ != std::vector<std::int64_t>{batch})
      return make_error(Code::invalid_argument,
                        fmt::format("{}: samples has shape [{}] but probs has {} rows", d.name, fmt::join(j.shape_, ", "), batch));

    // The reference's distributions (rules checked by the sampling oracle).
    std::vector<Tensor> scratch;  // sampling_distribution takes the outputs span but does not write it
    auto dist = sampling_distribution(OracleCall{d, axes, inputs, std::span<Tensor>(scratch), 0});
    if (!dist) return std::move(dist).error();
    // The same with top-p raised by the slack (rows with 0 < p < 1 only).
    std::vector<std::vector<double>> loose;
    auto ti = input_index(d, "top_p");
    if (ti && opt.top_p_slack > 0 && inputs[*ti].tensor) {
      Tensor raised = inputs[*ti].tensor->clone();
      std::vector<float> p = to_float(raised);
      for (float& v : p)
        if (v > 0 && v < 1) v = static_cast<float>(std::min(1.0, static_cast<double>(v) + opt.top_p_slack));
      KB_TRY(store_float(p, raised));
      std::vector<Arg> args(inputs.begin(), inputs.end());
      args[*ti].tensor = &raised;
      auto l = sampling_distribution(OracleCall{d, axes, args, std::span<Tensor>(scratch), 0});
      if (!l) return std::move(l).error();
      loose = std::move(*l);
    }

    const double n_planned = static_cast<double>(opt.draws);
    const std::int64_t cap = max_bins_for(n_planned, opt);
    j.rows_.resize(static_cast<std::size_t>(batch));
    // Rows are independent: set up on several threads, each writing only its
    // own Row and bin count.
    std::vector<std::int32_t> row_bins(static_cast<std::size_t>(batch), 0);
    std::atomic<bool> out_of_memory{false};
    parallel_for(batch, 16, [&](std::int64_t r) {
      try {
        const std::vector<double>& q = (*dist)[static_cast<std::size_t>(r)];
        Row& row = j.rows_[static_cast<std::size_t>(r)];
        row.bin_of_token.assign(static_cast<std::size_t>(V), -1);
        std::vector<std::int64_t> kept;
        for (std::int64_t t = 0; t < V; ++t)
          if (q[static_cast<std::size_t>(t)] > 0) kept.push_back(t);
        row.support = static_cast<std::int64_t>(kept.size());
        std::sort(kept.begin(), kept.end(), [&](std::int64_t a, std::int64_t b) {
          double qa = q[static_cast<std::size_t>(a)], qb = q[static_cast<std::size_t>(b)];
          return qa != qb ? qa > qb : a < b;
        });
        // Bins: one per token when the support fits under the cap, else runs
        // of about 1/cap of the reference mass each, in decreasing probability.
        std::int32_t bins = 0;
        double cdf = 0;
        std::int64_t last_raw = -1;
        for (std::int64_t t : kept) {
          std::int64_t raw = static_cast<std::int64_t>(kept.size()) <= cap
                                 ? last_raw + 1
                                 : std::min<std::int64_t>(cap - 1, static_cast<std::int64_t>(std::floor(cdf * static_cast<double>(cap))));
          if (raw != last_raw) {
            row.bin_mass.push_back(0);
            ++bins;
            last_raw = raw;
          }
          row.bin_of_token[static_cast<std::size_t>(t)] = bins - 1;
          row.bin_mass.back() += q[static_cast<std::size_t>(t)];
          cdf += q[static_cast<std::size_t>(t)];
        }
        row.counts.assign(row.bin_mass.size() + 1, 0);
        row_bins[static_cast<std::size_t>(r)] = bins;
        // Ties with a kept token count as that token; tokens inside the
        // top-p slack are allowed with reference mass 0.
        std::vector<std::pair<double, std::int32_t>> by_value;
        by_value.reserve(kept.size());
        for (std::int64_t t : kept)
          by_value.emplace_back(element_as_double(probs, r * V + t), row.bin_of_token[static_cast<std::size_t>(t)]);
        std::sort(by_value.begin(), by_value.end());
        for (std::int64_t t = 0; t < V; ++t) {
          auto& b = row.bin_of_token[static_cast<std::size_t>(t)];
          if (b >= 0) continue;
          double v = element_as_double(probs, r * V + t);
          auto it = std::lower_bound(by_value.begin(), by_value.end(), std::pair<double, std::int32_t>{v, -1});
          if (v > 0 && it != by_value.end() && it->first == v)
            b = it->second;
          else if (!loose.empty() && loose[static_cast<std::size_t>(r)][static_cast<std::size_t>(t)] > 0)
            b = bins;
        }
      } catch (const std::bad_alloc&) {
        out_of_memory = true;
      }
    });
    if (out_of_memory) throw std::bad_alloc();
    for (std::int32_t bins : row_bins) j.max_bins_ = std::max(j.max_bins_, bins);
    return j;
  } catch (const std::bad_alloc&) {
    return make_error(Code::out_of_memory, d.name + ": sampling judge: out of memory");
  }
}

std::optional<SamplingVerdict> SamplingJudge::add(std::span<const Tensor> outputs) {
  auto fail = [&](EvalStatus s, std::string detail) {
    SamplingVerdict v;
    v.status = s;
    v.detail = fmt::format("output \"{}\": {}", output_name_, detail);
    return v;
  };
  if (outputs.size() != 1)
    return fail(EvalStatus::incorrect_shape, fmt::format("{} outputs, expected 1", outputs.size()));
  const Tensor& got = outputs[0];
  if (got.shape() != shape_)
    return fail(EvalStatus::incorrect_shape,
                fmt::format("shape [{}], expected [{}]", fmt::join(got.shape(), ", "), fmt::join(shape_, ", ")));
  if (got.dtype() != dtype_)
    return fail(EvalStatus::incorrect_dtype,
                fmt::format("dtype {}, expected {}", dtype_name(got.dtype()), dtype_name(dtype_)));
  if (got.dtype() != DType::int64 && got.dtype() != DType::int32)
    return fail(EvalStatus::incorrect_dtype, fmt::format("dtype {} cannot hold token ids", dtype_name(got.dtype())));
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    std::int64_t s = got.dtype() == DType::int64 ? got.data<std::int64_t>()[r] : got.data<std::int32_t>()[r];
    if (s < 0 || s >= vocab_)
      return fail(EvalStatus::incorrect_numerical,
                  fmt::format("row {}: sample {} is outside the vocabulary [0, {})", r, s, vocab_));
    Row& row = rows_[r];
    std::int32_t b = row.bin_of_token[static_cast<std::size_t>(s)];
    if (b < 0)
      return fail(EvalStatus::incorrect_numerical,
                  fmt::format("row {}: sample {} is outside the support: probability 0 after top-k/top-p masking "
                              "(the reference keeps {} of {} tokens)",
                              r, s, row.support, vocab_));
    ++row.counts[static_cast<std::size_t>(b)];
  }
  ++draws_;
  return std::nullopt;
}

SamplingVerdict SamplingJudge::finish() const {
  SamplingVerdict v;
  v.max_bins = max_bins_;
  if (draws_ == 0) {
    v.status = EvalStatus::incorrect_numerical;
    v.detail = "no samples were collected";
    return v;
  }
  const double n = static_cast<double>(draws_);
  std::optional<std::size_t> worst_fail;
  double worst_excess = 0;
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    const Row& row = rows_[r];
    double tvd = 0;
    for (std::size_t b = 0; b < row.counts.size(); ++b) {
      double f = static_cast<double>(row.counts[b]) / n;
      double q = b < row.bin_mass.size() ? row.bin_mass[b] : 0.0;
      double diff = std::fabs(f - q);
      tvd += diff;
      v.max_abs = std::max(v.max_abs, diff);
      v.max_rel = std::max(v.max_rel, diff / (q + 1e-8));
    }
    tvd *= 0.5;
    double thr = row_threshold(row.bin_mass.size(), n, opt_);
    if (tvd >= v.max_tvd) {
      v.max_tvd = tvd;
      v.tvd_threshold = thr;
    }
    if (tvd > thr && (!worst_fail || tvd - thr > worst_excess)) {
      worst_fail = r;
      worst_excess = tvd - thr;
    }
  }
  if (worst_fail) {
    const Row& row = rows_[*worst_fail];
    double tvd = 0;
    for (std::size_t b = 0; b < row.counts.size(); ++b)
      tvd += std::fabs(static_cast<double>(row.counts[b]) / n - (b < row.bin_mass.size() ? row.bin_mass[b] : 0.0));
    tvd *= 0.5;
    v.status = EvalStatus::incorrect_numerical;
    v.detail = fmt::format(
        "output \"{}\": row {}: total variation distance {:.4f} between the frequencies of {} samples and the "
        "reference distribution ({} bins over {} tokens) exceeds the threshold {:.4f}",
        output_name_, *worst_fail, tvd, draws_, row.bin_mass.size(), row.support,
        row_threshold(row.bin_mass.size(), n, opt_));
    return v;
  }
  v.detail = fmt::format("max total variation distance {:.4f} (threshold {:.4f}) over {} rows, {} samples each",
                         v.max_tvd, v.tvd_threshold, rows_.size(), draws_);
  return v;
}

std::string SamplingJudge::describe() const {
  return fmt::format(
      "sampling: judged by distribution: {} calls per trial with distinct seeds; every sample inside the top-k/top-p "
      "support (ties allowed, top-p slack {}); per-row TVD over up to {} bins against 1/2 sqrt((B-1)/N) + "
      "sqrt(ln(1/{})/(2N)), at most {}",
      opt_.draws, opt_.top_p_slack, max_bins_for(opt_.draws, opt_), opt_.false_failure_probability, opt_.tvd_threshold);
}

}  // namespace kb
