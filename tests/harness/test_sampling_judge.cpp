// Sampling is judged by distribution: a correct sampler passes; one that
// samples outside the top-k / top-p support, one that always returns the
// argmax, one that ignores the probabilities inside the support and one that
// ignores its seed each fail with INCORRECT_NUMERICAL; shape and dtype as
// usual. Plus the judge's own rules (thresholds, ties, the top-p slack).
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "harness/harness.hpp"
#include "harness/sampling_judge.hpp"
#include "inputs/inputs.hpp"
#include "json/json.hpp"
#include "schema/io.hpp"
#include "tensor/convert.hpp"

namespace {

// The references of FlashInfer-Bench's sampling definitions (the rules kb's
// sampling oracle checks for), for a vocabulary of `V`.
std::string reference(bool k, bool p, int V) {
  std::string args = std::string("probs") + (k ? ", top_k" : "") + (p ? ", top_p" : "");
  std::string s = fmt::format(
      "import torch\n\n@torch.no_grad()\ndef run({}):\n    batch_size, vocab_size = probs.shape\n"
      "    assert vocab_size == {}\n    probs = probs.to(torch.float32)\n"
      "    samples = torch.empty(batch_size, dtype=torch.int64, device=probs.device)\n"
      "    for i in range(batch_size):\n        row = probs[i]\n",
      args, V);
  if (k)
    s += "        k = int(top_k[i].item())\n        if 0 < k < vocab_size:\n"
         "            idx_sorted = torch.argsort(row, descending=True)\n            keep_idx_k = idx_sorted[:k]\n"
         "            filtered_k = torch.zeros_like(row)\n            filtered_k[keep_idx_k] = row[keep_idx_k]\n"
         "            row = filtered_k / filtered_k.sum()\n";
  if (p)
    s += "        p = float(top_p[i].item())\n        if p <= 0.0:\n"
         "            samples[i] = torch.argmax(row).to(torch.int64)\n            continue\n"
         "        if p < 1.0:\n            vals, idx = torch.sort(row, descending=True)\n"
         "            cdf = torch.cumsum(vals, dim=0)\n            to_remove = cdf > p\n"
         "            if vocab_size > 1:\n                to_remove[1:] = to_remove[:-1].clone()\n"
         "                to_remove[0] = False\n            keep_idx_p = idx[~to_remove]\n"
         "            filtered_p = torch.zeros_like(row)\n            filtered_p[keep_idx_p] = row[keep_idx_p]\n"
         "            row = filtered_p / filtered_p.sum()\n";
  s += "        samples[i] = torch.multinomial(row, 1, replacement=True).squeeze(0)\n    return samples\n";
  return s;
}

kb::Definition sampling_definition(bool k, bool p, int V = 512) {
  std::string inputs = R"("probs": {"shape": ["batch_size", "vocab_size"], "dtype": "float32"})";
  if (k) inputs += R"(, "top_k": {"shape": ["batch_size"], "dtype": "int32"})";
  if (p) inputs += R"(, "top_p": {"shape": ["batch_size"], "dtype": "float32"})";
  std::string name = std::string(k ? "top_k_" : "") + (p ? "top_p_" : "") + "sampling_from_probs_test";
  std::string text = fmt::format(
      R"({{"name": "{}", "op_type": "sampling",
      "axes": {{"batch_size": {{"type": "var"}}, "vocab_size": {{"type": "const", "value": {}}}}},
      "inputs": {{{}}}, "outputs": {{"samples": {{"shape": ["batch_size"], "dtype": "int64"}}}},
      "reference": {}}})",
      name, V, inputs, kb::json::quote(reference(k, p, V)));
  auto d = kb::read_definition(text, "test");
  REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().message));
  return *d;
}

kb::Workload batch_workload(const kb::Definition& d, std::int64_t batch) {
  kb::Workload w;
  w.uuid = fmt::format("b{}", batch);
  w.axes = {{"batch_size", batch}};
  for (const auto& t : d.inputs) w.inputs.emplace_back(t.name, kb::InputSpec{});
  return w;
}

kb::Implementation make(std::string name, std::function<kb::Status(const kb::ImplementationCall&)> run) {
  kb::Implementation impl;
  impl.name = std::move(name);
  impl.author = "test";
  impl.supports = [](const kb::Definition&) { return std::string(); };
  impl.run = std::move(run);
  return impl;
}

kb::EvaluationResult judge(const kb::Definition& d, const kb::Implementation& impl, std::uint64_t seed = 11,
                           std::int64_t batch = 8, int draws = 600) {
  kb::BenchOptions opt;
  opt.trials = 2;
  opt.time = false;
  opt.seed = seed;
  opt.sampling.draws = draws;
  auto r = kb::evaluate(d, batch_workload(d, batch), impl, opt);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return *r;
}

struct Row {
  std::vector<float> probs;
  std::int64_t k = 0;  // 0: none
  std::optional<double> p;
};

Row row_of(const kb::ImplementationCall& c, std::int64_t r) {
  const kb::Definition& d = c.definition;
  const kb::Tensor& probs = *c.inputs[*kb::input_index(d, "probs")].tensor;
  std::int64_t V = probs.dim(1);
  Row row;
  auto all = kb::to_float(probs);
  row.probs.assign(all.begin() + r * V, all.begin() + (r + 1) * V);
  if (auto i = kb::input_index(d, "top_k")) row.k = static_cast<std::int64_t>(kb::element_as_double(*c.inputs[*i].tensor, r));
  if (auto i = kb::input_index(d, "top_p")) row.p = kb::element_as_double(*c.inputs[*i].tensor, r);
  return row;
}

// A sampler written for the tests: full sort, then the rules, inverse CDF.
// `ignore_k` skips top-k; `uniform` draws uniformly among the kept tokens.
std::vector<double> filtered(const Row& row, bool ignore_k) {
  std::size_t V = row.probs.size();
  std::vector<double> w(row.probs.begin(), row.probs.end());
  std::vector<std::size_t> order(V);
  auto sort_desc = [&] {
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return w[a] > w[b]; });
  };
  if (!ignore_k && row.k > 0 && row.k < static_cast<std::int64_t>(V)) {
    sort_desc();
    double s = 0;
    for (std::int64_t i = 0; i < row.k; ++i) s += w[order[i]];
    std::vector<double> nw(V, 0.0);
    for (std::int64_t i = 0; i < row.k; ++i) nw[order[i]] = w[order[i]] / s;
    w = nw;
  }
  if (row.p && *row.p <= 0) {
    std::size_t best = std::max_element(w.begin(), w.end()) - w.begin();
    std::vector<double> nw(V, 0.0);
    nw[best] = 1;
    return nw;
  }
  if (row.p && *row.p < 1) {
    sort_desc();
    double cdf = 0;
    std::vector<double> nw(V, 0.0);
    for (std::size_t i = 0; i < V && (i == 0 || cdf <= *row.p); ++i) {
      nw[order[i]] = w[order[i]];
      cdf += w[order[i]];
    }
    w = nw;
  }
  return w;
}

kb::Status sampler(const kb::ImplementationCall& c, bool ignore_k, bool uniform, bool argmax, bool ignore_seed) {
  std::mt19937_64 rng(ignore_seed ? 1234 : c.seed);
  kb::Tensor& out = c.outputs[0];
  for (std::int64_t r = 0; r < out.dim(0); ++r) {
    auto w = filtered(row_of(c, r), ignore_k);
    std::int64_t pick = 0;
    if (argmax) {
      pick = std::max_element(w.begin(), w.end()) - w.begin();
    } else {
      if (uniform)
        for (auto& x : w) x = x > 0 ? 1.0 : 0.0;
      std::discrete_distribution<std::int64_t> dist(w.begin(), w.end());
      pick = dist(rng);
    }
    out.data<std::int64_t>()[r] = pick;
  }
  return kb::ok_status();
}

}  // namespace

TEST_CASE("a correct sampler passes on top_k, top_p and top_k_top_p") {
  for (auto kp : {std::pair{true, false}, {false, true}, {true, true}}) {
    const bool k = kp.first, p = kp.second;  // plain variables: clang's lambdas (CAPTURE) cannot capture bindings
    CAPTURE(k);
    CAPTURE(p);
    auto d = sampling_definition(k, p);
    auto r = judge(d, make("right", [](const kb::ImplementationCall& c) { return sampler(c, false, false, false, false); }));
    CHECK_MESSAGE(r.evaluation.status == kb::EvalStatus::passed, r.summary);
    REQUIRE(r.evaluation.correctness);
    REQUIRE(r.evaluation.correctness->extra);
    CHECK(r.evaluation.correctness->extra->find("\"tvd\":") != std::string::npos);
    CHECK(r.evaluation.log.find("judged by distribution") != std::string::npos);
  }
}

TEST_CASE("kb's own CPU sampler and the oracle pass, over several seeds") {
  const kb::Implementation* cpu = kb::builtin_registry().find("kb_cpu_sampling");
  REQUIRE(cpu);
  kb::Implementation oracle = kb::reference_implementation();
  for (auto kp : {std::pair{true, false}, {false, true}, {true, true}}) {
    auto d = sampling_definition(kp.first, kp.second, 1000);
    CHECK(cpu->supports(d).empty());
    for (std::uint64_t seed : {1u, 2u}) {
      CAPTURE(d.name);
      CAPTURE(seed);
      auto r = judge(d, *cpu, seed);
      CHECK_MESSAGE(r.evaluation.status == kb::EvalStatus::passed, r.summary);
      auto o = judge(d, oracle, seed);
      CHECK_MESSAGE(o.evaluation.status == kb::EvalStatus::passed, o.summary);
    }
  }
}

TEST_CASE("kb's CPU sampler is reproducible from the call's seed") {
  const kb::Implementation* cpu = kb::builtin_registry().find("kb_cpu_sampling");
  REQUIRE(cpu);
  auto d = sampling_definition(true, true);
  auto w = batch_workload(d, 16);
  auto m = kb::materialize(d, w, {5, std::nullopt});
  REQUIRE(m.ok());
  kb::rebind_args(*m);
  auto draw = [&](std::uint64_t seed) {
    auto out = kb::allocate_outputs(d, m->axes);
    REQUIRE(out.ok());
    REQUIRE(cpu->run(kb::ImplementationCall{d, m->axes, m->args, *out, seed}).ok());
    const auto* s = (*out)[0].data<std::int64_t>();
    return std::vector<std::int64_t>(s, s + 16);
  };
  CHECK(draw(9) == draw(9));
  bool differs = false;
  for (std::uint64_t s = 10; s < 20 && !differs; ++s) differs = draw(s) != draw(9);
  CHECK(differs);
}

TEST_CASE("wrong samplers fail with INCORRECT_NUMERICAL") {
  using S = kb::EvalStatus;
  SUBCASE("ignoring top-k samples outside the support") {
    auto d = sampling_definition(true, false);
    auto r = judge(d, make("no_top_k", [](const kb::ImplementationCall& c) { return sampler(c, true, false, false, false); }));
    CHECK(r.evaluation.status == S::incorrect_numerical);
    CHECK_MESSAGE(r.summary.find("outside the support") != std::string::npos, r.summary);
    REQUIRE(r.evaluation.correctness);
    CHECK(r.evaluation.correctness->extra->find("out_of_support") != std::string::npos);
  }
  SUBCASE("always the argmax: inside the support, wrong distribution") {
    auto d = sampling_definition(true, true);
    auto r = judge(d, make("argmax", [](const kb::ImplementationCall& c) { return sampler(c, false, false, true, false); }));
    CHECK(r.evaluation.status == S::incorrect_numerical);
    CHECK_MESSAGE(r.summary.find("total variation distance") != std::string::npos, r.summary);
    REQUIRE(r.evaluation.correctness);
    CHECK(r.evaluation.correctness->max_absolute_error > 0.2);
  }
  SUBCASE("uniform over the support ignores the probabilities") {
    auto d = sampling_definition(true, false);
    auto r = judge(d, make("uniform", [](const kb::ImplementationCall& c) { return sampler(c, false, true, false, false); }));
    CHECK(r.evaluation.status == S::incorrect_numerical);
    CHECK_MESSAGE(r.summary.find("total variation distance") != std::string::npos, r.summary);
  }
  SUBCASE("ignoring the seed: every call returns the same samples") {
    auto d = sampling_definition(false, true);
    auto r = judge(d, make("fixed", [](const kb::ImplementationCall& c) { return sampler(c, false, false, false, true); }));
    CHECK(r.evaluation.status == S::incorrect_numerical);
    CHECK_MESSAGE(r.summary.find("total variation distance") != std::string::npos, r.summary);
  }
  SUBCASE("a sample outside the vocabulary") {
    auto d = sampling_definition(true, false);
    auto r = judge(d, make("oob", [](const kb::ImplementationCall& c) -> kb::Status {
      KB_TRY(sampler(c, false, false, false, false));
      c.outputs[0].data<std::int64_t>()[1] = 512;
      return kb::ok_status();
    }));
    CHECK(r.evaluation.status == S::incorrect_numerical);
    CHECK_MESSAGE(r.summary.find("row 1: sample 512 is outside the vocabulary [0, 512)") != std::string::npos, r.summary);
  }
  SUBCASE("poisoned output left untouched") {
    auto d = sampling_definition(true, false);
    auto r = judge(d, make("lazy", [](const kb::ImplementationCall&) { return kb::ok_status(); }));
    CHECK(r.evaluation.status == S::incorrect_numerical);
  }
  SUBCASE("wrong dtype and wrong shape") {
    auto d = sampling_definition(true, false);
    auto r = judge(d, make("int32", [](const kb::ImplementationCall& c) -> kb::Status {
      c.outputs[0] = kb::Tensor::allocate(kb::DType::int32, c.outputs[0].shape()).value();
      return kb::ok_status();
    }));
    CHECK(r.evaluation.status == S::incorrect_dtype);
    CHECK(!r.evaluation.correctness);
    r = judge(d, make("short", [](const kb::ImplementationCall& c) -> kb::Status {
      c.outputs[0] = kb::Tensor::allocate(kb::DType::int64, {c.outputs[0].dim(0) - 1}).value();
      return kb::ok_status();
    }));
    CHECK(r.evaluation.status == S::incorrect_shape);
    CHECK_MESSAGE(r.summary.find("shape [7], expected [8]") != std::string::npos, r.summary);
  }
}

TEST_CASE("the judge's threshold follows from the number of draws") {
  kb::SamplingOptions opt;
  int n = kb::minimum_sampling_draws(opt);
  CHECK(n > 100);
  CHECK(n < 400);
  auto d = sampling_definition(true, false, 64);
  auto w = batch_workload(d, 1);
  auto m = kb::materialize(d, w, {3, std::nullopt});
  REQUIRE(m.ok());
  kb::rebind_args(*m);
  opt.draws = n - 1;
  auto too_few = kb::SamplingJudge::create(d, m->axes, m->args, opt);
  REQUIRE(!too_few.ok());
  CHECK(too_few.error().message.find("draws") != std::string::npos);
  opt.draws = 1000;
  auto j = kb::SamplingJudge::create(d, m->axes, m->args, opt);
  REQUIRE(j.ok());
  CHECK(kb::SamplingJudge::draw_seed(7, 0) != kb::SamplingJudge::draw_seed(7, 1));
  CHECK(kb::SamplingJudge::draw_seed(7, 0) != kb::SamplingJudge::draw_seed(8, 0));
}

TEST_CASE("exact frequencies pass; ties with a kept token are allowed; the top-p slack is bounded") {
  // probs over 8 tokens, top_p 0.5: sorted 0.3 (t2), 0.25 (t5), 0.2 (t0), ...
  // keeps t2 and t5 (cdf before t5 is 0.3 <= 0.5; before t0 it is 0.55).
  auto d = sampling_definition(false, true, 8);
  kb::AxisValues axes;
  axes.values = {{"batch_size", 1}, {"vocab_size", 8}};
  auto probs = kb::Tensor::allocate(kb::DType::float32, {1, 8}).value();
  float pv[8] = {0.2f, 0.05f, 0.3f, 0.05f, 0.1f, 0.25f, 0.05f, 0.0f};
  REQUIRE(kb::store_float(pv, probs).ok());
  auto top_p = kb::Tensor::allocate(kb::DType::float32, {1}).value();
  float p = 0.5f;
  REQUIRE(kb::store_float(std::span<const float>(&p, 1), top_p).ok());
  std::vector<kb::Arg> args(2);
  args[0].tensor = &probs;
  args[1].tensor = &top_p;
  kb::SamplingOptions opt;
  opt.draws = 1100;
  auto j = kb::SamplingJudge::create(d, axes, args, opt);
  REQUIRE_MESSAGE(j.ok(), (j.ok() ? "" : j.error().message));
  auto samples = kb::Tensor::allocate(kb::DType::int64, {1}).value();
  auto add = [&](std::int64_t token) {
    samples.data<std::int64_t>()[0] = token;
    return j->add(std::span<const kb::Tensor>(&samples, 1));
  };
  // 0.3 / 0.55 and 0.25 / 0.55 of 1100 draws: 600 and 500.
  for (int i = 0; i < 600; ++i) REQUIRE(!add(2));
  for (int i = 0; i < 500; ++i) REQUIRE(!add(5));
  auto v = j->finish();
  CHECK(v.status == kb::EvalStatus::passed);
  CHECK(v.max_tvd < 1e-6);
  CHECK(v.tvd_threshold < 0.1);
  auto bad = add(0);  // cdf before t0 is 0.55 > 0.5 + 0.01
  REQUIRE(bad);
  CHECK(bad->status == kb::EvalStatus::incorrect_numerical);
  CHECK_MESSAGE(bad->detail.find("row 0: sample 0 is outside the support") != std::string::npos, bad->detail);

  // With p = 0.545, t0 is outside the reference's support (cdf before it
  // 0.55) but inside the slack: accepted, counted as mass the reference lacks.
  p = 0.545f;
  REQUIRE(kb::store_float(std::span<const float>(&p, 1), top_p).ok());
  auto j2 = kb::SamplingJudge::create(d, axes, args, opt);
  REQUIRE(j2.ok());
  samples.data<std::int64_t>()[0] = 0;
  CHECK(!j2->add(std::span<const kb::Tensor>(&samples, 1)));
  samples.data<std::int64_t>()[0] = 4;  // cdf before t4 is 0.75: outside
  CHECK(j2->add(std::span<const kb::Tensor>(&samples, 1)));

  // Ties: top-k 1 over a row whose two largest values are equal keeps the
  // lower index; the other is interchangeable and accepted.
  auto dk = sampling_definition(true, false, 8);
  float tv[8] = {0.1f, 0.3f, 0.05f, 0.3f, 0.05f, 0.1f, 0.05f, 0.05f};
  REQUIRE(kb::store_float(tv, probs).ok());
  auto top_k = kb::Tensor::allocate(kb::DType::int32, {1}).value();
  top_k.data<std::int32_t>()[0] = 1;
  args[1].tensor = &top_k;
  auto j3 = kb::SamplingJudge::create(dk, axes, args, opt);
  REQUIRE(j3.ok());
  samples.data<std::int64_t>()[0] = 3;
  CHECK(!j3->add(std::span<const kb::Tensor>(&samples, 1)));
  samples.data<std::int64_t>()[0] = 1;
  CHECK(!j3->add(std::span<const kb::Tensor>(&samples, 1)));
  samples.data<std::int64_t>()[0] = 0;
  CHECK(j3->add(std::span<const kb::Tensor>(&samples, 1)));
}
