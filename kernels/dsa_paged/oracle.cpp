// CPU oracle for op_type "dsa_paged": DeepSeek sparse attention's two
// kernels.
//
// Sparse attention (inputs q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices,
// sm_scale; outputs output, lse): for token t the valid entries of
// sparse_indices[t] (every value but -1) are rows of the caches flattened to
// [num_pages * page_size, dim] (index = page * page_size + offset). Over
// those rows, all heads sharing them (MLA's absorbed form):
//   logits = (q_nope . ckv + q_pe . kpe) * sm_scale
//   lse    = logsumexp(logits) / ln 2                 (base 2)
//   output = softmax(logits) . ckv                    rounded to the output dtype
// A token without valid entries gets output 0 and lse -inf. Repeated indices
// count as often as they appear, as the reference's gather does. An index
// other than -1 outside [0, num_pages * page_size) is an error (the reference
// would wrap negative ones Python-style).
//
// Top-k indexer (inputs q_index_fp8 [B, H, D] fp8, k_index_cache_fp8
// [pages, page_size, 1, D + 4] int8 in deep_gemm's packed layout (per page:
// page_size * D fp8 bytes, then page_size float32 scales), weights [B, H],
// seq_lens [B], block_table [B, max_pages]; output topk_indices [B, topk]):
// for sequence b, token j < seq_lens[b] lives on page block_table[b][j /
// page_size], slot j % page_size; its key is fp8 * scale (float32) and its
// score is sum_h relu(q[b, h] . key) * weights[b, h]. The min(topk, seq_len)
// highest scores' global indices (page * page_size + slot), in descending
// score order (ties: earlier token first), then -1. topk is the output's
// axis. Sums in double.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <numeric>
#include <string>
#include <vector>

#include "oracle/oracle.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels {
namespace {

bool float_dtype(DType t) { return t == DType::float32 || t == DType::float16 || t == DType::bfloat16; }

enum class Form { attention, indexer };

std::optional<Form> form_of(const Definition& d) {
  if (input_index(d, "sparse_indices")) return Form::attention;
  if (output_index(d, "topk_indices")) return Form::indexer;
  return std::nullopt;
}

std::string supports_attention(const Definition& d) {
  struct Want {
    const char* name;
    std::size_t rank;
  };
  for (const Want& w : {Want{"q_nope", 3}, Want{"q_pe", 3}, Want{"ckv_cache", 3}, Want{"kpe_cache", 3}}) {
    auto i = input_index(d, w.name);
    if (!i || d.inputs[*i].is_scalar() || d.inputs[*i].rank() != w.rank || !float_dtype(d.inputs[*i].dtype))
      return fmt::format("dsa sparse attention oracle expects a float input {} of rank {}", w.name, w.rank);
  }
  auto si = input_index(d, "sparse_indices");
  if (d.inputs[*si].is_scalar() || d.inputs[*si].rank() != 2 || !dtype_is_integer(d.inputs[*si].dtype))
    return "dsa sparse attention oracle expects an integer input sparse_indices [tokens, topk]";
  auto sc = input_index(d, "sm_scale");
  if (!sc || !d.inputs[*sc].is_scalar()) return "dsa sparse attention oracle expects a scalar input sm_scale";
  auto o = output_index(d, "output");
  auto l = output_index(d, "lse");
  if (!o || !float_dtype(d.outputs[*o].dtype) || (l && d.outputs[*l].dtype != DType::float32))
    return "dsa sparse attention oracle expects outputs output (float) and lse (float32)";
  if (d.outputs.size() != (l ? 2u : 1u)) return "dsa sparse attention oracle writes output and lse only";
  return {};
}

std::string supports_indexer(const Definition& d) {
  auto q = input_index(d, "q_index_fp8");
  auto k = input_index(d, "k_index_cache_fp8");
  auto w = input_index(d, "weights");
  auto sl = input_index(d, "seq_lens");
  auto bt = input_index(d, "block_table");
  if (!q || !k || !w || !sl || !bt || d.inputs.size() != 5)
    return "dsa indexer oracle expects inputs q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table";
  if (d.inputs[*q].is_scalar() || d.inputs[*q].rank() != 3 ||
      (d.inputs[*q].dtype != DType::float8_e4m3fn && !float_dtype(d.inputs[*q].dtype)))
    return "dsa indexer oracle expects q_index_fp8 [batch, heads, dim] (float8_e4m3fn)";
  if (d.inputs[*k].is_scalar() || d.inputs[*k].rank() != 4 ||
      (d.inputs[*k].dtype != DType::int8))
    return "dsa indexer oracle expects k_index_cache_fp8 [pages, page_size, 1, dim + 4] int8 (packed fp8 + scales)";
  if (d.inputs[*w].is_scalar() || d.inputs[*w].rank() != 2 || !float_dtype(d.inputs[*w].dtype))
    return "dsa indexer oracle expects float weights [batch, heads]";
  for (auto i : {*sl, *bt})
    if (d.inputs[i].is_scalar() || !dtype_is_integer(d.inputs[i].dtype))
      return "dsa indexer oracle expects integer seq_lens and block_table";
  auto o = output_index(d, "topk_indices");
  if (d.outputs.size() != 1 || d.outputs[*o].rank() != 2 || !dtype_is_integer(d.outputs[*o].dtype))
    return "dsa indexer oracle expects a single integer output topk_indices [batch, topk]";
  return {};
}

std::string supports(const Definition& d) {
  if (d.op_type != "dsa_paged") return fmt::format("op_type {} is not dsa_paged", d.op_type);
  auto f = form_of(d);
  if (!f) return "dsa_paged oracle expects sparse_indices (sparse attention) or an output topk_indices (indexer)";
  return *f == Form::attention ? supports_attention(d) : supports_indexer(d);
}

Status bad(const OracleCall& c, std::string what) {
  return make_error(Code::invalid_argument, fmt::format("{}: dsa_paged oracle: {}", c.definition.name, what));
}

const Tensor* tensor_arg(const OracleCall& c, std::string_view name) {
  auto i = input_index(c.definition, name);
  return i && *i < c.inputs.size() ? c.inputs[*i].tensor : nullptr;
}

Status run_attention(const OracleCall& c) {
  const Definition& d = c.definition;
  const Tensor *qn = tensor_arg(c, "q_nope"), *qp = tensor_arg(c, "q_pe"), *ckv = tensor_arg(c, "ckv_cache"),
               *kpe = tensor_arg(c, "kpe_cache"), *idx = tensor_arg(c, "sparse_indices");
  if (!qn || !qp || !ckv || !kpe || !idx) return bad(c, "q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices are required");
  auto scale_arg = scalar_as_double(c.inputs[*input_index(d, "sm_scale")]);
  if (!scale_arg) return bad(c, "sm_scale must be a number");
  const double scale = static_cast<float>(*scale_arg);
  const std::int64_t T = qn->dim(0), H = qn->dim(1), Dc = qn->dim(2), Dp = qp->dim(2);
  const std::int64_t rows = ckv->dim(0) * ckv->dim(1);
  if (qp->dim(0) != T || qp->dim(1) != H) return bad(c, "q_pe must be [tokens, heads, kpe]");
  if (ckv->dim(2) != Dc || kpe->dim(0) != ckv->dim(0) || kpe->dim(1) != ckv->dim(1) || kpe->dim(2) != Dp)
    return bad(c, "ckv_cache [pages, page_size, ckv] and kpe_cache [pages, page_size, kpe] disagree with the queries");
  if (idx->dim(0) != T) return bad(c, "sparse_indices must have one row per token");
  const std::int64_t K = idx->dim(1);
  Tensor& out = c.outputs[*output_index(d, "output")];
  auto li = output_index(d, "lse");
  Tensor* lse = li ? &c.outputs[*li] : nullptr;
  if (out.numel() != T * H * Dc || (lse && lse->numel() != T * H)) return bad(c, "outputs have the wrong sizes");

  const std::vector<float> qnf = to_float(*qn), qpf = to_float(*qp);
  std::vector<float> o(static_cast<std::size_t>(T * H * Dc), 0.0f);
  std::vector<float> l(static_cast<std::size_t>(T * H), -std::numeric_limits<float>::infinity());
  std::vector<std::int64_t> sel;
  std::vector<float> kc, kp;
  std::vector<double> logits, acc(static_cast<std::size_t>(Dc));
  for (std::int64_t t = 0; t < T; ++t) {
    sel.clear();
    for (std::int64_t j = 0; j < K; ++j) {
      auto v = static_cast<std::int64_t>(element_as_double(*idx, t * K + j));
      if (v == -1) continue;
      if (v < 0 || v >= rows)
        return bad(c, fmt::format("sparse_indices[{}, {}] = {} is outside the {} cached rows", t, j, v, rows));
      sel.push_back(v);
    }
    if (sel.empty()) continue;
    const auto n = static_cast<std::int64_t>(sel.size());
    kc.resize(static_cast<std::size_t>(n * Dc));
    kp.resize(static_cast<std::size_t>(n * Dp));
    for (std::int64_t r = 0; r < n; ++r) {
      for (std::int64_t e = 0; e < Dc; ++e)
        kc[static_cast<std::size_t>(r * Dc + e)] = static_cast<float>(element_as_double(*ckv, sel[r] * Dc + e));
      for (std::int64_t e = 0; e < Dp; ++e)
        kp[static_cast<std::size_t>(r * Dp + e)] = static_cast<float>(element_as_double(*kpe, sel[r] * Dp + e));
    }
    logits.resize(static_cast<std::size_t>(n));
    for (std::int64_t h = 0; h < H; ++h) {
      const float* a = &qnf[static_cast<std::size_t>((t * H + h) * Dc)];
      const float* b = &qpf[static_cast<std::size_t>((t * H + h) * Dp)];
      double mx = -std::numeric_limits<double>::infinity();
      for (std::int64_t r = 0; r < n; ++r) {
        double s = 0;
        for (std::int64_t e = 0; e < Dc; ++e) s += static_cast<double>(a[e]) * kc[static_cast<std::size_t>(r * Dc + e)];
        for (std::int64_t e = 0; e < Dp; ++e) s += static_cast<double>(b[e]) * kp[static_cast<std::size_t>(r * Dp + e)];
        logits[static_cast<std::size_t>(r)] = s * scale;
        mx = std::max(mx, s * scale);
      }
      double sum = 0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (std::int64_t r = 0; r < n; ++r) {
        const double p = std::exp(logits[static_cast<std::size_t>(r)] - mx);
        sum += p;
        for (std::int64_t e = 0; e < Dc; ++e) acc[static_cast<std::size_t>(e)] += p * kc[static_cast<std::size_t>(r * Dc + e)];
      }
      for (std::int64_t e = 0; e < Dc; ++e)
        o[static_cast<std::size_t>((t * H + h) * Dc + e)] = static_cast<float>(acc[static_cast<std::size_t>(e)] / sum);
      l[static_cast<std::size_t>(t * H + h)] = static_cast<float>((mx + std::log(sum)) / std::log(2.0));
    }
  }
  KB_TRY(store_float(o, out));
  if (lse) KB_TRY(store_float(l, *lse));
  return ok_status();
}

Status run_indexer(const OracleCall& c) {
  const Tensor *q = tensor_arg(c, "q_index_fp8"), *kcache = tensor_arg(c, "k_index_cache_fp8"),
               *w = tensor_arg(c, "weights"), *seq_lens = tensor_arg(c, "seq_lens"), *table = tensor_arg(c, "block_table");
  if (!q || !kcache || !w || !seq_lens || !table) return bad(c, "every indexer input must be a tensor");
  const std::int64_t B = q->dim(0), H = q->dim(1), D = q->dim(2);
  const std::int64_t pages = kcache->dim(0), ps = kcache->dim(1);
  if (kcache->dim(2) != 1 || kcache->dim(3) != D + 4)
    return bad(c, fmt::format("k_index_cache_fp8 must be [pages, page_size, 1, {}] (dim + 4 scale bytes)", D + 4));
  if (w->dim(0) != B || w->dim(1) != H) return bad(c, "weights must be [batch, heads]");
  if (seq_lens->numel() != B || table->rank() != 2 || table->dim(0) != B)
    return bad(c, "seq_lens [batch] and block_table [batch, max_pages] disagree with the batch");
  const std::int64_t max_pages = table->dim(1);
  Tensor& out = c.outputs[0];
  if (out.rank() != 2 || out.dim(0) != B) return bad(c, "topk_indices must be [batch, topk]");
  const std::int64_t topk = out.dim(1);

  const std::vector<float> qf = to_float(*q), wf = to_float(*w);
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(kcache->bytes());
  const std::int64_t page_bytes = ps * (D + 4);
  std::vector<std::int64_t> result(static_cast<std::size_t>(B * topk), -1);
  std::vector<double> score;
  std::vector<float> key(static_cast<std::size_t>(D));
  std::vector<std::int64_t> order, global;
  for (std::int64_t b = 0; b < B; ++b) {
    const auto len = static_cast<std::int64_t>(element_as_double(*seq_lens, b));
    if (len < 0 || len > max_pages * ps)
      return bad(c, fmt::format("seq_lens[{}] = {} is outside 0..{} (max_num_pages * page_size)", b, len, max_pages * ps));
    score.assign(static_cast<std::size_t>(len), 0.0);
    global.assign(static_cast<std::size_t>(len), 0);
    for (std::int64_t j = 0; j < len; ++j) {
      const auto page = static_cast<std::int64_t>(element_as_double(*table, b * max_pages + j / ps));
      if (page < 0 || page >= pages)
        return bad(c, fmt::format("block_table[{}, {}] = {} is outside the {} pages", b, j / ps, page, pages));
      const std::int64_t slot = j % ps;
      const std::uint8_t* fp8 = bytes + page * page_bytes + slot * D;
      float kscale;
      std::memcpy(&kscale, bytes + page * page_bytes + ps * D + slot * 4, 4);
      for (std::int64_t e = 0; e < D; ++e) key[static_cast<std::size_t>(e)] = fp8_e4m3fn_to_float(fp8[e]) * kscale;
      double s = 0;
      for (std::int64_t h = 0; h < H; ++h) {
        const float* qh = &qf[static_cast<std::size_t>((b * H + h) * D)];
        double dot = 0;
        for (std::int64_t e = 0; e < D; ++e) dot += static_cast<double>(qh[e]) * key[static_cast<std::size_t>(e)];
        if (dot > 0) s += dot * wf[static_cast<std::size_t>(b * H + h)];
      }
      score[static_cast<std::size_t>(j)] = s;
      global[static_cast<std::size_t>(j)] = page * ps + slot;
    }
    const std::int64_t k = std::min(topk, len);
    order.resize(static_cast<std::size_t>(len));
    std::iota(order.begin(), order.end(), std::int64_t{0});
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](std::int64_t x, std::int64_t y) {
      const double sx = score[static_cast<std::size_t>(x)], sy = score[static_cast<std::size_t>(y)];
      return sx != sy ? sx > sy : x < y;
    });
    for (std::int64_t i = 0; i < k; ++i)
      result[static_cast<std::size_t>(b * topk + i)] = global[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])];
  }
  for (std::size_t i = 0; i < result.size(); ++i) {
    if (out.dtype() == DType::int64) out.data<std::int64_t>()[i] = result[i];
    else if (out.dtype() == DType::int32) out.data<std::int32_t>()[i] = static_cast<std::int32_t>(result[i]);
    else return bad(c, "topk_indices must be int32 or int64");
  }
  return ok_status();
}

Status run(const OracleCall& c) {
  const Definition& d = c.definition;
  if (std::string why = supports(d); !why.empty()) return make_error(Code::unsupported, d.name + ": " + why);
  if (c.inputs.size() != d.inputs.size() || c.outputs.size() != d.outputs.size())
    return bad(c, "wrong number of arguments");
  try {
    return *form_of(d) == Form::attention ? run_attention(c) : run_indexer(c);
  } catch (const std::bad_alloc&) {
    return make_error(Code::out_of_memory, d.name + ": dsa_paged oracle: out of memory");
  }
}

}  // namespace
extern const OracleEntry dsa_paged_oracle{"dsa_paged", "dsa_paged sparse attention / fp8 top-k indexer", supports, run};
}  // namespace kb::kernels
