// The attention oracles (gqa_paged, gqa_ragged, mla_paged, mla_ragged) on the
// real definitions, against a naive computation written independently here:
// each sequence's keys and values are first gathered into dense per-token
// arrays (walking the page table token by token), then every (query, head)
// row gets a plain two-pass softmax in double. Plus hand-computable cases
// (GQA head mapping, bottom-right causal mask, base-2 lse, empty sequences)
// and malformed index tensors, which must give an error, never a crash.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "oracle/oracle.hpp"
#include "schema/io.hpp"
#include "tensor/convert.hpp"
#include "tensor/tensor.hpp"

namespace fs = std::filesystem;
using kb::DType;
using kb::Tensor;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

std::string definitions_dir() {
  const char* env = std::getenv("KB_SHARED_DIR");
  return std::string(env ? env : "../shared") + "/flashinfer-trace/definitions";
}

kb::Definition load(const std::string& op_type, const std::string& name) {
  auto d = kb::read_definition_file(definitions_dir() + "/" + op_type + "/" + name + ".json");
  REQUIRE_MESSAGE(d.ok(), name);
  return std::move(d).value();
}

Tensor alloc(DType dt, std::vector<std::int64_t> shape) {
  auto t = Tensor::allocate(dt, std::move(shape));
  REQUIRE(t.ok());
  return std::move(t).value();
}

Tensor ints(const std::vector<std::int64_t>& v, DType dt = DType::int32) {
  Tensor t = alloc(dt, {static_cast<std::int64_t>(v.size())});
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (dt == DType::int64) t.data<std::int64_t>()[i] = v[i];
    else t.data<std::int32_t>()[i] = static_cast<std::int32_t>(v[i]);
  }
  return t;
}

// Every value rounds into the tensor's dtype; the tests then read the stored
// values back, so the reference sees exactly what the oracle sees.
void fill_uniform(Tensor& t, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  for (auto& x : v) x = u(rng);
  REQUIRE(kb::store_float(v, t).ok());
}

// One call of an oracle being set up: axis values and inputs by name.
struct Call {
  const kb::Definition& def;
  std::map<std::string, std::int64_t> axes;
  std::map<std::string, Tensor> in;
  double sm_scale = 0.0;
  std::vector<Tensor> out;

  explicit Call(const kb::Definition& d) : def(d) {
    for (const auto& a : d.axes)
      if (a.kind == kb::AxisKind::const_) axes[a.name] = a.value;
  }
  std::int64_t axis(const std::string& n) const {
    auto it = axes.find(n);
    REQUIRE_MESSAGE(it != axes.end(), "axis " << n << " not set");
    return it->second;
  }
  std::vector<std::int64_t> shape_of(const kb::TensorSpec& s) const {
    std::vector<std::int64_t> shape;
    for (const auto& n : *s.shape) shape.push_back(axis(n));
    return shape;
  }
  const kb::TensorSpec& input_spec(const std::string& name) const {
    const kb::TensorSpec* s = def.find_input(name);
    REQUIRE_MESSAGE(s, name);
    return *s;
  }
  // A float input of the definition's shape and dtype, uniform in [-scale, scale].
  void random_input(const std::string& name, std::mt19937& rng, float scale = 1.0f) {
    const auto& s = input_spec(name);
    Tensor t = alloc(s.dtype, shape_of(s));
    fill_uniform(t, rng, scale);
    in[name] = std::move(t);
  }
  std::vector<float> values(const std::string& name) const { return kb::to_float(in.at(name)); }

  kb::Status run() {
    kb::AxisValues av;
    for (const auto& a : def.axes) av.values.emplace_back(a.name, axes.count(a.name) ? axes.at(a.name) : 0);
    std::vector<kb::Arg> args;
    for (const auto& s : def.inputs) {
      kb::Arg a;
      if (s.is_scalar()) a.scalar = kb::ScalarValue{sm_scale};
      else {
        auto it = in.find(s.name);
        REQUIRE_MESSAGE(it != in.end(), "input " << s.name << " not set");
        a.tensor = &it->second;
      }
      args.push_back(a);
    }
    out.clear();
    for (const auto& s : def.outputs) {
      out.push_back(alloc(s.dtype, shape_of(s)));
      out.back().fill_bytes(0xFF);  // NaN: every element must be written
    }
    auto entry = kb::find_oracle(def);
    REQUIRE_MESSAGE(entry.ok(), def.name);
    kb::OracleCall call{def, av, args, out, 0};
    auto st = (*entry)->run(call);
    for (const auto& t : out) CHECK(t.guards_intact());
    return st;
  }
  std::vector<float> output(const std::string& name) const {
    for (std::size_t i = 0; i < def.outputs.size(); ++i)
      if (def.outputs[i].name == name) return kb::to_float(out[i]);
    FAIL("no output " << name);
    return {};
  }
};

// ---- The independent reference -------------------------------------------

// One sequence, dense: its queries are rows [q_begin, q_begin + q_len) of
// the query matrix, its keys and values one vector per token (all kv heads
// side by side).
struct DenseSeq {
  std::int64_t q_begin = 0, q_len = 0;
  std::vector<std::vector<double>> k, v;  // [kv_len][H_kv * D]
};

struct Expected {
  std::vector<double> out;  // [tokens, H_q, D_v]
  std::vector<double> lse;  // [tokens, H_q], base 2
};

// q: [tokens][H_q * D_qk]. Rows no sequence covers stay at 0 / -inf.
Expected naive_attention(const std::vector<std::vector<double>>& q, const std::vector<DenseSeq>& seqs,
                         std::int64_t hq, std::int64_t hkv, std::int64_t dqk, std::int64_t dv, double scale,
                         bool causal) {
  const auto tokens = static_cast<std::int64_t>(q.size());
  Expected e{std::vector<double>(static_cast<std::size_t>(tokens * hq * dv), 0.0),
             std::vector<double>(static_cast<std::size_t>(tokens * hq), -kInf)};
  const std::int64_t per_kv = hq / hkv;
  for (const auto& s : seqs) {
    const auto kv_len = static_cast<std::int64_t>(s.k.size());
    for (std::int64_t i = 0; i < s.q_len; ++i) {
      const std::int64_t row = s.q_begin + i;
      // Keys this query may see: all, or (causal, bottom-right) those at
      // positions <= kv_len - q_len + i.
      std::vector<std::int64_t> keys;
      for (std::int64_t j = 0; j < kv_len; ++j)
        if (!causal || j <= kv_len - s.q_len + i) keys.push_back(j);
      if (keys.empty()) continue;
      for (std::int64_t h = 0; h < hq; ++h) {
        const std::int64_t g = h / per_kv;
        std::vector<double> logit;
        for (auto j : keys) {
          double dotp = 0;
          for (std::int64_t x = 0; x < dqk; ++x) dotp += q[row][h * dqk + x] * s.k[j][g * dqk + x];
          logit.push_back(dotp * scale);
        }
        const double mx = *std::max_element(logit.begin(), logit.end());
        double z = 0;
        for (double l : logit) z += std::exp(l - mx);
        const double lse_natural = mx + std::log(z);
        e.lse[row * hq + h] = lse_natural * M_LOG2E;
        for (std::size_t n = 0; n < keys.size(); ++n) {
          const double p = std::exp(logit[n] - lse_natural);
          for (std::int64_t x = 0; x < dv; ++x) e.out[(row * hq + h) * dv + x] += p * s.v[keys[n]][g * dv + x];
        }
      }
    }
  }
  return e;
}

// Output in a 16-bit float dtype: within 2^-8 relative (one rounding) of
// the double result; lse (float32) within 1e-5 relative. Non-finite values
// must sit where the reference has them.
void check_against(const Call& c, const Expected& e) {
  auto out = c.output("output");
  auto lse = c.output("lse");
  REQUIRE(out.size() == e.out.size());
  REQUIRE(lse.size() == e.lse.size());
  int bad = 0;
  for (std::size_t i = 0; i < out.size() && bad < 5; ++i) {
    const double diff = std::fabs(out[i] - e.out[i]);
    if (!(diff <= std::ldexp(1.0, -8) * std::fabs(e.out[i]) + 1e-6)) {
      ++bad;
      FAIL_CHECK(c.def.name << ": output[" << i << "] = " << out[i] << ", expected " << e.out[i]);
    }
  }
  for (std::size_t i = 0; i < lse.size() && bad < 5; ++i) {
    const bool ok = std::isinf(e.lse[i]) ? (std::isinf(lse[i]) && lse[i] < 0)
                                         : std::fabs(lse[i] - e.lse[i]) <= 1e-5 * std::max(1.0, std::fabs(e.lse[i]));
    if (!ok) {
      ++bad;
      FAIL_CHECK(c.def.name << ": lse[" << i << "] = " << lse[i] << ", expected " << e.lse[i]);
    }
  }
  CHECK(bad == 0);
}

// Rows of a [tokens, heads, dim] value list as [tokens][heads * dim].
std::vector<std::vector<double>> token_rows(const std::vector<float>& v, std::int64_t width) {
  std::vector<std::vector<double>> rows(v.size() / static_cast<std::size_t>(width));
  for (std::size_t t = 0; t < rows.size(); ++t)
    rows[t].assign(v.begin() + static_cast<std::ptrdiff_t>(t * width),
                   v.begin() + static_cast<std::ptrdiff_t>((t + 1) * width));
  return rows;
}

// Side-by-side concatenation of two row lists (MLA: [nope | pe]).
std::vector<std::vector<double>> concat_rows(std::vector<std::vector<double>> a,
                                             const std::vector<std::vector<double>>& b) {
  for (std::size_t t = 0; t < a.size(); ++t) a[t].insert(a[t].end(), b[t].begin(), b[t].end());
  return a;
}

// ---- Building paged and ragged batches -------------------------------------

struct SeqLens {
  std::int64_t q_len, kv_len;
};

// A page table for these kv lengths: pages handed out in a random order
// from `num_pages` (at least the pages needed; the rest stay unused).
struct PageTable {
  std::vector<std::int64_t> indptr, indices, last_len;
  std::int64_t num_pages = 0;
};

PageTable make_pages(const std::vector<SeqLens>& seqs, std::int64_t page_size, std::int64_t spare,
                     std::mt19937& rng) {
  PageTable pt;
  std::int64_t needed = 0;
  for (const auto& s : seqs) needed += (s.kv_len + page_size - 1) / page_size;
  pt.num_pages = needed + spare;
  std::vector<std::int64_t> order(static_cast<std::size_t>(pt.num_pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  pt.indptr.push_back(0);
  std::size_t next = 0;
  for (const auto& s : seqs) {
    const std::int64_t pages = (s.kv_len + page_size - 1) / page_size;
    for (std::int64_t p = 0; p < pages; ++p) pt.indices.push_back(order[next++]);
    pt.indptr.push_back(static_cast<std::int64_t>(pt.indices.size()));
    pt.last_len.push_back(pages == 0 ? 0 : s.kv_len - (pages - 1) * page_size);
  }
  return pt;
}

// The dense keys/values of sequence b, walking the page table token by
// token: token t lies in page indices[indptr[b] + t / page_size] at slot
// t % page_size. `cache` is [num_pages, page_size, width].
std::vector<std::vector<double>> gather_tokens(const std::vector<float>& cache, const PageTable& pt,
                                               std::size_t b, std::int64_t kv_len, std::int64_t page_size,
                                               std::int64_t width) {
  std::vector<std::vector<double>> rows;
  for (std::int64_t t = 0; t < kv_len; ++t) {
    const std::int64_t page = pt.indices[static_cast<std::size_t>(pt.indptr[b] + t / page_size)];
    const std::int64_t slot = t % page_size;
    const std::size_t at = static_cast<std::size_t>((page * page_size + slot) * width);
    rows.emplace_back(cache.begin() + static_cast<std::ptrdiff_t>(at),
                      cache.begin() + static_cast<std::ptrdiff_t>(at + width));
  }
  return rows;
}

// Sets the index inputs of a paged definition and the var axes that follow
// from them. Decode definitions have no qo_indptr (q_len is 1 for every
// sequence); kv_last_page_len is set where the definition has it, with as
// many entries as its shape says (batch_size or len_indptr).
void set_paged_indices(Call& c, const std::vector<SeqLens>& seqs, const PageTable& pt) {
  const auto batch = static_cast<std::int64_t>(seqs.size());
  std::int64_t total_q = 0;
  std::vector<std::int64_t> qo{0};
  for (const auto& s : seqs) qo.push_back(total_q += s.q_len);
  c.axes["batch_size"] = batch;
  c.axes["len_indptr"] = batch + 1;
  c.axes["total_q"] = total_q;
  c.axes["num_pages"] = pt.num_pages;
  c.axes["num_kv_indices"] = static_cast<std::int64_t>(pt.indices.size());
  if (c.def.find_input("qo_indptr")) c.in["qo_indptr"] = ints(qo);
  c.in["kv_indptr"] = ints(pt.indptr);
  c.in["kv_indices"] = ints(pt.indices);
  if (c.def.find_input("kv_last_page_len")) {
    auto last = pt.last_len;
    last.resize(static_cast<std::size_t>(c.shape_of(c.input_spec("kv_last_page_len"))[0]), 0);
    c.in["kv_last_page_len"] = ints(last);
  }
}

bool has_last_page_len(const kb::Definition& d) { return d.find_input("kv_last_page_len") != nullptr; }

// Runs a gqa_paged definition on these sequences (decode: q_len must be 1)
// and checks it against the naive reference.
void check_gqa_paged(const std::string& name, const std::vector<SeqLens>& seqs, double scale, unsigned seed) {
  auto def = load("gqa_paged", name);
  std::mt19937 rng(seed);
  Call c(def);
  const std::int64_t ps = c.axis("page_size"), hq = c.axis("num_qo_heads"), hkv = c.axis("num_kv_heads"),
                     d = c.axis("head_dim");
  const bool prefill = def.find_input("qo_indptr") != nullptr;
  // Without kv_last_page_len every page is full: lengths must fill them.
  if (!has_last_page_len(def))
    for (const auto& s : seqs) REQUIRE(s.kv_len % ps == 0);
  PageTable pt = make_pages(seqs, ps, 3, rng);
  set_paged_indices(c, seqs, pt);
  c.random_input("q", rng, 2.0f);
  c.random_input("k_cache", rng);
  c.random_input("v_cache", rng);
  c.sm_scale = scale;
  REQUIRE(c.run().ok());

  auto kc = c.values("k_cache"), vc = c.values("v_cache");
  std::vector<DenseSeq> dense;
  std::int64_t q_at = 0;
  for (std::size_t b = 0; b < seqs.size(); ++b) {
    DenseSeq s;
    s.q_begin = q_at;
    s.q_len = seqs[b].q_len;
    q_at += s.q_len;
    if (s.q_len == 0 || seqs[b].kv_len == 0) continue;
    s.k = gather_tokens(kc, pt, b, seqs[b].kv_len, ps, hkv * d);
    s.v = gather_tokens(vc, pt, b, seqs[b].kv_len, ps, hkv * d);
    dense.push_back(std::move(s));
  }
  auto e = naive_attention(token_rows(c.values("q"), hq * d), dense, hq, hkv, d, d, static_cast<float>(scale),
                           prefill);
  check_against(c, e);
}

void check_mla_paged(const std::string& name, const std::vector<SeqLens>& seqs, double scale, unsigned seed) {
  auto def = load("mla_paged", name);
  std::mt19937 rng(seed);
  Call c(def);
  const std::int64_t ps = c.axis("page_size"), hq = c.axis("num_qo_heads"), dc = c.axis("head_dim_ckv"),
                     dp = c.axis("head_dim_kpe");
  const bool prefill = def.find_input("qo_indptr") != nullptr;
  if (!has_last_page_len(def))
    for (const auto& s : seqs) REQUIRE(s.kv_len % ps == 0);
  PageTable pt = make_pages(seqs, ps, 2, rng);
  set_paged_indices(c, seqs, pt);
  c.random_input("q_nope", rng, 2.0f);
  c.random_input("q_pe", rng, 2.0f);
  c.random_input("ckv_cache", rng);
  c.random_input("kpe_cache", rng);
  c.sm_scale = scale;
  REQUIRE(c.run().ok());

  auto ckv = c.values("ckv_cache"), kpe = c.values("kpe_cache");
  std::vector<DenseSeq> dense;
  std::int64_t q_at = 0;
  for (std::size_t b = 0; b < seqs.size(); ++b) {
    DenseSeq s;
    s.q_begin = q_at;
    s.q_len = seqs[b].q_len;
    q_at += s.q_len;
    if (s.q_len == 0 || seqs[b].kv_len == 0) continue;
    auto c_rows = gather_tokens(ckv, pt, b, seqs[b].kv_len, ps, dc);
    s.k = concat_rows(c_rows, gather_tokens(kpe, pt, b, seqs[b].kv_len, ps, dp));
    s.v = c_rows;
    dense.push_back(std::move(s));
  }
  auto q = concat_rows(token_rows(c.values("q_nope"), hq * dc), token_rows(c.values("q_pe"), hq * dp));
  // Queries are [H][dc] + [H][dp] per token: regroup them per head.
  for (auto& row : q) {
    std::vector<double> per_head;
    for (std::int64_t h = 0; h < hq; ++h) {
      per_head.insert(per_head.end(), row.begin() + h * dc, row.begin() + (h + 1) * dc);
      per_head.insert(per_head.end(), row.begin() + hq * dc + h * dp, row.begin() + hq * dc + (h + 1) * dp);
    }
    row = std::move(per_head);
  }
  auto e = naive_attention(q, dense, hq, 1, dc + dp, dc, static_cast<float>(scale), prefill);
  check_against(c, e);
}

// Ragged: q/k/v contiguous per sequence, in sequence order.
void set_ragged_indices(Call& c, const std::vector<SeqLens>& seqs) {
  std::vector<std::int64_t> qo{0}, kv{0};
  for (const auto& s : seqs) {
    qo.push_back(qo.back() + s.q_len);
    kv.push_back(kv.back() + s.kv_len);
  }
  c.axes["len_indptr"] = static_cast<std::int64_t>(qo.size());
  c.axes["total_q"] = qo.back();
  c.axes["total_kv"] = kv.back();
  c.in["qo_indptr"] = ints(qo);
  c.in["kv_indptr"] = ints(kv);
}

void check_ragged(const std::string& op_type, const std::string& name, const std::vector<SeqLens>& seqs,
                  double scale, unsigned seed) {
  auto def = load(op_type, name);
  std::mt19937 rng(seed);
  Call c(def);
  set_ragged_indices(c, seqs);
  c.random_input("q", rng, 2.0f);
  c.random_input("k", rng);
  c.random_input("v", rng);
  c.sm_scale = scale;
  REQUIRE(c.run().ok());

  const auto& q = c.in.at("q");
  const auto& k = c.in.at("k");
  const auto& v = c.in.at("v");
  const std::int64_t hq = q.dim(1), dqk = q.dim(2), hkv = k.dim(1), dv = v.dim(2);
  auto k_rows = token_rows(c.values("k"), hkv * dqk);
  auto v_rows = token_rows(c.values("v"), hkv * dv);
  std::vector<DenseSeq> dense;
  std::int64_t q_at = 0, kv_at = 0;
  for (const auto& sl : seqs) {
    DenseSeq s;
    s.q_begin = q_at;
    s.q_len = sl.q_len;
    s.k.assign(k_rows.begin() + kv_at, k_rows.begin() + kv_at + sl.kv_len);
    s.v.assign(v_rows.begin() + kv_at, v_rows.begin() + kv_at + sl.kv_len);
    q_at += sl.q_len;
    kv_at += sl.kv_len;
    dense.push_back(std::move(s));
  }
  auto e = naive_attention(token_rows(c.values("q"), hq * dqk), dense, hq, hkv, dqk, dv, static_cast<float>(scale),
                           true);
  check_against(c, e);
}

// Prefill batches: an empty KV with queries, queries absent with a KV, a
// single token, q_len < kv_len across a page boundary, q_len == kv_len.
const std::vector<SeqLens> kPrefill64 = {{2, 0}, {0, 3}, {1, 1}, {5, 70}, {3, 3}, {4, 130}};
const std::vector<SeqLens> kPrefill1 = {{2, 0}, {0, 3}, {1, 1}, {5, 40}, {3, 3}};

}  // namespace

TEST_CASE("every shipped attention definition has an oracle") {
  int count = 0;
  for (const char* op : {"gqa_paged", "gqa_ragged", "mla_paged", "mla_ragged"}) {
    for (const auto& entry : fs::directory_iterator(definitions_dir() + "/" + op)) {
      if (entry.path().extension() != ".json") continue;
      auto d = kb::read_definition_file(entry.path().string());
      REQUIRE_MESSAGE(d.ok(), entry.path().string());
      auto o = kb::find_oracle(*d);
      CHECK_MESSAGE(o.ok(), d->name << ": " << (o.ok() ? "" : o.error().message));
      if (o.ok()) CHECK((*o)->op_type == op);
      ++count;
    }
  }
  CHECK(count == 44);
}

TEST_CASE("supports() says why it cannot take a definition") {
  auto base = load("gqa_paged", "gqa_paged_decode_h32_kv4_d128_ps64");
  auto reason = [](const kb::Definition& d) {
    for (const auto& e : kb::oracles())
      if (e.op_type == d.op_type) return e.supports(d);
    return std::string("no entry");
  };
  CHECK(reason(base).empty());
  {
    auto d = base;
    d.inputs.erase(d.inputs.begin() + 4);  // kv_indices
    CHECK(reason(d).find("kv_indices") != std::string::npos);
  }
  {
    auto d = base;
    d.inputs.push_back(d.inputs[3]);
    d.inputs.back().name = "custom_mask";
    CHECK(reason(d).find("custom_mask") != std::string::npos);
  }
  {
    auto d = base;
    d.inputs[3].dtype = DType::float32;  // kv_indptr
    CHECK(reason(d).find("kv_indptr") != std::string::npos);
  }
  {
    auto d = base;
    d.outputs[0].name = "out";
    CHECK_FALSE(reason(d).empty());
  }
  {
    auto d = load("gqa_ragged", "gqa_ragged_prefill_causal_h16_kv2_d128");
    CHECK(reason(d).empty());
    d.name = "gqa_ragged_prefill_h16_kv2_d128";  // not causal
    CHECK(reason(d).find("causal") != std::string::npos);
  }
  {
    auto d = load("mla_paged", "mla_paged_decode_h16_ckv512_kpe64_ps1");
    CHECK(reason(d).empty());
    d.inputs[1].name = "q_rope";
    CHECK(reason(d).find("q_pe") != std::string::npos);
  }
}

TEST_CASE("gqa_paged decode, page size 64: empty, single token, pages spanned, kv_last_page_len") {
  // GQA ratio 8 and 6 (h6_kv1); a sequence of exactly one full page.
  check_gqa_paged("gqa_paged_decode_h32_kv4_d128_ps64", {{1, 0}, {1, 1}, {1, 70}, {1, 64}}, 0.3, 1);
  check_gqa_paged("gqa_paged_decode_h6_kv1_d128_ps64", {{1, 130}, {1, 0}, {1, 5}}, 1.0 / std::sqrt(128.0), 2);
}

TEST_CASE("gqa_paged decode, page size 1") {
  check_gqa_paged("gqa_paged_decode_h6_kv1_d128_ps1", {{1, 3}, {1, 0}, {1, 1}, {1, 33}}, 0.3, 3);
  check_gqa_paged("gqa_paged_decode_h16_kv2_d128_ps1", {{1, 7}, {1, 2}}, 0.2, 4);
}

TEST_CASE("gqa_paged causal prefill, page size 64 (kv_last_page_len per batch and per len_indptr)") {
  auto a = load("gqa_paged", "gqa_paged_prefill_causal_h32_kv4_d128_ps64");
  auto b = load("gqa_paged", "gqa_paged_prefill_causal_h16_kv2_d128_ps64");
  REQUIRE((*a.find_input("kv_last_page_len")->shape)[0] == "batch_size");
  REQUIRE((*b.find_input("kv_last_page_len")->shape)[0] == "len_indptr");
  check_gqa_paged(a.name, kPrefill64, 0.3, 5);
  check_gqa_paged(b.name, kPrefill64, 1.0 / std::sqrt(128.0), 6);
  check_gqa_paged("gqa_paged_prefill_causal_h5_kv1_d128_ps64", kPrefill64, 0.25, 7);
}

TEST_CASE("gqa_paged causal prefill, page size 1") {
  check_gqa_paged("gqa_paged_prefill_causal_h24_kv4_d128_ps1", kPrefill1, 0.3, 8);
  check_gqa_paged("gqa_paged_prefill_causal_h5_kv1_d128_ps1", kPrefill1, 0.2, 9);
}

TEST_CASE("gqa_ragged causal prefill") {
  check_ragged("gqa_ragged", "gqa_ragged_prefill_causal_h16_kv2_d128", kPrefill64, 0.3, 10);
  check_ragged("gqa_ragged", "gqa_ragged_prefill_causal_h6_kv1_d128", kPrefill1, 1.0 / std::sqrt(128.0), 11);
}

TEST_CASE("mla_paged decode, page sizes 1 and 64") {
  check_mla_paged("mla_paged_decode_h16_ckv512_kpe64_ps1", {{1, 3}, {1, 0}, {1, 1}, {1, 20}}, 0.1, 12);
  check_mla_paged("mla_paged_decode_h16_ckv512_kpe64_ps64", {{1, 0}, {1, 1}, {1, 70}, {1, 64}},
                  1.0 / std::sqrt(192.0), 13);
}

TEST_CASE("mla_paged causal prefill, page sizes 1 and 64") {
  check_mla_paged("mla_paged_prefill_causal_h16_ckv512_kpe64_ps1", kPrefill1, 0.1, 14);
  check_mla_paged("mla_paged_prefill_causal_h16_ckv512_kpe64_ps64", kPrefill64, 1.0 / std::sqrt(192.0), 15);
}

TEST_CASE("mla_ragged causal prefill (qk 192, vo 128)") {
  check_ragged("mla_ragged", "mla_ragged_prefill_causal_h16_qk192_vo128", kPrefill64, 1.0 / std::sqrt(192.0), 16);
}

TEST_CASE("single token: output is that token's value, lse its logit in base 2") {
  auto def = load("gqa_paged", "gqa_paged_decode_h32_kv4_d128_ps1");
  std::mt19937 rng(17);
  Call c(def);
  PageTable pt = make_pages({{1, 1}}, 1, 4, rng);
  set_paged_indices(c, {{1, 1}}, pt);
  c.random_input("q", rng);
  c.random_input("k_cache", rng);
  c.random_input("v_cache", rng);
  c.sm_scale = 0.5;
  REQUIRE(c.run().ok());
  auto q = c.values("q"), k = c.values("k_cache"), v = c.values("v_cache");
  auto out = c.output("output"), lse = c.output("lse");
  const std::int64_t page = pt.indices[0];
  for (std::int64_t h = 0; h < 32; ++h) {
    const std::int64_t g = h / 8;
    double dotp = 0;
    for (int x = 0; x < 128; ++x) dotp += double(q[h * 128 + x]) * k[(page * 4 + g) * 128 + x];
    CHECK(lse[h] == doctest::Approx(dotp * 0.5 / std::log(2.0)).epsilon(1e-6));
    for (int x = 0; x < 128; ++x) REQUIRE(out[h * 128 + x] == v[(page * 4 + g) * 128 + x]);
  }
}

TEST_CASE("GQA head mapping: query head h reads kv head h / (H_q / H_kv)") {
  // Every value of kv head g is (g + 1) / 8: each query head's output is
  // that constant whatever the weights, so a wrong mapping shows at once.
  for (const char* name : {"gqa_paged_decode_h32_kv4_d128_ps64", "gqa_paged_decode_h20_kv4_d128_ps64"}) {
    auto def = load("gqa_paged", name);
    std::mt19937 rng(18);
    Call c(def);
    const std::vector<SeqLens> seqs = {{1, 9}, {1, 70}};
    PageTable pt = make_pages(seqs, 64, 1, rng);
    set_paged_indices(c, seqs, pt);
    c.random_input("q", rng);
    c.random_input("k_cache", rng);
    c.random_input("v_cache", rng);
    const std::int64_t hq = c.axis("num_qo_heads"), hkv = c.axis("num_kv_heads");
    Tensor& v = c.in.at("v_cache");
    std::vector<float> vv(static_cast<std::size_t>(v.numel()));
    for (std::size_t i = 0; i < vv.size(); ++i) vv[i] = static_cast<float>((i / 128) % hkv + 1) / 8.0f;
    REQUIRE(kb::store_float(vv, v).ok());
    c.sm_scale = 0.3;
    REQUIRE(c.run().ok());
    auto out = c.output("output");
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t h = 0; h < hq; ++h)
        for (int x = 0; x < 128; ++x)
          REQUIRE(out[(b * hq + h) * 128 + x] == doctest::Approx((h / (hq / hkv) + 1) / 8.0).epsilon(1e-2));
  }
}

TEST_CASE("causal mask is bottom-right; lse is base 2; rows with no visible key are 0 / -inf") {
  // k = 0: every visible key has logit 0, so a query seeing n keys averages
  // their values and has lse log2(n). Value of kv token j (in its sequence) = j.
  auto def = load("gqa_ragged", "gqa_ragged_prefill_causal_h5_kv1_d128");
  std::mt19937 rng(19);
  Call c(def);
  // (q 2, kv 5): queries see keys 0..3 and 0..4. (q 3, kv 3): 0, 0..1, 0..2.
  // (q 3, kv 2): q_len > kv_len: the first query sees nothing, then 0, 0..1.
  const std::vector<SeqLens> seqs = {{2, 5}, {3, 3}, {3, 2}};
  set_ragged_indices(c, seqs);
  c.random_input("q", rng);
  c.random_input("k", rng);
  c.random_input("v", rng);
  std::vector<float> zeros(static_cast<std::size_t>(c.in.at("k").numel()), 0.0f);
  REQUIRE(kb::store_float(zeros, c.in.at("k")).ok());
  std::vector<float> vals;
  for (const auto& s : seqs)
    for (std::int64_t j = 0; j < s.kv_len; ++j) vals.insert(vals.end(), 128, static_cast<float>(j));
  REQUIRE(kb::store_float(vals, c.in.at("v")).ok());
  c.sm_scale = 0.7;
  REQUIRE(c.run().ok());
  auto out = c.output("output"), lse = c.output("lse");
  const double expect_mean[] = {1.5, 2.0, 0.0, 0.5, 1.0, 0.0, 0.0, 0.5};
  const double expect_lse[] = {2.0, std::log2(5.0), 0.0, 1.0, std::log2(3.0), -kInf, 0.0, 1.0};
  for (int t = 0; t < 8; ++t) {
    for (int h = 0; h < 5; ++h) {
      CAPTURE(t);
      CAPTURE(h);
      if (std::isinf(expect_lse[t])) CHECK((std::isinf(lse[t * 5 + h]) && lse[t * 5 + h] < 0));
      else CHECK(lse[t * 5 + h] == doctest::Approx(expect_lse[t]).epsilon(1e-6));
      for (int x = 0; x < 128; ++x) REQUIRE(out[(t * 5 + h) * 128 + x] == doctest::Approx(expect_mean[t]));
    }
  }
}

TEST_CASE("empty sequences give output 0 and lse -inf, in decode and prefill") {
  auto def = load("mla_paged", "mla_paged_decode_h16_ckv512_kpe64_ps64");
  std::mt19937 rng(20);
  Call c(def);
  const std::vector<SeqLens> seqs = {{1, 0}, {1, 0}};
  PageTable pt = make_pages(seqs, 64, 2, rng);
  set_paged_indices(c, seqs, pt);
  c.random_input("q_nope", rng);
  c.random_input("q_pe", rng);
  c.random_input("ckv_cache", rng);
  c.random_input("kpe_cache", rng);
  c.sm_scale = 0.1;
  REQUIRE(c.run().ok());
  for (float x : c.output("output")) REQUIRE(x == 0.0f);
  for (float x : c.output("lse")) REQUIRE((std::isinf(x) && x < 0));

  // A prefill whose only sequence has pages but kv_last_page_len 0 on its
  // one page: no key, as the references compute it.
  auto pdef = load("gqa_paged", "gqa_paged_prefill_causal_h32_kv4_d128_ps64");
  Call p(pdef);
  PageTable ppt = make_pages({{2, 5}}, 64, 0, rng);
  ppt.last_len[0] = 0;
  set_paged_indices(p, {{2, 5}}, ppt);
  p.random_input("q", rng);
  p.random_input("k_cache", rng);
  p.random_input("v_cache", rng);
  p.sm_scale = 0.1;
  REQUIRE(p.run().ok());
  for (float x : p.output("output")) REQUIRE(x == 0.0f);
  for (float x : p.output("lse")) REQUIRE((std::isinf(x) && x < 0));
}

TEST_CASE("malformed index tensors are errors, not crashes") {
  auto expect_invalid = [](Call& c, const std::string& what) {
    auto st = c.run();
    CHECK_MESSAGE(!st.ok(), what);
    if (!st.ok()) {
      CHECK_MESSAGE(st.error().code == kb::Code::invalid_argument, what << ": " << st.error().message);
    }
  };
  const std::vector<SeqLens> seqs = {{2, 3}, {3, 70}};

  // Paged prefill with kv_last_page_len, ps 64.
  auto pdef = load("gqa_paged", "gqa_paged_prefill_causal_h32_kv4_d128_ps64");
  auto paged = [&](auto mutate, const std::string& what) {
    std::mt19937 rng(21);
    Call c(pdef);
    PageTable pt = make_pages(seqs, 64, 1, rng);
    set_paged_indices(c, seqs, pt);
    c.random_input("q", rng);
    c.random_input("k_cache", rng);
    c.random_input("v_cache", rng);
    c.sm_scale = 0.1;
    REQUIRE(c.run().ok());  // the unmutated call is fine
    mutate(c);
    expect_invalid(c, what);
  };
  auto set = [](Call& c, const std::string& name, std::size_t i, std::int64_t v) {
    c.in.at(name).data<std::int32_t>()[i] = static_cast<std::int32_t>(v);
  };
  paged([&](Call& c) { set(c, "kv_indices", 1, c.axis("num_pages")); }, "page index == num_pages");
  paged([&](Call& c) { set(c, "kv_indices", 0, -1); }, "negative page index");
  paged([&](Call& c) { set(c, "kv_indices", 2, 1 << 30); }, "huge page index");
  paged([&](Call& c) { c.in["kv_indptr"] = ints({0, 2, 1}); }, "kv_indptr decreasing");
  paged([&](Call& c) { set(c, "kv_indptr", 2, 4); }, "kv_indptr past the end of kv_indices");
  paged([&](Call& c) { set(c, "kv_indptr", 0, -1); }, "negative kv_indptr");
  paged([&](Call& c) { c.in["kv_indptr"] = ints({0, 1}); }, "kv_indptr too short");
  paged([&](Call& c) { set(c, "qo_indptr", 2, 99); }, "qo_indptr past total_q");
  paged([&](Call& c) { c.in["qo_indptr"] = ints({0, 5, 3}); }, "qo_indptr decreasing");
  paged([&](Call& c) { c.in["qo_indptr"] = ints({}); }, "qo_indptr empty");
  paged([&](Call& c) { set(c, "kv_last_page_len", 1, 65); }, "kv_last_page_len > page_size");
  paged([&](Call& c) { set(c, "kv_last_page_len", 0, -2); }, "negative kv_last_page_len");
  paged([&](Call& c) { c.in["kv_last_page_len"] = ints({3}); }, "kv_last_page_len too short");
  paged([&](Call& c) {
    Tensor f = alloc(DType::float32, {4});
    c.in["kv_indices"] = std::move(f);
  }, "float index tensor");
  paged([&](Call& c) { c.in["kv_indptr"] = alloc(DType::int32, {3, 1}); }, "rank-2 indptr");

  // Paged decode without kv_last_page_len, ps 1.
  auto ddef = load("mla_paged", "mla_paged_decode_h16_ckv512_kpe64_ps1");
  {
    std::mt19937 rng(22);
    Call c(ddef);
    PageTable pt = make_pages({{1, 2}, {1, 3}}, 1, 0, rng);
    set_paged_indices(c, {{1, 2}, {1, 3}}, pt);
    c.random_input("q_nope", rng);
    c.random_input("q_pe", rng);
    c.random_input("ckv_cache", rng);
    c.random_input("kpe_cache", rng);
    c.sm_scale = 0.1;
    REQUIRE(c.run().ok());
    set(c, "kv_indices", 4, 5);
    expect_invalid(c, "mla page index == num_pages");
    set(c, "kv_indices", 4, 0);
    c.in["kv_indptr"] = ints({0, 2, 5, 5});
    expect_invalid(c, "decode kv_indptr longer than batch_size + 1");
  }

  // Ragged.
  auto rdef = load("gqa_ragged", "gqa_ragged_prefill_causal_h16_kv2_d128");
  auto ragged = [&](auto mutate, const std::string& what) {
    std::mt19937 rng(23);
    Call c(rdef);
    set_ragged_indices(c, seqs);
    c.random_input("q", rng);
    c.random_input("k", rng);
    c.random_input("v", rng);
    c.sm_scale = 0.1;
    REQUIRE(c.run().ok());
    mutate(c);
    expect_invalid(c, what);
  };
  ragged([&](Call& c) { set(c, "kv_indptr", 2, 74); }, "ragged kv_indptr past total_kv");
  ragged([&](Call& c) { c.in["kv_indptr"] = ints({0, 50, 40}); }, "ragged kv_indptr decreasing");
  ragged([&](Call& c) { set(c, "qo_indptr", 2, 6); }, "ragged qo_indptr past total_q");
  ragged([&](Call& c) { c.in["kv_indptr"] = ints({0, 73}); }, "ragged kv_indptr shorter than qo_indptr");

  // An output of the wrong shape.
  {
    std::mt19937 rng(24);
    Call c(rdef);
    set_ragged_indices(c, seqs);
    c.random_input("q", rng);
    c.random_input("k", rng);
    c.random_input("v", rng);
    c.axes["total_q"] = 4;  // outputs allocated for 4 tokens, q has 5
    c.sm_scale = 0.1;
    expect_invalid(c, "output shape does not match q");
  }
}
