// The CPU oracles against goldens: tests/goldens/*.safetensors, each the
// outputs of a definition's own PyTorch reference on small inputs
// (tests/goldens/make/make_goldens.py, run on a GPU machine). For each file: the
// definition is loaded from $KB_SHARED_DIR/flashinfer-trace/definitions, the
// inputs rebuilt (stored "in.NAME" tensors, kb-golden-v1 generated ones,
// scalars from the metadata), the oracle run, and every "out.NAME" compared
// with FlashInfer-Bench's rule (an element fails iff |x - y| > atol and
// |x - y| / (|y| + 1e-8) > rtol; non-finite values must match by position and
// sign), atol = rtol = 1e-2 for 16-bit outputs and 1e-3 for float32 ones.
// Sampling goldens ("check": "distribution") hold the reference's draws
// instead ("out.NAME" of shape [batch, draws]): every draw must lie in the oracle's
// support and the total variation distance between the draws' histogram and
// the oracle's distribution must stay below 0.2.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <climits>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "golden_inputs.hpp"
#include "json/json.hpp"
#include "oracle/oracle.hpp"
#include "safetensors/safetensors.hpp"
#include "sampling/sampling_oracle.hpp"
#include "schema/io.hpp"
#include "tensor/convert.hpp"

namespace fs = std::filesystem;
namespace st = kb::safetensors;
using kb::DType;
using kb::Tensor;

namespace {

// ---- kb-golden-v1 against tests/goldens/make/golden_lib.py ------------------------

struct GeneratorCase {
  const char* definition;
  const char* name;
  std::uint64_t seed;
  float scale;
  std::uint32_t u24[5];  // (z >> 40) for i = 0..4
  float v[5];            // (2u - 1) * scale in float32
};

// Printed by golden_lib.py (numpy) for these names.
const GeneratorCase kGeneratorCases[] = {
    {"gemm_n128_k2048", "A", 0x9d3ed144332a44a3ull, 1.0f, {3609696, 11923249, 3988821, 16395185, 4075287},
     {-0x1.23ae8p-1f, 0x1.af7988p-2f, -0x1.0c8aacp-1f, 0x1.e8aec4p-1f, -0x1.0743a4p-1f}},
    {"rmsnorm_h128", "weight", 0x1c68863a250c05aeull, 0.37f, {5698355, 8060351, 7920119, 9668428, 15786256},
     {-0x1.e60834p-4f, -0x1.da6f18p-7f, -0x1.528e78p-6f, 0x1.ce6f5ap-5f, 0x1.4e1f4ep-2f}},
    {"top_p_sampling_from_probs_v262208", "probs", 0xe85e79ebeb9b5bbfull, 65552.0f,
     {2911516, 874403, 12904981, 7990375, 8646706},
     {-0x1.4e6074p+15f, -0x1.cabe1ep+15f, 0x1.13b98ep+15f, -0x1.84fe8ep+11f, 0x1.f83882p+10f}},
    {"\xc3\xa9/x", "y", 0x4fda0266e2fe3206ull, 0.37f, {3832312, 14882035, 959670, 10482103, 1949827},
     {-0x1.9b9458p-3f, 0x1.25484p-2f, -0x1.4f8918p-2f, 0x1.7a3826p-4f, -0x1.22d068p-2f}},
};

TEST_CASE("kb-golden-v1 reproduces golden_lib.py") {
  for (const auto& c : kGeneratorCases) {
    INFO(c.definition, "/", c.name);
    CHECK(kb::golden::fnv1a64(std::string(c.definition) + "/" + c.name) == c.seed);
    auto u = kb::golden::uniform01(c.definition, c.name, 5);
    REQUIRE(u.size() == 5);
    for (int i = 0; i < 5; ++i) CHECK(u[i] == static_cast<float>(c.u24[i]) * 0x1.0p-24f);
    auto t = kb::golden::generated(c.definition, c.name, DType::float32, {5}, c.scale);
    REQUIRE(t.ok());
    for (int i = 0; i < 5; ++i) CHECK(t->data<float>()[i] == c.v[i]);
  }
  // Far into the stream (golden_lib.uniform01("gemm_n128_k2048", "B", 10**6)[-1]).
  auto u = kb::golden::uniform01("gemm_n128_k2048", "B", 1000000);
  CHECK(u.back() == 7246311 * 0x1.0p-24f);
  double sum = 0;
  for (float x : u) sum += x;
  CHECK(sum == doctest::Approx(499926.757486701).epsilon(1e-12));
  // Rounded to the tensor's dtype.
  auto b = kb::golden::generated("gemm_n128_k2048", "A", DType::bfloat16, {5});
  REQUIRE(b.ok());
  for (int i = 0; i < 5; ++i)
    CHECK(b->data<std::uint16_t>()[i] == kb::float_to_bf16(kGeneratorCases[0].v[i]));
  CHECK_FALSE(kb::golden::generated("x", "y", DType::int32, {2}).ok());
  // Every float dtype: the same values as store_float of the float32 ones.
  auto f32 = kb::golden::generated("rmsnorm_h128", "weight", DType::float32, {3, 68}, 3.5f);
  REQUIRE(f32.ok());
  const std::vector<float> v = kb::to_float(*f32);
  for (DType t : {DType::float16, DType::bfloat16, DType::float8_e4m3fn, DType::float8_e5m2, DType::float4_e2m1}) {
    INFO(kb::dtype_name(t));
    auto g = kb::golden::generated("rmsnorm_h128", "weight", t, {3, 68}, 3.5f);
    REQUIRE(g.ok());
    auto ref = Tensor::allocate(t, g->shape());
    REQUIRE(ref.ok());
    REQUIRE(kb::store_float(v, *ref).ok());
    CHECK(std::equal(g->span().begin(), g->span().end(), ref->span().begin()));
  }
}

// ---- one golden file -----------------------------------------------------------

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::optional<std::string> meta(const st::Header& h, std::string_view key) {
  for (const auto& [k, v] : h.metadata)
    if (k == key) return v;
  return std::nullopt;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    if (end > pos) out.push_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

bool contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::optional<fs::path> find_definition(const fs::path& root, const std::string& name) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return std::nullopt;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file() && it->path().filename() == name + ".json") return it->path();
  return std::nullopt;
}

// Softmax over the last axis, in double, rounded to float32 (the goldens'
// "softmax" inputs: probabilities made from generated logits).
void softmax_last_axis(Tensor& t) {
  std::int64_t cols = t.rank() ? t.dim(t.rank() - 1) : 1;
  std::int64_t rows = cols ? t.numel() / cols : 0;
  std::vector<float> v = kb::to_float(t);
  for (std::int64_t r = 0; r < rows; ++r) {
    float* x = v.data() + r * cols;
    double mx = -INFINITY;
    for (std::int64_t j = 0; j < cols; ++j) mx = std::max(mx, static_cast<double>(x[j]));
    std::vector<double> e(static_cast<std::size_t>(cols));
    double sum = 0;
    for (std::int64_t j = 0; j < cols; ++j) sum += e[j] = std::exp(static_cast<double>(x[j]) - mx);
    for (std::int64_t j = 0; j < cols; ++j) x[j] = static_cast<float>(e[j] / sum);
  }
  (void)kb::store_float(v, t);
}

struct Outcome {
  std::vector<std::string> failures;
  std::string summary;
  bool skipped = false;
};

struct Tolerance {
  double atol, rtol;
};

// Element-wise comparison of the oracle's output x with the golden y.
void compare(const std::string& what, const Tensor& x, DType y_dtype, const std::vector<std::int64_t>& y_shape,
             std::span<const std::byte> y_bytes, Outcome& out, std::string& line) {
  if (x.shape() != y_shape || x.dtype() != y_dtype) {
    out.failures.push_back(fmt::format("{}: golden is {} {}, oracle wrote {} {}", what, kb::dtype_name(y_dtype),
                                       fmt::join(y_shape, "x"), kb::dtype_name(x.dtype()), fmt::join(x.shape(), "x")));
    return;
  }
  auto y = Tensor::allocate(y_dtype, y_shape);
  REQUIRE(y.ok());
  REQUIRE(y->nbytes() == y_bytes.size());
  if (!y_bytes.empty()) std::memcpy(y->bytes(), y_bytes.data(), y_bytes.size());
  const bool is_float = kb::dtype_is_float(y_dtype);
  const Tolerance tol = y_dtype == DType::float32 ? Tolerance{1e-3, 1e-3} : Tolerance{1e-2, 1e-2};
  double max_abs = 0, max_rel = 0;
  std::int64_t bad = 0, first_bad = -1;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    double xv = kb::element_as_double(x, i), yv = kb::element_as_double(*y, i);
    bool fail;
    if (!is_float) {
      fail = xv != yv;
    } else if (!std::isfinite(xv) || !std::isfinite(yv)) {
      fail = !(std::isnan(xv) && std::isnan(yv)) && xv != yv;  // same inf, or NaN on both sides
    } else {
      double abs = std::fabs(xv - yv), rel = abs / (std::fabs(yv) + 1e-8);
      max_abs = std::max(max_abs, abs);
      max_rel = std::max(max_rel, rel);
      fail = abs > tol.atol && rel > tol.rtol;
    }
    if (fail && bad++ == 0) first_bad = i;
  }
  line += fmt::format(" {}: max_abs {:.3g} max_rel {:.3g}", what, max_abs, max_rel);
  if (bad)
    out.failures.push_back(fmt::format("{}: {} of {} elements outside atol/rtol {}/{} (first at {}: oracle {} golden {})",
                                       what, bad, x.numel(), tol.atol, tol.rtol, first_bad,
                                       kb::element_as_double(x, first_bad), kb::element_as_double(*y, first_bad)));
}

// max_generated: goldens whose generated inputs hold more elements are
// skipped (sanitizer builds set KB_GOLDENS_MAX_GENERATED: the big gemm
// weights take minutes there and add no memory-safety coverage).
Outcome check_golden(const fs::path& file, const fs::path& definitions_root, std::int64_t max_generated) {
  Outcome out;
  auto fail = [&](std::string why) {
    out.failures.push_back(std::move(why));
    return out;
  };
  auto golden = st::read_file(file.string());
  if (!golden) return fail(golden.error().message);
  const st::Header& h = golden->header;
  if (meta(h, "format") != "kb-golden-v1") return fail("metadata format is not kb-golden-v1");
  auto def_name = meta(h, "definition");
  if (!def_name) return fail("metadata has no definition");
  auto def_path = find_definition(definitions_root, *def_name);
  if (!def_path) return fail(fmt::format("definition {} not found under {}", *def_name, definitions_root.string()));
  auto def = kb::read_definition_file(def_path->string());
  if (!def) return fail(def.error().message);
  const kb::Definition& d = *def;

  auto parse_meta_json = [&](const char* key) -> kb::Result<kb::json::Document> {
    return kb::json::parse(meta(h, key).value_or("{}"), fmt::format("{}: metadata {}", file.string(), key));
  };
  auto axes_doc = parse_meta_json("axes");
  auto scales_doc = parse_meta_json("scales");
  auto scalars_doc = parse_meta_json("scalars");
  if (!axes_doc) return fail(axes_doc.error().message);
  if (!scales_doc) return fail(scales_doc.error().message);
  if (!scalars_doc) return fail(scalars_doc.error().message);
  auto get = [](const kb::json::Document& doc, const std::string& key) -> std::optional<kb::json::Element> {
    kb::json::Element e;
    if (doc.root().at_key(key).get(e) != simdjson::SUCCESS) return std::nullopt;
    return e;
  };

  kb::AxisValues axes;
  for (const auto& a : d.axes) {
    if (a.kind == kb::AxisKind::const_) {
      axes.values.emplace_back(a.name, a.value);
      continue;
    }
    auto e = get(*axes_doc, a.name);
    std::int64_t v;
    if (!e || e->get_int64().get(v) != simdjson::SUCCESS) return fail(fmt::format("metadata axes lacks {}", a.name));
    axes.values.emplace_back(a.name, v);
  }
  auto shape_of = [&](const kb::TensorSpec& s) {
    std::vector<std::int64_t> shape;
    for (const auto& n : *s.shape) shape.push_back(axes.get(n).value_or(-1));
    return shape;
  };

  const auto generated = split_commas(meta(h, "generated").value_or(""));
  const auto softmax = split_commas(meta(h, "softmax").value_or(""));
  std::int64_t generated_elements = 0;
  for (const auto& s : d.inputs)
    if (!s.is_scalar() && contains(generated, s.name)) {
      std::int64_t n = 1;
      for (auto v : shape_of(s)) n *= v;
      generated_elements += n;
    }
  if (generated_elements > max_generated) {
    out.skipped = true;
    out.summary = fmt::format("{} ({}): skipped, {} generated elements > KB_GOLDENS_MAX_GENERATED {}",
                              file.filename().string(), d.name, generated_elements, max_generated);
    return out;
  }
  std::vector<Tensor> in_tensors(d.inputs.size());
  std::vector<kb::Arg> args(d.inputs.size());
  for (std::size_t i = 0; i < d.inputs.size(); ++i) {
    const kb::TensorSpec& s = d.inputs[i];
    if (s.is_scalar()) {
      auto e = get(*scalars_doc, s.name);
      if (!e) return fail(fmt::format("scalar input {} not in metadata scalars", s.name));
      if (e->is_bool()) args[i].scalar = kb::ScalarValue{bool(*e)};
      else if (e->is_int64()) args[i].scalar = kb::ScalarValue{std::int64_t(*e)};
      else if (e->is_number()) args[i].scalar = kb::ScalarValue{double(*e)};
      else return fail(fmt::format("scalar input {} is not a number", s.name));
      continue;
    }
    auto shape = shape_of(s);
    if (contains(generated, s.name)) {
      double scale = 1.0;
      if (auto e = get(*scales_doc, s.name)) {
        if (e->get_double().get(scale) != simdjson::SUCCESS) {
          std::int64_t iv = 0;
          if (e->get_int64().get(iv) != simdjson::SUCCESS) return fail(fmt::format("bad scale for {}", s.name));
          scale = static_cast<double>(iv);
        }
      }
      auto t = kb::golden::generated(d.name, s.name, s.dtype, shape, static_cast<float>(scale));
      if (!t) return fail(t.error().message);
      if (contains(softmax, s.name)) softmax_last_axis(*t);
      in_tensors[i] = std::move(*t);
    } else {
      const st::TensorInfo* info = h.find("in." + s.name);
      if (!info) return fail(fmt::format("input {} neither stored (in.{}) nor generated", s.name, s.name));
      if (info->dtype != s.dtype || info->shape != shape)
        return fail(fmt::format("in.{} is {} [{}], the definition wants {} [{}]", s.name, kb::dtype_name(info->dtype),
                                fmt::join(info->shape, ", "), kb::dtype_name(s.dtype), fmt::join(shape, ", ")));
      auto t = Tensor::allocate(s.dtype, shape);
      if (!t) return fail(t.error().message);
      auto bytes = golden->bytes(*info);
      if (bytes.size() != t->nbytes()) return fail(fmt::format("in.{}: byte size mismatch", s.name));
      if (!bytes.empty()) std::memcpy(t->bytes(), bytes.data(), bytes.size());
      in_tensors[i] = std::move(*t);
    }
    args[i].tensor = &in_tensors[i];
  }
  std::vector<Tensor> outputs;
  for (const auto& s : d.outputs) {
    auto t = Tensor::allocate(s.dtype, s.is_scalar() ? std::vector<std::int64_t>{} : shape_of(s));
    if (!t) return fail(t.error().message);
    t->fill_bytes(0xFF);  // NaN / -1: unwritten elements show
    outputs.push_back(std::move(*t));
  }

  auto oracle = kb::find_oracle(d);
  if (!oracle) return fail(oracle.error().message);
  kb::OracleCall call{d, axes, args, outputs, 0};
  if (auto st = (*oracle)->run(call); !st) return fail(st.error().message);
  for (const auto& t : outputs)
    if (!t.guards_intact()) return fail("oracle wrote outside an output tensor");

  std::string line = fmt::format("{} ({}):", file.filename().string(), d.name);
  if (meta(h, "check") == "distribution") {
    auto dist = kb::sampling_distribution(call);
    if (!dist) return fail(dist.error().message);
    for (std::size_t o = 0; o < d.outputs.size(); ++o) {
      const std::string key = "out." + d.outputs[o].name;
      const st::TensorInfo* info = h.find(key);
      if (!info) return fail(fmt::format("no {} in a distribution golden", key));
      if (info->dtype != DType::int64 || info->shape.size() != 2 ||
          info->shape[0] != static_cast<std::int64_t>(dist->size()))
        return fail(fmt::format("{} must be int64 [batch, draws]", key));
      auto bytes = golden->bytes(*info);
      const std::int64_t rows = info->shape[0], draws = info->shape[1];
      double worst_tv = 0;
      for (std::int64_t r = 0; r < rows; ++r) {
        const auto& p = (*dist)[static_cast<std::size_t>(r)];
        std::vector<double> hist(p.size(), 0.0);
        for (std::int64_t j = 0; j < draws; ++j) {
          std::int64_t tok;
          std::memcpy(&tok, bytes.data() + (r * draws + j) * 8, 8);
          if (tok < 0 || tok >= static_cast<std::int64_t>(p.size()) || p[static_cast<std::size_t>(tok)] <= 0) {
            out.failures.push_back(fmt::format("{} row {}: reference drew {}, outside the oracle's support", key, r, tok));
            break;
          }
          hist[static_cast<std::size_t>(tok)] += 1.0 / static_cast<double>(draws);
        }
        double tv = 0;
        for (std::size_t j = 0; j < p.size(); ++j) tv += std::fabs(hist[j] - p[j]);
        tv /= 2;
        worst_tv = std::max(worst_tv, tv);
        if (tv >= 0.2)
          out.failures.push_back(fmt::format("{} row {}: total variation distance {:.3f} >= 0.2", key, r, tv));
        // The oracle's own sample must be in its support too.
        std::int64_t mine = static_cast<std::int64_t>(kb::element_as_double(outputs[o], r));
        if (mine < 0 || mine >= static_cast<std::int64_t>(p.size()) || p[static_cast<std::size_t>(mine)] <= 0)
          out.failures.push_back(fmt::format("{} row {}: the oracle sampled {}, outside its own support", key, r, mine));
      }
      line += fmt::format(" {}: {} rows x {} draws, max TV {:.4f}", key, rows, draws, worst_tv);
    }
  } else {
    for (std::size_t o = 0; o < d.outputs.size(); ++o) {
      const std::string key = "out." + d.outputs[o].name;
      const st::TensorInfo* info = h.find(key);
      if (!info) {
        out.failures.push_back(fmt::format("{} missing from the golden", key));
        continue;
      }
      compare(key, outputs[o], info->dtype, info->shape, golden->bytes(*info), out, line);
    }
  }
  out.summary = line;
  return out;
}

TEST_CASE("oracles reproduce the goldens") {
  const fs::path goldens = env_or("KB_GOLDENS_DIR", "tests/goldens");
  const fs::path definitions = fs::path(env_or("KB_SHARED_DIR", "../shared")) / "flashinfer-trace" / "definitions";
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::directory_iterator it(goldens, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file() && it->path().extension() == ".safetensors") files.push_back(it->path());
  std::sort(files.begin(), files.end());
  REQUIRE_MESSAGE(!files.empty(),
                  "no goldens in " << goldens.string()
                                   << ": run `python3 tests/goldens/make/make_goldens.py DEFINITIONS_DIR tests/goldens` on a "
                                      "machine with PyTorch and a GPU");
  const std::string budget = env_or("KB_GOLDENS_MAX_GENERATED", "");
  const std::int64_t max_generated = budget.empty() ? INT64_MAX : std::stoll(budget);
  int failed = 0, skipped = 0;
  for (const auto& f : files) {
    Outcome o = check_golden(f, definitions, max_generated);
    if (o.skipped) ++skipped;
    if (!o.summary.empty()) MESSAGE(o.summary);
    for (const auto& why : o.failures) {
      const std::string message = f.filename().string() + ": " + why;
      FAIL_CHECK(message);
    }
    if (!o.failures.empty()) ++failed;
  }
  MESSAGE(fmt::format("{} goldens, {} failed, {} skipped", files.size(), failed, skipped));
  CHECK(skipped < static_cast<int>(files.size()));
}

}  // namespace
