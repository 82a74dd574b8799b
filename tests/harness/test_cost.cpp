// The cost model (lib/harness/cost.hpp) against counts done by hand: every op
// type, with small constants unlike the shipped ones, the arithmetic written
// out next to each expected number. Byte sizes: bf16/fp16 2, f32 4, fp8/int8
// 1, int32 4, int64 8.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "harness/cost.hpp"
#include "harness/timing_report.hpp"
#include "inputs/inputs.hpp"
#include "schema/io.hpp"
#include "tensor/convert.hpp"

namespace {

// One call of a definition written in the test: var axes given, every input
// allocated (zero-filled), index inputs set by the test.
struct TestCall {
  kb::Definition d;
  kb::AxisValues axes;
  std::vector<kb::Tensor> tensors;
  std::vector<kb::Arg> args;

  TestCall(const std::string& json, const std::map<std::string, std::int64_t>& vars) {
    auto r = kb::read_definition(json, "test");
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    d = *r;
    for (const auto& a : d.axes) {
      if (a.kind == kb::AxisKind::const_) {
        axes.values.emplace_back(a.name, a.value);
      } else {
        auto it = vars.find(a.name);
        REQUIRE_MESSAGE(it != vars.end(), a.name);
        axes.values.emplace_back(a.name, it->second);
      }
    }
    tensors.resize(d.inputs.size());
    args.resize(d.inputs.size());
    for (std::size_t i = 0; i < d.inputs.size(); ++i) {
      const auto& t = d.inputs[i];
      if (t.is_scalar()) {
        args[i].scalar = kb::ScalarValue{1.0};
        continue;
      }
      auto x = kb::Tensor::allocate(t.dtype, kb::bound_shape(t, axes));
      REQUIRE(x.ok());
      tensors[i] = std::move(*x);
      args[i].tensor = &tensors[i];
    }
  }
  void set(const std::string& name, const std::vector<std::int64_t>& v) {
    auto i = kb::input_index(d, name);
    REQUIRE(i);
    kb::Tensor& t = tensors[*i];
    REQUIRE(static_cast<std::int64_t>(v.size()) == t.numel());
    for (std::size_t j = 0; j < v.size(); ++j) {
      if (t.dtype() == kb::DType::int64) t.data<std::int64_t>()[j] = v[j];
      else t.data<std::int32_t>()[j] = static_cast<std::int32_t>(v[j]);
    }
  }
  void set_floats(const std::string& name, const std::vector<float>& v) {
    auto i = kb::input_index(d, name);
    REQUIRE(i);
    REQUIRE(kb::store_float(v, tensors[*i]).ok());
  }
  void set_scalar(const std::string& name, kb::ScalarValue v) {
    auto i = kb::input_index(d, name);
    REQUIRE(i);
    args[*i].scalar = v;
  }
  // The input as a deferred device input has it: shape and size, no values.
  void shape_only(const std::string& name) {
    auto i = kb::input_index(d, name);
    REQUIRE(i);
    auto t = kb::Tensor::shape_only(tensors[*i].dtype(), tensors[*i].shape());
    REQUIRE(t.ok());
    tensors[*i] = std::move(*t);
    args[*i].tensor = &tensors[*i];
  }
  void absent(const std::string& name) {
    auto i = kb::input_index(d, name);
    REQUIRE(i);
    args[*i].tensor = nullptr;
  }
  kb::Result<kb::CallCost> try_cost() const { return kb::ideal_cost(d, axes, args); }
  kb::CallCost cost() const {
    auto c = try_cost();
    REQUIRE_MESSAGE(c.ok(), (c.ok() ? "" : c.error().message));
    return *c;
  }
};

std::string def(const std::string& name, const std::string& op, const std::string& axes, const std::string& inputs,
                const std::string& outputs, const std::string& reference = "def run():\n    pass\n") {
  std::string ref;
  for (char ch : reference) ref += ch == '\n' ? std::string("\\n") : std::string(1, ch);
  return "{\"name\": \"" + name + "\", \"op_type\": \"" + op + "\", \"axes\": {" + axes + "}, \"inputs\": {" + inputs +
         "}, \"outputs\": {" + outputs + "}, \"reference\": \"" + ref + "\"}";
}
std::string var(const std::string& n) { return "\"" + n + "\": {\"type\": \"var\"}"; }
std::string cst(const std::string& n, std::int64_t v) {
  return "\"" + n + "\": {\"type\": \"const\", \"value\": " + std::to_string(v) + "}";
}
std::string ten(const std::string& n, const std::vector<std::string>& shape, const std::string& dtype) {
  std::string s = "\"" + n + "\": {\"shape\": [";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", \"" : "\"") + shape[i] + "\"";
  return s + "], \"dtype\": \"" + dtype + "\"}";
}
std::string scalar(const std::string& n) { return "\"" + n + "\": {\"shape\": null, \"dtype\": \"float32\"}"; }

// Visible (query, key) pairs of one sequence, read off the reference's mask
// directly: key j is visible to query i when j < i + 1 + (kv_len - q_len).
std::int64_t mask_pairs(std::int64_t q_len, std::int64_t kv_len) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < q_len; ++i)
    for (std::int64_t j = 0; j < kv_len; ++j) n += j < i + 1 + (kv_len - q_len);
  return n;
}

std::string ragged_gqa(std::int64_t hq, std::int64_t hkv, std::int64_t dim) {
  return def("gqa_ragged_prefill_causal_test", "gqa_ragged",
             cst("num_qo_heads", hq) + ", " + cst("num_kv_heads", hkv) + ", " + cst("head_dim", dim) + ", " +
                 var("len_indptr") + ", " + var("total_q") + ", " + var("total_kv"),
             ten("q", {"total_q", "num_qo_heads", "head_dim"}, "bfloat16") + ", " +
                 ten("k", {"total_kv", "num_kv_heads", "head_dim"}, "bfloat16") + ", " +
                 ten("v", {"total_kv", "num_kv_heads", "head_dim"}, "bfloat16") + ", " +
                 ten("qo_indptr", {"len_indptr"}, "int32") + ", " + ten("kv_indptr", {"len_indptr"}, "int32") + ", " +
                 scalar("sm_scale"),
             ten("output", {"total_q", "num_qo_heads", "head_dim"}, "bfloat16") + ", " +
                 ten("lse", {"total_q", "num_qo_heads"}, "float32"));
}

}  // namespace

TEST_CASE("gemm: 2*M*N*K; A, B and C whole") {
  TestCall c(def("gemm_n5_k7", "gemm", var("M") + ", " + cst("N", 5) + ", " + cst("K", 7),
                 ten("A", {"M", "K"}, "float16") + ", " + ten("B", {"N", "K"}, "float16"),
                 ten("C", {"M", "N"}, "float16")),
             {{"M", 3}});
  kb::CallCost k = c.cost();
  CHECK(k.flops == 2 * 3 * 5 * 7);                // 210
  CHECK(k.bytes == (3 * 7 + 5 * 7 + 3 * 5) * 2);  // A + B + C = 142
  CHECK(k.basis == kb::CostBasis::exact);
}

TEST_CASE("rmsnorm and fused_add_rmsnorm") {
  const std::string axes = var("batch_size") + ", " + cst("hidden_size", 8);
  const std::string x = ten("hidden_states", {"batch_size", "hidden_size"}, "bfloat16");
  const std::string w = ten("weight", {"hidden_size"}, "bfloat16");
  const std::string out = ten("output", {"batch_size", "hidden_size"}, "bfloat16");
  TestCall plain(def("rmsnorm_h8", "rmsnorm", axes, x + ", " + w, out), {{"batch_size", 3}});
  kb::CallCost p = plain.cost();
  CHECK(p.flops == 4 * 3 * 8 + 3 * 3);   // x^2, sum, *inv_rms, *w per element; mean, +eps, rsqrt per row = 105
  CHECK(p.bytes == (3 * 8 + 8 + 3 * 8) * 2);  // hidden + weight + output = 112

  TestCall fused(def("fused_add_rmsnorm_h8", "rmsnorm", axes,
                     x + ", " + ten("residual", {"batch_size", "hidden_size"}, "bfloat16") + ", " + w, out),
                 {{"batch_size", 3}});
  kb::CallCost f = fused.cost();
  CHECK(f.flops == 5 * 3 * 8 + 3 * 3);             // + the residual add = 129
  CHECK(f.bytes == (3 * 8 + 3 * 8 + 8 + 3 * 8) * 2);  // hidden + residual + weight + output = 160
}

TEST_CASE("rope: the cos/sin rows of the positions given, read once") {
  TestCall c(def("rope_d8_rd4", "rope",
                 var("num_tokens") + ", " + var("num_qo_heads") + ", " + var("num_kv_heads") + ", " +
                     cst("head_size", 8) + ", " + cst("rotary_dim", 4) + ", " + var("max_seq_len"),
                 ten("q", {"num_tokens", "num_qo_heads", "head_size"}, "bfloat16") + ", " +
                     ten("k", {"num_tokens", "num_kv_heads", "head_size"}, "bfloat16") + ", " +
                     ten("cos_sin_cache", {"max_seq_len", "rotary_dim"}, "float32") + ", " +
                     ten("positions", {"num_tokens"}, "int64"),
                 ten("q_out", {"num_tokens", "num_qo_heads", "head_size"}, "bfloat16") + ", " +
                     ten("k_out", {"num_tokens", "num_kv_heads", "head_size"}, "bfloat16")),
             {{"num_tokens", 4}, {"num_qo_heads", 3}, {"num_kv_heads", 1}, {"max_seq_len", 10}});
  c.set("positions", {2, 5, 2, 9});  // 3 distinct rows
  kb::CallCost k = c.cost();
  CHECK(k.flops == 3 * 4 * 4 * (3 + 1));  // 3 per rotated element, rotary 4, 4 tokens, 4 heads = 192
  // q 4*3*8*2 = 192, k 4*1*8*2 = 64, cache 3 rows * 4 * 4 = 48, positions 4*8 = 32, q_out 192, k_out 64
  CHECK(k.bytes == 192 + 64 + 48 + 32 + 192 + 64);
  c.set("positions", {2, 5, 10, 9});
  CHECK(!c.try_cost().ok());  // a position past the cache
}

TEST_CASE("silu_and_mul and sampling") {
  TestCall s(def("silu_and_mul_i5", "silu_and_mul",
                 var("num_tokens") + ", " + cst("intermediate_size", 5) + ", " + cst("two_intermediate_size", 10),
                 ten("x", {"num_tokens", "two_intermediate_size"}, "bfloat16"),
                 ten("out", {"num_tokens", "intermediate_size"}, "bfloat16")),
             {{"num_tokens", 3}});
  CHECK(s.cost().flops == 4 * 3 * 5);          // exp, +1, divide, *up per output element = 60
  CHECK(s.cost().bytes == (3 * 10 + 3 * 5) * 2);  // 90

  TestCall p(def("top_k_top_p_sampling_from_probs_v11", "sampling", var("batch_size") + ", " + cst("vocab_size", 11),
                 ten("probs", {"batch_size", "vocab_size"}, "float32") + ", " + ten("top_k", {"batch_size"}, "int32") +
                     ", " + ten("top_p", {"batch_size"}, "float32"),
                 ten("samples", {"batch_size"}, "int64")),
             {{"batch_size", 2}});
  CHECK(p.cost().flops == 2 * 11);                     // one add per probability
  CHECK(p.cost().bytes == 2 * 11 * 4 + 2 * 4 + 2 * 4 + 2 * 8);  // probs, top_k, top_p, samples = 120
}

TEST_CASE("gqa_ragged causal prefill, uneven sequences, group size 5") {
  // Hq 5 query heads share Hkv 1 KV head (a group of 5), head_dim 4.
  TestCall c(ragged_gqa(5, 1, 4), {{"len_indptr", 4}, {"total_q", 8}, {"total_kv", 11}});
  // seq 0: q 3, kv 5; seq 1: q 0, kv 2 (computes nothing, reads nothing); seq 2: q 5, kv 4 (more queries than keys)
  c.set("qo_indptr", {0, 3, 3, 8});
  c.set("kv_indptr", {0, 5, 7, 11});
  kb::CallCost k = c.cost();
  // seq 0, delta = 5 - 3 = 2: query i sees min(5, i + 3) keys: 3 + 4 + 5 = 12
  // seq 2, delta = 4 - 5 = -1: query i sees clamp(i, 0, 4): 0 + 1 + 2 + 3 + 4 = 10
  CHECK(mask_pairs(3, 5) == 12);
  CHECK(mask_pairs(5, 4) == 10);
  const double pairs = 12 + 10;
  CHECK(k.flops == pairs * 5 * (2 * 4 + 2 * 4));  // 22 pairs * 5 heads * 16 = 1760
  // q: 8 rows * 5*4*2 = 320; k, v: rows [0,5) and [7,11) = 9 rows * 1*4*2 = 72 each (once per KV head, not per
  // query head); qo_indptr, kv_indptr 4*4 = 16 each; output 8*5*4*2 = 320; lse 8*5*4 = 160
  CHECK(k.bytes == 320 + 72 + 72 + 16 + 16 + 320 + 160);
}

TEST_CASE("gqa_ragged causal pairs match the reference's mask over a range of lengths and groups") {
  for (std::int64_t hq : {1, 4, 5, 12})
    for (std::int64_t q_len = 1; q_len <= 9; q_len += 2)
      for (std::int64_t kv_len = 1; kv_len <= 13; kv_len += 3) {
        CAPTURE(hq);
        CAPTURE(q_len);
        CAPTURE(kv_len);
        const std::int64_t hkv = hq % 4 == 0 ? 4 : 1;
        TestCall c(ragged_gqa(hq, hkv, 8),
                   {{"len_indptr", 3}, {"total_q", q_len + 1}, {"total_kv", kv_len + 2}});
        // two sequences: (q_len, kv_len) and (1, 2)
        c.set("qo_indptr", {0, q_len, q_len + 1});
        c.set("kv_indptr", {0, kv_len, kv_len + 2});
        const double pairs = static_cast<double>(mask_pairs(q_len, kv_len) + mask_pairs(1, 2));
        CHECK(c.cost().flops == pairs * static_cast<double>(hq) * (2 * 8 + 2 * 8));
      }
}

TEST_CASE("gqa_paged decode: partly filled last pages, a page two sequences share, an empty sequence") {
  TestCall c(def("gqa_paged_decode_h4_kv2_d4_ps4", "gqa_paged",
                 var("batch_size") + ", " + cst("num_qo_heads", 4) + ", " + cst("num_kv_heads", 2) + ", " +
                     cst("head_dim", 4) + ", " + cst("page_size", 4) + ", " + var("num_pages") + ", " +
                     var("len_indptr") + ", " + var("num_kv_indices"),
                 ten("q", {"batch_size", "num_qo_heads", "head_dim"}, "bfloat16") + ", " +
                     ten("k_cache", {"num_pages", "page_size", "num_kv_heads", "head_dim"}, "bfloat16") + ", " +
                     ten("v_cache", {"num_pages", "page_size", "num_kv_heads", "head_dim"}, "bfloat16") + ", " +
                     ten("kv_indptr", {"len_indptr"}, "int32") + ", " + ten("kv_indices", {"num_kv_indices"}, "int32") +
                     ", " + ten("kv_last_page_len", {"batch_size"}, "int32") + ", " + scalar("sm_scale"),
                 ten("output", {"batch_size", "num_qo_heads", "head_dim"}, "bfloat16") + ", " +
                     ten("lse", {"batch_size", "num_qo_heads"}, "float32")),
             {{"batch_size", 3}, {"num_pages", 6}, {"len_indptr", 4}, {"num_kv_indices", 3}});
  // seq 0: pages 1, 4, last page 3 of 4 slots: 4 + 3 = 7 keys; seq 1: page 4, 2 slots: 2 keys; seq 2: no page
  c.set("kv_indptr", {0, 2, 3, 3});
  c.set("kv_indices", {1, 4, 4});
  c.set("kv_last_page_len", {3, 2, 1});
  kb::CallCost k = c.cost();
  CHECK(k.flops == (7 + 2) * 4 * (2 * 4 + 2 * 4));  // 9 pairs * 4 heads * 16 = 576
  // q: 2 computing rows * 4*4*2 = 64; k_cache: page 1 all 4 slots + page 4 max(3, 2) = 3 slots = 7 slots * 2*4*2
  // = 112, v_cache 112; kv_indptr 4*4 = 16; kv_indices 3*4 = 12; kv_last_page_len 3*4 = 12; output 3*4*4*2 = 96;
  // lse 3*4*4 = 48; sm_scale 0
  CHECK(k.bytes == 64 + 112 + 112 + 16 + 12 + 12 + 96 + 48);
  c.set("kv_indices", {1, 6, 4});
  auto bad = c.try_cost();
  REQUIRE(!bad.ok());
  CHECK(bad.error().message.find("kv_indices[1] = 6") != std::string::npos);
}

TEST_CASE("gqa_paged decode without kv_last_page_len (page size 1): every page full, a page shared") {
  TestCall c(def("gqa_paged_decode_h2_kv1_d2_ps1", "gqa_paged",
                 var("batch_size") + ", " + cst("num_qo_heads", 2) + ", " + cst("num_kv_heads", 1) + ", " +
                     cst("head_dim", 2) + ", " + cst("page_size", 1) + ", " + var("num_pages") + ", " +
                     var("len_indptr") + ", " + var("num_kv_indices"),
                 ten("q", {"batch_size", "num_qo_heads", "head_dim"}, "bfloat16") + ", " +
                     ten("k_cache", {"num_pages", "page_size", "num_kv_heads", "head_dim"}, "bfloat16") + ", " +
                     ten("v_cache", {"num_pages", "page_size", "num_kv_heads", "head_dim"}, "bfloat16") + ", " +
                     ten("kv_indptr", {"len_indptr"}, "int32") + ", " + ten("kv_indices", {"num_kv_indices"}, "int32") +
                     ", " + scalar("sm_scale"),
                 ten("output", {"batch_size", "num_qo_heads", "head_dim"}, "bfloat16") + ", " +
                     ten("lse", {"batch_size", "num_qo_heads"}, "float32")),
             {{"batch_size", 2}, {"num_pages", 4}, {"len_indptr", 3}, {"num_kv_indices", 3}});
  c.set("kv_indptr", {0, 2, 3});
  c.set("kv_indices", {3, 1, 3});  // seq 0: pages 3, 1; seq 1: page 3 again
  kb::CallCost k = c.cost();
  CHECK(k.flops == (2 + 1) * 2 * (2 * 2 + 2 * 2));  // 48
  // q 2*2*2*2 = 16; k, v: pages {1, 3} = 2 slots * 1*2*2 = 8 each; kv_indptr 3*4 = 12; kv_indices 12; output 16;
  // lse 2*2*4 = 16
  CHECK(k.bytes == 16 + 8 + 8 + 12 + 12 + 16 + 16);
}

TEST_CASE("gqa_paged causal prefill reads only the last page's valid slots") {
  TestCall c(def("gqa_paged_prefill_causal_h2_kv1_d2_ps2", "gqa_paged",
                 cst("num_qo_heads", 2) + ", " + cst("num_kv_heads", 1) + ", " + cst("head_dim", 2) + ", " +
                     cst("page_size", 2) + ", " + var("len_indptr") + ", " + var("total_q") + ", " +
                     var("num_kv_indices") + ", " + var("num_pages"),
                 ten("q", {"total_q", "num_qo_heads", "head_dim"}, "bfloat16") + ", " +
                     ten("k_cache", {"num_pages", "page_size", "num_kv_heads", "head_dim"}, "bfloat16") + ", " +
                     ten("v_cache", {"num_pages", "page_size", "num_kv_heads", "head_dim"}, "bfloat16") + ", " +
                     ten("qo_indptr", {"len_indptr"}, "int32") + ", " + ten("kv_indptr", {"len_indptr"}, "int32") +
                     ", " + ten("kv_indices", {"num_kv_indices"}, "int32") + ", " +
                     ten("kv_last_page_len", {"len_indptr"}, "int32") + ", " + scalar("sm_scale"),
                 ten("output", {"total_q", "num_qo_heads", "head_dim"}, "bfloat16") + ", " +
                     ten("lse", {"total_q", "num_qo_heads"}, "float32")),
             {{"len_indptr", 2}, {"total_q", 2}, {"num_kv_indices", 2}, {"num_pages", 3}});
  // one sequence, 2 queries over pages 2 (full) and 0 (1 slot): 3 keys, delta 1: 2 + 3 = 5 pairs
  c.set("qo_indptr", {0, 2});
  c.set("kv_indptr", {0, 2});
  c.set("kv_indices", {2, 0});
  c.set("kv_last_page_len", {1, 0});
  kb::CallCost k = c.cost();
  CHECK(mask_pairs(2, 3) == 5);
  CHECK(k.flops == 5 * 2 * (2 * 2 + 2 * 2));  // 80
  // q 2*2*2*2 = 16; k, v: 3 slots * 1*2*2 = 12 each; qo_indptr, kv_indptr 2*4 = 8 each; kv_indices 2*4 = 8;
  // kv_last_page_len: one entry per sequence, 4; output 16; lse 2*2*4 = 16
  CHECK(k.bytes == 16 + 12 + 12 + 8 + 8 + 8 + 4 + 16 + 16);
}

TEST_CASE("mla_paged decode: the latent is read once per token, shared by every query head") {
  TestCall c(def("mla_paged_decode_h3_ckv8_kpe2_ps4", "mla_paged",
                 var("batch_size") + ", " + cst("num_qo_heads", 3) + ", " + cst("head_dim_ckv", 8) + ", " +
                     cst("head_dim_kpe", 2) + ", " + cst("page_size", 4) + ", " + var("num_pages") + ", " +
                     var("len_indptr") + ", " + var("num_kv_indices"),
                 ten("q_nope", {"batch_size", "num_qo_heads", "head_dim_ckv"}, "bfloat16") + ", " +
                     ten("q_pe", {"batch_size", "num_qo_heads", "head_dim_kpe"}, "bfloat16") + ", " +
                     ten("ckv_cache", {"num_pages", "page_size", "head_dim_ckv"}, "bfloat16") + ", " +
                     ten("kpe_cache", {"num_pages", "page_size", "head_dim_kpe"}, "bfloat16") + ", " +
                     ten("kv_indptr", {"len_indptr"}, "int32") + ", " + ten("kv_indices", {"num_kv_indices"}, "int32") +
                     ", " + ten("kv_last_page_len", {"batch_size"}, "int32") + ", " + scalar("sm_scale"),
                 ten("output", {"batch_size", "num_qo_heads", "head_dim_ckv"}, "bfloat16") + ", " +
                     ten("lse", {"batch_size", "num_qo_heads"}, "float32")),
             {{"batch_size", 2}, {"num_pages", 5}, {"len_indptr", 3}, {"num_kv_indices", 3}});
  // seq 0: pages 0, 3 (1 slot): 5 keys; seq 1: page 2 (4 slots): 4 keys
  c.set("kv_indptr", {0, 2, 3});
  c.set("kv_indices", {0, 3, 2});
  c.set("kv_last_page_len", {1, 4});
  kb::CallCost k = c.cost();
  // logits over [ckv | kpe]: 2*(8 + 2); output over ckv: 2*8
  CHECK(k.flops == (5 + 4) * 3 * (2 * (8 + 2) + 2 * 8));  // 972
  // q_nope 2*3*8*2 = 96; q_pe 2*3*2*2 = 24; ckv: 4 + 1 + 4 = 9 slots * 8*2 = 144; kpe 9 * 2*2 = 36;
  // kv_indptr 3*4 = 12; kv_indices 3*4 = 12; kv_last_page_len 2*4 = 8; output 96; lse 2*3*4 = 24
  CHECK(k.bytes == 96 + 24 + 144 + 36 + 12 + 12 + 8 + 96 + 24);
}

TEST_CASE("mla_ragged causal prefill: separate qk and vo dims") {
  TestCall c(def("mla_ragged_prefill_causal_h2_qk6_vo4", "mla_ragged",
                 cst("num_qo_heads", 2) + ", " + cst("num_kv_heads", 2) + ", " + cst("qk_dim", 6) + ", " +
                     cst("vo_dim", 4) + ", " + var("total_q") + ", " + var("total_kv") + ", " + var("len_indptr"),
                 ten("q", {"total_q", "num_qo_heads", "qk_dim"}, "bfloat16") + ", " +
                     ten("k", {"total_kv", "num_kv_heads", "qk_dim"}, "bfloat16") + ", " +
                     ten("v", {"total_kv", "num_kv_heads", "vo_dim"}, "bfloat16") + ", " +
                     ten("qo_indptr", {"len_indptr"}, "int32") + ", " + ten("kv_indptr", {"len_indptr"}, "int32") +
                     ", " + scalar("sm_scale"),
                 ten("output", {"total_q", "num_qo_heads", "vo_dim"}, "bfloat16") + ", " +
                     ten("lse", {"total_q", "num_qo_heads"}, "float32")),
             {{"total_q", 2}, {"total_kv", 3}, {"len_indptr", 2}});
  c.set("qo_indptr", {0, 2});
  c.set("kv_indptr", {0, 3});
  kb::CallCost k = c.cost();
  CHECK(k.flops == 5 * 2 * (2 * 6 + 2 * 4));  // pairs 2 + 3 = 5: 200
  // q 2*2*6*2 = 48; k 3*2*6*2 = 72; v 3*2*4*2 = 48; indptrs 2*4 each; output 2*2*4*2 = 32; lse 2*2*4 = 16
  CHECK(k.bytes == 48 + 72 + 48 + 8 + 8 + 32 + 16);
}

TEST_CASE("dsa_paged sparse attention: the slots sparse_indices names, -1 padding") {
  TestCall c(def("dsa_sparse_attention_h2_ckv4_kpe2_topk3_ps2", "dsa_paged",
                 var("num_tokens") + ", " + cst("num_qo_heads", 2) + ", " + cst("head_dim_ckv", 4) + ", " +
                     cst("head_dim_kpe", 2) + ", " + cst("page_size", 2) + ", " + cst("topk", 3) + ", " +
                     var("num_pages"),
                 ten("q_nope", {"num_tokens", "num_qo_heads", "head_dim_ckv"}, "bfloat16") + ", " +
                     ten("q_pe", {"num_tokens", "num_qo_heads", "head_dim_kpe"}, "bfloat16") + ", " +
                     ten("ckv_cache", {"num_pages", "page_size", "head_dim_ckv"}, "bfloat16") + ", " +
                     ten("kpe_cache", {"num_pages", "page_size", "head_dim_kpe"}, "bfloat16") + ", " +
                     ten("sparse_indices", {"num_tokens", "topk"}, "int32") + ", " + scalar("sm_scale"),
                 ten("output", {"num_tokens", "num_qo_heads", "head_dim_ckv"}, "bfloat16") + ", " +
                     ten("lse", {"num_tokens", "num_qo_heads"}, "float32")),
             {{"num_tokens", 3}, {"num_pages", 3}});
  c.set("sparse_indices", {0, 5, -1, /**/ 5, 1, -1, /**/ -1, -1, -1});  // 4 pairs over slots {0, 1, 5}
  kb::CallCost k = c.cost();
  CHECK(k.flops == 4 * 2 * (2 * (4 + 2) + 2 * 4));  // 160
  // q_nope: 2 rows with keys * 2*4*2 = 32; q_pe 2 * 2*2*2 = 16; ckv 3 slots * 4*2 = 24; kpe 3 * 2*2 = 12;
  // sparse_indices 9*4 = 36; output 3*2*4*2 = 48; lse 3*2*4 = 24
  CHECK(k.bytes == 32 + 16 + 24 + 12 + 36 + 48 + 24);
}

TEST_CASE("dsa_paged top-k indexer: the pages seq_lens needs of each block_table row") {
  TestCall c(def("dsa_topk_indexer_h2_d4_topk4_ps4", "dsa_paged",
                 var("batch_size") + ", " + cst("num_index_heads", 2) + ", " + cst("index_head_dim", 4) + ", " +
                     cst("page_size", 4) + ", " + cst("topk", 4) + ", " + var("max_num_pages") + ", " +
                     var("num_pages") + ", " + cst("kv_cache_num_heads", 1) + ", " + cst("head_dim_with_scale", 8),
                 ten("q_index_fp8", {"batch_size", "num_index_heads", "index_head_dim"}, "float8_e4m3fn") + ", " +
                     ten("k_index_cache_fp8", {"num_pages", "page_size", "kv_cache_num_heads", "head_dim_with_scale"},
                         "int8") +
                     ", " + ten("weights", {"batch_size", "num_index_heads"}, "float32") + ", " +
                     ten("seq_lens", {"batch_size"}, "int32") + ", " +
                     ten("block_table", {"batch_size", "max_num_pages"}, "int32"),
                 ten("topk_indices", {"batch_size", "topk"}, "int32")),
             {{"batch_size", 3}, {"max_num_pages", 3}, {"num_pages", 5}});
  // seq 0: 5 keys on pages 3 (4 slots) and 1 (1 slot); seq 1: empty; seq 2: 4 keys on page 1 (4 slots)
  c.set("seq_lens", {5, 0, 4});
  c.set("block_table", {3, 1, 0, /**/ 2, 2, 2, /**/ 1, 4, 4});
  kb::CallCost k = c.cost();
  CHECK(k.flops == (5 + 4) * 2 * (2 * 4 + 2));  // 180
  // q: 2 rows * 2*4*1 = 16; cache: page 3 4 slots + page 1 max(1, 4) slots = 8 slots * 8 = 64; weights 2 rows * 2*4
  // = 16; seq_lens 3*4 = 12; block_table 2 + 1 = 3 entries * 4 = 12; topk_indices 3*4*4 = 48
  CHECK(k.bytes == 16 + 64 + 16 + 12 + 12 + 48);
}

TEST_CASE("moe with routing an input: the experts chosen, packed ids") {
  TestCall c(def("routed_moe_topk2_e4_h4_i2", "moe",
                 var("seq_len") + ", " + cst("num_experts", 4) + ", " + cst("hidden_size", 4) + ", " +
                     cst("intermediate_size", 2) + ", " + cst("gemm1_out_size", 4) + ", " + cst("top_k", 2),
                 ten("topk_ids", {"seq_len", "top_k"}, "int32") + ", " +
                     ten("hidden_states", {"seq_len", "hidden_size"}, "bfloat16") + ", " +
                     ten("gemm1_weights", {"num_experts", "gemm1_out_size", "hidden_size"}, "float32") + ", " +
                     ten("gemm2_weights", {"num_experts", "hidden_size", "intermediate_size"}, "float32"),
                 ten("output", {"seq_len", "hidden_size"}, "bfloat16"),
                 "def run(topk_ids, hidden_states, gemm1_weights, gemm2_weights):\n"
                 "    expert_idx = (topk_ids >> 16).to(torch.int16)\n"),
             {{"seq_len", 3}});
  auto packed = [](std::int64_t e) { return (e << 16) | 0x3F80; };  // expert e, weight bf16 1.0
  // token 0: experts 1, 3; token 1: expert 1 and 7 (no such expert); token 2: 5, 6 (none): 3 pairs, experts {1, 3}
  c.set("topk_ids", {packed(1), packed(3), packed(1), packed(7), packed(5), packed(6)});
  kb::CallCost k = c.cost();
  CHECK(k.basis == kb::CostBasis::exact);
  CHECK(k.flops == 3 * 2 * (4 * 4 + 4 * 2));  // pairs * 2*(G1*H + H*I) = 144
  // topk_ids 3*2*4 = 24; hidden_states: 2 routed rows * 4*2 = 16; gemm1 4*4*4*4 = 256 * 2/4 experts = 128;
  // gemm2 4*4*2*4 = 128 * 2/4 = 64; output 3*4*2 = 24
  CHECK(k.bytes == 24 + 16 + 128 + 64 + 24);
}

TEST_CASE("moe with routing inside the call: an upper bound, named as such") {
  const std::string json = def(
      "moe_fp8_topk2_e4_h4_i2", "moe",
      var("seq_len") + ", " + cst("num_experts", 4) + ", " + cst("num_local_experts", 4) + ", " +
          cst("hidden_size", 4) + ", " + cst("intermediate_size", 2) + ", " + cst("gemm1_out_size", 4),
      ten("routing_logits", {"seq_len", "num_experts"}, "float32") + ", " +
          ten("routing_bias", {"num_experts"}, "bfloat16") + ", " +
          ten("hidden_states", {"seq_len", "hidden_size"}, "float8_e4m3fn") + ", " +
          ten("gemm1_weights", {"num_local_experts", "gemm1_out_size", "hidden_size"}, "float8_e4m3fn") + ", " +
          ten("gemm2_weights", {"num_local_experts", "hidden_size", "intermediate_size"}, "float8_e4m3fn"),
      ten("output", {"seq_len", "hidden_size"}, "bfloat16"),
      "def run(routing_logits, routing_bias, hidden_states, gemm1_weights, gemm2_weights):\n    TOP_K = 2\n");
  TestCall one(json, {{"seq_len", 1}});
  kb::CallCost k = one.cost();
  CHECK(k.basis == kb::CostBasis::upper_bound);
  CHECK(k.flops == 1 * 2 * 2 * (4 * 4 + 4 * 2));  // 1 token * min(TOP_K 2, 4 experts) pairs * 2*(16 + 8) = 96
  // logits 1*4*4 = 16; bias 4*2 = 8 (routing, read whole); hidden 4; gemm1 4*4*4 = 64 * min(4, 1*2)/4 = 32;
  // gemm2 4*4*2 = 32 * 2/4 = 16; output 4*2 = 8
  CHECK(k.bytes == 16 + 8 + 4 + 32 + 16 + 8);
  TestCall three(json, {{"seq_len", 3}});
  // 3 tokens * 2 = 6 pairs; min(4 experts, 3*2) = all 4 experts' weights
  CHECK(three.cost().flops == 3 * 2 * 2 * (4 * 4 + 4 * 2));
  CHECK(three.cost().bytes == 3 * 4 * 4 + 8 + 3 * 4 + 64 + 32 + 3 * 4 * 2);
}

// MoE references kb's oracle computes (kernels/moe/form.hpp): the lines its
// form reader recognises, with the constants of the test.
std::string moe_reference(const std::string& routing, const std::string& constants) {
  return "def run():\n" + constants + routing +
         "    g1 = A_e @ W13_e.t()\n    up, gate = g1[:, :I], g1[:, I:]\n    c = torch.nn.functional.silu(gate) * up\n"
         "    o = c @ W2_e.t()\n    output.index_add_(0, tok_idx, o * w_tok)\n";
}
const char* kDeepSeekRouting =
    "    s = torch.sigmoid(logits)\n    s_with_bias = s + bias\n    weights = s * M\n"
    "    weights_sum = weights.sum(dim=-1, keepdim=True).clamp(min=1e-20)\n"
    "    weights = weights / weights_sum * routed_scaling_factor\n";
const char* kRenormalizeRouting = "    probs = torch.softmax(topk_logits, dim=-1)\n";

// Logits rows that pick `first` then `second` (top 2 of the row; every other expert far below).
std::vector<float> pick_rows(std::int64_t experts, const std::vector<std::pair<int, int>>& picks) {
  std::vector<float> v;
  for (auto [a, b] : picks) {
    std::vector<float> row(static_cast<std::size_t>(experts), -8.0f);
    row[static_cast<std::size_t>(a)] = 5.0f;
    row[static_cast<std::size_t>(b)] = 4.0f;
    v.insert(v.end(), row.begin(), row.end());
  }
  return v;
}

std::string ep_moe_json() {
  // DeepSeek routing over 16 experts, 4 of them local (global ids 4..7 with local_expert_offset 4), top 2,
  // fp8 weights with BLOCK 2 scales: H 4, I 2, G1 4.
  return def("moe_fp8_block_scale_ds_routing_topk2_e4of16_h4_i2", "moe",
             var("seq_len") + ", " + cst("num_experts", 16) + ", " + cst("num_local_experts", 4) + ", " +
                 cst("hidden_size", 4) + ", " + cst("intermediate_size", 2) + ", " + cst("gemm1_out_size", 4) + ", " +
                 cst("num_hidden_blocks", 2) + ", " + cst("num_intermediate_blocks", 1) + ", " +
                 cst("num_gemm1_out_blocks", 2),
             ten("routing_logits", {"seq_len", "num_experts"}, "float32") + ", " +
                 ten("routing_bias", {"num_experts"}, "bfloat16") + ", " +
                 ten("hidden_states", {"seq_len", "hidden_size"}, "float8_e4m3fn") + ", " +
                 ten("hidden_states_scale", {"num_hidden_blocks", "seq_len"}, "float32") + ", " +
                 ten("gemm1_weights", {"num_local_experts", "gemm1_out_size", "hidden_size"}, "float8_e4m3fn") + ", " +
                 ten("gemm1_weights_scale", {"num_local_experts", "num_gemm1_out_blocks", "num_hidden_blocks"},
                     "float32") + ", " +
                 ten("gemm2_weights", {"num_local_experts", "hidden_size", "intermediate_size"}, "float8_e4m3fn") +
                 ", " +
                 ten("gemm2_weights_scale", {"num_local_experts", "num_hidden_blocks", "num_intermediate_blocks"},
                     "float32") + ", " +
                 "\"local_expert_offset\": {\"shape\": null, \"dtype\": \"int32\"}, " + scalar("routed_scaling_factor"),
             ten("output", {"seq_len", "hidden_size"}, "bfloat16"),
             moe_reference(kDeepSeekRouting, "    TOP_K = 2\n    BLOCK = 2\n"));
}

TEST_CASE("moe routing inside the call, expert parallel: the local choices of the definition's own routing") {
  TestCall c(ep_moe_json(), {{"seq_len", 8}});
  c.set_scalar("local_expert_offset", kb::ScalarValue{std::int64_t{4}});
  // Bias 0: DeepSeek picks the two largest sigmoid(logit), the two largest logits.
  // token:  0      1      2      3      4        5       6      7
  // picks:  4, 9   0, 1   5, 6   4, 5   12, 13   6, 15   2, 3   4, 8
  // local:  4      -      5, 6   4, 5   -        6       -      4
  // 7 local pairs; local experts {4, 5, 6}: 3 of 4; tokens with a local choice: 0, 2, 3, 5, 7 (5 of 8)
  c.set_floats("routing_logits", pick_rows(16, {{4, 9}, {0, 1}, {5, 6}, {4, 5}, {12, 13}, {6, 15}, {2, 3}, {4, 8}}));
  kb::CallCost k = c.cost();
  CHECK(k.basis == kb::CostBasis::exact);
  CHECK(k.flops == 7 * 2 * (4 * 4 + 4 * 2));  // pairs * 2*(G1*H + H*I) = 336
  // logits 8*16*4 = 512 and bias 16*2 = 32, read whole; hidden_states 5 rows * 4 = 20; its scales [2, 8] f32 = 64
  // * 5/8 = 40; gemm1 4*4*4 = 64 * 3/4 = 48; its scales [4, 2, 2] f32 = 64 * 3/4 = 48; gemm2 4*4*2 = 32 * 3/4 = 24;
  // its scales [4, 2, 1] f32 = 32 * 3/4 = 24; output 8*4*2 = 64
  CHECK(k.bytes == 512 + 32 + 20 + 40 + 48 + 48 + 24 + 24 + 64);

  // The same choices seen from the rank holding experts 0..3: tokens 1 and 6 (0, 1; 2, 3): 4 pairs, 4 experts.
  c.set_scalar("local_expert_offset", kb::ScalarValue{std::int64_t{0}});
  kb::CallCost k0 = c.cost();
  CHECK(k0.basis == kb::CostBasis::exact);
  CHECK(k0.flops == 4 * 2 * (4 * 4 + 4 * 2));
  CHECK(k0.bytes == 512 + 32 + 2 * 4 + 64 * 2 / 8 + 64 + 64 + 32 + 32 + 64);

  // The bias steers the choice (s + bias): +2 on expert 7 makes it every token's first pick; with the logits'
  // first picks as second: 4 7 | 0 7 | 5 7 | 4 7 | 12 7 | 6 7 | 2 7 | 4 7. From offset 4: local pairs 8 (expert
  // 7) + 5 (4, 5, 4, 6, 4) = 13; experts {4, 5, 6, 7}; every token.
  c.set_scalar("local_expert_offset", kb::ScalarValue{std::int64_t{4}});
  std::vector<float> bias(16, 0.0f);
  bias[7] = 2.0f;
  c.set_floats("routing_bias", bias);
  kb::CallCost kb7 = c.cost();
  CHECK(kb7.flops == 13 * 2 * (4 * 4 + 4 * 2));
  CHECK(kb7.bytes == 512 + 32 + 8 * 4 + 64 + 64 + 64 + 32 + 32 + 64);

  // Experts 12..15 local, none of them picked: no FLOPs, no weights, no activations; the routing inputs and the output remain.
  c.set_floats("routing_bias", std::vector<float>(16, 0.0f));
  c.set_scalar("local_expert_offset", kb::ScalarValue{std::int64_t{12}});
  c.set_floats("routing_logits", pick_rows(16, {{4, 9}, {0, 1}, {5, 6}, {4, 5}, {10, 11}, {6, 9}, {2, 3}, {4, 8}}));
  kb::CallCost none = c.cost();
  CHECK(none.basis == kb::CostBasis::exact);
  CHECK(none.flops == 0);
  CHECK(none.bytes == 512 + 32 + 64);
}

TEST_CASE("moe routing inside the call: the routing inputs without values give the upper bound") {
  TestCall c(ep_moe_json(), {{"seq_len", 8}});
  c.set_scalar("local_expert_offset", kb::ScalarValue{std::int64_t{4}});
  c.shape_only("routing_logits");
  kb::CallCost k = c.cost();
  CHECK(k.basis == kb::CostBasis::upper_bound);
  CHECK(k.flops == 8 * 2 * 2 * (4 * 4 + 4 * 2));  // 8 tokens * top_k 2
  // every input whole: min(4 experts, 8*2) = all 4 local experts, every token
  CHECK(k.bytes == 512 + 32 + 32 + 64 + 64 + 64 + 32 + 32 + 64);
  CHECK(kb::cost_reads_values(c.d, "routing_logits"));
  CHECK(kb::cost_reads_values(c.d, "routing_bias"));
  CHECK_FALSE(kb::cost_reads_values(c.d, "hidden_states"));
  CHECK_FALSE(kb::cost_reads_values(c.d, "gemm1_weights"));
}

TEST_CASE("moe routing inside the call, every expert local: top-k + softmax over the call's own experts") {
  // Renormalize routing, 4 experts all local, top 2, float32 weights: H 4, I 2, G1 4; no offset input.
  const std::string json = def(
      "moe_renorm_topk2_e4_h4_i2", "moe",
      var("seq_len") + ", " + cst("num_local_experts", 4) + ", " + cst("hidden_size", 4) + ", " +
          cst("intermediate_size", 2) + ", " + cst("gemm1_out_size", 4),
      ten("routing_logits", {"seq_len", "num_local_experts"}, "bfloat16") + ", " +
          ten("hidden_states", {"seq_len", "hidden_size"}, "bfloat16") + ", " +
          ten("gemm1_weights", {"num_local_experts", "gemm1_out_size", "hidden_size"}, "float32") + ", " +
          ten("gemm2_weights", {"num_local_experts", "hidden_size", "intermediate_size"}, "float32"),
      ten("output", {"seq_len", "hidden_size"}, "bfloat16"), moe_reference(kRenormalizeRouting, "    TOP_K = 2\n"));
  for (std::int64_t tokens : {1, 3, 6}) {
    CAPTURE(tokens);
    TestCall c(json, {{"seq_len", tokens}});
    // token t picks experts (3, 1) for t even, (1, 2) for t odd
    std::vector<std::pair<int, int>> picks;
    for (std::int64_t t = 0; t < tokens; ++t) picks.push_back(t % 2 ? std::pair{1, 2} : std::pair{3, 1});
    c.set_floats("routing_logits", pick_rows(4, picks));
    kb::CallCost k = c.cost();
    CHECK(k.basis == kb::CostBasis::exact);
    const double chosen = tokens == 1 ? 2 : 3;  // {1, 3}, then {1, 2, 3}
    CHECK(k.flops == static_cast<double>(tokens) * 2 * 2 * (4 * 4 + 4 * 2));
    // logits T*4*2; hidden T*4*2 (every token routed); gemm1 4*4*4*4 = 256 * chosen/4; gemm2 4*4*2*4 = 128 *
    // chosen/4; output T*4*2
    CHECK(k.bytes == static_cast<double>(tokens) * 8 + static_cast<double>(tokens) * 8 + 64 * chosen + 32 * chosen +
                         static_cast<double>(tokens) * 8);
  }
}

// The shipped MoE definitions at their smallest workload, inputs made as a
// CUDA evaluation makes them (random floats deferred to the device) and the
// routing inputs filled on the host by fill_cost_inputs: every form kb
// computes is counted exactly, never above the bound the model gives without
// the routing values. Expert-parallel forms (48 or 32 of 256+ routed experts)
// count fewer (token, choice) pairs than tokens * top_k.
TEST_CASE("shipped moe definitions: exact from the routing values, at most the bound") {
  const char* dir = std::getenv("KB_SHARED_DIR");
  if (!dir) {
    MESSAGE("KB_SHARED_DIR not set: shipped definitions not checked");
    return;
  }
  const std::filesystem::path root = std::filesystem::path(dir) / "flashinfer-trace";
  int exact = 0, expert_parallel = 0;
  for (const auto& f : std::filesystem::directory_iterator(root / "definitions" / "moe")) {
    auto d = kb::read_definition_file(f.path().string());
    REQUIRE_MESSAGE(d.ok(), f.path().string());
    CAPTURE(d->name);
    std::ifstream in(root / "workloads" / "moe" / (d->name + ".jsonl"));
    std::optional<kb::Workload> w;
    std::int64_t fewest = 0;
    for (std::string line; std::getline(in, line);) {
      auto t = kb::read_trace(line, "workload");
      REQUIRE(t.ok());
      auto axes = kb::bind_axes(*d, t->workload);
      REQUIRE(axes.ok());
      const std::int64_t tokens = axes->get("seq_len").value_or(0);
      if (!w || tokens < fewest) {
        w = t->workload;
        fewest = tokens;
      }
    }
    if (!w) continue;
    // inputs kept on the host (integers, blobs) must stay small
    auto axes = kb::bind_axes(*d, *w);
    REQUIRE(axes.ok());
    double host = 0;
    for (const auto& s : d->inputs) {
      if (!s.shape || kb::dtype_is_float(s.dtype)) continue;
      double n = 1;
      for (const auto& a : *s.shape) n *= static_cast<double>(axes->get(a).value_or(0));
      host += n * kb::dtype_bits(s.dtype) / 8.0;
    }
    if (host > 64e6) continue;
    kb::MaterializeOptions mo{1, root.string()};
    mo.defer_random_floats = true;
    auto m = kb::materialize(*d, *w, mo);
    REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
    kb::rebind_args(*m);
    auto bound = kb::ideal_cost(*d, m->axes, m->args);
    REQUIRE_MESSAGE(bound.ok(), (bound.ok() ? "" : bound.error().message));
    REQUIRE(kb::fill_cost_inputs(*d, *m).ok());
    auto c = kb::ideal_cost(*d, m->axes, m->args);
    REQUIRE_MESSAGE(c.ok(), (c.ok() ? "" : c.error().message));
    CHECK(c->bytes <= bound->bytes);
    CHECK(c->flops <= bound->flops);
    if (c->basis == kb::CostBasis::exact && bound->basis == kb::CostBasis::upper_bound) {
      ++exact;
      if (c->flops < bound->flops) ++expert_parallel;
    }
    // the DeepSeek forms with local_expert_offset and the renormalize forms are ones kb computes
    if (d->name.starts_with("moe_fp8_block_scale_")) CHECK(c->basis == kb::CostBasis::exact);
  }
  MESSAGE("moe definitions counted exactly: " << exact << ", of them below the bound: " << expert_parallel);
  CHECK(exact >= 1);
  CHECK(expert_parallel >= 1);
}

TEST_CASE("gdn decode, prefill and multi-token decode") {
  const std::string heads = cst("num_q_heads", 1) + ", " + cst("num_k_heads", 1) + ", " + cst("num_v_heads", 2) +
                            ", " + cst("head_size", 4);
  const std::string gates = ten("A_log", {"num_v_heads"}, "float32") + ", ";
  const double per = 7 * 4 * 4 + 3 * 4 + 6;  // per (token, value head): 7*K*V + 3*V + 6 = 130
  TestCall dec(def("gdn_decode_qk1_v2_d4", "gdn", var("batch_size") + ", " + cst("seq_len", 1) + ", " + heads,
                   ten("q", {"batch_size", "seq_len", "num_q_heads", "head_size"}, "bfloat16") + ", " +
                       ten("k", {"batch_size", "seq_len", "num_k_heads", "head_size"}, "bfloat16") + ", " +
                       ten("v", {"batch_size", "seq_len", "num_v_heads", "head_size"}, "bfloat16") + ", " +
                       ten("state", {"batch_size", "num_v_heads", "head_size", "head_size"}, "float32") + ", " + gates +
                       ten("a", {"batch_size", "seq_len", "num_v_heads"}, "bfloat16") + ", " +
                       ten("dt_bias", {"num_v_heads"}, "float32") + ", " +
                       ten("b", {"batch_size", "seq_len", "num_v_heads"}, "bfloat16") + ", " + scalar("scale"),
                   ten("output", {"batch_size", "seq_len", "num_v_heads", "head_size"}, "bfloat16") + ", " +
                       ten("new_state", {"batch_size", "num_v_heads", "head_size", "head_size"}, "float32")),
               {{"batch_size", 2}});
  CHECK(dec.cost().flops == 2 * 2 * per);  // 2 tokens * 2 value heads * 130 = 520
  // q 2*4*2 = 16, k 16, v 2*2*4*2 = 32, state 2*2*4*4*4 = 256, A_log 8, a 2*2*2 = 8, dt_bias 8, b 8, output 32,
  // new_state 256
  CHECK(dec.cost().bytes == 16 + 16 + 32 + 256 + 8 + 8 + 8 + 8 + 32 + 256);

  TestCall pre(def("gdn_prefill_qk1_v2_d4", "gdn",
                   var("total_seq_len") + ", " + var("num_seqs") + ", " + heads + ", " + var("len_cu_seqlens"),
                   ten("q", {"total_seq_len", "num_q_heads", "head_size"}, "bfloat16") + ", " +
                       ten("k", {"total_seq_len", "num_k_heads", "head_size"}, "bfloat16") + ", " +
                       ten("v", {"total_seq_len", "num_v_heads", "head_size"}, "bfloat16") + ", " +
                       ten("state", {"num_seqs", "num_v_heads", "head_size", "head_size"}, "float32") + ", " + gates +
                       ten("a", {"total_seq_len", "num_v_heads"}, "bfloat16") + ", " +
                       ten("dt_bias", {"num_v_heads"}, "float32") + ", " +
                       ten("b", {"total_seq_len", "num_v_heads"}, "bfloat16") + ", " +
                       ten("cu_seqlens", {"len_cu_seqlens"}, "int64") + ", " + scalar("scale"),
                   ten("output", {"total_seq_len", "num_v_heads", "head_size"}, "bfloat16") + ", " +
                       ten("new_state", {"num_seqs", "num_v_heads", "head_size", "head_size"}, "float32")),
               {{"total_seq_len", 5}, {"num_seqs", 3}, {"len_cu_seqlens", 4}});
  pre.set("cu_seqlens", {0, 3, 3, 5});  // lengths 3, 0, 2
  CHECK(pre.cost().flops == 5 * 2 * per);  // 1300
  // q 5*4*2 = 40, k 40, v 5*2*4*2 = 80, state: 2 non-empty of 3 rows * 2*4*4*4 = 256, A_log 8, a 5*2*2 = 20,
  // dt_bias 8, b 20, cu_seqlens 4*8 = 32, output 80, new_state 3*128 = 384
  CHECK(pre.cost().bytes == 40 + 40 + 80 + 256 + 8 + 20 + 8 + 20 + 32 + 80 + 384);
  pre.absent("state");  // optional: absent, nothing read
  CHECK(pre.cost().bytes == 40 + 40 + 80 + 0 + 8 + 20 + 8 + 20 + 32 + 80 + 384);

  TestCall mtp(def("gdn_mtp_qk1_v2_d4", "gdn",
                   var("batch_size") + ", " + var("seq_len") + ", " + heads + ", " + var("pool_size"),
                   ten("q", {"batch_size", "seq_len", "num_q_heads", "head_size"}, "bfloat16") + ", " +
                       ten("k", {"batch_size", "seq_len", "num_k_heads", "head_size"}, "bfloat16") + ", " +
                       ten("v", {"batch_size", "seq_len", "num_v_heads", "head_size"}, "bfloat16") + ", " +
                       ten("initial_state", {"pool_size", "num_v_heads", "head_size", "head_size"}, "float32") + ", " +
                       ten("initial_state_indices", {"batch_size"}, "int32") + ", " + gates +
                       ten("a", {"batch_size", "seq_len", "num_v_heads"}, "bfloat16") + ", " +
                       ten("dt_bias", {"num_v_heads"}, "float32") + ", " +
                       ten("b", {"batch_size", "seq_len", "num_v_heads"}, "bfloat16") + ", " + scalar("scale") + ", " +
                       ten("intermediate_states_buffer",
                           {"pool_size", "seq_len", "num_v_heads", "head_size", "head_size"}, "float32"),
                   ten("output", {"batch_size", "seq_len", "num_v_heads", "head_size"}, "bfloat16") + ", " +
                       ten("final_state", {"pool_size", "num_v_heads", "head_size", "head_size"}, "float32")),
               {{"batch_size", 2}, {"seq_len", 2}, {"pool_size", 3}});
  mtp.set("initial_state_indices", {0, 2});
  CHECK(mtp.cost().flops == 2 * 2 * 2 * per);  // 4 tokens * 2 heads * 130 = 1040
  // q 2*2*4*2 = 32, k 32, v 2*2*2*4*2 = 64, initial_state whole (final_state copies it) 3*2*4*4*4 = 384,
  // indices 8, A_log 8, a 2*2*2*2 = 16, dt_bias 8, b 16, buffer untouched (an input: kb requires it unchanged) 0,
  // output 64, final_state 384
  CHECK(mtp.cost().bytes == 32 + 32 + 64 + 384 + 8 + 8 + 16 + 8 + 16 + 0 + 64 + 384);
}

TEST_CASE("mamba_ssu: sequences with a slot; the pool read whole because new_state copies it") {
  TestCall c(def("mamba_ssu_decode_h2_d2_s3_ng1", "mamba_ssu",
                 var("batch_size") + ", " + var("state_cache_size") + ", " + cst("nheads", 2) + ", " +
                     cst("head_dim", 2) + ", " + cst("dstate", 3) + ", " + cst("ngroups", 1),
                 ten("state", {"state_cache_size", "nheads", "head_dim", "dstate"}, "bfloat16") + ", " +
                     ten("x", {"batch_size", "nheads", "head_dim"}, "bfloat16") + ", " +
                     ten("dt", {"batch_size", "nheads", "head_dim"}, "bfloat16") + ", " +
                     ten("A", {"nheads", "head_dim", "dstate"}, "float32") + ", " +
                     ten("B", {"batch_size", "ngroups", "dstate"}, "bfloat16") + ", " +
                     ten("C", {"batch_size", "ngroups", "dstate"}, "bfloat16") + ", " +
                     ten("D", {"nheads", "head_dim"}, "bfloat16") + ", " +
                     ten("dt_bias", {"nheads", "head_dim"}, "bfloat16") + ", " +
                     ten("state_batch_indices", {"batch_size"}, "int32"),
                 ten("output", {"batch_size", "nheads", "head_dim"}, "bfloat16") + ", " +
                     ten("new_state", {"state_cache_size", "nheads", "head_dim", "dstate"}, "bfloat16")),
             {{"batch_size", 3}, {"state_cache_size", 4}});
  c.set("state_batch_indices", {1, -1, 3});  // 2 sequences with a slot
  kb::CallCost k = c.cost();
  CHECK(k.flops == 2 * 2 * 2 * (7 * 3 + 5));  // 2 valid * heads 2 * head_dim 2 * (7*dstate + 5) = 208
  // state 4*2*2*3*2 = 96; x 3*2*2*2 = 24 * 2/3 = 16; dt 16; A 2*2*3*4 = 48; B 3*1*3*2 = 18 * 2/3 = 12; C 12;
  // D 2*2*2 = 8; dt_bias 8; state_batch_indices 3*4 = 12; output 3*2*2*2 = 24; new_state 96
  CHECK(k.bytes == 96 + 16 + 16 + 48 + 12 + 12 + 8 + 8 + 12 + 24 + 96);
}

TEST_CASE("an op type the model does not know: every tensor whole, no FLOPs, and it says so") {
  TestCall c(def("softmax_v4", "softmax", var("rows") + ", " + cst("cols", 4), ten("x", {"rows", "cols"}, "float32"),
                 ten("y", {"rows", "cols"}, "float32")),
             {{"rows", 2}});
  CHECK(c.cost().basis == kb::CostBasis::tensor_sizes);
  CHECK(c.cost().flops == 0);
  CHECK(c.cost().bytes == 2 * 4 * 4 * 2);
  kb::Measurement m;
  m.median_ms = 1;
  kb::record_cost(m, c.cost());
  CHECK(kb::write_extra(m).find(R"("cost_basis":"tensor_sizes")") != std::string::npos);
}

TEST_CASE("mean_cost: rotated trials average, the weakest basis wins") {
  std::vector<kb::CallCost> v{{100, 10, kb::CostBasis::exact}, {300, 30, kb::CostBasis::upper_bound}};
  kb::CallCost m = kb::mean_cost(v);
  CHECK(m.bytes == 200);
  CHECK(m.flops == 20);
  CHECK(m.basis == kb::CostBasis::upper_bound);
  CHECK(kb::mean_cost({}).bytes == 0);
}

// Every shipped definition with workloads, on its smallest workload's inputs
// as kb builds them (the workload's index tensors, or valid ones from the
// seed), where those fit in 32 MB: the model
// knows its op type and layout, counts FLOPs, and never counts more bytes than
// every tensor whole.
TEST_CASE("shipped definitions: every op type modelled on kb's own inputs") {
  const char* dir = std::getenv("KB_SHARED_DIR");
  if (!dir) {
    MESSAGE("KB_SHARED_DIR not set: shipped definitions not checked");
    return;
  }
  const std::filesystem::path root = std::filesystem::path(dir) / "flashinfer-trace";
  REQUIRE(std::filesystem::is_directory(root / "definitions"));
  std::set<std::string> modelled, all;
  for (const auto& op : std::filesystem::directory_iterator(root / "definitions")) {
    for (const auto& f : std::filesystem::directory_iterator(op.path())) {
      auto d = kb::read_definition_file(f.path().string());
      REQUIRE_MESSAGE(d.ok(), f.path().string());
      all.insert(d->op_type);
      // its smallest workload
      std::ifstream in(root / "workloads" / op.path().filename() / (d->name + ".jsonl"));
      std::optional<kb::Workload> w;
      double whole = 0;
      for (std::string line; std::getline(in, line);) {
        auto t = kb::read_trace(line, "workload");
        REQUIRE(t.ok());
        auto axes = kb::bind_axes(*d, t->workload);
        REQUIRE(axes.ok());
        double bytes = 0;
        for (const auto* list : {&d->inputs, &d->outputs})
          for (const auto& s : *list) {
            if (!s.shape) continue;
            double n = 1;
            for (const auto& a : *s.shape) n *= static_cast<double>(axes->get(a).value_or(0));
            bytes += n * kb::dtype_bits(s.dtype) / 8.0;
          }
        if (!w || bytes < whole) {
          w = t->workload;
          whole = bytes;
        }
      }
      if (!w) continue;
      if (whole > 32e6) continue;
      CAPTURE(d->name);
      auto m = kb::materialize(*d, *w, kb::MaterializeOptions{1, root.string()});
      REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
      kb::rebind_args(*m);
      auto c = kb::ideal_cost(*d, m->axes, m->args);
      REQUIRE_MESSAGE(c.ok(), (c.ok() ? "" : c.error().message));
      CHECK(c->basis != kb::CostBasis::tensor_sizes);
      CHECK(c->flops > 0);
      CHECK(c->bytes > 0);
      CHECK(c->bytes <= whole);
      modelled.insert(d->op_type);
    }
  }
  std::string list;
  for (const auto& o : modelled) list += o + " ";
  MESSAGE("modelled on shipped inputs: " << list);
  // the shipped MLA and MoE workloads carry caches and weights of a GB or more
  for (const char* op : {"gemm", "rmsnorm", "gqa_paged", "gqa_ragged"})
    CHECK_MESSAGE(modelled.count(op) == 1, std::string(op));
}
