#include "oracle.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "common/parallel.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels::attention {
namespace {

constexpr double kLn2 = 0.693147180559945309417232121458176568;

// ---- Looking at the definition ---------------------------------------------

bool is_index_dtype(DType t) { return dtype_is_integer(t); }

// Why `d` does not fit: every name in `required` and nothing outside
// `required` + `optional` among the inputs, with the given ranks.
struct InputRule {
  std::string_view name;
  int rank;        // -1: a scalar (shape null) or a 0-D tensor
  bool index;      // integer tensor (else floating point)
  bool required;
};

std::string check_inputs(const Definition& d, std::initializer_list<InputRule> rules) {
  for (const auto& r : rules) {
    const TensorSpec* s = d.find_input(r.name);
    if (!s) {
      if (r.required) return fmt::format("input '{}' is missing", r.name);
      continue;
    }
    if (r.rank < 0) {
      if (!s->is_scalar() && s->rank() != 0) return fmt::format("input '{}' must be a scalar", r.name);
      continue;
    }
    if (s->is_scalar() || static_cast<int>(s->rank()) != r.rank)
      return fmt::format("input '{}' must have rank {}", r.name, r.rank);
    if (r.index && !is_index_dtype(s->dtype))
      return fmt::format("input '{}' must be an integer tensor, not {}", r.name, dtype_name(s->dtype));
    if (!r.index && !dtype_is_float(s->dtype))
      return fmt::format("input '{}' must be a floating-point tensor, not {}", r.name, dtype_name(s->dtype));
  }
  for (const auto& s : d.inputs) {
    bool known = false;
    for (const auto& r : rules) known = known || s.name == r.name;
    if (!known) return fmt::format("input '{}' is not one this oracle understands", s.name);
  }
  return {};
}

// `output` [tokens, H_q, D_v] required, `lse` [tokens, H_q] optional, nothing else.
std::string check_outputs(const Definition& d) {
  const TensorSpec* out = d.find_output("output");
  if (!out) return "output 'output' is missing";
  if (out->is_scalar() || out->rank() != 3) return "output 'output' must have rank 3";
  if (const TensorSpec* lse = d.find_output("lse"); lse && (lse->is_scalar() || lse->rank() != 2))
    return "output 'lse' must have rank 2";
  for (const auto& s : d.outputs)
    if (s.name != "output" && s.name != "lse")
      return fmt::format("output '{}' is not one this oracle produces", s.name);
  return {};
}

bool is_causal(const Definition& d) { return d.name.find("causal") != std::string::npos; }

// ---- Reading the call -------------------------------------------------------

Error bad(const Definition& d, std::string message) {
  return make_error(Code::invalid_argument, fmt::format("{}: {}", d.name, message));
}
Error bad(const OracleCall& c, std::string message) { return bad(c.definition, std::move(message)); }

Result<const Tensor*> tensor_input(const OracleCall& c, std::string_view name) {
  auto i = input_index(c.definition, name);
  if (!i || *i >= c.inputs.size()) return bad(c, fmt::format("input '{}' was not passed", name));
  const Tensor* t = c.inputs[*i].tensor;
  if (!t) return bad(c, fmt::format("input '{}' must be a tensor", name));
  return t;
}

// nullptr when the definition has no such input.
Result<const Tensor*> optional_tensor_input(const OracleCall& c, std::string_view name) {
  if (!input_index(c.definition, name)) return static_cast<const Tensor*>(nullptr);
  return tensor_input(c, name);
}

// The softmax scale as the references use it: a float32 multiplier.
Result<float> scale_input(const OracleCall& c, std::string_view name) {
  auto i = input_index(c.definition, name);
  if (!i || *i >= c.inputs.size()) return bad(c, fmt::format("input '{}' was not passed", name));
  const Arg& a = c.inputs[*i];
  if (auto v = scalar_as_double(a)) return static_cast<float>(*v);
  if (a.tensor && a.tensor->numel() == 1) return static_cast<float>(element_as_double(*a.tensor, 0));
  return bad(c, fmt::format("input '{}' must be a number", name));
}

Result<Tensor*> output_tensor(const OracleCall& c, std::string_view name, bool required) {
  auto i = output_index(c.definition, name);
  if (!i) {
    if (required) return bad(c, fmt::format("output '{}' is missing", name));
    return static_cast<Tensor*>(nullptr);
  }
  if (*i >= c.outputs.size()) return bad(c, fmt::format("output '{}' was not passed", name));
  return &c.outputs[*i];
}

std::string shape_str(const std::vector<std::int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }
std::string shape_str(const Tensor& t) { return shape_str(t.shape()); }

Status expect_shape(const OracleCall& c, std::string_view name, const Tensor& t,
                    const std::vector<std::int64_t>& shape) {
  if (t.shape() != shape)
    return bad(c, fmt::format("'{}' has shape {}, expected [{}]", name, shape_str(t), fmt::join(shape, ", ")));
  return ok_status();
}

// An indptr of exactly `len` entries, non-decreasing, every entry in [0, limit].
Status check_indptr(const Definition& c, std::string_view name, const std::vector<std::int64_t>& p,
                    std::size_t len, std::int64_t limit, std::string_view limit_what) {
  if (p.size() != len) return bad(c, fmt::format("'{}' has {} entries, expected {}", name, p.size(), len));
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] < 0 || p[i] > limit)
      return bad(c, fmt::format("{}[{}] = {} is outside [0, {}] ({})", name, i, p[i], limit, limit_what));
    if (i > 0 && p[i] < p[i - 1])
      return bad(c, fmt::format("'{}' decreases at entry {} ({} after {})", name, i, p[i], p[i - 1]));
  }
  return ok_status();
}

// ---- The attention itself ---------------------------------------------------

// A float32 copy of a tensor seen as [rows, heads, dim].
struct Rows {
  std::vector<float> data;
  std::int64_t heads = 0, dim = 0;
  const float* at(std::int64_t row, std::int64_t head) const {
    return data.data() + (row * heads + head) * dim;
  }
};

Rows rows_of(const Tensor& t, std::int64_t heads, std::int64_t dim) {
  return Rows{to_float(t), heads, dim};
}

// The listed pages of a cache [num_pages, page_size, heads, dim], packed in
// list order: row packed * page_size + slot is slot `slot` of pages[packed].
Rows packed_pages(const Tensor& t, const std::vector<std::int64_t>& pages, std::int64_t page_size,
                  std::int64_t heads, std::int64_t dim) {
  Rows r{{}, heads, dim};
  const std::int64_t page_elems = page_size * heads * dim;
  r.data.reserve(pages.size() * static_cast<std::size_t>(page_elems));
  for (std::int64_t page : pages) {
    const std::int64_t begin = page * page_elems;
    if (t.dtype() == DType::float32) {
      const float* src = t.data<float>() + begin;
      r.data.insert(r.data.end(), src, src + page_elems);
    } else {
      for (std::int64_t i = 0; i < page_elems; ++i)
        r.data.push_back(static_cast<float>(element_as_double(t, begin + i)));
    }
  }
  return r;
}

// Queries q0 (and q1, a second part of the query, MLA's q_pe) [tokens, H_q, d],
// keys k0 (k1) [rows, H_kv, d], values v [rows, H_kv, d_v].
struct Problem {
  const Rows* q0 = nullptr;
  const Rows* q1 = nullptr;  // null: keys have one part
  const Rows* k0 = nullptr;
  const Rows* k1 = nullptr;
  const Rows* v = nullptr;
  std::int64_t q_heads = 0;
  std::int64_t group = 1;  // H_q / H_kv
  double scale = 1.0;
  bool causal = false;
  std::vector<float> out;  // [tokens, H_q, d_v], starts at 0
  std::vector<float> lse;  // [tokens, H_q], starts at -inf
};

double dot(const float* a, const float* b, std::int64_t n) {
  double s = 0;
  for (std::int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return s;
}

// Threads the oracle spreads one sequence's (query, head) rows over, and the
// multiply-adds below which a sequence runs on the calling thread alone
// (starting threads costs more than such a sequence).
constexpr unsigned kAttendThreads = 16;
constexpr double kSerialMultiplyAdds = 1 << 20;

// The queries [q_begin, q_begin + q_len) of one sequence whose keys and
// values are the rows `kv_rows` (in sequence order). Every (query, head) row
// is computed alone, in the same order whatever thread takes it, so the
// results do not depend on the threads.
void attend(Problem& p, std::int64_t q_begin, std::int64_t q_len, const std::vector<std::int64_t>& kv_rows) {
  const auto kv_len = static_cast<std::int64_t>(kv_rows.size());
  const std::int64_t dv = p.v->dim, dk = p.k0->dim + (p.q1 ? p.k1->dim : 0);
  auto row = [&](std::int64_t item) {
    const std::int64_t i = item / p.q_heads, h = item % p.q_heads;
    std::int64_t visible = kv_len;
    if (p.causal) visible = std::clamp<std::int64_t>(kv_len - q_len + i + 1, 0, kv_len);
    if (visible == 0) return;  // no key: output 0, lse -inf
    const std::int64_t t = q_begin + i;
    const std::int64_t g = h / p.group;
    const float* qa = p.q0->at(t, h);
    const float* qb = p.q1 ? p.q1->at(t, h) : nullptr;
    std::vector<double> logits(static_cast<std::size_t>(visible));
    double m = -std::numeric_limits<double>::infinity();
    for (std::int64_t j = 0; j < visible; ++j) {
      const std::int64_t r = kv_rows[static_cast<std::size_t>(j)];
      double s = dot(qa, p.k0->at(r, g), p.k0->dim);
      if (qb) s += dot(qb, p.k1->at(r, g), p.k1->dim);
      const double l = s * p.scale;
      logits[static_cast<std::size_t>(j)] = l;
      m = std::max(m, l);
    }
    std::vector<double> acc(static_cast<std::size_t>(dv), 0.0);
    double sum = 0;
    for (std::int64_t j = 0; j < visible; ++j) {
      const double w = std::exp(logits[static_cast<std::size_t>(j)] - m);
      sum += w;
      const float* vr = p.v->at(kv_rows[static_cast<std::size_t>(j)], g);
      for (std::int64_t e = 0; e < dv; ++e) acc[static_cast<std::size_t>(e)] += w * static_cast<double>(vr[e]);
    }
    float* o = p.out.data() + (t * p.q_heads + h) * dv;
    for (std::int64_t e = 0; e < dv; ++e) o[e] = static_cast<float>(acc[static_cast<std::size_t>(e)] / sum);
    p.lse[static_cast<std::size_t>(t * p.q_heads + h)] = static_cast<float>((m + std::log(sum)) / kLn2);
  };
  const std::int64_t rows = q_len * p.q_heads;
  const double work = static_cast<double>(rows) * static_cast<double>(kv_len) * static_cast<double>(dk + dv);
  parallel_for(rows, work < kSerialMultiplyAdds ? 1u : kAttendThreads, row);
}

void start(Problem& p, std::int64_t tokens, std::int64_t dv) {
  p.out.assign(static_cast<std::size_t>(tokens * p.q_heads * dv), 0.0f);
  p.lse.assign(static_cast<std::size_t>(tokens * p.q_heads), -std::numeric_limits<float>::infinity());
}

// Checks the outputs' shapes, then stores the results into them.
Status finish(const OracleCall& c, const Problem& p, std::int64_t tokens, std::int64_t dv) {
  auto out = output_tensor(c, "output", true);
  if (!out) return std::move(out).error();
  auto lse = output_tensor(c, "lse", false);
  if (!lse) return std::move(lse).error();
  KB_TRY(expect_shape(c, "output", **out, {tokens, p.q_heads, dv}));
  if (*lse) KB_TRY(expect_shape(c, "lse", **lse, {tokens, p.q_heads}));
  KB_TRY(store_float(p.out, **out));
  if (*lse) KB_TRY(store_float(p.lse, **lse));
  return ok_status();
}

Status check_heads(const Definition& c, std::int64_t q_heads, std::int64_t kv_heads) {
  if (kv_heads < 1 || q_heads < 0 || q_heads % kv_heads != 0)
    return bad(c, fmt::format("{} query heads are not a multiple of {} kv heads", q_heads, kv_heads));
  return ok_status();
}

}  // namespace

// ---- Shapes and index checks (shared with the GPU oracle) --------------------

Result<std::vector<std::int64_t>> index_values(const Definition& d, std::string_view name, const Tensor& t) {
  if (t.rank() != 1) return bad(d, fmt::format("'{}' has shape {}, expected rank 1", name, shape_str(t)));
  std::vector<std::int64_t> v(static_cast<std::size_t>(t.numel()));
  switch (t.dtype()) {
    case DType::int64: std::copy_n(t.data<std::int64_t>(), v.size(), v.begin()); break;
    case DType::int32: std::copy_n(t.data<std::int32_t>(), v.size(), v.begin()); break;
    case DType::int16: std::copy_n(t.data<std::int16_t>(), v.size(), v.begin()); break;
    case DType::int8: std::copy_n(t.data<std::int8_t>(), v.size(), v.begin()); break;
    default: return bad(d, fmt::format("'{}' must be an integer tensor, not {}", name, dtype_name(t.dtype())));
  }
  return v;
}

Result<AttentionShapes> paged_shapes(const Definition& d, PagedKind kind, const Shape& q, const Shape* q_pe,
                                     const Shape& kc, const Shape& vc) {
  const bool mla = kind == PagedKind::mla;
  const char* q_name = mla ? "q_nope" : "q";
  const char* k_name = mla ? "ckv_cache" : "k_cache";
  const char* v_name = mla ? "kpe_cache" : "v_cache";  // MLA: the kpe part of the keys
  auto rank = [&](std::string_view name, const Shape& t, std::size_t r) -> Status {
    if (t.size() != r) return bad(d, fmt::format("'{}' has shape {}, expected rank {}", name, shape_str(t), r));
    return ok_status();
  };
  KB_TRY(rank(q_name, q, 3));
  AttentionShapes s;
  s.tokens = q[0], s.q_heads = q[1], s.d_qk = q[2];
  // The caches are [num_pages, page_size, kv_heads, dim] (MLA: [num_pages,
  // page_size, dim], one kv head).
  if (!mla) {
    KB_TRY(rank(k_name, kc, 4));
    KB_TRY(rank(v_name, vc, 4));
    s.num_pages = kc[0], s.page_size = kc[1], s.kv_heads = kc[2];
    if (kc[3] != s.d_qk)
      return bad(d, fmt::format("k_cache {} does not match q {} in head_dim", shape_str(kc), shape_str(q)));
    if (vc[0] != s.num_pages || vc[1] != s.page_size || vc[2] != s.kv_heads)
      return bad(d, fmt::format("v_cache {} does not match k_cache {}", shape_str(vc), shape_str(kc)));
    s.d_v = vc[3];
    KB_TRY(check_heads(d, s.q_heads, s.kv_heads));
  } else {
    if (!q_pe) return bad(d, "input 'q_pe' was not passed");
    KB_TRY(rank("q_pe", *q_pe, 3));
    KB_TRY(rank(k_name, kc, 3));
    KB_TRY(rank(v_name, vc, 3));
    s.d_pe = (*q_pe)[2];
    if ((*q_pe)[0] != s.tokens || (*q_pe)[1] != s.q_heads)
      return bad(d, fmt::format("q_pe {} does not match q_nope {}", shape_str(*q_pe), shape_str(q)));
    s.num_pages = kc[0], s.page_size = kc[1];
    if (kc[2] != s.d_qk)
      return bad(d, fmt::format("ckv_cache {} does not match q_nope {} in head_dim_ckv", shape_str(kc), shape_str(q)));
    if (vc[0] != s.num_pages || vc[1] != s.page_size || vc[2] != s.d_pe)
      return bad(d, fmt::format("kpe_cache {} does not match ckv_cache {} and q_pe {}", shape_str(vc), shape_str(kc),
                                shape_str(*q_pe)));
    s.d_v = s.d_qk;  // output = attn . ckv
  }
  if (s.page_size < 1) return bad(d, fmt::format("page_size is {}, expected at least 1", s.page_size));
  return s;
}

Result<std::vector<Sequence>> paged_sequences(const Definition& d, const AttentionShapes& shapes,
                                              const std::vector<std::int64_t>* qo_p,
                                              const std::vector<std::int64_t>& indptr,
                                              const std::vector<std::int64_t>& indices,
                                              const std::vector<std::int64_t>* last_p) {
  // Sequences: decode has one query per sequence (batch = tokens); prefill
  // takes its query ranges from qo_indptr.
  const bool prefill = qo_p != nullptr;
  std::int64_t batch = shapes.tokens;
  if (prefill) {
    const auto& qo = *qo_p;
    if (qo.empty()) return bad(d, "'qo_indptr' is empty (it needs batch_size + 1 entries)");
    batch = static_cast<std::int64_t>(qo.size()) - 1;
    KB_TRY(check_indptr(d, "qo_indptr", qo, qo.size(), shapes.tokens, "query tokens"));
  }
  KB_TRY(check_indptr(d, "kv_indptr", indptr, static_cast<std::size_t>(batch + 1),
                      static_cast<std::int64_t>(indices.size()), "entries of kv_indices"));
  if (last_p && static_cast<std::int64_t>(last_p->size()) < batch)
    return bad(d, fmt::format("'kv_last_page_len' has {} entries for {} sequences", last_p->size(), batch));
  std::vector<Sequence> seqs;
  for (std::int64_t b = 0; b < batch; ++b) {
    Sequence s;
    s.q_begin = prefill ? (*qo_p)[static_cast<std::size_t>(b)] : b;
    s.q_len = prefill ? (*qo_p)[static_cast<std::size_t>(b + 1)] - s.q_begin : 1;
    s.first = indptr[static_cast<std::size_t>(b)];
    s.pages = indptr[static_cast<std::size_t>(b + 1)] - s.first;
    if (s.q_len == 0 || s.pages == 0) continue;  // output 0, lse -inf
    s.last_len = shapes.page_size;
    if (last_p) {
      s.last_len = (*last_p)[static_cast<std::size_t>(b)];
      if (s.last_len < 0 || s.last_len > shapes.page_size)
        return bad(d, fmt::format("kv_last_page_len[{}] = {} is outside [0, {}] (page_size)", b, s.last_len,
                                  shapes.page_size));
    }
    for (std::int64_t i = s.first; i < s.first + s.pages; ++i) {
      const std::int64_t page = indices[static_cast<std::size_t>(i)];
      if (page < 0 || page >= shapes.num_pages)
        return bad(d, fmt::format("kv_indices[{}] = {} is not a page (num_pages {})", i, page, shapes.num_pages));
    }
    seqs.push_back(s);
  }
  return seqs;
}

Result<AttentionShapes> ragged_shapes(const Definition& d, const Shape& q, const Shape& k, const Shape& v) {
  for (const auto& [name, t] : {std::pair<const char*, const Shape*>{"q", &q}, {"k", &k}, {"v", &v}})
    if (t->size() != 3) return bad(d, fmt::format("'{}' has shape {}, expected rank 3", name, shape_str(*t)));
  AttentionShapes s;
  s.tokens = q[0], s.q_heads = q[1], s.d_qk = q[2];
  s.kv_rows = k[0], s.kv_heads = k[1], s.d_v = v[2];
  if (k[2] != s.d_qk) return bad(d, fmt::format("k {} does not match q {} in head dim", shape_str(k), shape_str(q)));
  if (v[0] != s.kv_rows || v[1] != s.kv_heads)
    return bad(d, fmt::format("v {} does not match k {}", shape_str(v), shape_str(k)));
  KB_TRY(check_heads(d, s.q_heads, s.kv_heads));
  return s;
}

Result<std::vector<Sequence>> ragged_sequences(const Definition& d, const AttentionShapes& shapes,
                                               const std::vector<std::int64_t>& qo,
                                               const std::vector<std::int64_t>& kvp) {
  if (qo.empty()) return bad(d, "'qo_indptr' is empty (it needs batch_size + 1 entries)");
  KB_TRY(check_indptr(d, "qo_indptr", qo, qo.size(), shapes.tokens, "query tokens"));
  KB_TRY(check_indptr(d, "kv_indptr", kvp, qo.size(), shapes.kv_rows, "kv tokens"));
  std::vector<Sequence> seqs;
  for (std::size_t b = 0; b + 1 < qo.size(); ++b) {
    Sequence s;
    s.q_begin = qo[b];
    s.q_len = qo[b + 1] - qo[b];
    s.first = kvp[b];
    s.pages = 1;
    s.last_len = kvp[b + 1] - kvp[b];
    if (s.q_len == 0 || s.last_len == 0) continue;  // output 0, lse -inf
    seqs.push_back(s);
  }
  return seqs;
}

// ---- Paged ------------------------------------------------------------------

std::string supports_paged(const Definition& d, PagedKind kind) {
  std::string why;
  if (kind == PagedKind::gqa) {
    why = check_inputs(d, {{"q", 3, false, true},
                           {"k_cache", 4, false, true},
                           {"v_cache", 4, false, true},
                           {"qo_indptr", 1, true, false},
                           {"kv_indptr", 1, true, true},
                           {"kv_indices", 1, true, true},
                           {"kv_last_page_len", 1, true, false},
                           {"sm_scale", -1, false, true}});
  } else {
    why = check_inputs(d, {{"q_nope", 3, false, true},
                           {"q_pe", 3, false, true},
                           {"ckv_cache", 3, false, true},
                           {"kpe_cache", 3, false, true},
                           {"qo_indptr", 1, true, false},
                           {"kv_indptr", 1, true, true},
                           {"kv_indices", 1, true, true},
                           {"kv_last_page_len", 1, true, false},
                           {"sm_scale", -1, false, true}});
  }
  if (why.empty()) why = check_outputs(d);
  if (why.empty() && d.find_input("qo_indptr") && !is_causal(d))
    why = "only causal prefill is supported (the name says no 'causal')";
  return why;
}

Status run_paged(const OracleCall& c, PagedKind kind) {
  const bool mla = kind == PagedKind::mla;
  const char* q_name = mla ? "q_nope" : "q";
  const char* k_name = mla ? "ckv_cache" : "k_cache";
  const char* v_name = mla ? "kpe_cache" : "v_cache";  // MLA: the kpe part of the keys
  auto q_r = tensor_input(c, q_name);
  if (!q_r) return std::move(q_r).error();
  auto qpe_r = mla ? tensor_input(c, "q_pe") : Result<const Tensor*>(static_cast<const Tensor*>(nullptr));
  if (!qpe_r) return std::move(qpe_r).error();
  auto k_r = tensor_input(c, k_name);
  if (!k_r) return std::move(k_r).error();
  auto v_r = tensor_input(c, v_name);
  if (!v_r) return std::move(v_r).error();
  auto qo_r = optional_tensor_input(c, "qo_indptr");
  if (!qo_r) return std::move(qo_r).error();
  auto indptr_r = tensor_input(c, "kv_indptr");
  if (!indptr_r) return std::move(indptr_r).error();
  auto indices_r = tensor_input(c, "kv_indices");
  if (!indices_r) return std::move(indices_r).error();
  auto last_r = optional_tensor_input(c, "kv_last_page_len");
  if (!last_r) return std::move(last_r).error();
  auto scale = scale_input(c, "sm_scale");
  if (!scale) return std::move(scale).error();

  const Tensor& q = **q_r;
  const Tensor& kc = **k_r;
  const Tensor& vc = **v_r;
  auto shapes_r = paged_shapes(c.definition, kind, q.shape(), mla ? &(*qpe_r)->shape() : nullptr, kc.shape(),
                               vc.shape());
  if (!shapes_r) return std::move(shapes_r).error();
  const AttentionShapes& sh = *shapes_r;

  const bool prefill = *qo_r != nullptr;
  std::vector<std::int64_t> qo, last;
  if (prefill) {
    auto v = index_values(c.definition, "qo_indptr", **qo_r);
    if (!v) return std::move(v).error();
    qo = std::move(*v);
  }
  auto indptr_v = index_values(c.definition, "kv_indptr", **indptr_r);
  if (!indptr_v) return std::move(indptr_v).error();
  auto indices_v = index_values(c.definition, "kv_indices", **indices_r);
  if (!indices_v) return std::move(indices_v).error();
  if (*last_r) {
    auto v = index_values(c.definition, "kv_last_page_len", **last_r);
    if (!v) return std::move(v).error();
    last = std::move(*v);
  }
  const auto& indices = *indices_v;
  auto seqs_r = paged_sequences(c.definition, sh, prefill ? &qo : nullptr, *indptr_v, indices,
                                *last_r ? &last : nullptr);
  if (!seqs_r) return std::move(seqs_r).error();
  const std::vector<Sequence>& seqs = *seqs_r;

  // Only the pages that are read are converted to float32 (a cache may hold
  // far more pages than a call reads).
  std::vector<std::int64_t> packed_of(static_cast<std::size_t>(sh.num_pages), -1);  // page -> packed position
  std::vector<std::int64_t> used_pages;                                             // packed position -> page
  for (const Sequence& s : seqs)
    for (std::int64_t i = s.first; i < s.first + s.pages; ++i) {
      const std::int64_t page = indices[static_cast<std::size_t>(i)];
      auto& packed = packed_of[static_cast<std::size_t>(page)];
      if (packed < 0) {
        packed = static_cast<std::int64_t>(used_pages.size());
        used_pages.push_back(page);
      }
    }

  Rows q0 = rows_of(q, sh.q_heads, sh.d_qk), q1, k0, k1, vals;
  Problem p;
  if (!mla) {
    k0 = packed_pages(kc, used_pages, sh.page_size, sh.kv_heads, sh.d_qk);
    vals = packed_pages(vc, used_pages, sh.page_size, sh.kv_heads, sh.d_v);
    p.q0 = &q0, p.k0 = &k0, p.v = &vals;
  } else {
    q1 = rows_of(**qpe_r, sh.q_heads, sh.d_pe);
    k0 = packed_pages(kc, used_pages, sh.page_size, 1, sh.d_qk);
    k1 = packed_pages(vc, used_pages, sh.page_size, 1, sh.d_pe);
    p.q0 = &q0, p.q1 = &q1, p.k0 = &k0, p.k1 = &k1, p.v = &k0;
  }
  p.q_heads = sh.q_heads;
  p.group = sh.q_heads / sh.kv_heads;
  p.scale = *scale;
  p.causal = prefill;
  start(p, sh.tokens, sh.d_v);

  std::vector<std::int64_t> kv_rows;
  for (const Sequence& s : seqs) {
    kv_rows.clear();
    for (std::int64_t i = 0; i < s.pages; ++i) {
      const std::int64_t page = indices[static_cast<std::size_t>(s.first + i)];
      const std::int64_t packed = packed_of[static_cast<std::size_t>(page)];
      const std::int64_t used = i + 1 < s.pages ? sh.page_size : s.last_len;
      for (std::int64_t slot = 0; slot < used; ++slot) kv_rows.push_back(packed * sh.page_size + slot);
    }
    attend(p, s.q_begin, s.q_len, kv_rows);
  }
  return finish(c, p, sh.tokens, sh.d_v);
}

// ---- Ragged -----------------------------------------------------------------

std::string supports_ragged(const Definition& d) {
  std::string why = check_inputs(d, {{"q", 3, false, true},
                                     {"k", 3, false, true},
                                     {"v", 3, false, true},
                                     {"qo_indptr", 1, true, true},
                                     {"kv_indptr", 1, true, true},
                                     {"sm_scale", -1, false, true}});
  if (why.empty()) why = check_outputs(d);
  if (why.empty() && !is_causal(d)) why = "only causal prefill is supported (the name says no 'causal')";
  return why;
}

Status run_ragged(const OracleCall& c) {
  auto q_r = tensor_input(c, "q");
  if (!q_r) return std::move(q_r).error();
  auto k_r = tensor_input(c, "k");
  if (!k_r) return std::move(k_r).error();
  auto v_r = tensor_input(c, "v");
  if (!v_r) return std::move(v_r).error();
  auto qo_r = tensor_input(c, "qo_indptr");
  if (!qo_r) return std::move(qo_r).error();
  auto kvp_r = tensor_input(c, "kv_indptr");
  if (!kvp_r) return std::move(kvp_r).error();
  auto scale = scale_input(c, "sm_scale");
  if (!scale) return std::move(scale).error();

  const Tensor& q = **q_r;
  const Tensor& k = **k_r;
  const Tensor& v = **v_r;
  auto shapes_r = ragged_shapes(c.definition, q.shape(), k.shape(), v.shape());
  if (!shapes_r) return std::move(shapes_r).error();
  const AttentionShapes& sh = *shapes_r;
  auto qo_v = index_values(c.definition, "qo_indptr", **qo_r);
  if (!qo_v) return std::move(qo_v).error();
  auto kvp_v = index_values(c.definition, "kv_indptr", **kvp_r);
  if (!kvp_v) return std::move(kvp_v).error();
  auto seqs = ragged_sequences(c.definition, sh, *qo_v, *kvp_v);
  if (!seqs) return std::move(seqs).error();

  Rows q0 = rows_of(q, sh.q_heads, sh.d_qk);
  Rows k0 = rows_of(k, sh.kv_heads, sh.d_qk);
  Rows vals = rows_of(v, sh.kv_heads, sh.d_v);
  Problem p;
  p.q0 = &q0, p.k0 = &k0, p.v = &vals;
  p.q_heads = sh.q_heads;
  p.group = sh.q_heads / sh.kv_heads;
  p.scale = *scale;
  p.causal = true;
  start(p, sh.tokens, sh.d_v);

  std::vector<std::int64_t> kv_rows;
  for (const Sequence& s : *seqs) {
    kv_rows.clear();
    for (std::int64_t r = s.first; r < s.first + s.last_len; ++r) kv_rows.push_back(r);
    attend(p, s.q_begin, s.q_len, kv_rows);
  }
  return finish(c, p, sh.tokens, sh.d_v);
}

}  // namespace kb::kernels::attention
