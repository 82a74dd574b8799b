#include "harness/dsa_judge.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "tensor/convert.hpp"

namespace kb {
namespace {

const Tensor* input(const Definition& d, std::span<const Arg> inputs, std::string_view name) {
  auto i = input_index(d, name);
  return i && *i < inputs.size() ? inputs[*i].tensor : nullptr;
}

// What the judge reads of a call's inputs.
struct IndexerInputs {
  const Tensor *q, *cache, *weights, *seq_lens, *table;
  std::int64_t heads, dim, pages, page_size, max_pages;
};

std::optional<IndexerInputs> indexer_inputs(const Definition& d, std::span<const Arg> inputs, std::string& why) {
  IndexerInputs in{input(d, inputs, "q_index_fp8"), input(d, inputs, "k_index_cache_fp8"), input(d, inputs, "weights"),
                   input(d, inputs, "seq_lens"),    input(d, inputs, "block_table"),       0, 0, 0, 0, 0};
  if (!in.q || !in.cache || !in.weights || !in.seq_lens || !in.table) {
    why = "the indexer's inputs are missing";
    return std::nullopt;
  }
  if (in.q->rank() != 3 || in.cache->rank() != 4 || in.cache->dim(2) != 1 || in.cache->dim(3) != in.q->dim(2) + 4 ||
      in.cache->dtype() != DType::int8 || in.table->rank() != 2) {
    why = "the indexer's inputs have unexpected shapes";
    return std::nullopt;
  }
  in.heads = in.q->dim(1);
  in.dim = in.q->dim(2);
  in.pages = in.cache->dim(0);
  in.page_size = in.cache->dim(1);
  in.max_pages = in.table->dim(1);
  return in;
}

}  // namespace

bool judged_by_topk_scores(const Definition& d) {
  if (d.op_type != "dsa_paged" || !output_index(d, "topk_indices")) return false;
  for (const char* n : {"q_index_fp8", "k_index_cache_fp8", "weights", "seq_lens", "block_table"})
    if (!input_index(d, n)) return false;
  return true;
}

Comparison compare_topk_indices(const Definition& d, std::span<const Arg> inputs, const Tensor& got,
                                const Tensor& expected, const Tolerance& tol) {
  Comparison c;
  if (got.shape() != expected.shape()) return compare(got, expected, tol);  // shape message
  if (got.dtype() != expected.dtype()) return compare(got, expected, tol);  // dtype message
  auto wrong = [&](std::string detail) {
    c.verdict = Comparison::Verdict::wrong_values;
    c.detail = std::move(detail);
    c.max_abs = c.max_rel = std::numeric_limits<double>::infinity();
    return c;
  };
  std::string why;
  auto in = indexer_inputs(d, inputs, why);
  if (!in || got.rank() != 2) return wrong(why.empty() ? "topk_indices must be [batch, topk]" : why);
  const std::int64_t B = got.dim(0), K = got.dim(1), ps = in->page_size;
  if (in->q->dim(0) != B || in->seq_lens->numel() != B || in->table->dim(0) != B)
    return wrong("topk_indices' batch differs from the inputs'");
  const std::vector<float> qf = to_float(*in->q), wf = to_float(*in->weights);
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(in->cache->bytes());
  const std::int64_t page_bytes = ps * (in->dim + 4);
  std::vector<float> key(static_cast<std::size_t>(in->dim));
  auto score = [&](std::int64_t b, std::int64_t index) {
    const std::int64_t page = index / ps, slot = index % ps;
    float scale;
    std::memcpy(&scale, bytes + page * page_bytes + ps * in->dim + slot * 4, 4);
    const std::uint8_t* fp8 = bytes + page * page_bytes + slot * in->dim;
    for (std::int64_t e = 0; e < in->dim; ++e) key[static_cast<std::size_t>(e)] = fp8_e4m3fn_to_float(fp8[e]) * scale;
    double s = 0;
    for (std::int64_t h = 0; h < in->heads; ++h) {
      const float* qh = &qf[static_cast<std::size_t>((b * in->heads + h) * in->dim)];
      double dot = 0;
      for (std::int64_t e = 0; e < in->dim; ++e) dot += static_cast<double>(qh[e]) * key[static_cast<std::size_t>(e)];
      if (dot > 0) s += dot * wf[static_cast<std::size_t>(b * in->heads + h)];
    }
    return s;
  };
  // Validity of one row (the solution's; the reference's is checked too, so
  // a broken oracle cannot pass anything), then its sorted scores.
  constexpr double kPad = -std::numeric_limits<double>::infinity();
  auto row_scores = [&](const Tensor& t, std::int64_t b, const char* who, std::vector<double>& out) -> std::string {
    const auto len = static_cast<std::int64_t>(element_as_double(*in->seq_lens, b));
    std::vector<std::int64_t> picked;
    out.clear();
    for (std::int64_t j = 0; j < K; ++j) {
      const auto index = static_cast<std::int64_t>(element_as_double(t, b * K + j));
      if (index < 0) {
        out.push_back(kPad);
        continue;
      }
      const std::int64_t page = index / ps;
      std::int64_t slot = -1;
      for (std::int64_t s = 0; s < in->max_pages && slot < 0; ++s)
        if (static_cast<std::int64_t>(element_as_double(*in->table, b * in->max_pages + s)) == page) slot = s;
      if (slot < 0 || slot * ps + index % ps >= len || page >= in->pages)
        return fmt::format("{} row {}, position {}: index {} is not a token of the sequence (seq_len {})", who, b, j,
                           index, len);
      picked.push_back(index);
      out.push_back(score(b, index));
    }
    std::sort(picked.begin(), picked.end());
    if (auto dup = std::adjacent_find(picked.begin(), picked.end()); dup != picked.end())
      return fmt::format("{} row {}: index {} appears twice", who, b, *dup);
    std::sort(out.begin(), out.end(), std::greater<>());
    return {};
  };
  std::vector<double> ref, sol;
  c.total = B * K;
  for (std::int64_t b = 0; b < B; ++b) {
    if (auto e = row_scores(expected, b, "reference", ref); !e.empty()) return wrong(e);
    if (auto e = row_scores(got, b, "solution", sol); !e.empty()) return wrong(e);
    for (std::int64_t j = 0; j < K; ++j) {
      const double x = sol[static_cast<std::size_t>(j)], y = ref[static_cast<std::size_t>(j)];
      bool bad;
      if (!std::isfinite(x) || !std::isfinite(y)) {
        bad = x != y;
        c.nonfinite_mismatched += bad;
      } else {
        const double abs = std::fabs(x - y), rel = abs / (std::fabs(y) + 1e-8);
        c.max_abs = std::max(c.max_abs, abs);
        c.max_rel = std::max(c.max_rel, rel);
        bad = abs > tol.atol && rel > tol.rtol;
      }
      if (bad && c.mismatched++ == 0)
        c.detail = fmt::format("row {}, rank {}: the solution's score {} where the reference's is {}", b, j, x, y);
    }
  }
  const double matched = c.total ? 1.0 - static_cast<double>(c.mismatched) / static_cast<double>(c.total) : 1.0;
  if (matched < tol.required_matched_ratio) {
    c.verdict = Comparison::Verdict::wrong_values;
    c.detail = fmt::format("{} of {} sorted top-k scores outside atol={} rtol={} (matched {:.4f} < {}); first: {}",
                           c.mismatched, c.total, tol.atol, tol.rtol, matched, tol.required_matched_ratio, c.detail);
  }
  return c;
}

Comparison judge_output(const Definition& d, std::span<const Arg> inputs, std::size_t output, const Tensor& got,
                        const Tensor& expected, const Tolerance& tol) {
  if (output < d.outputs.size() && d.outputs[output].name == "topk_indices" && judged_by_topk_scores(d))
    return compare_topk_indices(d, inputs, got, expected, tol);
  return compare(got, expected, tol);
}

}  // namespace kb
