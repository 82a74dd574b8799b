// Reading, writing and validating FlashInfer Trace objects.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "json/json.hpp"
#include "schema/io.hpp"
#include "schema/validate.hpp"

namespace fs = std::filesystem;

namespace {

std::string shared_dir() {
  const char* env = std::getenv("KB_SHARED_DIR");
  return env ? env : "../shared";
}

// First error line of reading `text` as a definition ("" if it reads fine).
std::string definition_error(const std::string& text) {
  kb::Diagnostics d;
  auto r = kb::read_definition(text, "x.json", &d);
  return r ? std::string() : d.first_error();
}

const char* kGemm = R"({
  "name": "gemm_small", "op_type": "gemm",
  "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 8}, "K": {"type": "const", "value": 4}},
  "inputs": {"A": {"shape": ["M", "K"], "dtype": "float16"}, "B": {"shape": ["N", "K"], "dtype": "float16"}},
  "outputs": {"C": {"shape": ["M", "N"], "dtype": "float16"}},
  "reference": "import torch\n\ndef run(A, B):\n    return A @ B.T\n"
})";

std::string with(std::string text, const std::string& from, const std::string& to) {
  auto pos = text.find(from);
  REQUIRE_MESSAGE(pos != std::string::npos, from);
  return text.replace(pos, from.size(), to);
}

}  // namespace

TEST_CASE("every shipped definition reads, writes and reads back to the same object") {
  auto dir = fs::path(shared_dir()) / "flashinfer-trace" / "definitions";
  REQUIRE_MESSAGE(fs::is_directory(dir), "needs ../shared (set KB_SHARED_DIR)");
  int n = 0;
  for (auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    kb::Diagnostics diags;
    auto d = kb::read_definition_file(e.path().string(), &diags);
    REQUIRE_MESSAGE(d.ok(), diags.errors_text());
    std::string text = kb::to_json(*d);
    auto back = kb::read_definition(text, "roundtrip", &diags);
    REQUIRE_MESSAGE(back.ok(), diags.errors_text());
    CHECK(*back == *d);
    CHECK(kb::to_json(*back) == text);  // writing is a fixed point
    // Signature order is kept exactly as written.
    CHECK(d->inputs.size() + d->outputs.size() > 0);
    ++n;
  }
  CHECK(n == 132);
}

TEST_CASE("every shipped workload line reads, writes and reads back to the same trace") {
  auto dir = fs::path(shared_dir()) / "flashinfer-trace" / "workloads";
  int lines = 0;
  for (auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().extension() != ".jsonl") continue;
    std::ifstream f(e.path());
    std::string line;
    while (std::getline(f, line)) {
      if (line.empty()) continue;
      kb::Diagnostics diags;
      auto t = kb::read_trace(line, "line", &diags);
      REQUIRE_MESSAGE(t.ok(), diags.errors_text());
      auto text = kb::to_json(*t);
      CHECK(text.find('\n') == std::string::npos);  // one JSONL line
      auto back = kb::read_trace(text, "roundtrip", &diags);
      REQUIRE(back.ok());
      CHECK(*back == *t);
      ++lines;
    }
  }
  CHECK(lines == 663);
}

TEST_CASE("definition details are read as written") {
  auto d = kb::read_definition(kGemm, "x.json");
  REQUIRE(d.ok());
  CHECK(d->name == "gemm_small");
  REQUIRE(d->axes.size() == 3);
  CHECK(d->axes[0].kind == kb::AxisKind::var);
  CHECK(d->axes[1].value == 8);
  CHECK(d->inputs[0].name == "A");
  CHECK(d->inputs[1].name == "B");
  CHECK(d->inputs[0].dtype == kb::DType::float16);
  CHECK(d->dialect == kb::Dialect::flashinfer_trace);
}

TEST_CASE("scalars, 0-D tensors and all 11 dtypes survive a round trip") {
  const char* dtypes[] = {"float32", "float16",  "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1",
                          "int64",   "int32",    "int16",    "int8",          "bool"};
  std::string inputs;
  int i = 0;
  for (const char* dt : dtypes) inputs += fmt::format(R"("t{}": {{"shape": ["M"], "dtype": "{}"}},)", i++, dt);
  std::string text = fmt::format(R"({{"name": "all", "op_type": "x", "axes": {{"M": {{"type": "var"}}}},
    "inputs": {{{} "s": {{"shape": null, "dtype": "float32"}}, "z": {{"shape": [], "dtype": "int32"}}}},
    "outputs": {{"o": {{"shape": ["M"], "dtype": "float32"}}}}, "reference": "def run(*a):\n    pass\n"}})",
                                 inputs);
  kb::Diagnostics diags;
  auto d = kb::read_definition(text, "x.json", &diags);
  REQUIRE_MESSAGE(d.ok(), diags.errors_text());
  REQUIRE(d->inputs.size() == 13);
  for (int k = 0; k < 11; ++k) CHECK(kb::dtype_name(d->inputs[k].dtype) == dtypes[k]);
  CHECK(d->inputs[11].is_scalar());
  CHECK(!d->inputs[12].is_scalar());
  CHECK(d->inputs[12].rank() == 0);
  auto back = kb::read_definition(kb::to_json(*d), "rt");
  REQUIRE(back.ok());
  CHECK(*back == *d);
}

TEST_CASE("the seed-001 dialect is read") {
  const char* seed = R"({
    "id": "rmsnorm_seed",
    "axes": {"B": {"type": "var"}, "Q": {"type": "var", "parent": "B"}, "H": {"type": "const", "value": 16}},
    "assumptions": ["H % 2 == 0"],
    "inputs": {"x": {"shape": ["Q", "H"], "dtype": "float8_e4m3"}, "eps": {"shape": [], "dtype": "float32"},
               "w": {"shape": ["H"]}},
    "outputs": {"y": {"shape": ["Q", "H"], "dtype": "float16"}},
    "reference_code": "def run(x, eps, w, y):\n    pass\n"
  })";
  kb::Diagnostics diags;
  auto d = kb::read_definition(seed, "seed.json", &diags);
  REQUIRE_MESSAGE(d.ok(), diags.errors_text());
  CHECK(d->dialect == kb::Dialect::seed001);
  CHECK(d->name == "rmsnorm_seed");
  CHECK(d->constraints == std::vector<std::string>{"H % 2 == 0"});
  CHECK(d->axes[1].parent == std::optional<std::string>("B"));
  CHECK(d->inputs[0].dtype == kb::DType::float8_e4m3fn);
  CHECK(d->inputs[1].is_scalar());              // seed scalars are shape []
  CHECK(d->inputs[2].dtype == kb::DType::float16);  // seed default dtype
  CHECK(d->reference.find("def run") == 0);
  // seed-001 has no op_type; FlashInfer-Bench requires one, so the current
  // dialect refuses the definition until it gets one.
  CHECK(kb::read_definition(kb::to_json(*d), "rt").error().message == "rt: definition.op_type: must not be empty");
  d->op_type = "rmsnorm";
  // Written back in the current dialect, it reads as the same definition.
  auto back = kb::read_definition(kb::to_json(*d), "rt");
  REQUIRE(back.ok());
  CHECK(back->dialect == kb::Dialect::flashinfer_trace);
  CHECK(*back == *d);
  // "code" is the other seed spelling of the reference.
  auto d2 = kb::read_definition(with(seed, "reference_code", "code"), "seed.json");
  CHECK(d2.ok());
}

TEST_CASE("definition errors name the JSON path") {
  CHECK(definition_error(with(kGemm, R"(["M", "K"])", R"(["M", "H"])")) ==
        R"(x.json: definition.inputs.A.shape[1]: unknown axis "H")");
  CHECK(definition_error(with(kGemm, R"("dtype": "float16"}, "B")", R"("dtype": "float17"}, "B")"))
            .find("x.json: definition.inputs.A.dtype: unknown dtype \"float17\"") == 0);
  CHECK(definition_error(with(kGemm, R"("outputs": {"C")", R"("outputs": {"A")")) ==
        "x.json: definition.outputs.A: name is also an input (input and output names must differ)");
  CHECK(definition_error(with(kGemm, "def run(A, B)", "def runner(A, B)")) ==
        "x.json: definition.reference: has no top-level `def run(...)`");
  CHECK(definition_error(with(kGemm, "\"value\": 8", "\"value\": -8")) ==
        "x.json: definition.axes.N.value: expected a non-negative integer, got -8");
  CHECK(definition_error(with(kGemm, R"("name": "gemm_small", )", "")) ==
        "x.json: definition.name: required field is missing");
  CHECK(definition_error(with(kGemm, R"("type": "var")", R"("type": "variable")")) ==
        R"(x.json: definition.axes.M.type: expected "const" or "var", got "variable")");
  CHECK(definition_error(with(kGemm, R"("reference")", R"("constraints": ["N >"], "reference")"))
            .find("x.json: definition.constraints[0]: `N >`: column") == 0);
  CHECK(definition_error(with(kGemm, R"("reference")", R"("constraints": ["Q == 1"], "reference")"))
            .find("unknown name \"Q\"") != std::string::npos);
  CHECK(definition_error(with(kGemm, "{\n  \"name\"", "{\"name\": \"a\", \n  \"name\"")) .find("duplicate key") != std::string::npos);
  CHECK(definition_error("{\"name\": ").find("x.json: invalid JSON") == 0);
  CHECK(definition_error("").find("x.json: invalid JSON: empty document") == 0);
  CHECK(definition_error("[1, 2]") == "x.json: definition: expected an object, got array [1,2]");
}

TEST_CASE("violated axis-only constraints show their values") {
  auto r = kb::read_definition(with(kGemm, R"("reference")", R"("constraints": ["N == 2 * K + 1"], "reference")"),
                               "x.json");
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("x.json: definition.constraints[0]: constraint `N == 2 * K + 1` violated") == 0);
  CHECK(r.error().message.find("8") != std::string::npos);
  CHECK(r.error().message.find("9") != std::string::npos);
}

TEST_CASE("hostile definitions are refused without allocating their sizes") {
  std::string deep = std::string(5000, '[') + std::string(5000, ']');
  CHECK(definition_error(deep).find("nested deeper than") != std::string::npos);
  auto huge = with(kGemm, "\"value\": 8", "\"value\": 1000000000000");
  huge = with(huge, "\"value\": 4", "\"value\": 1000000000000");
  CHECK(definition_error(huge).find("const axes give more than") != std::string::npos);
  CHECK(definition_error(with(kGemm, "\"value\": 8", "\"value\": 18446744073709551615")) ==
        "x.json: definition.axes.N.value: integer 18446744073709551615 is too large");
  CHECK(definition_error(with(kGemm, "\"value\": 8", "\"value\": 100000000000000000000")).find("x.json: invalid JSON") == 0);
  CHECK(definition_error(std::string(5000, '[')).find("x.json: invalid JSON") == 0);
  // A name becomes a file name: at most 255 bytes, and a long one is cut in the message.
  CHECK(definition_error(with(kGemm, "gemm_small", std::string(255, 'x'))).empty());
  CHECK(definition_error(with(kGemm, "gemm_small", std::string(1 << 20, 'x'))) ==
        "x.json: definition.name: \"" + std::string(64, 'x') +
            "\"... is not usable as a file name: it is 1048576 bytes long (at most 255) (kb writes traces to "
            "OUT/traces/<author>/<op_type>/<definition>.jsonl)");
}

TEST_CASE("workloads are checked against their definition") {
  auto d = kb::read_definition(kGemm, "x.json");
  REQUIRE(d.ok());
  auto check = [&](const std::string& text) {
    kb::Diagnostics diags;
    auto t = kb::read_trace(text, "w.jsonl:3", &diags);
    if (!t) return diags.first_error();
    kb::CheckContext ctx;
    ctx.origin = "w.jsonl:3";
    ctx.path = "workload";
    kb::validate_workload_against(t->workload, *d, ctx, diags);
    return diags.first_error();
  };
  std::string ok = R"({"definition": "gemm_small", "workload": {"uuid": "u", "axes": {"M": 3},
    "inputs": {"A": {"type": "random"}, "B": {"type": "random"}}}, "solution": null, "evaluation": null})";
  CHECK(check(ok) == "");
  CHECK(check(with(ok, R"("M": 3)", R"("M": -3)")) ==
        "w.jsonl:3: workload.axes.M: expected a non-negative integer, got -3");
  CHECK(check(with(ok, R"("M": 3)", R"("M": 3, "N": 8)")) ==
        "w.jsonl:3: workload.axes.N: axis is const (8) in gemm_small; workloads bind var axes only");
  CHECK(check(with(ok, R"("M": 3)", R"("X": 3)")) ==
        "w.jsonl:3: workload.axes.X: definition gemm_small has no axis \"X\"");
  CHECK(check(with(ok, R"(, "B": {"type": "random"})", "")) ==
        "w.jsonl:3: workload.inputs: input \"B\" of gemm_small is missing");
  CHECK(check(with(ok, R"("B": {"type": "random"})", R"("B": {"type": "random"}, "C": {"type": "random"})")) ==
        "w.jsonl:3: workload.inputs.C: definition gemm_small has no input \"C\" (it is an output)");
  CHECK(check(with(ok, R"("B": {"type": "random"})", R"("B": {"type": "scalar", "value": 1.5})")) ==
        "w.jsonl:3: workload.inputs.B.type: \"B\" is a rank-2 tensor: a scalar value cannot stand for it");
  CHECK(check(with(ok, R"("B": {"type": "random"})", R"("B": {"type": "safetensors", "path": "/etc/x", "tensor_key": "B"})")) ==
        "w.jsonl:3: workload.inputs.B.path: \"/etc/x\" must be a relative path inside the dataset (no leading '/', no '..')");
  CHECK(check(with(ok, R"("M": 3)", R"("M": 1000000000000000)")).find("over the limit") != std::string::npos);
  CHECK(check(with(ok, R"("type": "random"}, "B")", R"("type": "randn"}, "B")")) ==
        "w.jsonl:3: workload.inputs.A.type: expected \"random\", \"scalar\" or \"safetensors\", got \"randn\"");
}

TEST_CASE("scalar inputs must have values of the right kind") {
  const char* def = R"({"name": "s", "op_type": "x", "axes": {"M": {"type": "var"}},
    "inputs": {"x": {"shape": ["M"], "dtype": "float32"}, "eps": {"shape": null, "dtype": "float32"},
               "k": {"shape": null, "dtype": "int32"}, "flag": {"shape": null, "dtype": "bool"}},
    "outputs": {"y": {"shape": ["M"], "dtype": "float32"}}, "reference": "def run(x, eps, k, flag):\n  pass"})";
  auto d = kb::read_definition(def, "s.json");
  REQUIRE(d.ok());
  auto check = [&](const std::string& eps, const std::string& k, const std::string& flag) {
    std::string text = fmt::format(R"({{"uuid": "u", "axes": {{"M": 2}}, "inputs": {{"x": {{"type": "random"}},
      "eps": {}, "k": {}, "flag": {}}}}})", eps, k, flag);
    kb::Diagnostics diags;
    auto w = kb::read_workload(text, "w", &diags);
    if (!w) return diags.first_error();
    kb::CheckContext ctx;
    ctx.origin = "w";
    ctx.path = "workload";
    kb::validate_workload_against(*w, *d, ctx, diags);
    return diags.first_error();
  };
  std::string f = R"({"type": "scalar", "value": 1e-5})", i = R"({"type": "scalar", "value": 3})",
              b = R"({"type": "scalar", "value": true})";
  CHECK(check(f, i, b) == "");
  CHECK(check(i, i, b) == "");  // an int is a fine float
  CHECK(check(f, f, b) == "w: workload.inputs.k.value: 1e-05 does not fit dtype int32 (expected an integer)");
  CHECK(check(f, i, i) == "w: workload.inputs.flag.value: 3 does not fit dtype bool (expected a boolean)");
  CHECK(check(R"({"type": "random"})", i, b) ==
        "w: workload.inputs.eps.type: \"eps\" is a scalar (float32): its input must be {\"type\": \"scalar\"}");
}

TEST_CASE("evaluations follow the status and field rules") {
  auto eval = [](const std::string& status, bool corr, bool perf) {
    std::string text = fmt::format(R"({{"status": "{}", "environment": {{"hardware": "NVIDIA H200", "libs": {{"torch": "2.11"}}}},
      "timestamp": "2026-11-22T10:00:00Z", "log": ""{}{}}})", status,
                                   corr ? R"(, "correctness": {"max_relative_error": 0.001, "max_absolute_error": 0.5, "extra": {"matched": 1.0}})" : "",
                                   perf ? R"(, "performance": {"latency_ms": 0.25, "reference_latency_ms": 1.0, "speedup_factor": 4.0})" : "");
    kb::Diagnostics diags;
    auto e = kb::read_evaluation(text, "e", &diags);
    return std::pair{e.ok() ? kb::to_json(*e) : std::string(), diags.first_error()};
  };
  CHECK(eval("PASSED", true, true).second == "");
  CHECK(eval("PASSED", true, false).second == "e: evaluation.performance: required when status is PASSED");
  CHECK(eval("INCORRECT_NUMERICAL", true, false).second == "");
  CHECK(eval("INCORRECT_NUMERICAL", true, true).second ==
        "e: evaluation.performance: must be absent when status is INCORRECT_NUMERICAL");
  CHECK(eval("RUNTIME_ERROR", false, false).second == "");
  CHECK(eval("TIMEOUT", true, false).second == "e: evaluation.correctness: must be absent when status is TIMEOUT");
  CHECK(eval("CRASHED", false, false).second.find("e: evaluation.status: unknown status \"CRASHED\"") == 0);
  // Round trip of every status with the fields its rules call for.
  for (auto st : {kb::EvalStatus::passed, kb::EvalStatus::incorrect_shape, kb::EvalStatus::incorrect_dtype,
                  kb::EvalStatus::incorrect_numerical, kb::EvalStatus::runtime_error, kb::EvalStatus::compile_error,
                  kb::EvalStatus::timeout}) {
    bool corr = st == kb::EvalStatus::passed || st == kb::EvalStatus::incorrect_numerical;
    auto [json, err] = eval(std::string(kb::eval_status_name(st)), corr, st == kb::EvalStatus::passed);
    REQUIRE(err == "");
    auto back = kb::read_evaluation(json, "rt");
    REQUIRE(back.ok());
    CHECK(back->status == st);
    CHECK(kb::to_json(*back) == json);
  }
}

TEST_CASE("a full trace with an evaluation round-trips, and NaN errors are kept") {
  kb::Trace t;
  t.definition = "gemm_small";
  t.workload.uuid = "abc";
  t.workload.axes = {{"M", 7}};
  auto scalar = [](kb::ScalarValue v) {
    kb::InputSpec s;
    s.kind = kb::InputKind::scalar;
    s.value = v;
    return s;
  };
  kb::InputSpec blob;
  blob.kind = kb::InputKind::safetensors;
  blob.path = "blob/x.safetensors";
  blob.tensor_key = "B";
  t.workload.inputs = {{"A", kb::InputSpec{}},      {"s", scalar(0.5)},   {"i", scalar(std::int64_t{3})},
                       {"f", scalar(2.0)},          {"b", scalar(false)}, {"B", blob}};
  t.solution = "kb_cublaslt";
  kb::Evaluation e;
  e.status = kb::EvalStatus::incorrect_numerical;
  e.environment = {"NVIDIA H100 80GB HBM3", {{"cuda", "13.0"}, {"kb", "0.1.0"}}};
  e.timestamp = "2026-11-22T10:00:00.123+01:00";
  e.log = "line 1\nline \"2\"\t\x01";
  e.correctness = kb::Correctness{std::nan(""), 0.125, R"({"matched_ratio":0.5})"};
  t.evaluation = e;
  std::string text = kb::to_json(t);
  CHECK(text.find("\"max_relative_error\":\"NaN\"") != std::string::npos);
  CHECK(text.find("\"value\":2.0") != std::string::npos);  // floats stay floats
  kb::Diagnostics diags;
  auto back = kb::read_trace(text, "rt", &diags);
  REQUIRE_MESSAGE(back.ok(), diags.errors_text());
  CHECK(std::isnan(back->evaluation->correctness->max_relative_error));
  CHECK(kb::to_json(*back) == text);
  CHECK(back->workload == t.workload);
  CHECK(std::holds_alternative<double>(back->workload.inputs[3].second.value));
  CHECK(back->evaluation->log == e.log);
}

TEST_CASE("solutions: sources and entry point rules") {
  std::string ok = R"({"name": "my_gemm", "definition": "gemm_small", "author": "me",
    "spec": {"language": "cuda", "target_hardware": ["NVIDIA_H100"], "entry_point": "main.cu::run",
             "dependencies": [], "destination_passing_style": true},
    "sources": [{"path": "main.cu", "content": "extern \"C\" void run() {}"}, {"path": "inc/a.h", "content": ""}]})";
  auto err = [](const std::string& text) {
    kb::Diagnostics d;
    auto s = kb::read_solution(text, "s.json", &d);
    return s ? std::string() : d.first_error();
  };
  CHECK(err(ok) == "");
  auto s = kb::read_solution(ok, "s.json");
  REQUIRE(s.ok());
  auto back = kb::read_solution(kb::to_json(*s), "rt");
  REQUIRE(back.ok());
  CHECK(*back == *s);
  CHECK(err(with(ok, "main.cu::run", "other.cu::run")) ==
        "s.json: solution.spec.entry_point: entry file \"other.cu\" is not among the sources");
  CHECK(err(with(ok, "main.cu::run", "main.cu")) ==
        "s.json: solution.spec.entry_point: \"main.cu\" is not of the form \"file::symbol\"");
  CHECK(err(with(ok, "inc/a.h", "../a.h")) ==
        "s.json: solution.sources[1].path: \"../a.h\" must be a relative path (no leading '/', no '..')");
  CHECK(err(with(ok, "inc/a.h", "main.cu")) == "s.json: solution.sources[1].path: duplicate path \"main.cu\"");
  CHECK(err(with(ok, "\"cuda\"", "\"fortran\"")).find("unknown language \"fortran\"") != std::string::npos);
}

TEST_CASE("helpers: ISO 8601, def run, float formatting") {
  CHECK(kb::is_iso8601("2025-01-02T03:04:05"));
  CHECK(kb::is_iso8601("2025-01-02T03:04:05.123456Z"));
  CHECK(kb::is_iso8601("2025-01-02 03:04:05+05:30"));
  CHECK(!kb::is_iso8601("2025-13-02T03:04:05"));
  CHECK(!kb::is_iso8601("yesterday"));
  CHECK(kb::has_top_level_run("import x\n@torch.no_grad()\ndef run(a):\n  pass"));
  CHECK(!kb::has_top_level_run("class A:\n    def run(self):\n        pass"));
  CHECK(!kb::has_top_level_run("def running(a): pass"));
  CHECK(kb::json::format_double(1.0) == "1.0");
  CHECK(kb::json::format_double(0.1) == "0.1");
  CHECK(kb::json::format_double(1e-5) == "1e-05");
  CHECK(kb::json::quote("a\"b\\c\n\x02") == "\"a\\\"b\\\\c\\n\\u0002\"");
}

TEST_CASE("JSON syntax errors say where and what") {
  CHECK(definition_error("{\"a\": 1,}") == "x.json: invalid JSON: column 9: expected a string key after ',', found '}'");
  CHECK(definition_error("{\n  \"a\": 1\n}}") == "x.json: invalid JSON: line 3, column 2: unexpected '}' after the end of the document");
  CHECK(definition_error("{\"a\": NaN}") == "x.json: invalid JSON: column 7: expected a value, found `NaN`");
  CHECK(definition_error("{\"a\": 18446744073709551616}") == "x.json: invalid JSON: column 7: integer 18446744073709551616 is too large");
  CHECK(definition_error("[1, 2") == "x.json: invalid JSON: column 6: unexpected end of document (1 bracket still open)");
  CHECK(definition_error("{\"a\": \"\xff\"}") == "x.json: invalid JSON: column 8: invalid UTF-8 in a string");
  CHECK(!kb::json::find_syntax_error("{\"a\": [1, 2.5e3, -0, \"\\u00e9\", true, null, {}]}").has_value());
}

TEST_CASE("names must be Python identifiers; def run is found the way Python would") {
  CHECK(definition_error(with(kGemm, R"("A": {"shape")", R"("x y": {"shape")")) ==
        "x.json: definition.inputs[\"x y\"]: tensor name must be a Python identifier (it is a parameter of `run`)");
  CHECK(definition_error(with(kGemm, R"("A": {"shape")", R"("class": {"shape")")).find("must be a Python identifier") !=
        std::string::npos);
  CHECK(kb::has_top_level_run("def  run(x):\n  pass"));
  CHECK(kb::has_top_level_run("async def run(x):\n  pass"));
  CHECK(!kb::has_top_level_run("s = '''\ndef run(x):\n'''\n"));
  CHECK(kb::has_top_level_run("s = '''doc'''\ndef run(x):\n  pass"));
}

TEST_CASE("shape constraints are decided from the axes; scalar values must fit their dtype") {
  auto d = kb::read_definition(with(kGemm, R"("reference")", R"("constraints": ["A.shape[5] == 1"], "reference")"), "x.json");
  REQUIRE(d.ok());  // M is var: decided per workload
  kb::Diagnostics diags;
  auto w = kb::read_workload(R"({"uuid": "u", "axes": {"M": 2}, "inputs": {"A": {"type": "random"}, "B": {"type": "random"}}})", "w");
  REQUIRE(w.ok());
  kb::CheckContext ctx;
  ctx.origin = "w";
  ctx.path = "workload";
  kb::validate_workload_against(*w, *d, ctx, diags);
  CHECK(diags.first_error().find("constraint `A.shape[5] == 1` cannot be evaluated") != std::string::npos);
  // All of B's axes are const: decided when the definition is read.
  CHECK(definition_error(with(kGemm, R"("reference")", R"("constraints": ["B.shape[0] == 9"], "reference")"))
            .find("x.json: definition.constraints[0]: constraint `B.shape[0] == 9` violated") == 0);

  const char* def = R"({"name": "s", "op_type": "x", "axes": {"M": {"type": "var"}},
    "inputs": {"x": {"shape": ["M"], "dtype": "float32"}, "k": {"shape": null, "dtype": "int32"},
               "e": {"shape": null, "dtype": "float32"}},
    "outputs": {"y": {"shape": ["M"], "dtype": "float32"}}, "reference": "def run(x, k, e):\n  pass"})";
  auto sd = kb::read_definition(def, "s.json");
  REQUIRE(sd.ok());
  auto check = [&](const char* k, const char* e) {
    kb::Diagnostics dg;
    auto wl = kb::read_workload(fmt::format(R"({{"uuid": "u", "axes": {{"M": 1}}, "inputs": {{"x": {{"type": "random"}},
      "k": {{"type": "scalar", "value": {}}}, "e": {{"type": "scalar", "value": {}}}}}}})", k, e), "w", &dg);
    REQUIRE(wl.ok());
    kb::validate_workload_against(*wl, *sd, ctx, dg);
    return dg.first_error();
  };
  CHECK(check("7", "0.5") == "");
  CHECK(check("99999999999", "0.5") == "w: workload.inputs.k.value: 99999999999 does not fit dtype int32");
  CHECK(check("7", "1e300") == "w: workload.inputs.e.value: 1e+300 does not fit dtype float32");
}

TEST_CASE("Diagnostics stay fast with many errors") {
  kb::Diagnostics d;
  for (int i = 0; i < 200000; ++i) d.error("f", "p", "m");
  CHECK(d.error_count() == 200000);
  CHECK(d.error_after(0) == "f: p: m");
  // Past the per-file cap the problems are counted, not kept.
  CHECK(d.items().size() == kb::Diagnostics::kMaxPerFile + 1);
  CHECK(d.error_after(199999) == "... and 199950 more problems in f");
}
