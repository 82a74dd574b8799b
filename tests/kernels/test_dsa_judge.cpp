// The DSA indexer's judge (lib/harness/dsa_judge.hpp): selections judged by
// their set and sorted scores. It must pass the oracle's own output in any
// order and with tied tokens swapped at the boundary, and fail a lower-scored
// pick, a missing pick, a duplicate, a token outside the sequence, and wrong
// shapes or dtypes.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "harness/dsa_judge.hpp"
#include "linear_test_util.hpp"

using kb::Comparison;
using kb::DType;
using kb::Tensor;
using namespace linear_test;

namespace {

constexpr std::int64_t kHeads = 4, kDim = 16, kPs = 4, kTopk = 6, kB = 3, kMaxPages = 4, kPages = 7;

struct Fixture {
  kb::Definition d;
  std::unique_ptr<Call> call;
  std::vector<kb::Arg> args;
  Tensor expected;
  std::vector<std::int64_t> lens{11, 4, 0};
  std::vector<std::int64_t> table;
  std::int64_t twin_a = -1, twin_b = -1;  // tokens of sequence 0 with equal keys, tied at the top-k boundary

  Fixture() : d(shipped("dsa_paged", "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64")) {
    set_const(d, "num_index_heads", kHeads);
    set_const(d, "index_head_dim", kDim);
    set_const(d, "page_size", kPs);
    set_const(d, "topk", kTopk);
    set_const(d, "head_dim_with_scale", kDim + 4);
    std::mt19937 rng(7);
    for (std::int64_t b = 0; b < kB; ++b) {
      std::vector<std::int64_t> perm(kPages);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      table.insert(table.end(), perm.begin(), perm.begin() + kMaxPages);
    }
    // Random keys; then the best unselected token of sequence 0 gets a copy
    // of the last selected one's key, so the two tie exactly at the boundary.
    auto keys = uniform(rng, kPages * kPs * kDim, -2, 2);
    call = std::make_unique<Call>(d, bind(d, {{"batch_size", kB}, {"max_num_pages", kMaxPages}, {"num_pages", kPages}}));
    std::vector<float> deq;
    call->tensors.emplace("q_index_fp8", make(DType::float8_e4m3fn, {kB, kHeads, kDim}, uniform(rng, kB * kHeads * kDim, -3, 3)));
    call->tensors.emplace("k_index_cache_fp8", pack_keys(keys, kPages, kPs, kDim, &deq));
    call->tensors.emplace("weights", make(DType::float32, {kB, kHeads}, uniform(rng, kB * kHeads, 0.1f, 1)));
    call->tensors.emplace("seq_lens", make_ints(DType::int32, {kB}, lens));
    call->tensors.emplace("block_table", make_ints(DType::int32, {kB, kMaxPages}, table));
    REQUIRE(call->run().ok());
    const std::int32_t* first = call->out("topk_indices").data<std::int32_t>();
    twin_a = first[kTopk - 1];
    for (std::int64_t j = 0; j < lens[0] && twin_b < 0; ++j)
      if (std::find(first, first + kTopk, global(0, j)) == first + kTopk) twin_b = global(0, j);
    REQUIRE(twin_b >= 0);
    std::copy_n(&keys[twin_a * kDim], kDim, &keys[twin_b * kDim]);
    call->tensors.erase("k_index_cache_fp8");
    call->tensors.emplace("k_index_cache_fp8", pack_keys(keys, kPages, kPs, kDim, &deq));
    REQUIRE(call->run().ok());
    expected = call->out("topk_indices").clone();
    args.resize(d.inputs.size());
    for (std::size_t i = 0; i < d.inputs.size(); ++i) args[i].tensor = &call->tensors.at(d.inputs[i].name);
  }
  std::int32_t* row(Tensor& t, std::int64_t b) { return t.data<std::int32_t>() + b * kTopk; }
  Comparison judge(const Tensor& got) const {
    return kb::judge_output(d, args, 0, got, expected, kb::Tolerance{});
  }
  std::int64_t global(std::int64_t b, std::int64_t j) const { return table[b * kMaxPages + j / kPs] * kPs + j % kPs; }
};

TEST_CASE("dsa indexer judge: the reference's set in any order passes") {
  Fixture f;
  CHECK(kb::judged_by_topk_scores(f.d));
  CHECK(f.judge(f.expected).verdict == Comparison::Verdict::match);
  Tensor got = f.expected.clone();
  std::reverse(f.row(got, 0), f.row(got, 0) + kTopk);
  std::reverse(f.row(got, 1), f.row(got, 1) + kTopk);  // padding first
  CHECK(f.judge(got).verdict == Comparison::Verdict::match);
  // An element-wise comparison would have failed it.
  CHECK(kb::compare(got, f.expected, kb::Tolerance{}).verdict == Comparison::Verdict::wrong_values);
}

TEST_CASE("dsa indexer judge: a tied token may replace its twin") {
  Fixture f;
  Tensor got = f.expected.clone();
  std::int32_t* r = f.row(got, 0);
  auto* pa = std::find(r, r + kTopk, f.twin_a);
  auto* pb = std::find(r, r + kTopk, f.twin_b);
  REQUIRE(((pa == r + kTopk) != (pb == r + kTopk)));  // exactly one twin selected
  if (pa != r + kTopk) *pa = static_cast<std::int32_t>(f.twin_b);
  else *pb = static_cast<std::int32_t>(f.twin_a);
  CHECK(f.judge(got).verdict == Comparison::Verdict::match);
}

TEST_CASE("dsa indexer judge: wrong selections fail") {
  Fixture f;
  // The lowest-scored token of sequence 0 in place of the top pick.
  std::vector<std::int32_t> sel(f.row(f.expected, 0), f.row(f.expected, 0) + kTopk);
  std::int64_t outside = -1;
  for (std::int64_t j = 0; j < f.lens[0] && outside < 0; ++j)
    if (std::find(sel.begin(), sel.end(), f.global(0, j)) == sel.end()) outside = f.global(0, j);
  REQUIRE(outside >= 0);
  {
    Tensor got = f.expected.clone();
    f.row(got, 0)[0] = static_cast<std::int32_t>(outside);
    Comparison c = f.judge(got);
    CHECK(c.verdict == Comparison::Verdict::wrong_values);
    CHECK(c.mismatched >= 1);
  }
  {  // a pick dropped (padding where the reference selected)
    Tensor got = f.expected.clone();
    f.row(got, 0)[kTopk - 1] = -1;
    Comparison c = f.judge(got);
    CHECK(c.verdict == Comparison::Verdict::wrong_values);
    CHECK(c.nonfinite_mismatched == 1);
  }
  {  // a duplicate
    Tensor got = f.expected.clone();
    f.row(got, 0)[1] = f.row(got, 0)[0];
    CHECK(f.judge(got).detail.find("twice") != std::string::npos);
    CHECK(f.judge(got).verdict == Comparison::Verdict::wrong_values);
  }
  {  // a token past the sequence's length (sequence 1 has 4 tokens; its page's slot 3 + 1 is outside)
    Tensor got = f.expected.clone();
    f.row(got, 1)[kTopk - 1] = static_cast<std::int32_t>(f.global(1, 4));
    Comparison c = f.judge(got);
    CHECK(c.verdict == Comparison::Verdict::wrong_values);
    CHECK(c.detail.find("not a token") != std::string::npos);
  }
  {  // a token of another sequence's page
    std::int64_t foreign = -1;
    for (std::int64_t p = 0; p < kPages && foreign < 0; ++p)
      if (std::find(f.table.begin() + 2 * kMaxPages, f.table.begin() + 3 * kMaxPages, p) == f.table.begin() + 3 * kMaxPages)
        foreign = p;
    REQUIRE(foreign >= 0);
    Tensor got = f.expected.clone();
    f.row(got, 2)[0] = static_cast<std::int32_t>(foreign * kPs);  // sequence 2 is empty anyway
    CHECK(f.judge(got).verdict == Comparison::Verdict::wrong_values);
  }
  {  // shape and dtype
    auto shorter = Tensor::allocate(DType::int32, {kB, kTopk - 1});
    REQUIRE(shorter.ok());
    CHECK(f.judge(*shorter).verdict == Comparison::Verdict::wrong_shape);
    auto wide = Tensor::allocate(DType::int64, {kB, kTopk});
    REQUIRE(wide.ok());
    CHECK(f.judge(*wide).verdict == Comparison::Verdict::wrong_dtype);
  }
}

TEST_CASE("dsa indexer judge: scores within tolerance pass, a required ratio admits a few misses") {
  Fixture f;
  std::vector<std::int32_t> sel(f.row(f.expected, 0), f.row(f.expected, 0) + kTopk);
  std::int64_t outside = -1;
  for (std::int64_t j = 0; j < f.lens[0] && outside < 0; ++j)
    if (std::find(sel.begin(), sel.end(), f.global(0, j)) == sel.end()) outside = f.global(0, j);
  Tensor got = f.expected.clone();
  f.row(got, 0)[0] = static_cast<std::int32_t>(outside);
  kb::Tolerance loose;
  loose.required_matched_ratio = 0.5;
  CHECK(kb::judge_output(f.d, f.args, 0, got, f.expected, loose).verdict == Comparison::Verdict::match);
  kb::Tolerance huge;
  huge.atol = 1e9;
  CHECK(kb::judge_output(f.d, f.args, 0, got, f.expected, huge).verdict == Comparison::Verdict::match);
}

TEST_CASE("other outputs and definitions keep the element-wise judge") {
  auto d = shipped("dsa_paged", "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps1");
  CHECK_FALSE(kb::judged_by_topk_scores(d));
  auto x = make(DType::float32, {2}, {1.0f, 2.0f});
  auto y = make(DType::float32, {2}, {2.0f, 1.0f});
  CHECK(kb::judge_output(d, {}, 0, x, y, kb::Tolerance{}).verdict == Comparison::Verdict::wrong_values);
  CHECK(kb::judge_output(d, {}, 0, x, x, kb::Tolerance{}).verdict == Comparison::Verdict::match);
}

}  // namespace
