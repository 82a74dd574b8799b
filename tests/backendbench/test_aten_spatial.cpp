// Tests of kb's convolution, pooling and upsampling oracles (kernels/aten):
// hand-computed small cases, the adjoint identities that tie convolution_backward
// to convolution over a range of shapes, and PyTorch's own outputs on f64 cases
// (tests/backendbench/goldens/aten_spatial.json, from tests/backendbench/goldens/make/aten_spatial.py).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backendbench/report.hpp"
#include "backendbench/run.hpp"
#include "fixture.hpp"
#include "json/json.hpp"

namespace bb = kb::backendbench;
using bb::Dtype;
using bb::HostTensor;
using kb_test::check_values;
using kb_test::Fixture;
using kb_test::values;

TEST_CASE("convolution: hand-computed 1-D and 2-D cases, bias, groups, transposed") {
  // x = [1, 2, 3], w = [1, 10]: valid correlation [21, 32]; padding 1 adds [1*10 ... 3*1] at the ends
  Fixture v("aten.convolution.default", "((T([1, 1, 3], f32), T([1, 1, 2], f32), None, [1], [0], [1], False, [0], 1), {})",
            {{1, 2, 3}, {1, 10}});
  check_values(v.out(), {21, 32});
  Fixture p("aten.convolution.default",
            "((T([1, 1, 3], f32), T([1, 1, 2], f32), T([1], f32), [1], [1], [1], False, [0], 1), {})",
            {{1, 2, 3}, {1, 10}, {100}});
  check_values(p.out(), {110, 121, 132, 103});
  // stride 2, dilation 2 over [1..5]: taps (0, 2) and (2, 4): 1 + 30 = 31, 3 + 50 = 53
  Fixture sd("aten.convolution.default",
             "((T([1, 1, 5], f32), T([1, 1, 2], f32), None, [2], [0], [2], False, [0], 1), {})",
             {{1, 2, 3, 4, 5}, {1, 10}});
  check_values(sd.out(), {31, 53});
  // groups 2: each output channel sees its own input channel
  Fixture g("aten.convolution.default",
            "((T([1, 2, 2], f32), T([2, 1, 1], f32), None, [1], [0], [1], False, [0], 2), {})",
            {{1, 2, 3, 4}, {10, 100}});
  check_values(g.out(), {10, 20, 300, 400});
  // transposed, stride 2: each input element stamps the kernel at 2 i
  Fixture t("aten.convolution.default",
            "((T([1, 1, 2], f32), T([1, 1, 2], f32), None, [2], [0], [1], True, [0], 1), {})", {{1, 2}, {1, 10}});
  check_values(t.out(), {1, 10, 2, 20});
  Fixture to("aten.convolution.default",
             "((T([1, 1, 2], f32), T([1, 1, 2], f32), None, [2], [0], [1], True, [1], 1), {})", {{1, 2}, {1, 10}});
  check_values(to.out(), {1, 10, 2, 20, 0});
  // 2-D, channels-last input: x = [[1, 2], [3, 4]] stored channel-fastest (one channel: same order)
  Fixture cl("aten.convolution.default",
             "((T([1, 2, 2, 2], f16, stride=(8, 1, 4, 2)), T([1, 2, 2, 2], f16), None, [1, 1], [0, 0], [1, 1], False, "
             "[0, 0], 1), {})",
             {{1, 10, 2, 20, 3, 30, 4, 40}, {1, 1, 1, 1, 1, 0, 0, 0}});
  check_values(cl.out(), {1 + 2 + 3 + 4 + 10});
  CHECK(cl.out().dtype == Dtype::f16);
  CHECK(cl.out().shape == std::vector<std::int64_t>{1, 1, 1, 1});
  Fixture bad("aten.convolution.default",
              "((T([1, 3, 4], f32), T([2, 2, 1], f32), None, [1], [0], [1], False, [0], 1), {})");
  CHECK(bad.error.find("channels") != std::string::npos);
  Fixture small("aten.convolution.default",
                "((T([1, 1, 2], f32), T([1, 1, 3], f32), None, [1], [0], [1], False, [0], 1), {})");
  CHECK(small.error.find("smaller than the dilated kernel") != std::string::npos);
}

namespace {

std::vector<double> random_values(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

std::string dims(const std::vector<std::int64_t>& v) { return bb::shape_text(v); }

}  // namespace

TEST_CASE("convolution_backward is the adjoint of convolution: <conv(x, w), y> = <x, gx(y)> = <w, gw(y)>") {
  struct Config {
    std::vector<std::int64_t> x, w, stride, pad, dil, opad;
    bool transposed;
    std::int64_t groups;
  };
  const Config configs[] = {
      {{2, 3, 9}, {4, 3, 3}, {1}, {0}, {1}, {0}, false, 1},
      {{1, 4, 11}, {6, 2, 3}, {2}, {2}, {3}, {0}, false, 2},
      {{2, 4, 7, 6}, {4, 1, 3, 3}, {2, 1}, {1, 1}, {1, 2}, {0, 0}, false, 4},
      {{1, 6, 5, 5}, {6, 2, 2, 3}, {3, 2}, {0, 1}, {2, 1}, {0, 0}, false, 3},
      {{2, 4, 3, 4}, {4, 3, 3, 2}, {2, 3}, {1, 0}, {1, 1}, {1, 2}, true, 2},
      {{1, 3, 4}, {3, 2, 5}, {2}, {1}, {2}, {1}, true, 1},
      {{1, 2, 3, 3, 2}, {4, 2, 2, 2, 1}, {1, 2, 1}, {1, 0, 0}, {1, 1, 1}, {0, 0, 0}, false, 1},
  };
  std::mt19937_64 rng(7);
  for (const Config& c : configs) {
    const std::string common = fmt::format("[{}], [{}], [{}], {}, [{}], {}", fmt::join(c.stride, ", "),
                                           fmt::join(c.pad, ", "), fmt::join(c.dil, ", "),
                                           c.transposed ? "True" : "False", fmt::join(c.opad, ", "), c.groups);
    auto numel = [](const std::vector<std::int64_t>& s) {
      std::int64_t n = 1;
      for (auto d : s) n *= d;
      return static_cast<std::size_t>(n);
    };
    auto xv = random_values(numel(c.x), rng), wv = random_values(numel(c.w), rng);
    const std::string fwd_text = fmt::format("((T({}, f64), T({}, f64), None, {}), {{}})", dims(c.x), dims(c.w), common);
    INFO(fwd_text);
    Fixture f("aten.convolution.default", fwd_text, {xv, wv});
    const HostTensor& y = f.out();
    auto yv = values(y);
    auto gyv = random_values(yv.size(), rng);
    Fixture b("aten.convolution_backward.default",
              fmt::format("((T({}, f64), T({}, f64), T({}, f64), [0], {}, [True, True, True]), {{}})", dims(y.shape),
                          dims(c.x), dims(c.w), common),
              {gyv, xv, wv});
    const double lhs = dot(yv, gyv);
    CHECK(dot(xv, values(b.out(0))) == doctest::Approx(lhs).epsilon(1e-12));
    CHECK(dot(wv, values(b.out(1))) == doctest::Approx(lhs).epsilon(1e-12));
    // grad_bias: the sum of grad_output per output channel
    auto gb = values(b.out(2));
    const std::size_t cy = static_cast<std::size_t>(y.shape[1]), per = gyv.size() / (static_cast<std::size_t>(y.shape[0]) * cy);
    double want0 = 0;
    for (std::size_t n = 0; n < static_cast<std::size_t>(y.shape[0]); ++n)
      for (std::size_t k = 0; k < per; ++k) want0 += gyv[n * cy * per + k];
    CHECK(gb.size() == cy);
    CHECK(gb[0] == doctest::Approx(want0).epsilon(1e-12));
  }
}

TEST_CASE("pooling: hand-computed max, average and adaptive windows") {
  // 3x3 plane, kernel 2, stride 1: maxima and their flat indices
  Fixture m("aten.max_pool2d_with_indices.default", "((T([1, 1, 3, 3], f32), [2, 2], [1, 1]), {})",
            {{1, 5, 2, 4, 3, 9, 7, 8, 6}});
  check_values(m.out(0), {5, 9, 8, 9});
  check_values(m.out(1), {1, 5, 7, 5});
  CHECK(m.out(1).dtype == Dtype::i64);
  // NaN wins over any number; ties keep the first
  Fixture n("aten.max_pool2d_with_indices.default", "((T([1, 1, 2], f32), [1, 2]), {})", {{NAN, 1}});
  CHECK(std::isnan(values(n.out(0))[0]));
  Fixture tie("aten.max_pool2d_with_indices.default", "((T([1, 1, 2], f32), [1, 2]), {})", {{3, 3}});
  check_values(tie.out(1), {0});
  // backward scatters into the indexed positions (three windows chose index 5)
  Fixture mb("aten.max_pool2d_with_indices_backward.default",
             "((T([1, 1, 2, 2], f32), T([1, 1, 3, 3], f32), [2, 2], [1, 1], [0, 0], [1, 1], False, T([1, 1, 2, 2], i64)), {})",
             {{1, 2, 3, 4}, {0, 0, 0, 0, 0, 0, 0, 0, 0}, {5, 5, 7, 5}});
  check_values(mb.out(), {0, 0, 0, 0, 0, 7, 0, 3, 0});
  // average with padding 1 on [[1, 2], [3, 4]], kernel 2 stride 2: corners only see one element
  Fixture a("aten.avg_pool2d.default", "((T([1, 1, 2, 2], f32), [2, 2], [2, 2], [1, 1]), {})", {{1, 2, 3, 4}});
  check_values(a.out(), {0.25, 0.5, 0.75, 1.0});
  Fixture ax("aten.avg_pool2d.default", "((T([1, 1, 2, 2], f32), [2, 2], [2, 2], [1, 1], False, False), {})",
             {{1, 2, 3, 4}});
  check_values(ax.out(), {1, 2, 3, 4});
  Fixture ab("aten.avg_pool2d_backward.default",
             "((T([1, 1, 1, 1], f32), T([1, 1, 2, 2], f32), [2, 2], [2, 2], [0, 0], False, True, None), {})",
             {{8}, {0, 0, 0, 0}});
  check_values(ab.out(), {2, 2, 2, 2});
  // adaptive 3 -> 2: windows [0, 2) and [1, 3)
  Fixture ad("aten._adaptive_avg_pool2d.default", "((T([1, 1, 1, 3], f32), [1, 2]), {})", {{1, 2, 4}});
  check_values(ad.out(), {1.5, 3});
  Fixture adb("aten._adaptive_avg_pool2d_backward.default", "((T([1, 1, 1, 2], f32), T([1, 1, 1, 3], f32)), {})",
              {{2, 4}, {0, 0, 0}});
  check_values(adb.out(), {1, 3, 2});
  Fixture bad("aten.max_pool2d_with_indices.default", "((T([1, 1, 4, 4], f32), [2, 2], [1, 1], [2, 2]), {})");
  CHECK(bad.error.find("padding") != std::string::npos);
}

TEST_CASE("max_pool2d_with_indices_backward: prepare sets the forward's indices") {
  auto args = bb::parse_args(
      "((T([2, 3, 4, 4], f16), T([2, 3, 9, 9], f16), [3, 3], [2, 2], [0, 0], [1, 1], False, T([2, 3, 4, 4], i64)), {})");
  REQUIRE(args.ok());
  auto call = bb::materialize_call("aten.max_pool2d_with_indices_backward.default", *args, 3, 0, false);
  REQUIRE(call.ok());
  const bb::OpInfo* info = bb::find_aten_op("aten.max_pool2d_with_indices_backward.default");
  bb::Rng rng(1);
  REQUIRE(bb::prepare_call(*info, *call, rng).ok());
  auto x = values(*call->positional[1].tensor);
  auto ind = values(*call->positional[7].tensor);
  // each index lies in its window and holds the window's maximum
  for (std::size_t p = 0; p < 6; ++p)
    for (std::size_t oh = 0; oh < 4; ++oh)
      for (std::size_t ow = 0; ow < 4; ++ow) {
        auto at = static_cast<std::size_t>(ind[(p * 4 + oh) * 4 + ow]);
        std::size_t h = at / 9, w = at % 9;
        CHECK((h >= 2 * oh && h < 2 * oh + 3 && w >= 2 * ow && w < 2 * ow + 3));
        for (std::size_t i = 2 * oh; i < 2 * oh + 3; ++i)
          for (std::size_t j = 2 * ow; j < 2 * ow + 3; ++j) CHECK(x[p * 81 + i * 9 + j] <= x[p * 81 + at]);
      }
  CHECK(bb::run_cpu(*info, *call).ok());
}

TEST_CASE("upsampling: nearest and bilinear, align_corners, and the backwards as adjoints") {
  Fixture n("aten.upsample_nearest2d.vec", "((T([1, 1, 1, 2], f32), None, [1.0, 2.0]), {})", {{1, 2}});
  check_values(n.out(), {1, 1, 2, 2});
  Fixture na("aten.upsample_nearest2d.vec", "((T([1, 1, 1, 3], f32), [1, 2], None), {})", {{1, 2, 3}});
  check_values(na.out(), {1, 2});  // scale 1.5: sources 0 and 1
  Fixture b("aten.upsample_bilinear2d.vec", "((T([1, 1, 1, 2], f32), [1, 3], True, None), {})", {{0, 1}});
  check_values(b.out(), {0, 0.5, 1});
  // half-pixel centres: 2 -> 4 samples at -0.25 (clamped 0), 0.25, 0.75, 1.25 (upper tap clamped)
  Fixture h("aten.upsample_bilinear2d.vec", "((T([1, 1, 1, 2], f32), None, False, [1.0, 2.0]), {})", {{0, 1}});
  check_values(h.out(), {0, 0.25, 0.75, 1});
  Fixture nb("aten.upsample_nearest2d_backward.vec", "((T([1, 1, 1, 4], f32), None, [1, 1, 1, 2], [1.0, 2.0]), {})",
             {{1, 2, 3, 4}});
  check_values(nb.out(), {3, 7});
  // the backward is the adjoint: <up(x), g> = <x, up_backward(g)>
  std::mt19937_64 rng(3);
  for (bool align : {true, false}) {
    auto xv = random_values(2 * 3 * 5, rng), gv = random_values(2 * 7 * 4, rng);
    const std::string a = align ? "True" : "False";
    Fixture up("aten.upsample_bilinear2d.vec", "((T([1, 2, 3, 5], f64), [7, 4], " + a + ", None), {})", {xv});
    Fixture bw("aten.upsample_bilinear2d_backward.vec", "((T([1, 2, 7, 4], f64), [7, 4], [1, 2, 3, 5], " + a + ", None), {})",
               {gv});
    CHECK(dot(values(up.out()), gv) == doctest::Approx(dot(xv, values(bw.out()))).epsilon(1e-12));
  }
}

TEST_CASE("convolution, pooling and upsampling agree with PyTorch on f64 cases") {
  const std::string path = std::string(KB_SOURCE_DIR) + "/tests/backendbench/goldens/aten_spatial.json";
  auto text = kb::json::read_text_file(path);
  REQUIRE_MESSAGE(text.ok(), path);
  auto doc = kb::json::parse(*text, path);
  REQUIRE(doc.ok());
  kb::json::Array cases;
  REQUIRE(!doc->root()["cases"].get_array().get(cases));
  std::size_t n = 0;
  for (auto c : cases) {
    std::string_view op, args;
    REQUIRE(!c["op"].get_string().get(op));
    REQUIRE(!c["args"].get_string().get(args));
    std::vector<std::vector<double>> inputs;
    for (auto in : c["inputs"].get_array()) {
      inputs.emplace_back();
      for (auto v : in.get_array()) inputs.back().push_back(v.is_int64() ? static_cast<double>(v.get_int64().value())
                                                                         : v.get_double().value());
    }
    INFO(op << " " << args);
    Fixture f(std::string(op), std::string(args), inputs);
    REQUIRE_MESSAGE(f.error.empty(), f.error);
    std::size_t k = 0;
    for (auto o : c["outputs"].get_array()) {
      REQUIRE(k < f.outs.size());
      const HostTensor& got = f.outs[k];
      if (o.is_null()) {
        CHECK(got.undefined);
      } else {
        std::vector<std::int64_t> shape;
        for (auto d : o["shape"].get_array()) shape.push_back(d.get_int64().value());
        CHECK(got.shape == shape);
        std::vector<double> want;
        for (auto v : o["values"].get_array())
          want.push_back(v.is_int64() ? static_cast<double>(v.get_int64().value()) : v.get_double().value());
        auto g = values(got);
        REQUIRE(g.size() == want.size());
        for (std::size_t i = 0; i < want.size(); ++i) {
          INFO("output " << k << " element " << i);
          CHECK(g[i] == doctest::Approx(want[i]).epsilon(1e-9).scale(1.0));
        }
      }
      ++k;
    }
    CHECK(k == f.outs.size());
    ++n;
  }
  CHECK(n >= 30);
}

TEST_CASE("BackendBench's output files: summary, per-operator CSV, full and failed results, overhead flags") {
  auto rep = bb::parse_text(
      "Operator: aten.relu.default\n"
      "cnt: 1, ((T([4, 4], f16),), {})\n"
      "cnt: 1, ((T([8], f16),), {})\n"
      "Operator: aten.gather.default\n"
      "cnt: 1, ((T([3, 5], f16), 7, T([3, 2], i64)), {})\n"
      "Operator: aten._cudnn_ctc_loss.default\n"
      "cnt: 1, ((T([1], f16),), {})\n",
      "t.txt");
  REQUIRE(rep.ok());
  bb::RunOptions opt;
  opt.baseline["aten.relu.default"][0] = 1000.0;  // far above an empty call
  opt.baseline["aten.relu.default"][1] = 1e-9;    // below it: overhead-dominated
  auto r = bb::run_cpu_trace(rep.trace, opt);
  REQUIRE(r.ok());
  REQUIRE(r->empty_call_ms.has_value());
  const std::string dir = (std::filesystem::temp_directory_path() / "kb_test_bb_outputs").string();
  std::filesystem::remove_all(dir);
  bb::OutputInfo info{"kb backendbench run t.txt", "cpu", 1.0, 1e-6};
  REQUIRE(bb::write_outputs(*r, rep.trace, info, dir).ok());
  auto read = [&](const char* name) {
    auto t = kb::json::read_text_file(dir + "/" + name);
    REQUIRE_MESSAGE(t.ok(), name);
    return *t;
  };
  const std::string csv = read("operator_summary.csv");
  CHECK(csv.rfind("operator,total_tests,passed_tests,failed_tests,correctness_rate,avg_speedup,geomean_speedup,"
                  "max_absolute_error,max_relative_error\n", 0) == 0);
  CHECK(csv.find("\naten.relu.default,2,2,0,1,") != std::string::npos);
  CHECK(csv.find("\naten.gather.default,1,0,1,0,") != std::string::npos);  // dim 7 of a 2-D tensor fails
  auto full = kb::json::parse(read("full_results.json"), "full_results.json");
  REQUIRE(full.ok());
  kb::json::Array entries;
  REQUIRE(!full->root().get_array().get(entries));
  std::size_t correctness = 0, performance = 0, overhead = 0;
  for (auto e : entries) {
    std::string_view type;
    REQUIRE(!e["test_type"].get_string().get(type));
    correctness += type == "correctness";
    if (type == "performance") {
      ++performance;
      bool flagged = false;
      REQUIRE(!e["overhead_dominated"].get_bool().get(flagged));
      overhead += flagged;
    }
  }
  CHECK(correctness == 3);
  CHECK(performance == 2);
  CHECK(overhead == 1);
  auto failed = kb::json::parse(read("failed_tests.json"), "failed_tests.json");
  REQUIRE(failed.ok());
  kb::json::Array failed_entries;
  REQUIRE(!failed->root().get_array().get(failed_entries));
  CHECK(failed_entries.size() == 1);
  const std::string md = read("OVERALL_SUMMARY.md");
  CHECK(md.rfind("# BackendBench Run Summary\n", 0) == 0);
  CHECK(md.find("| Correctness Score | 0.50 |") != std::string::npos);
  CHECK(md.find("| Perf@1.0 Score |") != std::string::npos);
  CHECK(md.find("under 1.3x an empty call") != std::string::npos);
  CHECK(md.find("| aten._cudnn_ctc_loss.default | 1 | kb does not implement it |") != std::string::npos);
  std::filesystem::remove_all(dir);
}
