// kb_cpu_sampling: top_k / top_p / top_k_top_p sampling_from_probs on the
// CPU, written apart from the oracle (which sorts each row and builds the
// filtered distribution):
//
//   top-k: a streaming min-heap of the k largest values gives the pivot (the
//     k-th largest); tokens above it are kept, then tokens equal to it in
//     index order until k are kept. Kept values are renormalised (float32
//     sum, as filtered / filtered.sum()).
//   top-p: no sort. A quickselect-style partition around pivot values finds
//     the tokens whose probability mass *before* them, in decreasing order,
//     is at most p (the first token always; the one that crosses p too):
//     whole groups above the pivot are taken when their mass fits, the
//     search descends into the group where the cdf crosses p. Expected O(n).
//     p <= 0 keeps only the first maximal token; p >= 1 keeps everything.
//   draw: one uniform per row from a std::mt19937_64 seeded with the call's
//     seed, inverse CDF over the kept tokens in the order the selection left
//     them (any fixed order draws the same distribution; double sums).
//
// Same seed, same samples; different seeds give independent draws.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <queue>
#include <random>
#include <vector>

#include "harness/implementation.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels {
namespace {

struct Token {
  float v;
  std::int32_t idx;
};

bool float_dtype(DType t) { return t == DType::float32 || t == DType::float16 || t == DType::bfloat16; }
bool int_dtype(DType t) { return t == DType::int32 || t == DType::int64; }

std::string supports(const Definition& d) {
  if (d.op_type != "sampling") return "not a sampling definition";
  auto probs = input_index(d, "probs");
  auto top_k = input_index(d, "top_k");
  auto top_p = input_index(d, "top_p");
  if (!probs || (!top_k && !top_p) || d.inputs.size() != 1 + (top_k ? 1u : 0u) + (top_p ? 1u : 0u))
    return "needs inputs probs and top_k and/or top_p";
  const TensorSpec& pr = d.inputs[*probs];
  if (pr.is_scalar() || pr.rank() != 2 || !float_dtype(pr.dtype)) return "needs probs [batch_size, vocab_size] (float)";
  if (d.outputs.size() != 1 || d.outputs[0].name != "samples" || d.outputs[0].is_scalar() ||
      d.outputs[0].rank() != 1 || !int_dtype(d.outputs[0].dtype))
    return "needs one output samples [batch_size] (int32/int64)";
  if (top_k && (d.inputs[*top_k].is_scalar() || d.inputs[*top_k].rank() != 1 || !int_dtype(d.inputs[*top_k].dtype)))
    return "needs top_k [batch_size] (int32/int64)";
  if (top_p && (d.inputs[*top_p].is_scalar() || d.inputs[*top_p].rank() != 1 || !float_dtype(d.inputs[*top_p].dtype)))
    return "needs top_p [batch_size] (float)";
  return {};
}

// Keeps the k largest of `cand` (ties at the k-th value: lowest indices).
void keep_top_k(std::vector<Token>& cand, std::int64_t k) {
  std::priority_queue<float, std::vector<float>, std::greater<float>> heap;  // the k largest seen, smallest on top
  for (const Token& t : cand) {
    if (static_cast<std::int64_t>(heap.size()) < k) heap.push(t.v);
    else if (t.v > heap.top()) {
      heap.pop();
      heap.push(t.v);
    }
  }
  float pivot = heap.top();
  std::int64_t above = 0;
  for (const Token& t : cand) above += t.v > pivot;
  std::int64_t ties_left = k - above;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < cand.size(); ++i) {  // cand is in index order
    const Token t = cand[i];
    if (t.v > pivot || (t.v == pivot && ties_left-- > 0)) cand[kept++] = t;
  }
  cand.resize(kept);
}

// Keeps the tokens of `cand` whose cdf before them (decreasing order, ties by
// index) is at most p. Values are already the distribution top-p sees. In
// place: [0, lo) holds what is kept, [lo, hi) what is still undecided.
void keep_top_p(std::vector<Token>& cand, double p) {
  std::size_t lo = 0, hi = cand.size();
  double budget = p;  // p minus the mass already kept
  while (lo < hi && budget >= 0) {
    // Median of three values as the pivot; three-way partition.
    float a = cand[lo].v, b = cand[lo + (hi - lo) / 2].v, c = cand[hi - 1].v;
    float pv = std::max(std::min(a, b), std::min(std::max(a, b), c));
    auto first = cand.begin() + static_cast<std::ptrdiff_t>(lo), last = cand.begin() + static_cast<std::ptrdiff_t>(hi);
    auto eq_begin = std::partition(first, last, [pv](const Token& t) { return t.v > pv; });
    auto eq_end = std::partition(eq_begin, last, [pv](const Token& t) { return t.v == pv; });
    double mg = 0;
    for (auto it = first; it != eq_begin; ++it) mg += it->v;
    if (mg > budget) {  // the cdf crosses p among the larger values
      hi = static_cast<std::size_t>(eq_begin - cand.begin());
      continue;
    }
    lo = static_cast<std::size_t>(eq_begin - cand.begin());  // all larger values kept
    std::sort(eq_begin, eq_end, [](const Token& x, const Token& y) { return x.idx < y.idx; });
    double before = mg;
    bool all_equal = true;
    for (auto it = eq_begin; it != eq_end; ++it) {
      if (before > budget) {
        all_equal = false;
        break;
      }
      before += it->v;
      ++lo;
    }
    if (!all_equal) break;
    budget -= before;
  }
  cand.resize(lo);
}

Status run(const ImplementationCall& c) {
  const Definition& d = c.definition;
  const Tensor& probs = *c.inputs[*input_index(d, "probs")].tensor;
  auto ki = input_index(d, "top_k");
  auto pi = input_index(d, "top_p");
  const Tensor* top_k = ki ? c.inputs[*ki].tensor : nullptr;
  const Tensor* top_p = pi ? c.inputs[*pi].tensor : nullptr;
  Tensor& out = c.outputs[0];
  if (probs.rank() != 2 || out.rank() != 1 || out.dim(0) != probs.dim(0))
    return make_error(Code::invalid_argument, "kb_cpu_sampling: probs must be [batch, vocab] and samples [batch]");
  const std::int64_t batch = probs.dim(0), vocab = probs.dim(1);
  if (vocab <= 0 || vocab > INT32_MAX) return make_error(Code::invalid_argument, "kb_cpu_sampling: bad vocab_size");
  std::vector<float> converted;
  if (probs.dtype() != DType::float32) converted = to_float(probs);
  const float* all = probs.dtype() == DType::float32 ? probs.data<float>() : converted.data();
  std::mt19937_64 rng(c.seed);
  thread_local std::vector<Token> cand;  // reused: a vocabulary-sized buffer per call is costly
  for (std::int64_t r = 0; r < batch; ++r) {
    const float* row = all + r * vocab;
    cand.resize(static_cast<std::size_t>(vocab));
    for (std::int64_t j = 0; j < vocab; ++j) {
      if (!(row[j] >= 0) || !std::isfinite(row[j]))
        return make_error(Code::invalid_argument,
                          fmt::format("kb_cpu_sampling: probs[{}, {}] = {} is not a probability", r, j, row[j]));
      cand[static_cast<std::size_t>(j)] = {row[j], static_cast<std::int32_t>(j)};
    }
    if (top_k) {
      auto k = static_cast<std::int64_t>(element_as_double(*top_k, r));
      if (k > 0 && k < vocab) {
        keep_top_k(cand, k);
        float sum = 0;
        for (const Token& t : cand) sum += t.v;
        if (!(sum > 0)) return make_error(Code::invalid_argument, fmt::format("kb_cpu_sampling: row {}: top-k keeps no mass", r));
        for (Token& t : cand) t.v /= sum;
      }
    }
    if (top_p) {
      double p = element_as_double(*top_p, r);
      if (p <= 0) {
        std::size_t best = 0;
        for (std::size_t j = 1; j < cand.size(); ++j)
          if (cand[j].v > cand[best].v) best = j;
        Token only{1, cand[best].idx};  // certain
        cand.assign(1, only);
      } else if (p < 1) {
        keep_top_p(cand, p);
      }
    }
    double total = 0;
    for (const Token& t : cand) total += t.v;
    if (!(total > 0)) return make_error(Code::invalid_argument, fmt::format("kb_cpu_sampling: row {} has no mass", r));
    double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * total;
    std::int32_t pick = -1;
    double acc = 0;
    for (const Token& t : cand) {
      if (t.v <= 0) continue;
      pick = t.idx;
      acc += t.v;
      if (u < acc) break;
    }
    if (out.dtype() == DType::int64) out.data<std::int64_t>()[r] = pick;
    else out.data<std::int32_t>()[r] = pick;
  }
  return ok_status();
}

}  // namespace

void add_sampling_cpu(Registry& r) {
  Implementation impl;
  impl.name = "kb_cpu_sampling";
  impl.author = "kb";
  impl.device = Device::cpu;
  impl.description = "top-k / top-p sampling on the CPU: heap top-k, sort-free top-p selection, inverse CDF";
  impl.supports = supports;
  impl.run = run;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
