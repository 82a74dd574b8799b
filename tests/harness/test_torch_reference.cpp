// The definition's PyTorch reference as the judge's reference
// (--reference torch). Needs python3 with torch: without it the test exits
// 77 (meson's "skipped") and says why.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <cstdio>

#include "harness/harness.hpp"
#include "harness/torch_reference.hpp"
#include "inputs/inputs.hpp"
#include "json/json.hpp"
#include "schema/io.hpp"
#include "tensor/convert.hpp"

namespace {

kb::Definition def(const std::string& name, const std::string& op_type, const std::string& inputs,
                   const std::string& outputs, const std::string& reference, const std::string& axes =
                   R"("n": {"type": "var"}, "h": {"type": "const", "value": 64})") {
  std::string text = fmt::format(R"({{"name": "{}", "op_type": "{}", "axes": {{{}}}, "inputs": {{{}}},
      "outputs": {{{}}}, "reference": {}}})",
                                 name, op_type, axes, inputs, outputs, kb::json::quote(reference));
  auto d = kb::read_definition(text, "test");
  REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().message));
  return *d;
}

// An op kb has no oracle for: y = x * s + 1 in float32, cast to x's dtype.
kb::Definition scale_def(const std::string& body = "    return (x.float() * s + 1.0).to(x.dtype)\n") {
  return def("scale_plus_one", "kb_test_scale",
             R"("x": {"shape": ["n", "h"], "dtype": "bfloat16"}, "s": {"shape": null, "dtype": "float32"})",
             R"("y": {"shape": ["n", "h"], "dtype": "bfloat16"})", "import torch\n\ndef run(x, s):\n" + body);
}

kb::Workload workload(std::int64_t n, bool with_scalar = true) {
  kb::Workload w;
  w.uuid = "w";
  w.axes = {{"n", n}};
  w.inputs = {{"x", kb::InputSpec{}}};
  if (with_scalar) {
    kb::InputSpec s;
    s.kind = kb::InputKind::scalar;
    s.value = 0.5;
    w.inputs.emplace_back("s", s);
  }
  return w;
}

kb::Implementation scale_impl(float offset) {
  kb::Implementation impl;
  impl.name = "scale_cpu";
  impl.author = "test";
  impl.supports = [](const kb::Definition&) { return std::string(); };
  impl.run = [offset](const kb::ImplementationCall& c) -> kb::Status {
    auto x = kb::to_float(*c.inputs[0].tensor);
    double s = *kb::scalar_as_double(c.inputs[1]);
    for (auto& v : x) v = static_cast<float>(v * s + 1.0 + offset);
    return kb::store_float(x, c.outputs[0]);
  };
  return impl;
}

kb::BenchOptions torch_options() {
  kb::BenchOptions opt;
  opt.reference = kb::ReferenceSource::torch;
  opt.trials = 2;
  opt.time = false;
  return opt;
}

}  // namespace

TEST_CASE("a definition without a kb oracle is judged against its PyTorch reference") {
  auto d = scale_def();
  CHECK(!kb::reference_implementation().supports(d).empty());  // no oracle
  kb::BenchOptions native;
  native.time = false;
  CHECK(!kb::evaluate(d, workload(3), scale_impl(0), native).ok());

  auto ok = kb::evaluate(d, workload(3), scale_impl(0), torch_options());
  REQUIRE_MESSAGE(ok.ok(), (ok.ok() ? "" : ok.error().message));
  CHECK_MESSAGE(ok->evaluation.status == kb::EvalStatus::passed, ok->summary);
  CHECK(ok->evaluation.log.find("PyTorch reference (torch ") != std::string::npos);

  auto wrong = kb::evaluate(d, workload(3), scale_impl(0.25f), torch_options());
  REQUIRE(wrong.ok());
  CHECK(wrong->evaluation.status == kb::EvalStatus::incorrect_numerical);

  // Timed: the reference latency is the PyTorch call's.
  auto opt = torch_options();
  opt.time = true;
  opt.min_samples = 2;
  opt.max_samples = 3;
  auto timed = kb::evaluate(d, workload(3), scale_impl(0), opt);
  REQUIRE(timed.ok());
  REQUIRE(timed->evaluation.performance);
  CHECK(timed->evaluation.performance->reference_latency_ms > 0);
}

TEST_CASE("the runner passes every dtype torch has and casts returned values to the declared dtype") {
  auto d = def("types", "kb_test_types",
               R"("a": {"shape": ["n"], "dtype": "int16"}, "b": {"shape": ["n"], "dtype": "bool"},
                  "c": {"shape": ["n"], "dtype": "float16"}, "e": {"shape": [], "dtype": "int64"},
                  "k": {"shape": null, "dtype": "int32"}, "f": {"shape": null, "dtype": "bool"})",
               R"("sum": {"shape": ["n"], "dtype": "float32"}, "zero_d": {"shape": [], "dtype": "int64"})",
               "import torch\ndef run(a, b, c, e, k, f):\n"
               "    assert isinstance(k, int) and isinstance(f, bool)\n"
               "    return a.double() + b.double() + c.double() + k + f, e + 1\n",
               R"("n": {"type": "var"})");
  auto a = kb::Tensor::allocate(kb::DType::int16, {3}).value();
  auto b = kb::Tensor::allocate(kb::DType::bool_, {3}).value();
  auto c = kb::Tensor::allocate(kb::DType::float16, {3}).value();
  auto e = kb::Tensor::allocate(kb::DType::int64, {}).value();
  float av[3] = {-7, 0, 1000}, bv[3] = {1, 0, 1}, cv[3] = {0.5f, -2.25f, 3};
  REQUIRE(kb::store_float(av, a).ok());
  REQUIRE(kb::store_float(bv, b).ok());
  REQUIRE(kb::store_float(cv, c).ok());
  e.data<std::int64_t>()[0] = 41;
  std::vector<kb::Arg> args(6);
  args[0].tensor = &a;
  args[1].tensor = &b;
  args[2].tensor = &c;
  args[3].tensor = &e;
  args[4].scalar = std::int64_t{10};
  args[5].scalar = true;
  std::vector<kb::Tensor> outs;
  outs.push_back(kb::Tensor::allocate(kb::DType::float32, {3}).value());
  outs.push_back(kb::Tensor::allocate(kb::DType::int64, {}).value());
  auto r = kb::run_torch_reference(d, args, outs, {});
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  const float* s = outs[0].data<float>();
  CHECK(s[0] == doctest::Approx(-7 + 1 + 0.5 + 11));
  CHECK(s[1] == doctest::Approx(0 + 0 - 2.25 + 11));
  CHECK(s[2] == doctest::Approx(1000 + 1 + 3 + 11));
  CHECK(outs[1].data<std::int64_t>()[0] == 42);
  REQUIRE(r->notes.size() == 1);  // float64 cast to float32
  CHECK(r->notes[0].find("output sum: the reference returned float64, cast to float32") != std::string::npos);
}

TEST_CASE("kb's oracle agrees with the PyTorch reference of a bundled-style rmsnorm") {
  auto d = def("rmsnorm_h64", "rmsnorm",
               R"("hidden_states": {"shape": ["n", "h"], "dtype": "bfloat16"}, "weight": {"shape": ["h"], "dtype": "bfloat16"})",
               R"("output": {"shape": ["n", "h"], "dtype": "bfloat16"})",
               "import torch\n\ndef run(hidden_states, weight):\n    EPS = 1e-6\n    x = hidden_states.to(torch.float32)\n"
               "    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)\n"
               "    y = (x * inv_rms) * weight.to(torch.float32)\n    return y.to(hidden_states.dtype)\n");
  kb::Workload w;
  w.uuid = "r";
  w.axes = {{"n", 5}};
  w.inputs = {{"hidden_states", kb::InputSpec{}}, {"weight", kb::InputSpec{}}};
  REQUIRE(kb::reference_implementation().supports(d).empty());
  auto r = kb::evaluate(d, w, kb::reference_implementation(), torch_options());
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  CHECK_MESSAGE(r->evaluation.status == kb::EvalStatus::passed, r->summary);
}

TEST_CASE("failures of the reference are clear errors") {
  SUBCASE("an exception, with the traceback's last lines") {
    auto d = scale_def("    raise ValueError('scale must be positive')\n");
    auto r = kb::evaluate(d, workload(2), scale_impl(0), torch_options());
    REQUIRE(!r.ok());
    CHECK_MESSAGE(r.error().message.find("scale_plus_one: torch reference: the reference raised ValueError: scale must "
                                         "be positive (reference line 4: raise ValueError('scale must be positive'))") !=
                      std::string::npos,
                  r.error().message);
    CHECK(r.error().message.find("last lines of the Python output:") != std::string::npos);
  }
  SUBCASE("a function the installed torch lacks") {
    auto d = scale_def("    return torch.no_such_function_in_any_torch(x)\n");
    auto r = kb::evaluate(d, workload(2), scale_impl(0), torch_options());
    REQUIRE(!r.ok());
    CHECK_MESSAGE(r.error().message.find("AttributeError") != std::string::npos, r.error().message);
    CHECK(r.error().message.find("lacks this attribute: the reference needs a newer PyTorch") != std::string::npos);
  }
  SUBCASE("an assert of the constants it was written for") {
    auto d = scale_def("    assert x.shape[1] == 128\n    return x\n");
    auto r = kb::evaluate(d, workload(2), scale_impl(0), torch_options());
    REQUIRE(!r.ok());
    CHECK_MESSAGE(r.error().message.find("the reference raised AssertionError") != std::string::npos, r.error().message);
    CHECK(r.error().message.find("references often assert the constants of the definition they were written for") !=
          std::string::npos);
  }
  SUBCASE("a shape built from the constants it was written for") {
    auto d = scale_def("    return x.view(2, 2, 128)\n");
    auto r = kb::evaluate(d, workload(2), scale_impl(0), torch_options());
    REQUIRE(!r.ok());
    CHECK_MESSAGE(r.error().message.find("is invalid for input of size") != std::string::npos, r.error().message);
    CHECK(r.error().message.find("references often build shapes from the constants") != std::string::npos);
    CHECK(r.error().message.find("newer PyTorch") == std::string::npos);
  }
  SUBCASE("wrong number of outputs") {
    auto d = scale_def("    return x, x\n");
    auto r = kb::evaluate(d, workload(2), scale_impl(0), torch_options());
    REQUIRE(!r.ok());
    CHECK_MESSAGE(r.error().message.find("the reference returned 2 value(s); the definition has 1 output(s) (y)") !=
                      std::string::npos,
                  r.error().message);
  }
  SUBCASE("wrong shape") {
    auto d = scale_def("    return x[:1]\n");
    auto r = kb::evaluate(d, workload(2), scale_impl(0), torch_options());
    REQUIRE(!r.ok());
    CHECK_MESSAGE(r.error().message.find("output y: the reference returned shape [1, 64]; the definition says [2, 64]") !=
                      std::string::npos,
                  r.error().message);
  }
  SUBCASE("a timeout") {
    auto d = scale_def("    import time\n    time.sleep(30)\n    return x\n");
    auto opt = torch_options();
    opt.torch.timeout_s = 2;
    auto r = kb::evaluate(d, workload(2), scale_impl(0), opt);
    REQUIRE(!r.ok());
    CHECK_MESSAGE(r.error().message.find("did not finish within 2 s") != std::string::npos, r.error().message);
  }
  SUBCASE("python missing") {
    auto opt = torch_options();
    opt.torch.python = "/nonexistent/python3";
    auto r = kb::evaluate(scale_def(), workload(2), scale_impl(0), opt);
    REQUIRE(!r.ok());
    CHECK_MESSAGE(r.error().message.find("cannot start /nonexistent/python3") != std::string::npos, r.error().message);
  }
  SUBCASE("a dtype the installed torch lacks, or float4 which no torch has unpacked") {
    auto d = def("fp4", "kb_test_fp4", R"("x": {"shape": ["n"], "dtype": "float4_e2m1"})",
                 R"("y": {"shape": ["n"], "dtype": "float32"})", "def run(x):\n    return x.float()\n",
                 R"("n": {"type": "var"})");
    auto x = kb::Tensor::allocate(kb::DType::float4_e2m1, {4}).value();
    std::vector<kb::Arg> args(1);
    args[0].tensor = &x;
    std::vector<kb::Tensor> outs;
    outs.push_back(kb::Tensor::allocate(kb::DType::float32, {4}).value());
    auto r = kb::run_torch_reference(d, args, outs, {});
    REQUIRE(!r.ok());
    CHECK_MESSAGE(r.error().message.find("input x: dtype float4_e2m1") != std::string::npos, r.error().message);
  }
}

int main(int argc, char** argv) {
  auto v = kb::torch_version({});
  if (!v) {
    std::printf("SKIP: python3 cannot run torch: %s\n", v.error().message.c_str());
    return 77;
  }
  std::printf("torch %s\n", v->c_str());
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
