// CPU oracle for op_type "sampling": top_k / top_p / top_k_top_p
// sampling_from_probs. For each row it builds the distribution the
// definition's reference draws from, following the reference's rules:
//
//   top-k (when 0 < k < vocab_size, else no filtering): keep the k largest
//     probabilities, renormalise (row / row.sum() in float32);
//   top-p, applied after top-k: p <= 0 -> argmax (first maximal index), a
//     one-hot row; p < 1 -> sort descending, cdf = cumsum, drop a token when
//     the cdf *before* it already exceeds p (the first token is always kept),
//     renormalise; p >= 1 (or NaN) -> no filtering;
//
// then draws one sample per row with a splitmix64 stream seeded by call.seed.
// Ties are broken by index (the lower index counts as larger), where torch's
// argsort/sort leave the order among equal values unspecified. The cdf is
// accumulated in double over the float32 row. Rows must be finite,
// non-negative and of positive sum (torch.multinomial's own conditions).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <new>
#include <numeric>
#include <string>
#include <vector>

#include "common/parallel.hpp"
#include "oracle/oracle.hpp"
#include "sampling_oracle.hpp"
#include "tensor/convert.hpp"

namespace kb {
namespace kernels {
namespace {

// Threads for the per-row distributions (each row sorts or selects over the
// whole vocabulary).
constexpr unsigned kSamplingThreads = 16;

std::string squeezed(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') out.push_back(c);
  return out;
}

bool float_dtype(DType t) { return t == DType::float32 || t == DType::float16 || t == DType::bfloat16; }
bool int_dtype(DType t) { return t == DType::int32 || t == DType::int64; }

// Fragments of the reference each rule needs (whitespace removed).
constexpr const char* kTopKRule[] = {"0<k<vocab_size", "argsort(row,descending=True)", "[:k]"};
constexpr const char* kTopPRule[] = {"p<=0.0", "torch.argmax(row)", "torch.sort(row,descending=True)",
                                     "cumsum(vals", "cdf>p", "[1:]=to_remove[:-1]", "to_remove[0]=False"};

std::string supports(const Definition& d) {
  if (d.op_type != "sampling") return fmt::format("op_type {} is not sampling", d.op_type);
  auto probs = input_index(d, "probs");
  auto top_k = input_index(d, "top_k");
  auto top_p = input_index(d, "top_p");
  if (!probs || (!top_k && !top_p) || d.inputs.size() != 1 + (top_k ? 1u : 0u) + (top_p ? 1u : 0u))
    return "sampling oracle expects inputs probs and top_k and/or top_p, nothing else";
  if (d.outputs.size() != 1 || d.outputs[0].name != "samples")
    return "sampling oracle expects a single output named samples";
  const TensorSpec& pr = d.inputs[*probs];
  const TensorSpec& out = d.outputs[0];
  if (pr.is_scalar() || pr.rank() != 2 || !float_dtype(pr.dtype))
    return "sampling oracle expects probs [batch_size, vocab_size] of a float dtype";
  const std::string& batch = (*pr.shape)[0];
  if (out.is_scalar() || out.rank() != 1 || (*out.shape)[0] != batch || !int_dtype(out.dtype))
    return "sampling oracle expects samples [batch_size] of int64/int32";
  if (top_k) {
    const TensorSpec& t = d.inputs[*top_k];
    if (t.is_scalar() || t.rank() != 1 || (*t.shape)[0] != batch || !int_dtype(t.dtype))
      return "sampling oracle expects top_k [batch_size] of int32/int64";
  }
  if (top_p) {
    const TensorSpec& t = d.inputs[*top_p];
    if (t.is_scalar() || t.rank() != 1 || (*t.shape)[0] != batch || !float_dtype(t.dtype))
      return "sampling oracle expects top_p [batch_size] of a float dtype";
  }
  std::string r = squeezed(d.reference);
  if (r.find("multinomial(row") == std::string::npos)
    return "sampling oracle: the reference does not draw with torch.multinomial(row, ...)";
  if (top_k)
    for (const char* f : kTopKRule)
      if (r.find(f) == std::string::npos)
        return fmt::format("sampling oracle: the reference's top-k rule differs from the one implemented (no '{}')", f);
  if (top_p)
    for (const char* f : kTopPRule)
      if (r.find(f) == std::string::npos)
        return fmt::format("sampling oracle: the reference's top-p rule differs from the one implemented (no '{}')", f);
  if (top_k && top_p && r.find(kTopKRule[0]) > r.find("cdf>p"))
    return "sampling oracle: the reference applies top-p before top-k; this oracle applies top-k first";
  return {};
}

struct Inputs {
  const Tensor* probs = nullptr;
  const Tensor* top_k = nullptr;
  const Tensor* top_p = nullptr;
  std::int64_t batch = 0;
  std::int64_t vocab = 0;
};

Result<Inputs> gather(const OracleCall& call) {
  const Definition& d = call.definition;
  if (std::string why = supports(d); !why.empty()) return make_error(Code::unsupported, d.name + ": " + why);
  if (call.inputs.size() != d.inputs.size())
    return make_error(Code::invalid_argument, d.name + ": sampling oracle: wrong number of inputs");
  for (const Arg& a : call.inputs)
    if (!a.tensor) return make_error(Code::invalid_argument, d.name + ": sampling oracle: every input must be a tensor");
  Inputs in;
  in.probs = call.inputs[*input_index(d, "probs")].tensor;
  if (auto i = input_index(d, "top_k")) in.top_k = call.inputs[*i].tensor;
  if (auto i = input_index(d, "top_p")) in.top_p = call.inputs[*i].tensor;
  if (in.probs->rank() != 2)
    return make_error(Code::invalid_argument, d.name + ": sampling oracle: probs must be [batch_size, vocab_size]");
  in.batch = in.probs->dim(0);
  in.vocab = in.probs->dim(1);
  for (const Tensor* t : {in.top_k, in.top_p})
    if (t && (t->rank() != 1 || t->dim(0) != in.batch))
      return make_error(Code::invalid_argument,
                        fmt::format("{}: sampling oracle: top_k/top_p must have batch_size = {} entries", d.name,
                                    in.batch));
  return in;
}

// Row i's distribution (vocab values, summing to 1) into dist.
Status row_distribution(const OracleCall& call, const Inputs& in, std::int64_t i, std::vector<double>& dist) {
  const std::string& name = call.definition.name;
  const std::int64_t V = in.vocab;
  std::vector<float> row(static_cast<std::size_t>(V));
  for (std::int64_t j = 0; j < V; ++j) {
    double v = element_as_double(*in.probs, i * V + j);
    if (!std::isfinite(v) || v < 0)
      return make_error(Code::invalid_argument,
                        fmt::format("{}: sampling oracle: probs[{}, {}] = {} (must be finite and >= 0)", name, i, j, v));
    row[static_cast<std::size_t>(j)] = static_cast<float>(v);
  }
  // Larger first; equal values by index.
  auto before = [&](std::int64_t a, std::int64_t b) {
    float va = row[static_cast<std::size_t>(a)], vb = row[static_cast<std::size_t>(b)];
    return va != vb ? va > vb : a < b;
  };
  auto renormalise = [&](const std::vector<char>& keep) -> Status {
    double sum = 0;
    for (std::int64_t j = 0; j < V; ++j)
      if (keep[static_cast<std::size_t>(j)]) sum += row[static_cast<std::size_t>(j)];
    if (!(sum > 0))
      return make_error(Code::invalid_argument,
                        fmt::format("{}: sampling oracle: row {} keeps no probability mass", name, i));
    auto sum_f = static_cast<float>(sum);
    for (std::int64_t j = 0; j < V; ++j) {
      float& v = row[static_cast<std::size_t>(j)];
      v = keep[static_cast<std::size_t>(j)] ? v / sum_f : 0.0f;  // float32, as filtered / filtered.sum()
    }
    return ok_status();
  };
  std::vector<std::int64_t> order(static_cast<std::size_t>(V));

  if (in.top_k) {
    std::int64_t k = static_cast<std::int64_t>(element_as_double(*in.top_k, i));
    if (0 < k && k < V) {
      std::iota(order.begin(), order.end(), 0);
      std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), before);
      std::vector<char> keep(static_cast<std::size_t>(V), 0);
      for (std::int64_t j = 0; j < V; ++j)
        if (!before(order[static_cast<std::size_t>(k - 1)], j)) keep[static_cast<std::size_t>(j)] = 1;
      KB_TRY(renormalise(keep));
    }
  }
  if (in.top_p) {
    double p = element_as_double(*in.top_p, i);
    if (p <= 0.0) {
      std::int64_t arg = 0;
      for (std::int64_t j = 1; j < V; ++j)
        if (row[static_cast<std::size_t>(j)] > row[static_cast<std::size_t>(arg)]) arg = j;
      dist.assign(static_cast<std::size_t>(V), 0.0);
      if (V > 0) dist[static_cast<std::size_t>(arg)] = 1.0;
      return ok_status();
    }
    if (p < 1.0) {
      // Zero entries add nothing to the cdf and keep no mass: sort only the rest.
      order.clear();
      for (std::int64_t j = 0; j < V; ++j)
        if (row[static_cast<std::size_t>(j)] > 0) order.push_back(j);
      std::sort(order.begin(), order.end(), before);
      std::vector<char> keep(static_cast<std::size_t>(V), 0);
      double cdf = 0;
      for (std::size_t r = 0; r < order.size(); ++r) {
        // Kept when nothing before it has pushed the cdf past p.
        if (r > 0 && cdf > p) break;
        std::int64_t j = order[r];
        keep[static_cast<std::size_t>(j)] = 1;
        cdf += row[static_cast<std::size_t>(j)];
      }
      KB_TRY(renormalise(keep));
    }
  }
  double sum = 0;
  for (float v : row) sum += v;
  if (!(sum > 0) || !std::isfinite(sum))
    return make_error(Code::invalid_argument,
                      fmt::format("{}: sampling oracle: row {} of probs has no positive mass", name, i));
  dist.resize(static_cast<std::size_t>(V));
  for (std::int64_t j = 0; j < V; ++j) dist[static_cast<std::size_t>(j)] = row[static_cast<std::size_t>(j)] / sum;
  return ok_status();
}

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Status run_checked(const OracleCall& call) {
  auto in = gather(call);
  if (!in) return std::move(in).error();
  if (call.outputs.size() != 1 || call.outputs[0].rank() != 1 || call.outputs[0].dim(0) != in->batch ||
      !int_dtype(call.outputs[0].dtype()))
    return make_error(Code::invalid_argument,
                      call.definition.name + ": sampling oracle: samples must be an int64/int32 [batch_size] tensor");
  Tensor& out = call.outputs[0];
  std::uint64_t state = call.seed;
  std::vector<double> dist;
  for (std::int64_t i = 0; i < in->batch; ++i) {
    KB_TRY(row_distribution(call, *in, i, dist));
    double u = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;  // [0, 1)
    std::int64_t pick = -1, last = -1;
    double cum = 0;
    for (std::size_t j = 0; j < dist.size(); ++j) {
      if (dist[j] <= 0) continue;
      last = static_cast<std::int64_t>(j);
      cum += dist[j];
      if (u < cum) {
        pick = last;
        break;
      }
    }
    if (pick < 0) pick = last;  // u beyond the rounded total: the last token with mass
    if (out.dtype() == DType::int64)
      out.data<std::int64_t>()[i] = pick;
    else
      out.data<std::int32_t>()[i] = static_cast<std::int32_t>(pick);
  }
  return ok_status();
}

Status run(const OracleCall& call) {
  try {
    return run_checked(call);
  } catch (const std::bad_alloc&) {
    return make_error(Code::out_of_memory, call.definition.name + ": sampling oracle: out of memory");
  }
}

}  // namespace
extern const OracleEntry sampling_oracle{"sampling", "top_k / top_p / top_k_top_p sampling_from_probs", supports,
                                         run};
}  // namespace kernels

Result<std::vector<std::vector<double>>> sampling_distribution(const OracleCall& call) {
  try {
    auto in = kernels::gather(call);
    if (!in) return std::move(in).error();
    // Rows are independent (a top-p row sorts its whole vocabulary): computed
    // on several threads, the first failing row's error reported.
    const auto batch = static_cast<std::size_t>(in->batch);
    std::vector<std::vector<double>> rows(batch);
    std::vector<Status> status(batch, ok_status());
    std::atomic<bool> out_of_memory{false};
    parallel_for(in->batch, kernels::kSamplingThreads, [&](std::int64_t i) {
      try {
        status[static_cast<std::size_t>(i)] = kernels::row_distribution(call, *in, i, rows[static_cast<std::size_t>(i)]);
      } catch (const std::bad_alloc&) {
        out_of_memory = true;
      }
    });
    if (out_of_memory) throw std::bad_alloc();
    for (Status& st : status)
      if (!st.ok()) return std::move(st).error();
    return rows;
  } catch (const std::bad_alloc&) {
    return make_error(Code::out_of_memory, call.definition.name + ": sampling oracle: out of memory");
  }
}

}  // namespace kb
