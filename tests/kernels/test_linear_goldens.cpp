// The gdn, mamba_ssu and dsa_paged CPU oracles against their goldens:
// tests/goldens/linear/*.safetensors, each the outputs of a definition's own
// PyTorch reference (tests/goldens/make/linear.py). A golden of a scaled-down copy
// of a shipped definition carries that copy's JSON in its metadata
// ("definition_json", "scaled_from"); the others name a shipped definition.
// Inputs are rebuilt (stored "in.NAME", kb-golden-v1 generated ones, scalars
// from the metadata; an optional input neither stored nor generated is
// None), the oracle run, and every "out.NAME" compared with FlashInfer-Bench's
// element rule at atol = rtol = 1e-2 for 16-bit outputs and 1e-3 for float32
// ones, except the indexer's topk_indices, judged by lib/harness's set and
// sorted-score rule (at 1e-3: torch's float32 scores against the oracle's).
// Every shipped definition of the three op types must have a golden.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>

#include "golden_inputs.hpp"
#include "harness/dsa_judge.hpp"
#include "json/json.hpp"
#include "linear_test_util.hpp"
#include "safetensors/safetensors.hpp"

namespace st = kb::safetensors;
using kb::DType;
using kb::Tensor;
using namespace linear_test;

namespace {

const char* const kOpTypes[] = {"gdn", "mamba_ssu", "dsa_paged"};

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

struct Outcome {
  std::string definition;  // the shipped definition it proves
  bool scaled = false;
  std::vector<std::string> failures;
  std::string summary;
};

Outcome check_golden(const fs::path& file) {
  Outcome out;
  auto fail = [&](std::string why) {
    out.failures.push_back(file.filename().string() + ": " + std::move(why));
    return out;
  };
  auto golden = st::read_file(file.string());
  if (!golden) return fail(golden.error().message);
  const st::Header& h = golden->header;
  if (meta(h, "format") != "kb-golden-v1") return fail("metadata format is not kb-golden-v1");
  auto name = meta(h, "definition");
  if (!name) return fail("metadata has no definition");
  kb::Result<kb::Definition> def = kb::make_error(kb::Code::not_found, "");
  if (auto json = meta(h, "definition_json")) {
    def = kb::read_definition(*json, file.string() + ": metadata definition_json");
    out.scaled = true;
    out.definition = meta(h, "scaled_from").value_or("");
  } else {
    std::optional<fs::path> path;
    for (const char* op : kOpTypes)
      if (fs::exists(definitions_dir() / op / (*name + ".json"))) path = definitions_dir() / op / (*name + ".json");
    if (!path) return fail(fmt::format("definition {} not found under {}", *name, definitions_dir().string()));
    def = kb::read_definition_file(path->string());
    out.definition = *name;
  }
  if (!def) return fail(def.error().message);
  const kb::Definition& d = *def;
  if (d.name != *name) return fail(fmt::format("metadata names {}, its definition is {}", *name, d.name));

  auto axes_doc = kb::json::parse(meta(h, "axes").value_or("{}"), "axes");
  auto scales_doc = kb::json::parse(meta(h, "scales").value_or("{}"), "scales");
  auto scalars_doc = kb::json::parse(meta(h, "scalars").value_or("{}"), "scalars");
  if (!axes_doc || !scales_doc || !scalars_doc) return fail("unreadable metadata");
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
  const auto generated = split_commas(meta(h, "generated").value_or(""));
  std::vector<Tensor> in(d.inputs.size());
  std::vector<kb::Arg> args(d.inputs.size());
  for (std::size_t i = 0; i < d.inputs.size(); ++i) {
    const kb::TensorSpec& s = d.inputs[i];
    if (s.is_scalar()) {
      auto e = get(*scalars_doc, s.name);
      if (!e) return fail(fmt::format("scalar input {} not in metadata scalars", s.name));
      double v;
      if (e->get_double().get(v) != simdjson::SUCCESS) {
        std::int64_t iv;
        if (e->get_int64().get(iv) != simdjson::SUCCESS) return fail(fmt::format("scalar {} is not a number", s.name));
        v = static_cast<double>(iv);
      }
      args[i].scalar = kb::ScalarValue{v};
      continue;
    }
    auto shape = kb::bound_shape(s, axes);
    if (std::find(generated.begin(), generated.end(), s.name) != generated.end()) {
      double scale = 1.0;
      if (auto e = get(*scales_doc, s.name); e && e->get_double().get(scale) != simdjson::SUCCESS) {
        std::int64_t iv = 1;
        if (e->get_int64().get(iv) != simdjson::SUCCESS) return fail(fmt::format("bad scale for {}", s.name));
        scale = static_cast<double>(iv);
      }
      auto t = kb::golden::generated(d.name, s.name, s.dtype, shape, static_cast<float>(scale));
      if (!t) return fail(t.error().message);
      in[i] = std::move(*t);
    } else if (const st::TensorInfo* info = h.find("in." + s.name)) {
      if (info->dtype != s.dtype || info->shape != shape)
        return fail(fmt::format("in.{} is {} [{}], the definition wants {} [{}]", s.name, kb::dtype_name(info->dtype),
                                fmt::join(info->shape, ", "), kb::dtype_name(s.dtype), fmt::join(shape, ", ")));
      auto t = Tensor::allocate(s.dtype, shape);
      if (!t) return fail(t.error().message);
      auto bytes = golden->bytes(*info);
      if (bytes.size() != t->nbytes()) return fail(fmt::format("in.{}: byte size mismatch", s.name));
      if (!bytes.empty()) std::memcpy(t->bytes(), bytes.data(), bytes.size());
      in[i] = std::move(*t);
    } else if (s.optional) {
      continue;  // None
    } else {
      return fail(fmt::format("input {} neither stored, generated nor optional", s.name));
    }
    args[i].tensor = &in[i];
  }
  auto outputs = kb::allocate_outputs(d, axes);
  if (!outputs) return fail(outputs.error().message);
  for (auto& t : *outputs) t.fill_bytes(0xFF);
  auto oracle = kb::find_oracle(d);
  if (!oracle) return fail(oracle.error().message);
  kb::OracleCall call{d, axes, args, *outputs, 0};
  if (auto r = (*oracle)->run(call); !r) return fail(r.error().message);

  std::string line = fmt::format("{}{}:", file.filename().string(), out.scaled ? " (scaled)" : "");
  for (std::size_t o = 0; o < d.outputs.size(); ++o) {
    const std::string key = "out." + d.outputs[o].name;
    const st::TensorInfo* info = h.find(key);
    if (!info) return fail(key + " missing");
    auto y = Tensor::allocate(info->dtype, info->shape);
    if (!y) return fail(y.error().message);
    auto bytes = golden->bytes(*info);
    if (bytes.size() != y->nbytes()) return fail(key + ": byte size mismatch");
    if (!bytes.empty()) std::memcpy(y->bytes(), bytes.data(), bytes.size());
    const Tensor& x = (*outputs)[o];
    kb::Tolerance tol;
    tol.atol = tol.rtol = info->dtype == DType::float32 || kb::dtype_is_integer(info->dtype) ? 1e-3 : 1e-2;
    kb::Comparison c = kb::judge_output(d, args, o, x, *y, tol);
    line += fmt::format(" {}: max_abs {:.3g} max_rel {:.3g}", key, c.max_abs, c.max_rel);
    if (c.verdict != kb::Comparison::Verdict::match) out.failures.push_back(fmt::format("{}: {}", key, c.detail));
    if (kb::judged_by_topk_scores(d) && d.outputs[o].name == "topk_indices") {
      // The selections are also the same sets row by row (ties aside, which
      // random fp8 data does not produce).
      std::int64_t rows = x.dim(0), k = x.dim(1), differing = 0;
      for (std::int64_t r = 0; r < rows; ++r) {
        std::vector<double> a, b;
        for (std::int64_t j = 0; j < k; ++j) {
          a.push_back(kb::element_as_double(x, r * k + j));
          b.push_back(kb::element_as_double(*y, r * k + j));
        }
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        differing += a != b;
      }
      line += fmt::format(" ({} rows, {} with a different set)", rows, differing);
      if (differing) out.failures.push_back(fmt::format("{}: {} rows select a different set", key, differing));
    }
  }
  out.summary = line;
  return out;
}

TEST_CASE("gdn, mamba_ssu and dsa_paged oracles reproduce their goldens") {
  const fs::path dir = fs::path(env_or("KB_GOLDENS_DIR", "tests/goldens")) / "linear";
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file() && it->path().extension() == ".safetensors") files.push_back(it->path());
  std::sort(files.begin(), files.end());
  REQUIRE_MESSAGE(!files.empty(), "no goldens in " << dir.string()
                                                   << ": run tests/goldens/make/linear.py DEFINITIONS_DIR tests/goldens/linear");
  std::set<std::string> proven;
  for (const auto& f : files) {
    Outcome o = check_golden(f);
    MESSAGE(o.summary);
    for (const auto& why : o.failures) FAIL_CHECK(why);
    if (o.failures.empty()) proven.insert(o.definition);
  }
  for (const char* op : kOpTypes) {
    std::vector<fs::path> defs;
    for (fs::directory_iterator it(definitions_dir() / op, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().extension() == ".json") defs.push_back(it->path());
    CHECK(!defs.empty());
    for (const auto& p : defs) {
      INFO(p.string());
      CHECK(proven.count(p.stem().string()) == 1);
    }
  }
}

}  // namespace
