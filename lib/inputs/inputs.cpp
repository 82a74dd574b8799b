#include "inputs/inputs.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <thread>
#include <cmath>
#include <cstring>
#include <limits>
#include <filesystem>
#include <numeric>
#include <regex>

#include "common/parallel.hpp"
#include "expr/expr.hpp"
#include "inputs/random.hpp"
#include "safetensors/safetensors.hpp"
#include "tensor/convert.hpp"

namespace kb {
namespace {

using random::Rng;

// ---- structure-aware generation --------------------------------------------

enum class Structure {
  none, indptr, indices, last_page_len, positions, probs, top_k, top_p,
  slots,        // `X_indices` into the rows of input X (a state pool): distinct rows
  token_rows,   // rank-2 `*indices` over a paged cache's tokens: distinct tokens per row, then -1
  seq_lens,     // token counts that a block_table's pages can hold
  block_table,  // per row, distinct pages of the cache
  packed_fp8,   // deep_gemm's packed fp8 cache: per page, fp8 rows then float32 scales
  unit_rows,    // gdn's q and k: rows of unit L2 norm, as the model normalizes them
  moe_topk_ids, // pre-routed MoE: per token, distinct experts packed as expert << 16 | bf16 weight bits
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// For `X_indices` (or `X_batch_indices`, ...): the first axis of the input
// named by the longest `_`-separated prefix X, e.g. initial_state_indices ->
// initial_state's pool_size, state_batch_indices -> state's state_cache_size.
std::optional<std::string> pool_axis_of(const Definition& d, std::string_view name) {
  std::string_view prefix = name.substr(0, name.size() - std::string_view("_indices").size());
  while (!prefix.empty()) {
    for (const auto& t : d.inputs)
      if (t.name == prefix && !t.is_scalar() && t.rank() >= 1) return (*t.shape)[0];
    auto cut = prefix.rfind('_');
    if (cut == std::string_view::npos) break;
    prefix = prefix.substr(0, cut);
  }
  return std::nullopt;
}

Structure classify(const Definition& d, const TensorSpec& t) {
  if (t.is_scalar()) return Structure::none;
  bool integer = dtype_is_integer(t.dtype);
  if (integer && t.rank() == 1) {
    if (ends_with(t.name, "indptr") || t.name.rfind("cu_seqlens", 0) == 0) return Structure::indptr;
    if (ends_with(t.name, "_indices") && pool_axis_of(d, t.name)) return Structure::slots;
    if (ends_with(t.name, "indices")) return Structure::indices;
    if (t.name == "seq_lens") return Structure::seq_lens;
    if (t.name == "kv_last_page_len") return Structure::last_page_len;
    if (t.name == "positions") return Structure::positions;
    if (t.name == "top_k") return Structure::top_k;
  }
  if (integer && t.rank() == 2 && ends_with(t.name, "indices")) return Structure::token_rows;
  if (integer && t.rank() == 2 && t.name == "block_table") return Structure::block_table;
  if (t.dtype == DType::int8 && t.rank() == 4 && ends_with(t.name, "_fp8")) return Structure::packed_fp8;
  if (d.op_type == "gdn" && (t.name == "q" || t.name == "k") && dtype_is_float(t.dtype)) return Structure::unit_rows;
  if (dtype_is_float(t.dtype) && t.rank() == 1 && t.name == "top_p") return Structure::top_p;
  if (d.op_type == "sampling" && t.name == "probs" && dtype_is_float(t.dtype) && t.rank() == 2) return Structure::probs;
  if (d.op_type == "moe" && t.name == "topk_ids" && t.dtype == DType::int32 && t.rank() == 2) return Structure::moe_topk_ids;
  return Structure::none;
}

// From constraints of the form `AXIS == T[-1].item()`: the axis giving T's last value.
std::optional<std::string> total_axis_of(const Definition& d, std::string_view tensor) {
  static const std::regex kForward(R"(^\s*(\w+)\s*==\s*(\w+)\s*\[\s*-1\s*\]\s*\.item\(\)\s*$)");
  static const std::regex kBackward(R"(^\s*(\w+)\s*\[\s*-1\s*\]\s*\.item\(\)\s*==\s*(\w+)\s*$)");
  for (const auto& c : d.constraints) {
    std::smatch m;
    if (std::regex_match(c, m, kForward) && m[2].str() == tensor) return m[1].str();
    if (std::regex_match(c, m, kBackward) && m[1].str() == tensor) return m[2].str();
  }
  return std::nullopt;
}

// Random split of `total` into `parts` non-negative lengths.
std::vector<std::int64_t> split(Rng& rng, std::int64_t total, std::int64_t parts) {
  std::vector<std::int64_t> cuts;
  for (std::int64_t i = 0; i + 1 < parts; ++i) cuts.push_back(rng.uniform_int(0, total + 1));
  std::sort(cuts.begin(), cuts.end());
  std::vector<std::int64_t> out;
  std::int64_t prev = 0;
  for (auto c : cuts) {
    out.push_back(c - prev);
    prev = c;
  }
  if (parts > 0) out.push_back(total - prev);
  return out;
}

void store_ints(Tensor& t, const std::vector<std::int64_t>& v) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    switch (t.dtype()) {
      case DType::int64: t.data<std::int64_t>()[i] = v[i]; break;
      case DType::int32: t.data<std::int32_t>()[i] = static_cast<std::int32_t>(v[i]); break;
      case DType::int16: t.data<std::int16_t>()[i] = static_cast<std::int16_t>(v[i]); break;
      default: t.data<std::int8_t>()[i] = static_cast<std::int8_t>(v[i]); break;
    }
  }
}


// Builds the index structures of one call together, since they depend on
// each other (query lengths bound key lengths; indices fill indptr's pages).
class StructureBuilder {
 public:
  StructureBuilder(const Definition& d, const AxisValues& axes, Materialized& m, std::uint64_t seed)
      : d_(d), axes_(axes), m_(m), rng_(seed, "structure") {}

  Status build(std::size_t i) {
    const TensorSpec& t = d_.inputs[i];
    switch (classify(d_, t)) {
      case Structure::indptr: return build_indptr(i);
      case Structure::indices: return build_indices(i);
      case Structure::last_page_len: return build_last_page_len(i);
      case Structure::positions: return build_bounded(i, "max_seq_len");
      case Structure::top_k: return build_top_k(i);
      case Structure::top_p: return build_top_p(i);
      case Structure::probs: return build_probs(i);
      case Structure::moe_topk_ids: return build_moe_topk_ids(i);
      case Structure::slots: return build_slots(i);
      case Structure::token_rows: return build_token_rows(i);
      case Structure::seq_lens: return build_seq_lens(i);
      case Structure::block_table: return build_block_table(i);
      case Structure::packed_fp8: return build_packed_fp8(i);
      case Structure::unit_rows: return build_unit_rows(i);
      case Structure::none: break;
    }
    return make_error(Code::unsupported, fmt::format("input \"{}\": kb cannot build valid values for it", t.name));
  }

 private:
  std::int64_t page_size() const { return axes_.get("page_size").value_or(1); }

  const std::vector<std::int64_t>* lengths_of(std::string_view indptr_name) {
    for (const auto& [n, v] : lengths_)
      if (n == indptr_name) return &v;
    return nullptr;
  }

  Status build_indptr(std::size_t i) {
    const TensorSpec& t = d_.inputs[i];
    Tensor& out = m_.tensors[i];
    std::int64_t n = out.numel();
    if (n == 0) return make_error(Code::invalid_argument, fmt::format("input \"{}\" has no elements", t.name));
    auto axis = total_axis_of(d_, t.name);
    if (!axis)
      return make_error(Code::unsupported,
                        fmt::format("input \"{}\": no constraint `AXIS == {}[-1].item()` gives its total", t.name, t.name));
    std::int64_t total = *axes_.get(*axis);
    std::int64_t batch = n - 1;
    std::vector<std::int64_t> len;
    // Keys (or pages) of a sequence cover its queries when the totals allow,
    // so causal prefill rows always see at least their own position.
    const std::vector<std::int64_t>* q = t.name.rfind("kv", 0) == 0 ? lengths_of("qo_indptr") : nullptr;
    std::int64_t ps = page_size();
    if (q && static_cast<std::int64_t>(q->size()) == batch) {
      std::vector<std::int64_t> need(batch);
      for (std::int64_t b = 0; b < batch; ++b) need[b] = ((*q)[b] + ps - 1) / ps;
      std::int64_t sum_need = std::accumulate(need.begin(), need.end(), std::int64_t{0});
      if (sum_need <= total) {
        len = split(rng_, total - sum_need, batch);
        for (std::int64_t b = 0; b < batch; ++b) len[b] += need[b];
      }
    }
    if (len.empty()) len = split(rng_, total, batch);
    std::vector<std::int64_t> v{0};
    for (auto l : len) v.push_back(v.back() + l);
    store_ints(out, v);
    lengths_.emplace_back(t.name, len);
    m_.notes.push_back(fmt::format("built {}: {} sequences, lengths [{}], total {} (= axis {})", t.name, batch,
                                   fmt::join(len.size() > 16 ? std::vector<std::int64_t>(len.begin(), len.begin() + 16) : len, ", "),
                                   total, *axis));
    return ok_status();
  }

  Status build_indices(std::size_t i) {
    const TensorSpec& t = d_.inputs[i];
    Tensor& out = m_.tensors[i];
    auto pages = axes_.get("num_pages");
    if (!pages)
      return make_error(Code::unsupported, fmt::format("input \"{}\": no axis num_pages bounds its values", t.name));
    std::int64_t n = out.numel();
    if (n > *pages)
      return make_error(Code::invalid_argument, fmt::format("input \"{}\": {} distinct page indices asked for, "
                                                            "but num_pages is {}", t.name, n, *pages));
    // A random permutation's prefix: unique pages in random order, as a
    // serving engine's allocator leaves them.
    std::vector<std::int64_t> perm(static_cast<std::size_t>(*pages));
    std::iota(perm.begin(), perm.end(), 0);
    for (std::int64_t k = 0; k < n; ++k) std::swap(perm[k], perm[rng_.uniform_int(k, *pages)]);
    perm.resize(static_cast<std::size_t>(n));
    store_ints(out, perm);
    m_.notes.push_back(fmt::format("built {}: {} unique pages of {} in random order", t.name, n, *pages));
    return ok_status();
  }

  Status build_last_page_len(std::size_t i) {
    Tensor& out = m_.tensors[i];
    std::int64_t ps = page_size();
    const auto* pages = lengths_of("kv_indptr");
    const auto* q = lengths_of("qo_indptr");
    std::vector<std::int64_t> v(static_cast<std::size_t>(out.numel()));
    for (std::size_t b = 0; b < v.size(); ++b) {
      std::int64_t p = pages && b < pages->size() ? (*pages)[b] : 1;
      if (p == 0) {
        v[b] = 0;  // empty sequence: no last page
        continue;
      }
      // At least as many keys as queries when the pages allow it.
      std::int64_t lo = 1;
      if (q && b < q->size()) lo = std::max<std::int64_t>(1, (*q)[b] - (p - 1) * ps);
      v[b] = lo >= ps ? ps : rng_.uniform_int(lo, ps + 1);
    }
    store_ints(out, v);
    m_.notes.push_back(fmt::format("built kv_last_page_len in 1..{}", ps));
    return ok_status();
  }

  Status build_bounded(std::size_t i, std::string_view bound_axis) {
    const TensorSpec& t = d_.inputs[i];
    auto bound = axes_.get(bound_axis);
    if (!bound || *bound <= 0)
      return make_error(Code::unsupported, fmt::format("input \"{}\": no axis {} bounds its values", t.name, bound_axis));
    std::vector<std::int64_t> v(static_cast<std::size_t>(m_.tensors[i].numel()));
    for (auto& x : v) x = rng_.uniform_int(0, *bound);
    store_ints(m_.tensors[i], v);
    m_.notes.push_back(fmt::format("built {} in [0, {})", t.name, *bound));
    return ok_status();
  }

  std::int64_t vocab() const {
    for (const auto& t : d_.inputs)
      if (t.name == "probs" && t.shape && t.shape->size() == 2) return axes_.get((*t.shape)[1]).value_or(1);
    return 1;
  }

  Status build_top_k(std::size_t i) {
    std::int64_t hi = std::min<std::int64_t>(vocab(), 128);
    std::vector<std::int64_t> v(static_cast<std::size_t>(m_.tensors[i].numel()));
    for (auto& x : v) x = rng_.uniform_int(1, hi + 1);
    store_ints(m_.tensors[i], v);
    m_.notes.push_back(fmt::format("built top_k in [1, {}]", hi));
    return ok_status();
  }

  // Pre-routed MoE: per token, top_k distinct experts of gemm1_weights' first axis, each packed
  // as expert << 16 | the bfloat16 bits of its weight (a softmax of N(0,1) over the token's picks).
  Status build_moe_topk_ids(std::size_t i) {
    Tensor& t = m_.tensors[i];
    auto w = input_index(d_, "gemm1_weights");
    if (!w || m_.tensors[*w].rank() == 0)
      return make_error(Code::unsupported, "input \"topk_ids\": no gemm1_weights gives the number of experts");
    const std::int64_t experts = m_.tensors[*w].dim(0), rows = t.dim(0), k = t.dim(1);
    if (k > experts || experts > 32767)
      return make_error(Code::invalid_argument,
                        fmt::format("input \"topk_ids\": {} distinct experts of {} cannot be packed", k, experts));
    std::vector<std::int64_t> pool(static_cast<std::size_t>(experts));
    for (std::int64_t r = 0; r < rows; ++r) {
      std::iota(pool.begin(), pool.end(), std::int64_t{0});
      std::vector<double> e(static_cast<std::size_t>(k));
      double sum = 0;
      for (std::int64_t j = 0; j < k; ++j) {
        std::swap(pool[static_cast<std::size_t>(j)], pool[static_cast<std::size_t>(rng_.uniform_int(j, experts))]);
        sum += e[static_cast<std::size_t>(j)] = std::exp(rng_.normal());
      }
      for (std::int64_t j = 0; j < k; ++j) {
        std::uint16_t bits = float_to_bf16(static_cast<float>(e[static_cast<std::size_t>(j)] / sum));
        t.data<std::int32_t>()[r * k + j] = static_cast<std::int32_t>(
            (static_cast<std::uint32_t>(pool[static_cast<std::size_t>(j)]) << 16) | bits);
      }
    }
    m_.notes.push_back(fmt::format("built topk_ids: {} distinct experts of {} a token, weights softmax of N(0,1) as bfloat16",
                                   k, experts));
    return ok_status();
  }

  Status build_top_p(std::size_t i) {
    std::vector<float> v(static_cast<std::size_t>(m_.tensors[i].numel()));
    for (auto& x : v) x = static_cast<float>(0.1 + 0.85 * rng_.uniform());
    m_.notes.push_back("built top_p in [0.1, 0.95)");
    return store_float(v, m_.tensors[i]);
  }

  Status build_probs(std::size_t i) {
    Tensor& t = m_.tensors[i];
    std::int64_t rows = t.dim(0), cols = t.dim(1);
    std::vector<float> v(static_cast<std::size_t>(rows * cols));
    // Rows on several threads, each element the stream's value at its
    // position and each row summed in order: the bytes of one sequential pass.
    parallel_for(rows, std::thread::hardware_concurrency(), [&](std::int64_t r) {
      double sum = 0;
      for (std::int64_t c = 0; c < cols; ++c) {
        // exp(3 * N(0,1)): a peaked, LLM-like distribution over the vocabulary.
        double x = std::exp(3.0 * rng_.normal_ahead(static_cast<std::uint64_t>(r * cols + c)));
        v[static_cast<std::size_t>(r * cols + c)] = static_cast<float>(x);
        sum += x;
      }
      for (std::int64_t c = 0; c < cols; ++c) v[static_cast<std::size_t>(r * cols + c)] /= static_cast<float>(sum);
    });
    rng_.skip_normals(static_cast<std::uint64_t>(rows * cols));
    m_.notes.push_back("built probs: rows of exp(3 N(0,1)) normalized to sum 1");
    return store_float(v, t);
  }

  // Distinct values of [0, n) in random order, `count` of them (a random
  // permutation's prefix); repeats only when count > n.
  std::vector<std::int64_t> distinct(std::int64_t count, std::int64_t n) {
    std::vector<std::int64_t> out;
    if (n <= 0) return out;
    if (count > n) {
      for (std::int64_t k = 0; k < count; ++k) out.push_back(rng_.uniform_int(0, n));
      return out;
    }
    std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
    std::iota(perm.begin(), perm.end(), 0);
    for (std::int64_t k = 0; k < count; ++k) std::swap(perm[k], perm[rng_.uniform_int(k, n)]);
    perm.resize(static_cast<std::size_t>(count));
    return perm;
  }

  Status build_slots(std::size_t i) {
    const TensorSpec& t = d_.inputs[i];
    auto axis = pool_axis_of(d_, t.name);
    auto pool = axes_.get(*axis);
    if (!pool || *pool <= 0)
      return make_error(Code::invalid_argument, fmt::format("input \"{}\": axis {} gives no rows to index", t.name, *axis));
    std::int64_t n = m_.tensors[i].numel();
    store_ints(m_.tensors[i], distinct(n, *pool));
    m_.notes.push_back(fmt::format("built {}: {} {} rows of {} (axis {})", t.name, n,
                                   n <= *pool ? "distinct" : "random", *pool, *axis));
    return ok_status();
  }

  Status build_token_rows(std::size_t i) {
    const TensorSpec& t = d_.inputs[i];
    Tensor& out = m_.tensors[i];
    auto pages = axes_.get("num_pages");
    if (!pages)
      return make_error(Code::unsupported, fmt::format("input \"{}\": no axis num_pages bounds its values", t.name));
    const std::int64_t tokens = *pages * page_size(), rows = out.dim(0), k = out.dim(1);
    const std::int64_t valid = std::min(k, tokens);
    for (std::int64_t r = 0; r < rows; ++r) {
      std::vector<std::int64_t> v = distinct(valid, tokens);
      v.resize(static_cast<std::size_t>(k), -1);
      for (std::int64_t j = 0; j < k; ++j) {
        if (out.dtype() == DType::int64) out.data<std::int64_t>()[r * k + j] = v[static_cast<std::size_t>(j)];
        else out.data<std::int32_t>()[r * k + j] = static_cast<std::int32_t>(v[static_cast<std::size_t>(j)]);
      }
    }
    m_.notes.push_back(fmt::format("built {}: per row {} distinct tokens of {} ({} pages x {}), then -1", t.name, valid,
                                   tokens, *pages, page_size()));
    return ok_status();
  }

  Status build_seq_lens(std::size_t i) {
    const TensorSpec& t = d_.inputs[i];
    auto max_pages = axes_.get("max_num_pages");
    auto pages = axes_.get("num_pages");
    if (!max_pages || !pages)
      return make_error(Code::unsupported, fmt::format("input \"{}\": no axes max_num_pages and num_pages bound it", t.name));
    // A block_table row holds distinct pages, so at most num_pages of them.
    const std::int64_t hi = std::min(*max_pages, *pages) * page_size();
    std::vector<std::int64_t> v(static_cast<std::size_t>(m_.tensors[i].numel()));
    for (auto& x : v) x = hi > 0 ? rng_.uniform_int(1, hi + 1) : 0;
    store_ints(m_.tensors[i], v);
    m_.notes.push_back(fmt::format("built {} in [1, {}]", t.name, hi));
    return ok_status();
  }

  Status build_block_table(std::size_t i) {
    const TensorSpec& t = d_.inputs[i];
    Tensor& out = m_.tensors[i];
    auto pages = axes_.get("num_pages");
    if (!pages || *pages <= 0)
      return make_error(Code::unsupported, fmt::format("input \"{}\": no axis num_pages bounds its values", t.name));
    const std::int64_t rows = out.dim(0), cols = out.dim(1);
    std::vector<std::int64_t> all;
    for (std::int64_t r = 0; r < rows; ++r) {
      std::vector<std::int64_t> v = distinct(std::min(cols, *pages), *pages);
      while (static_cast<std::int64_t>(v.size()) < cols) v.push_back(v[v.size() % static_cast<std::size_t>(*pages)]);
      all.insert(all.end(), v.begin(), v.end());
    }
    store_ints(out, all);
    m_.notes.push_back(fmt::format("built {}: per row distinct pages of {} in random order", t.name, *pages));
    return ok_status();
  }

  // Keys drawn N(0, 1) and rounded to bf16, quantized per token to fp8
  // e4m3fn with scale amax / 448, laid out per page as [page_size rows of
  // dim fp8 bytes][page_size float32 scales] (FlashInfer-Bench builds its
  // random indexer caches the same way).
  Status build_packed_fp8(std::size_t i) {
    const TensorSpec& t = d_.inputs[i];
    Tensor& out = m_.tensors[i];
    const std::int64_t pages = out.dim(0), ps = out.dim(1), heads = out.dim(2), row = out.dim(3);
    if (row <= 4 || heads != 1)
      return make_error(Code::unsupported,
                        fmt::format("input \"{}\": a packed fp8 cache is [pages, page_size, 1, dim + 4]", t.name));
    const std::int64_t dim = row - 4;
    auto* bytes = reinterpret_cast<std::uint8_t*>(out.bytes());
    // Pages on several threads, token (p, s)'s key the stream's normals at its
    // position: the bytes of one sequential pass.
    parallel_for(pages, std::thread::hardware_concurrency(), [&](std::int64_t p) {
      std::vector<float> key(static_cast<std::size_t>(dim));
      for (std::int64_t s = 0; s < ps; ++s) {
        float amax = 0;
        for (std::int64_t e = 0; e < dim; ++e) {
          const auto at = static_cast<std::uint64_t>((p * ps + s) * dim + e);
          const float x = bf16_to_float(float_to_bf16(static_cast<float>(rng_.normal_ahead(at))));
          key[static_cast<std::size_t>(e)] = x;
          amax = std::max(amax, std::fabs(x));
        }
        const float scale = std::max(amax, 1e-4f) / 448.0f;
        for (std::int64_t e = 0; e < dim; ++e)
          bytes[p * ps * row + s * dim + e] = float_to_fp8_e4m3fn(key[static_cast<std::size_t>(e)] * (1.0f / scale));
        std::memcpy(bytes + p * ps * row + ps * dim + s * 4, &scale, 4);
      }
    });
    rng_.skip_normals(static_cast<std::uint64_t>(pages * ps * dim));
    m_.notes.push_back(fmt::format("built {}: N(0,1) keys quantized to fp8 per token (scale amax/448), packed per page",
                                   t.name));
    return ok_status();
  }

  Status build_unit_rows(std::size_t i) {
    const TensorSpec& t = d_.inputs[i];
    Tensor& out = m_.tensors[i];
    const std::int64_t dim = out.rank() ? out.dim(out.rank() - 1) : 1;
    std::vector<float> v(static_cast<std::size_t>(out.numel()));
    const std::int64_t rows = dim > 0 ? out.numel() / dim : 0;
    // Blocks of rows on several threads, each element the stream's value at
    // its position: the bytes of one sequential pass (a prefill's q and k are
    // tens of millions of normals, about a second each on one thread).
    constexpr std::int64_t kRowsPerItem = 64;
    parallel_for((rows + kRowsPerItem - 1) / kRowsPerItem, std::thread::hardware_concurrency(), [&](std::int64_t b) {
      for (std::int64_t r = b * kRowsPerItem; r < std::min(rows, (b + 1) * kRowsPerItem); ++r) {
        float* row = v.data() + r * dim;
        double ss = 0;
        for (std::int64_t e = 0; e < dim; ++e) {
          const double x = rng_.normal_ahead(static_cast<std::uint64_t>(r * dim + e));
          row[e] = static_cast<float>(x);
          ss += x * x;
        }
        const double inv = ss > 0 ? 1.0 / std::sqrt(ss) : 0.0;
        for (std::int64_t e = 0; e < dim; ++e) row[e] = static_cast<float>(row[e] * inv);
      }
    });
    rng_.skip_normals(static_cast<std::uint64_t>(rows * dim));
    m_.notes.push_back(fmt::format("built {}: N(0,1) rows scaled to unit L2 norm (the model l2-normalizes q and k; "
                                   "unnormalized keys make the delta rule diverge)", t.name));
    return store_float(v, out);
  }

  const Definition& d_;
  const AxisValues& axes_;
  Materialized& m_;
  Rng rng_;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> lengths_;
};

// FlashInfer-Bench's random distributions, seeded (random.hpp: element i
// from (key, i) alone). Large tensors are filled in chunks of 1M storage
// units on several threads; the bits do not depend on the thread count.
template <DType T>
void fill_units(std::byte* storage, std::uint64_t key, std::int64_t begin, std::int64_t end) {
  auto* out = reinterpret_cast<random::unit_t<T>*>(storage);
  for (std::int64_t j = begin; j < end; ++j) out[j] = random::unit<T>(key, static_cast<std::uint64_t>(j));
}

void fill_units(DType t, std::byte* storage, std::uint64_t key, std::int64_t begin, std::int64_t end) {
  switch (t) {
    case DType::float32: return fill_units<DType::float32>(storage, key, begin, end);
    case DType::float16: return fill_units<DType::float16>(storage, key, begin, end);
    case DType::bfloat16: return fill_units<DType::bfloat16>(storage, key, begin, end);
    case DType::float8_e4m3fn: return fill_units<DType::float8_e4m3fn>(storage, key, begin, end);
    case DType::float8_e5m2: return fill_units<DType::float8_e5m2>(storage, key, begin, end);
    case DType::float4_e2m1: return fill_units<DType::float4_e2m1>(storage, key, begin, end);
    case DType::int64: return fill_units<DType::int64>(storage, key, begin, end);
    case DType::int32: return fill_units<DType::int32>(storage, key, begin, end);
    case DType::int16: return fill_units<DType::int16>(storage, key, begin, end);
    case DType::int8: return fill_units<DType::int8>(storage, key, begin, end);
    case DType::bool_: return fill_units<DType::bool_>(storage, key, begin, end);
  }
}

// Constraint environment over materialized inputs.
class MaterializedEnvironment final : public expr::Environment {
 public:
  MaterializedEnvironment(const Definition& d, const Materialized& m) : d_(d), m_(m) {}
  std::optional<expr::Value> scalar(std::string_view name) const override {
    if (auto v = m_.axes.get(name)) return expr::Value::integer(*v);
    auto i = input_index(d_, name);
    if (i && m_.args[*i].scalar) {
      const auto& s = *m_.args[*i].scalar;
      if (auto* x = std::get_if<std::int64_t>(&s)) return expr::Value::integer(*x);
      if (auto* x = std::get_if<double>(&s)) return expr::Value::floating(*x);
      return expr::Value::boolean(std::get<bool>(s));
    }
    return std::nullopt;
  }
  std::optional<std::vector<std::int64_t>> shape(std::string_view tensor) const override {
    auto i = input_index(d_, tensor);
    if (i && m_.args[*i].tensor) return m_.args[*i].tensor->shape();
    if (const TensorSpec* o = d_.find_output(tensor); o && o->shape) return bound_shape(*o, m_.axes);
    return std::nullopt;
  }
  std::optional<std::int64_t> element(std::string_view tensor, std::span<const std::int64_t> index) const override {
    auto i = input_index(d_, tensor);
    if (!i || !m_.args[*i].tensor) return std::nullopt;
    const Tensor& t = *m_.args[*i].tensor;
    if (!dtype_is_integer(t.dtype()) && t.dtype() != DType::bool_) return std::nullopt;
    std::int64_t flat = 0;
    for (std::size_t k = 0; k < index.size(); ++k) flat = flat * t.dim(k) + index[k];
    return static_cast<std::int64_t>(element_as_double(t, flat));
  }

 private:
  const Definition& d_;
  const Materialized& m_;
};

}  // namespace

std::vector<std::int64_t> bound_shape(const TensorSpec& t, const AxisValues& axes) {
  std::vector<std::int64_t> s;
  if (t.shape)
    for (const auto& a : *t.shape) s.push_back(axes.get(a).value_or(0));
  return s;
}

Result<AxisValues> bind_axes(const Definition& d, const Workload& w) {
  AxisValues out;
  for (const auto& a : d.axes) {
    if (a.kind == AxisKind::const_) {
      out.values.emplace_back(a.name, a.value);
    } else if (const std::int64_t* v = w.find_axis(a.name)) {
      out.values.emplace_back(a.name, *v);
    } else {
      return make_error(Code::invalid_data, fmt::format("workload {}: var axis {} is not bound", w.uuid, a.name));
    }
  }
  return out;
}

void rebind_args(Materialized& m) {
  for (std::size_t i = 0; i < m.args.size(); ++i)
    if (m.args[i].tensor) m.args[i].tensor = &m.tensors[i];
}

void fill_random(Tensor& t, std::uint64_t key) {
  constexpr std::int64_t kChunk = 1 << 20;
  const std::int64_t n = random::units(t.dtype(), t.numel());
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  auto work = [&](std::int64_t c) { fill_units(t.dtype(), t.bytes(), key, c * kChunk, std::min(n, (c + 1) * kChunk)); };
  parallel_for(chunks, std::thread::hardware_concurrency(), work);
}

Status fill_deferred(Materialized& m, const std::function<bool(std::size_t input)>& only) {
  for (std::size_t i = 0; i < m.deferred.size() && i < m.tensors.size(); ++i) {
    if (!m.deferred[i] || (only && !only(i))) continue;
    auto t = Tensor::allocate(m.tensors[i].dtype(), m.tensors[i].shape());
    if (!t) return t.error();
    fill_random(*t, m.deferred[i]->key);
    m.tensors[i] = std::move(*t);
    m.deferred[i].reset();
  }
  rebind_args(m);
  return ok_status();
}

Result<std::vector<Tensor>> allocate_outputs(const Definition& d, const AxisValues& axes) {
  std::vector<Tensor> out;
  for (const auto& t : d.outputs) {
    auto x = Tensor::allocate(t.dtype, bound_shape(t, axes));
    if (!x) return make_error(x.error().code, fmt::format("output \"{}\": {}", t.name, x.error().message));
    out.push_back(std::move(*x));
  }
  return out;
}

Result<Materialized> materialize(const Definition& d, const Workload& w, const MaterializeOptions& opt) {
  Materialized m;
  auto axes = bind_axes(d, w);
  if (!axes) return axes.error();
  m.axes = std::move(*axes);
  m.tensors.resize(d.inputs.size());
  m.args.resize(d.inputs.size());
  m.deferred.resize(d.inputs.size());
  std::vector<std::size_t> to_build;
  for (std::size_t i = 0; i < d.inputs.size(); ++i) {
    const TensorSpec& t = d.inputs[i];
    const InputSpec* in = w.find_input(t.name);
    if (!in) {
      if (t.optional) continue;  // passed as None
      return make_error(Code::invalid_data, fmt::format("workload {}: input \"{}\" is missing", w.uuid, t.name));
    }
    if (t.is_scalar()) {
      if (in->kind != InputKind::scalar)
        return make_error(Code::invalid_data, fmt::format("input \"{}\" is a scalar but the workload gives no value", t.name));
      m.args[i].scalar = in->value;
      continue;
    }
    const bool structure = classify(d, t) != Structure::none;
    std::filesystem::path file;
    bool blob_absent = false;
    if (in->kind == InputKind::safetensors) {
      file = opt.dataset_root ? std::filesystem::path(*opt.dataset_root) / in->path : std::filesystem::path(in->path);
      std::error_code ec;
      blob_absent = !std::filesystem::exists(file, ec);
    }
    // Seeded random values: a random input, or a blob that is absent.
    const bool random_values = !structure && (in->kind == InputKind::random || blob_absent);
    const bool deferred = random_values && opt.defer_random_floats && dtype_is_float(t.dtype);
    auto tensor = deferred ? Tensor::shape_only(t.dtype, bound_shape(t, m.axes))
                           : Tensor::allocate(t.dtype, bound_shape(t, m.axes));
    if (!tensor) return make_error(tensor.error().code, fmt::format("input \"{}\": {}", t.name, tensor.error().message));
    m.tensors[i] = std::move(*tensor);
    m.args[i].tensor = &m.tensors[i];
    Tensor& x = m.tensors[i];
    if (random_values) {
      const RandomRecipe recipe{random::stream_key(opt.seed, t.name), t.dtype, x.numel()};
      if (deferred)
        m.deferred[i] = recipe;
      else
        fill_random(x, recipe.key);
      if (blob_absent)
        m.notes.push_back(fmt::format("blob {} is absent: {} filled with seeded random values", in->path, t.name));
      continue;
    }
    switch (in->kind) {
      case InputKind::scalar: {  // a 0-D tensor given as a value
        double v = std::visit([](auto y) { return static_cast<double>(y); }, in->value);
        std::vector<float> one(static_cast<std::size_t>(x.numel()), static_cast<float>(v));
        KB_TRY(store_float(one, x));
        break;
      }
      case InputKind::random:
        to_build.push_back(i);  // a structure (random_values above took the rest)
        break;
      case InputKind::safetensors: {
        if (blob_absent) {
          to_build.push_back(i);
          m.notes.push_back(fmt::format("blob {} is absent: kb built valid {} itself", in->path, t.name));
          break;
        }
        auto f = safetensors::read_file(file.string());
        if (!f) return f.error();
        const auto* info = f->header.find(in->tensor_key);
        if (!info)
          return make_error(Code::not_found, fmt::format("{}: no tensor \"{}\"", file.string(), in->tensor_key));
        if (info->dtype != x.dtype() || info->shape != x.shape())
          return make_error(Code::invalid_data,
                            fmt::format("{}: tensor \"{}\" is {} [{}], the definition needs {} [{}]", file.string(),
                                        in->tensor_key, dtype_name(info->dtype), fmt::join(info->shape, ", "),
                                        dtype_name(x.dtype()), fmt::join(x.shape(), ", ")));
        auto bytes = f->bytes(*info);
        std::memcpy(x.bytes(), bytes.data(), bytes.size());
        break;
      }
    }
  }
  // Index structures last, indptr before indices and last-page lengths, and
  // query indptr before key indptr (keys are sized to cover queries).
  auto rank = [&](std::size_t i) {
    const std::string& n = d.inputs[i].name;
    switch (classify(d, d.inputs[i])) {
      case Structure::indptr: return n.rfind("qo", 0) == 0 ? 0 : 1;
      case Structure::indices: return 2;
      case Structure::last_page_len: return 3;
      default: return 4;
    }
  };
  std::stable_sort(to_build.begin(), to_build.end(), [&](auto a, auto b) { return rank(a) < rank(b); });
  StructureBuilder builder(d, m.axes, m, opt.seed);
  for (auto i : to_build) KB_TRY(builder.build(i));
  return m;
}

Result<std::vector<std::string>> check_constraints_on(const Definition& d, const Materialized& m) {
  MaterializedEnvironment env(d, m);
  std::vector<std::string> unchecked;
  for (const auto& c : d.constraints) {
    auto e = expr::parse(c);
    if (!e) return make_error(Code::invalid_data, fmt::format("constraint `{}`: {}", c, e.error().message));
    auto out = expr::evaluate(*e, env);
    if (out.verdict == expr::Verdict::violated)
      return make_error(Code::invalid_data, fmt::format("constraint `{}` violated by the inputs: {}", c, out.detail));
    if (out.verdict == expr::Verdict::unchecked) unchecked.push_back(fmt::format("constraint `{}` unchecked: {}", c, out.detail));
  }
  std::vector<std::optional<IndexValues>> given(d.inputs.size());
  for (std::size_t i = 0; i < d.inputs.size() && i < m.args.size(); ++i)
    if (const Tensor* t = m.args[i].tensor; t && is_index_input(d, i))
      given[i] = index_values(t->dtype(), t->shape(), t->span());
  auto problems = check_index_inputs(d, m.axes, [&](std::size_t i) { return given[i] ? &*given[i] : nullptr; });
  if (!problems.empty())
    return make_error(Code::invalid_data, fmt::format("input \"{}\": {}", d.inputs[problems[0].input].name,
                                                      problems[0].message));
  return unchecked;
}

Status ready_trial(const Definition& d, Materialized& m, std::string* log) {
  rebind_args(m);
  auto unchecked = check_constraints_on(d, m);
  if (!unchecked) return unchecked.error();
  if (log) {
    for (const auto& n : m.notes) *log += n + "\n";
    for (const auto& n : *unchecked) *log += n + "\n";
  }
  return ok_status();
}


// ---- Index inputs -------------------------------------------------------------

namespace {

// What the entries of one index input may hold: [lo, hi) or [lo, hi], -1 as
// padding where allowed; an indptr also starts at 0 and never decreases.
struct IndexRule {
  std::int64_t lo = 0;
  std::int64_t hi = 0;
  bool hi_inclusive = false;
  bool minus_one_pads = false;
  bool indptr = false;
  std::string hi_what;  // the axis (or product) hi comes from
};

std::int64_t saturating_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<std::int64_t>::max() : r;
}

// The rule of input i under `axes`; nullopt when the input is no index
// structure or an axis its rule needs is not bound.
std::optional<IndexRule> index_rule(const Definition& d, const AxisValues& axes, std::size_t i) {
  const TensorSpec& t = d.inputs[i];
  const std::int64_t ps = axes.get("page_size").value_or(1);
  IndexRule r;
  auto bounded_by = [&](std::string_view axis, bool inclusive) -> std::optional<IndexRule> {
    auto v = axes.get(axis);
    if (!v) return std::nullopt;
    r.hi = *v;
    r.hi_inclusive = inclusive;
    r.hi_what = std::string(axis);
    return r;
  };
  switch (classify(d, t)) {
    case Structure::indptr: {
      r.indptr = true;
      r.hi_inclusive = true;
      r.hi = std::numeric_limits<std::int64_t>::max();
      if (auto axis = total_axis_of(d, t.name))
        if (auto total = axes.get(*axis)) {
          r.hi = *total;
          r.hi_what = *axis;
        }
      return r;
    }
    case Structure::indices: return bounded_by("num_pages", false);
    case Structure::block_table: return bounded_by("num_pages", false);
    case Structure::positions: return bounded_by("max_seq_len", false);
    case Structure::slots: {
      r.minus_one_pads = d.op_type == "mamba_ssu";  // PAD_SLOT_ID: the batch row is skipped
      return bounded_by(*pool_axis_of(d, t.name), false);
    }
    case Structure::token_rows: {
      auto pages = axes.get("num_pages");
      if (!pages) return std::nullopt;
      r.hi = saturating_mul(*pages, ps);
      r.minus_one_pads = true;
      r.hi_what = "num_pages * page_size";
      return r;
    }
    case Structure::seq_lens: {
      auto pages = axes.get("max_num_pages");
      if (!pages) return std::nullopt;
      r.hi = saturating_mul(*pages, ps);
      r.hi_inclusive = true;
      r.hi_what = "max_num_pages * page_size";
      return r;
    }
    case Structure::last_page_len:
      r.hi = ps;
      r.hi_inclusive = true;
      r.hi_what = "page_size";
      return r;
    default: return std::nullopt;
  }
}

// "name[3]" or "name[1, 2]" for the flat position k of a tensor of `shape`.
std::string entry_text(std::string_view name, const std::vector<std::int64_t>& shape, std::int64_t k) {
  std::vector<std::int64_t> index(shape.size(), 0);
  for (std::size_t a = shape.size(); a-- > 0;) {
    const std::int64_t extent = std::max<std::int64_t>(shape[a], 1);
    index[a] = k % extent;
    k /= extent;
  }
  if (index.empty()) return std::string(name);
  return fmt::format("{}[{}]", name, fmt::join(index, ", "));
}

}  // namespace

std::optional<IndexValues> index_values(DType dtype, std::vector<std::int64_t> shape, std::span<const std::byte> bytes) {
  std::size_t width = 0;
  switch (dtype) {
    case DType::int64: width = 8; break;
    case DType::int32: width = 4; break;
    case DType::int16: width = 2; break;
    case DType::int8: width = 1; break;
    default: return std::nullopt;
  }
  std::int64_t n = 1;
  for (auto e : shape)
    if (e < 0 || __builtin_mul_overflow(n, e, &n)) return std::nullopt;
  if (bytes.size() / width < static_cast<std::uint64_t>(n)) return std::nullopt;
  IndexValues out;
  out.shape = std::move(shape);
  out.values.resize(static_cast<std::size_t>(n));
  for (std::size_t k = 0; k < out.values.size(); ++k) {
    const std::byte* p = bytes.data() + k * width;
    switch (width) {
      case 8: { std::int64_t x; std::memcpy(&x, p, 8); out.values[k] = x; break; }
      case 4: { std::int32_t x; std::memcpy(&x, p, 4); out.values[k] = x; break; }
      case 2: { std::int16_t x; std::memcpy(&x, p, 2); out.values[k] = x; break; }
      default: { std::int8_t x; std::memcpy(&x, p, 1); out.values[k] = x; break; }
    }
  }
  return out;
}

bool is_index_input(const Definition& d, std::size_t i) {
  switch (classify(d, d.inputs[i])) {
    case Structure::indptr: case Structure::indices: case Structure::slots: case Structure::token_rows:
    case Structure::block_table: case Structure::seq_lens: case Structure::last_page_len: case Structure::positions:
      return true;
    default: return false;
  }
}

std::vector<IndexProblem> check_index_inputs(const Definition& d, const AxisValues& axes,
                                             const std::function<const IndexValues*(std::size_t)>& values) {
  std::vector<IndexProblem> problems;
  for (std::size_t i = 0; i < d.inputs.size(); ++i) {
    if (!is_index_input(d, i)) continue;
    const IndexValues* v = values(i);
    if (!v) continue;
    auto rule = index_rule(d, axes, i);
    if (!rule) continue;
    const std::string& name = d.inputs[i].name;
    std::string first;
    std::size_t bad = 0;
    auto flag = [&](std::string message) {
      if (bad++ == 0) first = std::move(message);
    };
    const auto& x = v->values;
    for (std::size_t k = 0; k < x.size(); ++k) {
      const std::int64_t e = x[k];
      const auto at = static_cast<std::int64_t>(k);
      if (rule->indptr && k == 0 && e != 0) {
        flag(fmt::format("{} = {}, expected 0 (an indptr starts at 0)", entry_text(name, v->shape, at), e));
        continue;
      }
      const bool above = rule->hi_inclusive ? e > rule->hi : e >= rule->hi;
      if ((e < rule->lo || above) && !(rule->minus_one_pads && e == -1)) {
        std::string range = fmt::format("[{}, {}{}", rule->lo, rule->hi, rule->hi_inclusive ? "]" : ")");
        if (!rule->hi_what.empty()) range += fmt::format(" ({})", rule->hi_what);
        if (rule->hi == std::numeric_limits<std::int64_t>::max()) range = "the non-negative integers";
        flag(fmt::format("{} = {} is outside {}{}", entry_text(name, v->shape, at), e, range,
                         rule->minus_one_pads ? " and not -1 (padding)" : ""));
        continue;
      }
      if (rule->indptr && k > 0 && e < x[k - 1])
        flag(fmt::format("{} = {} is less than {} = {} (an indptr never decreases)", entry_text(name, v->shape, at), e,
                         entry_text(name, v->shape, at - 1), x[k - 1]));
    }
    if (bad)
      problems.push_back({i, bad == 1 ? first
                                      : fmt::format("{} (and {} more bad entr{})", first, bad - 1, bad == 2 ? "y" : "ies")});
  }
  return problems;
}

}  // namespace kb
