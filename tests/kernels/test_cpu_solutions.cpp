// kb's own CPU solutions for rope and the attention op types (kernels/<op>/cpu.cpp)
// judged against the oracles on every shipped definition of those op types,
// with small seeded workloads built by kb's input generator (valid index
// structures, empty sequences included), compared with the harness's judge.
// Then the judge must catch deliberately broken attention: a causal mask
// aligned top-left instead of bottom-right, last pages read as full, lse in
// base e, and no causal mask at all.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "attention/online_softmax.hpp"
#include "harness/implementation.hpp"
#include "harness/judge.hpp"
#include "inputs/inputs.hpp"
#include "schema/io.hpp"

namespace fs = std::filesystem;

namespace {

std::string definitions_dir() {
  const char* env = std::getenv("KB_SHARED_DIR");
  return std::string(env ? env : "../shared") + "/flashinfer-trace/definitions";
}

std::vector<kb::Definition> shipped(const std::string& op_type) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(definitions_dir() + "/" + op_type)) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::vector<kb::Definition> defs;
  for (const auto& f : files) {
    auto d = kb::read_definition_file(f);
    REQUIRE_MESSAGE(d.ok(), f);
    defs.push_back(std::move(d).value());
  }
  return defs;
}

// A small workload: every var axis from `sizes` (by name), every input random
// (kb builds the index tensors), sm_scale 1/sqrt(head dim).
kb::Workload small_workload(const kb::Definition& d, const std::map<std::string, std::int64_t>& sizes) {
  kb::Workload w;
  w.uuid = "test-" + d.name;
  for (const auto& a : d.axes) {
    if (a.kind != kb::AxisKind::var) continue;
    auto it = sizes.find(a.name);
    REQUIRE_MESSAGE(it != sizes.end(), d.name << ": no test size for axis " << a.name);
    w.axes.emplace_back(a.name, it->second);
  }
  for (const auto& t : d.inputs) {
    kb::InputSpec in;
    if (t.is_scalar()) {
      in.kind = kb::InputKind::scalar;
      in.value = 1.0 / std::sqrt(192.0);
    }
    w.inputs.emplace_back(t.name, in);
  }
  return w;
}

// A workload's size: sequences, query tokens, key tokens (paged: pages enough
// for about that many keys, plus one, so last pages are partly filled).
struct Size {
  std::int64_t batch, queries, keys;
};

// Every var axis the shipped rope / attention definitions have.
std::map<std::string, std::int64_t> axes_for(const kb::Definition& d, Size z) {
  const kb::Axis* ps = d.find_axis("page_size");
  const std::int64_t page = ps && ps->kind == kb::AxisKind::const_ ? ps->value : 1;
  const std::int64_t pages = page == 1 ? z.keys : (z.keys + page - 1) / page + 1;
  return {{"batch_size", z.batch},   {"len_indptr", z.batch + 1}, {"total_q", z.queries}, {"num_kv_indices", pages},
          {"num_pages", pages + 5},  {"total_kv", z.keys},        {"num_tokens", z.queries}, {"num_qo_heads", 4},
          {"num_kv_heads", 2},       {"max_seq_len", 40}};
}

struct Run {
  kb::Materialized m;
  std::vector<kb::Tensor> expected, got;
};

// Materializes the workload, runs the oracle into `expected` and the named
// solution into `got`.
Run run_both(const kb::Definition& d, const kb::Workload& w, const std::string& solution, std::uint64_t seed) {
  Run r;
  auto m = kb::materialize(d, w, {seed, std::nullopt});
  REQUIRE_MESSAGE(m.ok(), d.name << ": " << m.error().message);
  r.m = std::move(m).value();
  kb::rebind_args(r.m);
  auto e = kb::allocate_outputs(d, r.m.axes);
  auto g = kb::allocate_outputs(d, r.m.axes);
  REQUIRE(e.ok());
  REQUIRE(g.ok());
  r.expected = std::move(e).value();
  r.got = std::move(g).value();
  for (auto& t : r.got) t.fill_bytes(0xFF);  // NaN: every element must be written
  kb::Implementation oracle = kb::reference_implementation();
  REQUIRE_MESSAGE(oracle.supports(d).empty(), d.name);
  auto st = oracle.run(kb::ImplementationCall{d, r.m.axes, r.m.args, r.expected, seed});
  REQUIRE_MESSAGE(st.ok(), d.name << ": oracle: " << st.error().message);
  const kb::Implementation* impl = kb::builtin_registry().find(solution);
  REQUIRE_MESSAGE(impl, solution);
  REQUIRE_MESSAGE(impl->supports(d).empty(), d.name << ": " << impl->supports(d));
  st = impl->run(kb::ImplementationCall{d, r.m.axes, r.m.args, r.got, seed});
  REQUIRE_MESSAGE(st.ok(), d.name << ": " << solution << ": " << st.error().message);
  return r;
}

// The judge's verdict on every output: true when all match under kb's default tolerance.
bool all_match(const kb::Definition& d, const std::vector<kb::Tensor>& got, const std::vector<kb::Tensor>& expected,
               std::string* detail = nullptr) {
  kb::Tolerance tol;
  bool ok = true;
  for (std::size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].guards_intact());
    auto c = kb::compare(got[i], expected[i], tol);
    if (c.verdict != kb::Comparison::Verdict::match) {
      ok = false;
      if (detail) *detail += fmt::format("{}: {}; ", d.outputs[i].name, c.detail);
    }
  }
  return ok;
}

// Every shipped definition of op_type at each size in `sizes`; those whose
// name contains `big_for` also at `big` (kept to a few: the oracle is slow
// without optimization).
void judge_all(const std::string& op_type, const std::string& solution, const std::vector<Size>& sizes,
               const std::string& big_for = "", Size big = {}) {
  auto defs = shipped(op_type);
  REQUIRE(!defs.empty());
  for (const auto& d : defs) {
    std::vector<Size> all = sizes;
    if (!big_for.empty() && d.name.find(big_for) != std::string::npos) all.push_back(big);
    for (std::size_t k = 0; k < all.size(); ++k) {
      CAPTURE(d.name);
      CAPTURE(k);
      Run r = run_both(d, small_workload(d, axes_for(d, all[k])), solution, 1000 + k);
      std::string detail;
      CHECK_MESSAGE(all_match(d, r.got, r.expected, &detail), detail);
    }
  }
}

const kb::Definition& find_def(const std::vector<kb::Definition>& defs, const std::string& name) {
  auto it = std::find_if(defs.begin(), defs.end(), [&](const kb::Definition& d) { return d.name == name; });
  REQUIRE_MESSAGE(it != defs.end(), name);
  return *it;
}

}  // namespace

TEST_CASE("kb_cpu_rope matches the oracle on every shipped rope definition") {
  judge_all("rope", "kb_cpu_rope", {{1, 1, 1}, {1, 37, 1}});
}

TEST_CASE("kb_cpu_gqa_paged matches the oracle on every shipped gqa_paged definition") {
  // Fewer keys than queries (ps1: causal rows with no key), more sequences
  // than pages (empty ones), and several key blocks.
  judge_all("gqa_paged", "kb_cpu_gqa_paged", {{3, 9, 7}, {5, 5, 2}}, "h20_kv4", {2, 40, 100});
}

TEST_CASE("kb_cpu_gqa_ragged matches the oracle on every shipped gqa_ragged definition") {
  judge_all("gqa_ragged", "kb_cpu_gqa_ragged", {{3, 9, 40}, {4, 12, 6}}, "h32_kv4", {2, 40, 100});
}

TEST_CASE("kb_cpu_mla_paged matches the oracle on every shipped mla_paged definition") {
  judge_all("mla_paged", "kb_cpu_mla_paged", {{3, 9, 7}, {2, 20, 70}});
}

TEST_CASE("kb_cpu_mla_ragged matches the oracle on every shipped mla_ragged definition") {
  judge_all("mla_ragged", "kb_cpu_mla_ragged", {{3, 9, 40}, {4, 12, 6}, {2, 40, 100}});
}

TEST_CASE("kb_cpu_rope refuses what it cannot compute") {
  auto defs = shipped("rope");
  const kb::Implementation* impl = kb::builtin_registry().find("kb_cpu_rope");
  REQUIRE(impl);
  kb::Definition d = defs.front();
  std::string ref = d.reference;
  // A reference that rotates in bfloat16 rounds after every op: refused, with a reason.
  for (auto pos = ref.find("q.to(torch.float32)"); pos != std::string::npos; pos = ref.find("q.to(torch.float32)"))
    ref.replace(pos, 19, "q");
  d.reference = ref;
  CHECK(impl->supports(d).find("half-precision") != std::string::npos);
}

// The judge must tell a broken attention from a right one: each case runs the
// same flash::Problem the solution builds, changed in one place.
TEST_CASE("the judge catches broken attention") {
  auto defs = shipped("gqa_paged");
  const kb::Definition& d = find_def(defs, "gqa_paged_prefill_causal_h6_kv1_d128_ps64");
  kb::Workload w = small_workload(d, axes_for(d, {3, 12, 300}));
  Run r = run_both(d, w, "kb_cpu_gqa_paged", 7);
  REQUIRE(all_match(d, r.got, r.expected));

  // The problem as kernels/gqa_paged/cpu.cpp sets it up.
  kb::ImplementationCall call{d, r.m.axes, r.m.args, r.got, 7};
  namespace flash = kb::kernels::flash;
  const kb::Tensor* q = flash::tensor_arg(call, "q");
  const kb::Tensor* kc = flash::tensor_arg(call, "k_cache");
  const kb::Tensor* vc = flash::tensor_arg(call, "v_cache");
  auto scale = flash::scale_arg(call, "sm_scale");
  REQUIRE(scale.ok());
  auto problem = [&](std::vector<std::int64_t>& table) {
    flash::Problem p;
    p.q[0] = {q, q->dim(1), q->dim(2)};
    p.k[0] = {kc, kc->dim(2), kc->dim(3)};
    p.v = {vc, vc->dim(2), vc->dim(3)};
    p.tokens = q->dim(0), p.q_heads = q->dim(1), p.kv_heads = kc->dim(2), p.dv = vc->dim(3);
    p.sm_scale = *scale;
    p.page_size = kc->dim(1);
    auto st = flash::paged_sequences(call, p, flash::tensor_arg(call, "qo_indptr"), flash::tensor_arg(call, "kv_indptr"),
                                     flash::tensor_arg(call, "kv_indices"), flash::tensor_arg(call, "kv_last_page_len"),
                                     kc->dim(0), table);
    REQUIRE(st.ok());
    return p;
  };
  auto outputs_of = [&](const flash::Problem& p, bool natural_lse = false) {
    std::vector<float> out, lse;
    REQUIRE(flash::attend(p, out, lse).ok());
    if (natural_lse)
      for (float& x : lse) x *= static_cast<float>(std::log(2.0));
    auto outs = kb::allocate_outputs(d, r.m.axes);
    REQUIRE(outs.ok());
    kb::ImplementationCall c{d, r.m.axes, r.m.args, *outs, 7};
    REQUIRE(flash::store_outputs(c, p, out, lse).ok());
    return std::move(outs).value();
  };

  std::vector<std::int64_t> table;
  flash::Problem p = problem(table);
  // Unchanged, the same route matches (so each failure below is the change's).
  CHECK(all_match(d, outputs_of(p), r.expected));
  // The workload must make each change matter: a sequence with more keys than
  // queries (so the diagonal is not 0) and a partly filled last page.
  bool shifted = false, partial = false;
  for (const auto& s : p.seqs) {
    shifted = shifted || (s.q_len > 0 && s.diagonal > 0);
    partial = partial || (s.q_len > 0 && s.kv_len % p.page_size != 0);
  }
  REQUIRE(shifted);
  REQUIRE(partial);

  SUBCASE("causal mask aligned top-left (diagonal 0)") {
    for (auto& s : p.seqs) s.diagonal = 0;
    CHECK_FALSE(all_match(d, outputs_of(p), r.expected));
  }
  SUBCASE("kv_last_page_len ignored: every last page read as full") {
    for (auto& s : p.seqs)
      if (s.kv_len > 0) {
        s.kv_len = (s.kv_len + p.page_size - 1) / p.page_size * p.page_size;
        s.diagonal = s.kv_len - s.q_len;  // (with the old diagonal the causal mask would hide the extra keys)
      }
    CHECK_FALSE(all_match(d, outputs_of(p), r.expected));
  }
  SUBCASE("no causal mask") {
    p.causal = false;
    CHECK_FALSE(all_match(d, outputs_of(p), r.expected));
  }
  SUBCASE("natural-log lse instead of base 2") {
    CHECK_FALSE(all_match(d, outputs_of(p, true), r.expected));
  }
}
