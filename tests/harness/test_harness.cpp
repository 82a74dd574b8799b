// The harness judges: each deliberately wrong solution earns its status, the
// right one passes, and inputs are reproducible from the seed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <unistd.h>
#include <stdexcept>

#include "harness/harness.hpp"
#include "harness/trace_writer.hpp"
#include "inputs/inputs.hpp"
#include "inputs/random.hpp"
#include "schema/io.hpp"
#include "tensor/convert.hpp"

namespace {

const char* kDef = R"({
  "name": "silu_and_mul_i64", "op_type": "silu_and_mul",
  "axes": {"num_tokens": {"type": "var"}, "intermediate_size": {"type": "const", "value": 64},
           "two_intermediate_size": {"type": "const", "value": 128}},
  "inputs": {"x": {"shape": ["num_tokens", "two_intermediate_size"], "dtype": "bfloat16"}},
  "outputs": {"out": {"shape": ["num_tokens", "intermediate_size"], "dtype": "bfloat16"}},
  "reference": "import torch\ndef run(x):\n    d = x.shape[-1] // 2\n    return (torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float()).to(x.dtype)\n"
})";

kb::Definition definition() {
  auto d = kb::read_definition(kDef, "test");
  REQUIRE(d.ok());
  return *d;
}

kb::Workload workload(std::int64_t tokens) {
  kb::Workload w;
  w.uuid = "w" + std::to_string(tokens);
  w.axes = {{"num_tokens", tokens}};
  w.inputs = {{"x", kb::InputSpec{}}};
  return w;
}

// A correct solution written here (independent of the oracle).
kb::Status correct(const kb::ImplementationCall& c) {
  const kb::Tensor& x = *c.inputs[0].tensor;
  kb::Tensor& out = c.outputs[0];
  auto xf = kb::to_float(x);
  std::int64_t rows = out.dim(0), d = out.dim(1);
  std::vector<float> y(static_cast<std::size_t>(rows * d));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < d; ++j) {
      float g = xf[r * 2 * d + j], u = xf[r * 2 * d + d + j];
      y[r * d + j] = g / (1 + std::exp(-g)) * u;
    }
  return kb::store_float(y, out);
}

kb::Implementation make(std::string name, std::function<kb::Status(const kb::ImplementationCall&)> run) {
  kb::Implementation impl;
  impl.name = std::move(name);
  impl.author = "test";
  impl.supports = [](const kb::Definition&) { return std::string(); };
  impl.run = std::move(run);
  return impl;
}

kb::EvaluationResult judge(const kb::Implementation& impl, std::int64_t tokens = 5) {
  kb::BenchOptions opt;
  opt.trials = 2;
  opt.time = false;
  auto r = kb::evaluate(definition(), workload(tokens), impl, opt);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return *r;
}

}  // namespace

TEST_CASE("a correct solution passes, with correctness and performance recorded") {
  kb::BenchOptions opt;
  opt.trials = 3;
  opt.min_samples = 3;
  opt.max_samples = 5;
  auto r = kb::evaluate(definition(), workload(7), make("right", correct), opt);
  REQUIRE(r.ok());
  CHECK(r->evaluation.status == kb::EvalStatus::passed);
  REQUIRE(r->evaluation.correctness);
  CHECK(r->evaluation.correctness->max_absolute_error <= 0.02);
  REQUIRE(r->evaluation.performance);
  CHECK(r->evaluation.performance->latency_ms > 0);
  CHECK(r->evaluation.log.find("seed=27490 trials=3") != std::string::npos);
}

TEST_CASE("each wrong solution earns its status") {
  using S = kb::EvalStatus;
  SUBCASE("wrong shape") {
    auto r = judge(make("shape", [](const kb::ImplementationCall& c) -> kb::Status {
      c.outputs[0] = kb::Tensor::allocate(kb::DType::bfloat16, {c.outputs[0].dim(0), 63}).value();
      return kb::ok_status();
    }));
    CHECK(r.evaluation.status == S::incorrect_shape);
    CHECK(r.summary.find("shape [5, 63], expected [5, 64]") != std::string::npos);
    CHECK(!r.evaluation.correctness);
  }
  SUBCASE("wrong dtype") {
    auto r = judge(make("dtype", [](const kb::ImplementationCall& c) -> kb::Status {
      c.outputs[0] = kb::Tensor::allocate(kb::DType::float32, c.outputs[0].shape()).value();
      return kb::ok_status();
    }));
    CHECK(r.evaluation.status == S::incorrect_dtype);
  }
  SUBCASE("wrong values") {
    auto r = judge(make("values", [](const kb::ImplementationCall& c) -> kb::Status {
      KB_TRY(correct(c));
      auto v = kb::to_float(c.outputs[0]);
      for (auto& x : v) x = x * 1.25f + 0.1f;
      return kb::store_float(v, c.outputs[0]);
    }));
    CHECK(r.evaluation.status == S::incorrect_numerical);
    REQUIRE(r.evaluation.correctness);
    CHECK(r.evaluation.correctness->max_absolute_error > 0.05);
    CHECK(!r.evaluation.performance);
  }
  SUBCASE("NaN where the reference is finite") {
    auto r = judge(make("nan", [](const kb::ImplementationCall& c) -> kb::Status {
      KB_TRY(correct(c));
      c.outputs[0].data<std::uint16_t>()[3] = 0x7FC0;
      return kb::ok_status();
    }));
    CHECK(r.evaluation.status == S::incorrect_numerical);
    CHECK(r.summary.find("element 3: nan") != std::string::npos);
  }
  SUBCASE("an exception") {
    auto r = judge(make("throws", [](const kb::ImplementationCall&) -> kb::Status {
      throw std::runtime_error("kernel exploded");
    }));
    CHECK(r.evaluation.status == S::runtime_error);
    CHECK(r.evaluation.log.find("kernel exploded") != std::string::npos);
  }
  SUBCASE("an error status") {
    auto r = judge(make("fails", [](const kb::ImplementationCall&) -> kb::Status {
      return kb::Status(kb::make_error(kb::Code::cuda_error, "launch failed"));
    }));
    CHECK(r.evaluation.status == S::runtime_error);
  }
  SUBCASE("output left untouched: the poison is caught") {
    auto r = judge(make("lazy", [](const kb::ImplementationCall&) -> kb::Status { return kb::ok_status(); }));
    CHECK(r.evaluation.status == S::incorrect_numerical);
  }
  SUBCASE("input modified") {
    auto r = judge(make("scribbles", [](const kb::ImplementationCall& c) -> kb::Status {
      KB_TRY(correct(c));
      auto* x = const_cast<kb::Tensor*>(c.inputs[0].tensor);
      x->data<std::uint16_t>()[0] ^= 1;
      return kb::ok_status();
    }));
    CHECK(r.evaluation.status == S::runtime_error);
    CHECK(r.summary == "modified input \"x\"");
  }
  SUBCASE("guard bytes overwritten") {
    auto r = judge(make("overflows", [](const kb::ImplementationCall& c) -> kb::Status {
      KB_TRY(correct(c));
      c.outputs[0].bytes()[c.outputs[0].nbytes() + 3] = std::byte{0};
      return kb::ok_status();
    }));
    CHECK(r.evaluation.status == S::runtime_error);
    CHECK(r.summary == "wrote outside output \"out\" (guard bytes changed)");
  }
  SUBCASE("remembering the first trial's answer fails the second trial") {
    auto cached = std::make_shared<std::vector<std::byte>>();
    auto r = judge(make("caches", [cached](const kb::ImplementationCall& c) -> kb::Status {
      if (cached->empty()) {
        KB_TRY(correct(c));
        cached->assign(c.outputs[0].bytes(), c.outputs[0].bytes() + c.outputs[0].nbytes());
      } else {
        std::memcpy(c.outputs[0].bytes(), cached->data(), cached->size());
      }
      return kb::ok_status();
    }));
    CHECK(r.evaluation.status == S::incorrect_numerical);
    CHECK(r.summary.rfind("trial 1:", 0) == 0);
  }
}

TEST_CASE("the same seed gives the same inputs; another seed different ones") {
  auto d = definition();
  auto w = workload(4);
  auto a = kb::materialize(d, w, {42, std::nullopt});
  auto b = kb::materialize(d, w, {42, std::nullopt});
  auto c = kb::materialize(d, w, {43, std::nullopt});
  REQUIRE((a.ok() && b.ok() && c.ok()));
  CHECK(std::memcmp(a->tensors[0].bytes(), b->tensors[0].bytes(), a->tensors[0].nbytes()) == 0);
  CHECK(std::memcmp(a->tensors[0].bytes(), c->tensors[0].bytes(), a->tensors[0].nbytes()) != 0);
  // N(0, 1): mean near 0, variance near 1 over 512 values.
  auto v = kb::to_float(a->tensors[0]);
  double mean = 0, var = 0;
  for (float x : v) mean += x;
  mean /= v.size();
  for (float x : v) var += (x - mean) * (x - mean);
  var /= v.size();
  CHECK(std::fabs(mean) < 0.15);
  CHECK(var == doctest::Approx(1.0).epsilon(0.2));
}

TEST_CASE("gdn's q and k: rows of unit norm, the structure stream's normals in order, on any thread count") {
  const char* def = R"J({"name": "gdn_qk", "op_type": "gdn",
    "axes": {"num_tokens": {"type": "var"}, "num_heads": {"type": "const", "value": 3},
             "head_size": {"type": "const", "value": 40}},
    "inputs": {"q": {"shape": ["num_tokens", "num_heads", "head_size"], "dtype": "float32"},
               "k": {"shape": ["num_tokens", "num_heads", "head_size"], "dtype": "float32"}},
    "outputs": {"o": {"shape": ["num_tokens"], "dtype": "float32"}}, "reference": "def run(q, k):\n  pass"})J";
  auto d = kb::read_definition(def, "d");
  REQUIRE(d.ok());
  kb::Workload w;
  w.uuid = "u";
  w.axes = {{"num_tokens", 1001}};
  w.inputs = {{"q", kb::InputSpec{}}, {"k", kb::InputSpec{}}};
  auto m = kb::materialize(*d, w, {11, std::nullopt});
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  // What one sequential pass gives: q's rows, then k's, from Rng(seed, "structure").
  kb::random::Rng rng(11, "structure");
  std::size_t bad = 0, rows = 0;
  for (std::size_t t = 0; t < 2; ++t) {
    const float* got = m->tensors[t].data<float>();
    for (std::int64_t r = 0; r < 1001 * 3; ++r, ++rows) {
      double x[40], ss = 0, norm = 0;
      for (double& e : x) ss += (e = rng.normal()) * e;
      for (int e = 0; e < 40; ++e) {
        const float want = static_cast<float>(static_cast<float>(x[e]) * (1.0 / std::sqrt(ss)));
        bad += got[r * 40 + e] != want;
        norm += static_cast<double>(got[r * 40 + e]) * got[r * 40 + e];
      }
      bad += std::abs(norm - 1.0) > 1e-5;
    }
  }
  CHECK(rows == 2 * 1001 * 3);
  CHECK(bad == 0);
}

TEST_CASE("a packed fp8 key cache: per token the structure stream's normals, quantized by its amax, on any thread count") {
  const char* def = R"J({"name": "packed", "op_type": "dsa_paged",
    "axes": {"num_pages": {"type": "var"}, "page_size": {"type": "const", "value": 16},
             "one": {"type": "const", "value": 1}, "row": {"type": "const", "value": 40}},
    "inputs": {"k_cache_fp8": {"shape": ["num_pages", "page_size", "one", "row"], "dtype": "int8"}},
    "outputs": {"o": {"shape": ["num_pages"], "dtype": "float32"}}, "reference": "def run(k):\n  pass"})J";
  auto d = kb::read_definition(def, "d");
  REQUIRE(d.ok());
  kb::Workload w;
  w.uuid = "u";
  w.axes = {{"num_pages", 37}};
  w.inputs = {{"k_cache_fp8", kb::InputSpec{}}};
  auto m = kb::materialize(*d, w, {5, std::nullopt});
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  const auto* got = reinterpret_cast<const std::uint8_t*>(m->tensors[0].bytes());
  kb::random::Rng rng(5, "structure");
  std::size_t bad = 0;
  for (int p = 0; p < 37; ++p)
    for (int s = 0; s < 16; ++s) {
      float key[36], amax = 0;
      for (float& x : key) {
        x = kb::bf16_to_float(kb::float_to_bf16(static_cast<float>(rng.normal())));
        amax = std::max(amax, std::fabs(x));
      }
      const float scale = std::max(amax, 1e-4f) / 448.0f;
      for (int e = 0; e < 36; ++e) bad += got[p * 16 * 40 + s * 36 + e] != kb::float_to_fp8_e4m3fn(key[e] * (1.0f / scale));
      float stored = 0;
      std::memcpy(&stored, got + p * 16 * 40 + 16 * 36 + s * 4, 4);
      bad += stored != scale;
    }
  CHECK(bad == 0);
}

TEST_CASE("index structures are built valid from axes and constraints") {
  const char* def = R"J({"name": "paged", "op_type": "gqa_paged",
    "axes": {"batch_size": {"type": "var"}, "num_pages": {"type": "var"}, "len_indptr": {"type": "var"},
             "num_kv_indices": {"type": "var"}, "page_size": {"type": "const", "value": 16}},
    "constraints": ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"],
    "inputs": {"kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
               "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
               "kv_last_page_len": {"shape": ["batch_size"], "dtype": "int32"}},
    "outputs": {"o": {"shape": ["batch_size"], "dtype": "float32"}}, "reference": "def run(a, b, c):\n  pass"})J";
  auto d = kb::read_definition(def, "d");
  REQUIRE(d.ok());
  kb::Workload w;
  w.uuid = "u";
  w.axes = {{"batch_size", 6}, {"num_pages", 40}, {"len_indptr", 7}, {"num_kv_indices", 25}};
  kb::InputSpec missing_blob;
  missing_blob.kind = kb::InputKind::safetensors;
  missing_blob.path = "blob/absent.safetensors";
  missing_blob.tensor_key = "kv_indptr";
  w.inputs = {{"kv_indptr", missing_blob}, {"kv_indices", kb::InputSpec{}}, {"kv_last_page_len", kb::InputSpec{}}};
  auto m = kb::materialize(*d, w, {7, std::nullopt});
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  const auto* indptr = m->tensors[0].data<std::int32_t>();
  CHECK(indptr[0] == 0);
  CHECK(indptr[6] == 25);
  for (int i = 0; i < 6; ++i) CHECK(indptr[i] <= indptr[i + 1]);
  std::set<int> pages;
  for (int i = 0; i < 25; ++i) {
    int p = m->tensors[1].data<std::int32_t>()[i];
    CHECK((p >= 0 && p < 40));
    pages.insert(p);
  }
  CHECK(pages.size() == 25);  // unique
  for (int b = 0; b < 6; ++b) {
    int last = m->tensors[2].data<std::int32_t>()[b];
    if (indptr[b + 1] > indptr[b]) CHECK((last >= 1 && last <= 16));
  }
  kb::rebind_args(*m);
  auto unchecked = kb::check_constraints_on(*d, *m);
  REQUIRE(unchecked.ok());
  CHECK(unchecked->empty());  // every constraint decided, and held
  bool noted = false;
  for (const auto& n : m->notes) noted |= n.find("blob blob/absent.safetensors is absent: kb built valid kv_indptr") == 0;
  CHECK(noted);
}

TEST_CASE("compare: a large output judged in ranges on several threads counts as one pass over it would") {
  // 6.5M elements: several ranges wherever there is more than one hardware thread.
  const std::int64_t n = 6'500'000;
  auto expected = kb::Tensor::allocate(kb::DType::float32, {n});
  auto got = kb::Tensor::allocate(kb::DType::float32, {n});
  REQUIRE(expected.ok());
  REQUIRE(got.ok());
  float* e = expected->data<float>();
  float* g = got->data<float>();
  for (std::int64_t i = 0; i < n; ++i) e[i] = g[i] = static_cast<float>(i % 1000) * 0.01f + 1.0f;
  kb::Tolerance tol;
  kb::Comparison same = kb::compare(*got, *expected, tol);
  CHECK(same.verdict == kb::Comparison::Verdict::match);
  CHECK(same.mismatched == 0);
  CHECK(same.total == n);
  CHECK(same.detail.empty());
  // Mismatches late in the tensor (past any first range) and one earlier; a NaN where the reference is finite.
  g[n - 1] = 100.0f;
  g[4'000'000] = std::nanf("");
  g[3'000'001] = e[3'000'001] + 0.5f;
  kb::Comparison c = kb::compare(*got, *expected, tol);
  CHECK(c.verdict == kb::Comparison::Verdict::wrong_values);
  CHECK(c.mismatched == 3);
  CHECK(c.nonfinite_mismatched == 1);
  CHECK(c.max_abs == doctest::Approx(100.0 - e[n - 1]));
  CHECK(c.detail.find("first: element 3000001: ") != std::string::npos);
  // Below the required ratio only: three of 6.5M out passes a 0.95 rule, and the maximum errors stay recorded.
  tol.required_matched_ratio = 0.95;
  kb::Comparison loose = kb::compare(*got, *expected, tol);
  CHECK(loose.verdict == kb::Comparison::Verdict::match);
  CHECK(loose.mismatched == 3);
  CHECK(loose.max_abs == c.max_abs);
}

TEST_CASE("tolerance file: values out of range are refused with the file and the entry named") {
  auto over = kb::TolerancePolicy::parse(R"({"name_contains": {"fp4": {"required_matched_ratio": 1.5}}})", "tol.json");
  REQUIRE_FALSE(over.ok());
  CHECK(over.error().message == "tol.json: name_contains.fp4.required_matched_ratio: expected a fraction from 0 to 1");
  auto negative = kb::TolerancePolicy::parse(R"({"op_type": {"gemm": {"atol": -0.5}}})", "tol.json");
  REQUIRE_FALSE(negative.ok());
  CHECK(negative.error().message == "tol.json: op_type.gemm.atol: expected a non-negative number");
  auto not_json = kb::TolerancePolicy::parse("{\"default\": ", "tol.json");
  REQUIRE_FALSE(not_json.ok());
  CHECK(not_json.error().message.rfind("tol.json", 0) == 0);
  auto fine = kb::TolerancePolicy::parse(R"({"default": {"required_matched_ratio": 0.99}})", "tol.json");
  REQUIRE(fine.ok());
  CHECK(fine->for_definition("gemm", "x").required_matched_ratio == 0.99);
}

TEST_CASE("tolerance policy precedence: definition over op_type over default, flags on top") {
  kb::TolerancePolicy p;
  CHECK(p.for_definition("moe", "moe_fp8_block_scale_x").required_matched_ratio == 0.95);
  CHECK(p.for_definition("moe", "x").required_matched_ratio == 1.0);
  CHECK(p.for_definition("gemm", "x").atol == 0.01);
  p.atol = 0.5;
  CHECK(p.for_definition("gemm", "x").atol == 0.5);
}

TEST_CASE("trace files: a line torn by a killed run stays apart from the next one appended") {
  namespace fs = std::filesystem;
  const fs::path out = fs::temp_directory_path() / ("kb_trace_writer_" + std::to_string(::getpid()));
  fs::remove_all(out);
  kb::TraceWriter writer(out.string());
  const kb::Definition def = definition();
  kb::Trace t;
  t.definition = def.name;
  t.workload = workload(3);
  REQUIRE(writer.append("test", def, t).ok());
  const std::string path = writer.path_for("test", def);
  auto read_all = [&] {
    std::ifstream f(path);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  const std::string first = read_all();
  REQUIRE(first.size() > 20);
  fs::resize_file(path, first.size() - 10);  // the run killed mid-line: no newline at the end
  t.workload = workload(4);
  REQUIRE(writer.append("test", def, t).ok());
  const std::string text = read_all();
  const auto nl = text.find('\n');
  REQUIRE(nl != std::string::npos);
  CHECK(nl == first.size() - 10);  // the torn line ends where it was cut
  auto second = kb::read_trace(std::string_view(text).substr(nl + 1, text.size() - nl - 2), "t");
  REQUIRE_MESSAGE(second.ok(), (second.ok() ? "" : second.error().message));
  CHECK(second->workload.uuid == "w4");
  fs::remove_all(out);
}

TEST_CASE("trace files: a name that is not one path component, or a link out of --out, writes nothing") {
  namespace fs = std::filesystem;
  const fs::path base = fs::temp_directory_path() / ("kb_trace_escape_" + std::to_string(::getpid()));
  fs::remove_all(base);
  const fs::path out = base / "out", elsewhere = base / "elsewhere";
  fs::create_directories(elsewhere);
  kb::TraceWriter writer(out.string());
  kb::Trace t;
  t.workload = workload(3);
  auto refused = [&](const std::string& author, const kb::Definition& d, const std::string& says) {
    auto st = writer.append(author, d, t);
    REQUIRE_MESSAGE(!st.ok(), says);
    CHECK_MESSAGE(st.error().message.find(says) != std::string::npos, st.error().message);
  };
  kb::Definition d = definition();
  refused("../../elsewhere", d, "author name \"../../elsewhere\" contains '/'");
  refused("..", d, "author name \"..\" is \"..\"");
  refused("a\nb", d, "contains control character 0x0a");
  refused(std::string(256, 'a'), d, "is 256 bytes long (at most 255)");
  d.name = (elsewhere / "abs_def").string();
  refused("test", d, "definition name");
  d = definition();
  d.op_type = "../../../elsewhere";
  refused("test", d, "op_type name");
  // traces/ is a link to a directory outside the output directory.
  fs::create_directories(out);
  fs::create_directory_symlink(elsewhere, out / "traces");
  refused("test", definition(), "outside the output directory");
  CHECK(fs::is_empty(elsewhere));
  // The trace file itself is a link to a file outside.
  fs::remove(out / "traces");
  const std::string path = writer.path_for("test", definition());
  fs::create_directories(fs::path(path).parent_path());
  fs::create_symlink(elsewhere / "victim.jsonl", path);
  refused("test", definition(), "cannot resolve");  // dangling: opening it would create the target
  CHECK(fs::is_empty(elsewhere));
  std::ofstream(elsewhere / "victim.jsonl").put('\n');
  refused("test", definition(), "outside the output directory");
  CHECK(fs::file_size(elsewhere / "victim.jsonl") == 1);
  fs::remove(path);
  CHECK(writer.append("test", definition(), t).ok());
  fs::remove_all(base);
}
