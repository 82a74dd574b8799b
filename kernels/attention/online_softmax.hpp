// kb's CPU attention solutions (gqa_paged, gqa_ragged, mla_paged, mla_ragged):
// a tiled online softmax in the manner of FlashAttention, written apart from
// the oracle (kernels/attention/oracle.cpp), which gathers each
// sequence's keys, materializes every logit and accumulates in double.
//
// Here, per work unit (one sequence, one kv head, a tile of queries with all
// the query heads of that kv head's group):
//   - queries are loaded once, pre-multiplied by sm_scale * log2(e), so every
//     score is already a base-2 logit;
//   - keys and values stream through in blocks of kKeyBlock, read straight
//     from the cache (a paged one through its page table, key j of a sequence
//     being slot j % page_size of page table[first + j / page_size]) and
//     widened to float32 block by block;
//   - each row keeps a running max m, a running sum l and an fp32 accumulator;
//     a block with a larger max rescales both by exp2(m_old - m_new);
//   - at the end, output = acc / l and lse = m + log2(l) (already base 2).
// Everything is float32. Causal masks are bottom-right aligned: query i of a
// sequence sees keys j <= i + diagonal, diagonal = kv_len - q_len. A row that
// sees no key (empty sequence, no queries, or a causal window before the
// first key) keeps output 0 and lse -inf, as the references' per-row loops do.
// Work units are spread over threads; each writes its own output rows.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/result.hpp"
#include "harness/implementation.hpp"
#include "oracle/oracle.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels::flash {

// Keys per block: 32 keys of 576 floats (MLA) stay within 72 KiB, L2-resident.
constexpr std::int64_t kKeyBlock = 32;
// Query rows (query tokens x heads of one group) per work unit, at most.
constexpr std::int64_t kRowsPerUnit = 64;
// Multiply-adds (about a millisecond) worth starting a thread for.
constexpr std::int64_t kMinWorkPerThread = std::int64_t{1} << 21;

// n elements of t from element `first`, widened to float32.
inline void load_row(const Tensor& t, std::int64_t first, std::int64_t n, float* dst) {
  switch (t.dtype()) {
    case DType::float32: std::memcpy(dst, t.data<float>() + first, static_cast<std::size_t>(n) * sizeof(float)); break;
    case DType::bfloat16: {
      const std::uint16_t* s = t.data<std::uint16_t>() + first;
      for (std::int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(s[i]);
      break;
    }
    case DType::float16: {
      const std::uint16_t* s = t.data<std::uint16_t>() + first;
      for (std::int64_t i = 0; i < n; ++i) dst[i] = half_to_float(s[i]);
      break;
    }
    default:
      for (std::int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(element_as_double(t, first + i));
  }
}

// Eight independent partial sums: vectorizable without -ffast-math.
inline float dot(const float* a, const float* b, std::int64_t n) {
  float acc[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  float s = 0;
  for (; i < n; ++i) s += a[i] * b[i];
  return s + ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// A tensor seen as [rows, heads, dim] (MLA caches: heads 1).
struct Part {
  const Tensor* t = nullptr;
  std::int64_t heads = 1;
  std::int64_t dim = 0;
  std::int64_t offset(std::int64_t row, std::int64_t head) const { return (row * heads + head) * dim; }
};

struct Sequence {
  std::int64_t q_begin = 0, q_len = 0;  // query tokens [q_begin, q_begin + q_len)
  std::int64_t kv_len = 0;              // keys of the sequence
  std::int64_t kv_first = 0;            // ragged: its first key row; paged: its first page-table entry
  std::int64_t diagonal = 0;            // causal: query i sees keys j <= i + diagonal
};

struct Problem {
  Part q[2];  // query parts: q (GQA, ragged), or q_nope and q_pe (MLA)
  Part k[2];  // the key parts they multiply: k / k_cache, or ckv_cache and kpe_cache
  int parts = 1;
  Part v;     // values; MLA: the same tensor as k[0]
  std::int64_t tokens = 0, q_heads = 0, kv_heads = 1, dv = 0;
  float sm_scale = 1.0f;
  bool causal = false;
  const std::vector<std::int64_t>* page_table = nullptr;  // null: ragged
  std::int64_t page_size = 1;
  std::vector<Sequence> seqs;

  std::int64_t key_row(const Sequence& s, std::int64_t j) const {
    if (!page_table) return s.kv_first + j;
    return (*page_table)[static_cast<std::size_t>(s.kv_first + j / page_size)] * page_size + j % page_size;
  }
};

namespace detail {

struct Unit {
  std::int64_t seq, head, q0, q1;  // sequence, kv head, query tile [q0, q1) within the sequence
};

struct Scratch {
  std::vector<float> qs, ks, vs, m, l, acc, s;
};

// One work unit: rows r = (query q0 + r / group, head head * group + r % group).
inline void run_unit(const Problem& p, const Unit& u, Scratch& w, float* out, float* lse) {
  const Sequence& s = p.seqs[static_cast<std::size_t>(u.seq)];
  const std::int64_t group = p.q_heads / p.kv_heads;
  const std::int64_t rows = (u.q1 - u.q0) * group;
  std::int64_t dk = 0;
  for (int c = 0; c < p.parts; ++c) dk += p.k[c].dim;
  const bool v_is_k0 = p.v.t == p.k[0].t;
  const float log2e_scale = p.sm_scale * 1.4426950408889634f;

  // Per-row key limit and the block loop's end.
  auto limit = [&](std::int64_t r) {
    if (!p.causal) return s.kv_len;
    return std::clamp<std::int64_t>(u.q0 + r / group + s.diagonal + 1, 0, s.kv_len);
  };
  std::int64_t kv_end = 0;
  for (std::int64_t r = 0; r < rows; ++r) kv_end = std::max(kv_end, limit(r));

  w.qs.resize(static_cast<std::size_t>(rows * dk));
  w.m.assign(static_cast<std::size_t>(rows), -std::numeric_limits<float>::infinity());
  w.l.assign(static_cast<std::size_t>(rows), 0.0f);
  w.acc.assign(static_cast<std::size_t>(rows * p.dv), 0.0f);
  w.ks.resize(static_cast<std::size_t>(kKeyBlock * dk));
  w.vs.resize(v_is_k0 ? 0 : static_cast<std::size_t>(kKeyBlock * p.dv));
  w.s.resize(static_cast<std::size_t>(kKeyBlock));
  if (kv_end == 0) return;  // no row sees a key: outputs stay 0, lse -inf

  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t t = s.q_begin + u.q0 + r / group, h = u.head * group + r % group;
    float* dst = w.qs.data() + r * dk;
    for (int c = 0; c < p.parts; ++c) {
      load_row(*p.q[c].t, p.q[c].offset(t, h), p.q[c].dim, dst);
      for (std::int64_t e = 0; e < p.q[c].dim; ++e) dst[e] *= log2e_scale;
      dst += p.q[c].dim;
    }
  }

  for (std::int64_t j0 = 0; j0 < kv_end; j0 += kKeyBlock) {
    const std::int64_t jn = std::min(kKeyBlock, kv_end - j0);
    for (std::int64_t jj = 0; jj < jn; ++jj) {
      const std::int64_t row = p.key_row(s, j0 + jj);
      float* dst = w.ks.data() + jj * dk;
      for (int c = 0; c < p.parts; ++c) {
        load_row(*p.k[c].t, p.k[c].offset(row, u.head), p.k[c].dim, dst);
        dst += p.k[c].dim;
      }
      if (!v_is_k0) load_row(*p.v.t, p.v.offset(row, u.head), p.dv, w.vs.data() + jj * p.dv);
    }
    // Values are ckv = the first dv floats of each key row (MLA), or their own block.
    const float* vbase = v_is_k0 ? w.ks.data() : w.vs.data();
    const std::int64_t vstride = v_is_k0 ? dk : p.dv;

    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t n = std::clamp<std::int64_t>(limit(r) - j0, 0, jn);
      if (n == 0) continue;
      const float* qr = w.qs.data() + r * dk;
      float block_max = -std::numeric_limits<float>::infinity();
      for (std::int64_t jj = 0; jj < n; ++jj) {
        w.s[static_cast<std::size_t>(jj)] = dot(qr, w.ks.data() + jj * dk, dk);
        block_max = std::max(block_max, w.s[static_cast<std::size_t>(jj)]);
      }
      float& m = w.m[static_cast<std::size_t>(r)];
      float& l = w.l[static_cast<std::size_t>(r)];
      float* acc = w.acc.data() + r * p.dv;
      const float m_new = std::max(m, block_max);
      if (m_new > m) {  // rescale what was summed under the old max (exp2(-inf) = 0 the first time)
        const float alpha = std::exp2(m - m_new);
        l *= alpha;
        for (std::int64_t e = 0; e < p.dv; ++e) acc[e] *= alpha;
        m = m_new;
      }
      for (std::int64_t jj = 0; jj < n; ++jj) {
        const float pj = std::exp2(w.s[static_cast<std::size_t>(jj)] - m);
        l += pj;
        const float* vr = vbase + jj * vstride;
        for (std::int64_t e = 0; e < p.dv; ++e) acc[e] += pj * vr[e];
      }
    }
  }

  for (std::int64_t r = 0; r < rows; ++r) {
    const float l = w.l[static_cast<std::size_t>(r)];
    if (!(l > 0.0f)) continue;  // saw no key
    const std::int64_t t = s.q_begin + u.q0 + r / group, h = u.head * group + r % group;
    const float inv = 1.0f / l;
    float* o = out + (t * p.q_heads + h) * p.dv;
    const float* acc = w.acc.data() + r * p.dv;
    for (std::int64_t e = 0; e < p.dv; ++e) o[e] = acc[e] * inv;
    lse[t * p.q_heads + h] = w.m[static_cast<std::size_t>(r)] + std::log2(l);
  }
}

}  // namespace detail

// Runs the problem into out [tokens, q_heads, dv] (0 where no key is seen)
// and lse [tokens, q_heads] (base 2; -inf where no key is seen). The caller
// has checked every index against the tensors (see paged_sequences /
// ragged_sequences).
inline Status attend(const Problem& p, std::vector<float>& out, std::vector<float>& lse) {
  out.assign(static_cast<std::size_t>(p.tokens * p.q_heads * p.dv), 0.0f);
  lse.assign(static_cast<std::size_t>(p.tokens * p.q_heads), -std::numeric_limits<float>::infinity());
  const std::int64_t group = p.q_heads / p.kv_heads;
  const std::int64_t q_tile = std::max<std::int64_t>(1, kRowsPerUnit / std::max<std::int64_t>(1, group));
  std::vector<detail::Unit> units;
  for (std::int64_t b = 0; b < static_cast<std::int64_t>(p.seqs.size()); ++b) {
    const Sequence& s = p.seqs[static_cast<std::size_t>(b)];
    if (s.q_len == 0 || s.kv_len == 0) continue;
    for (std::int64_t h = 0; h < p.kv_heads; ++h)
      for (std::int64_t q0 = 0; q0 < s.q_len; q0 += q_tile) units.push_back({b, h, q0, std::min(s.q_len, q0 + q_tile)});
  }
  std::atomic<std::size_t> next{0};
  std::atomic<bool> oom{false};
  auto worker = [&] {
    try {
      detail::Scratch scratch;
      for (std::size_t i = next++; i < units.size() && !oom; i = next++) run_unit(p, units[i], scratch, out.data(), lse.data());
    } catch (const std::bad_alloc&) {
      oom = true;
    }
  };
  // A thread per kMinWorkPerThread multiply-adds at most: small calls (one
  // decode token over a few keys) cost less than starting threads.
  std::int64_t dk = 0, work = 0;
  for (int c = 0; c < p.parts; ++c) dk += p.k[c].dim;
  for (const auto& u : units)
    work += (u.q1 - u.q0) * group * p.seqs[static_cast<std::size_t>(u.seq)].kv_len * (dk + p.dv);
  const unsigned hw = std::max(1u, std::min(std::thread::hardware_concurrency(), 16u));
  const auto threads = static_cast<unsigned>(
      std::min<std::int64_t>({static_cast<std::int64_t>(hw), static_cast<std::int64_t>(units.size()),
                              1 + work / kMinWorkPerThread}));
  if (threads <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker);
    for (auto& th : pool) th.join();
  }
  if (oom) return make_error(Code::out_of_memory, "attention: out of memory");
  return ok_status();
}

// ---- Reading a call ----------------------------------------------------------

inline Error bad_call(const ImplementationCall& c, std::string_view what) {
  return make_error(Code::invalid_argument, fmt::format("{}: {}", c.definition.name, what));
}

// The tensor passed for input `name`, or null.
inline const Tensor* tensor_arg(const ImplementationCall& c, std::string_view name) {
  auto i = input_index(c.definition, name);
  if (!i || *i >= c.inputs.size()) return nullptr;
  return c.inputs[*i].tensor;
}

// The output named `name`, or null.
inline Tensor* output_arg(const ImplementationCall& c, std::string_view name) {
  auto i = output_index(c.definition, name);
  if (!i || *i >= c.outputs.size()) return nullptr;
  return &c.outputs[*i];
}

// Every input but sm_scale arrived as a tensor.
inline Status tensors_passed(const ImplementationCall& c) {
  for (std::size_t i = 0; i < c.definition.inputs.size(); ++i) {
    const std::string& n = c.definition.inputs[i].name;
    if (n != "sm_scale" && (i >= c.inputs.size() || !c.inputs[i].tensor))
      return bad_call(c, fmt::format("input '{}' was not passed as a tensor", n));
  }
  return ok_status();
}

// sm_scale as the references use it: a float32 multiplier (a Python float or a one-element tensor).
inline Result<float> scale_arg(const ImplementationCall& c, std::string_view name) {
  auto i = input_index(c.definition, name);
  if (!i || *i >= c.inputs.size()) return bad_call(c, fmt::format("input '{}' was not passed", name));
  const Arg& a = c.inputs[*i];
  if (auto v = scalar_as_double(a)) return static_cast<float>(*v);
  if (a.tensor && a.tensor->numel() == 1) return static_cast<float>(element_as_double(*a.tensor, 0));
  return bad_call(c, fmt::format("input '{}' must be a number", name));
}

// The values of a rank-1 integer tensor.
inline Result<std::vector<std::int64_t>> int_values(const ImplementationCall& c, std::string_view name, const Tensor* t) {
  if (!t) return bad_call(c, fmt::format("input '{}' was not passed as a tensor", name));
  if (t->rank() != 1 || !dtype_is_integer(t->dtype()))
    return bad_call(c, fmt::format("input '{}' must be a rank-1 integer tensor", name));
  std::vector<std::int64_t> v(static_cast<std::size_t>(t->numel()));
  for (std::int64_t i = 0; i < t->numel(); ++i) {
    if (t->dtype() == DType::int64) v[static_cast<std::size_t>(i)] = t->data<std::int64_t>()[i];
    else if (t->dtype() == DType::int32) v[static_cast<std::size_t>(i)] = t->data<std::int32_t>()[i];
    else v[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(element_as_double(*t, i));
  }
  return v;
}

// An indptr: `len` entries, starting anywhere >= 0, never decreasing, at most `limit`.
inline Status check_offsets(const ImplementationCall& c, std::string_view name, const std::vector<std::int64_t>& v,
                            std::size_t len, std::int64_t limit) {
  if (v.size() != len) return bad_call(c, fmt::format("'{}' has {} entries, expected {}", name, v.size(), len));
  std::int64_t prev = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] < prev || v[i] > limit)
      return bad_call(c, fmt::format("{}[{}] = {} breaks 0 <= ... non-decreasing ... <= {}", name, i, v[i], limit));
    prev = v[i];
  }
  return ok_status();
}

// Sequences of a paged call. Decode (qo == null): sequence b is query token b.
// Prefill: qo_indptr's ranges, causal. Every page index used is checked
// against num_pages and copied into `table`.
inline Status paged_sequences(const ImplementationCall& c, Problem& p, const Tensor* qo_t, const Tensor* indptr_t,
                              const Tensor* indices_t, const Tensor* last_t, std::int64_t num_pages,
                              std::vector<std::int64_t>& table) {
  std::vector<std::int64_t> qo;
  std::int64_t batch = p.tokens;
  if (qo_t) {
    auto v = int_values(c, "qo_indptr", qo_t);
    if (!v) return std::move(v).error();
    qo = std::move(*v);
    if (qo.empty()) return bad_call(c, "'qo_indptr' is empty");
    batch = static_cast<std::int64_t>(qo.size()) - 1;
    KB_TRY(check_offsets(c, "qo_indptr", qo, qo.size(), p.tokens));
  }
  auto indptr = int_values(c, "kv_indptr", indptr_t);
  if (!indptr) return std::move(indptr).error();
  auto indices = int_values(c, "kv_indices", indices_t);
  if (!indices) return std::move(indices).error();
  KB_TRY(check_offsets(c, "kv_indptr", *indptr, static_cast<std::size_t>(batch + 1),
                       static_cast<std::int64_t>(indices->size())));
  std::vector<std::int64_t> last;
  if (last_t) {
    auto v = int_values(c, "kv_last_page_len", last_t);
    if (!v) return std::move(v).error();
    last = std::move(*v);
    if (static_cast<std::int64_t>(last.size()) < batch)
      return bad_call(c, fmt::format("'kv_last_page_len' has {} entries for {} sequences", last.size(), batch));
  }
  for (std::size_t i = 0; i < indices->size(); ++i)
    if ((*indices)[i] < 0 || (*indices)[i] >= num_pages)
      return bad_call(c, fmt::format("kv_indices[{}] = {} is not a page (num_pages {})", i, (*indices)[i], num_pages));
  table = std::move(*indices);
  p.page_table = &table;
  p.causal = qo_t != nullptr;
  p.seqs.clear();
  for (std::int64_t b = 0; b < batch; ++b) {
    Sequence s;
    s.q_begin = qo_t ? qo[static_cast<std::size_t>(b)] : b;
    s.q_len = qo_t ? qo[static_cast<std::size_t>(b + 1)] - s.q_begin : 1;
    s.kv_first = (*indptr)[static_cast<std::size_t>(b)];
    const std::int64_t pages = (*indptr)[static_cast<std::size_t>(b + 1)] - s.kv_first;
    std::int64_t tail = p.page_size;
    if (!last.empty() && pages > 0) {
      tail = last[static_cast<std::size_t>(b)];
      if (tail < 0 || tail > p.page_size)
        return bad_call(c, fmt::format("kv_last_page_len[{}] = {} is outside [0, {}]", b, tail, p.page_size));
    }
    s.kv_len = pages > 0 ? (pages - 1) * p.page_size + tail : 0;
    s.diagonal = s.kv_len - s.q_len;
    p.seqs.push_back(s);
  }
  return ok_status();
}

// Sequences of a ragged causal call: qo_indptr over the query tokens,
// kv_indptr over the key rows.
inline Status ragged_sequences(const ImplementationCall& c, Problem& p, const Tensor* qo_t, const Tensor* kv_t,
                               std::int64_t total_kv) {
  auto qo = int_values(c, "qo_indptr", qo_t);
  if (!qo) return std::move(qo).error();
  auto kv = int_values(c, "kv_indptr", kv_t);
  if (!kv) return std::move(kv).error();
  if (qo->empty()) return bad_call(c, "'qo_indptr' is empty");
  KB_TRY(check_offsets(c, "qo_indptr", *qo, qo->size(), p.tokens));
  KB_TRY(check_offsets(c, "kv_indptr", *kv, qo->size(), total_kv));
  p.page_table = nullptr;
  p.causal = true;
  p.seqs.clear();
  for (std::size_t b = 0; b + 1 < qo->size(); ++b) {
    Sequence s;
    s.q_begin = (*qo)[b];
    s.q_len = (*qo)[b + 1] - s.q_begin;
    s.kv_first = (*kv)[b];
    s.kv_len = (*kv)[b + 1] - s.kv_first;
    s.diagonal = s.kv_len - s.q_len;
    p.seqs.push_back(s);
  }
  return ok_status();
}

// Stores out / lse into the definition's outputs "output" [tokens, q_heads,
// dv] and (when it has one) "lse" [tokens, q_heads].
inline Status store_outputs(const ImplementationCall& c, const Problem& p, const std::vector<float>& out,
                            const std::vector<float>& lse) {
  Tensor* o = output_arg(c, "output");
  if (!o) return bad_call(c, "output 'output' was not passed");
  if (o->shape() != std::vector<std::int64_t>{p.tokens, p.q_heads, p.dv})
    return bad_call(c, fmt::format("output 'output' has rank {} / {} elements, expected [{}, {}, {}]", o->rank(),
                                   o->numel(), p.tokens, p.q_heads, p.dv));
  KB_TRY(store_float(out, *o));
  if (Tensor* l = output_arg(c, "lse")) {
    if (l->shape() != std::vector<std::int64_t>{p.tokens, p.q_heads})
      return bad_call(c, fmt::format("output 'lse' has rank {} / {} elements, expected [{}, {}]", l->rank(),
                                     l->numel(), p.tokens, p.q_heads));
    KB_TRY(store_float(lse, *l));
  }
  return ok_status();
}

// Why a definition does not fit: `required` inputs present, nothing outside
// required + optional, outputs exactly "output" (rank 3) and optionally "lse".
inline std::string check_signature(const Definition& d, std::string_view op_type,
                                   std::initializer_list<std::string_view> required,
                                   std::initializer_list<std::string_view> optional) {
  if (d.op_type != op_type) return fmt::format("not a {} definition", op_type);
  for (auto n : required)
    if (!d.find_input(n)) return fmt::format("needs input '{}'", n);
  for (const auto& in : d.inputs) {
    bool known = std::find(required.begin(), required.end(), in.name) != required.end() ||
                 std::find(optional.begin(), optional.end(), in.name) != optional.end();
    if (!known) return fmt::format("does not know input '{}'", in.name);
    if (in.name != "sm_scale" && in.is_scalar()) return fmt::format("input '{}' must be a tensor", in.name);
  }
  const TensorSpec* o = d.find_output("output");
  if (!o || o->is_scalar() || o->rank() != 3) return "needs output 'output' of rank 3";
  for (const auto& out : d.outputs)
    if (out.name != "output" && out.name != "lse") return fmt::format("does not produce output '{}'", out.name);
  if (const TensorSpec* l = d.find_output("lse"); l && (l->is_scalar() || l->rank() != 2))
    return "output 'lse' must have rank 2";
  return {};
}

// A ragged causal prefill call (gqa_ragged, mla_ragged): q [total_q, H_q,
// D_qk], k [total_kv, H_kv, D_qk], v [total_kv, H_kv, D_v], qo_indptr,
// kv_indptr, sm_scale.
inline Status run_ragged(const ImplementationCall& c) {
  KB_TRY(tensors_passed(c));
  const Tensor* q = tensor_arg(c, "q");
  const Tensor* k = tensor_arg(c, "k");
  const Tensor* v = tensor_arg(c, "v");
  if (q->rank() != 3 || k->rank() != 3 || v->rank() != 3)
    return bad_call(c, "expects q [total_q, H_q, D_qk], k [total_kv, H_kv, D_qk], v [total_kv, H_kv, D_v]");
  const std::int64_t total_kv = k->dim(0), kv_heads = k->dim(1);
  if (k->dim(2) != q->dim(2) || v->dim(0) != total_kv || v->dim(1) != kv_heads)
    return bad_call(c, "q, k and v disagree in shape");
  if (kv_heads < 1 || q->dim(1) % kv_heads != 0)
    return bad_call(c, fmt::format("{} query heads are not a multiple of {} kv heads", q->dim(1), kv_heads));
  auto scale = scale_arg(c, "sm_scale");
  if (!scale) return std::move(scale).error();
  Problem p;
  p.parts = 1;
  p.q[0] = {q, q->dim(1), q->dim(2)};
  p.k[0] = {k, kv_heads, k->dim(2)};
  p.v = {v, kv_heads, v->dim(2)};
  p.tokens = q->dim(0);
  p.q_heads = q->dim(1);
  p.kv_heads = kv_heads;
  p.dv = v->dim(2);
  p.sm_scale = *scale;
  KB_TRY(ragged_sequences(c, p, tensor_arg(c, "qo_indptr"), tensor_arg(c, "kv_indptr"), total_kv));
  std::vector<float> out, lse;
  KB_TRY(attend(p, out, lse));
  return store_outputs(c, p, out, lse);
}

}  // namespace kb::kernels::flash
