// Tests of kb's embedding-bag, advanced-indexing, group-norm, padding, fold,
// grid-sampling, topk/norm/mse, rounding-division and factory oracles
// (kernels/aten): hand-computed small cases, the prepare functions' index
// validity, adjoint identities, and PyTorch's own outputs on f64 cases
// (tests/backendbench/goldens/aten_more.json, from tests/backendbench/goldens/make/aten_more.py).
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backendbench/run.hpp"
#include "fixture.hpp"
#include "json/json.hpp"

namespace bb = kb::backendbench;
using bb::Dtype;
using bb::HostTensor;
using kb_test::check_values;
using kb_test::Fixture;
using kb_test::values;

using Shape = std::vector<std::int64_t>;

TEST_CASE("_embedding_bag: sum with per-sample weights, mean, max, padding_idx and CUDA's auxiliary outputs") {
  // weight rows r = [r, 10 r]; indices [1, 2, 3, 0]; bags [0, 2) and [2, 4)
  const std::vector<double> w{0, 0, 1, 10, 2, 20, 3, 30};
  Fixture s("aten._embedding_bag.default",
            "((T([4, 2], f32), T([4], i64), T([2], i64), False, 0, False, T([4], f32)), {})",
            {w, {1, 2, 3, 0}, {0, 2}, {1, 2, 3, 4}});
  check_values(s.out(0), {1 * 1 + 2 * 2, 10 + 40, 3 * 3 + 0, 90});
  check_values(s.out(1), {0, 0, 1, 1});  // offset2bag
  check_values(s.out(2), {2, 2});        // bag_size
  CHECK(s.out(3).shape == Shape{0});     // max_indices, only in max mode
  CHECK(s.out(1).dtype == Dtype::i64);
  Fixture m("aten._embedding_bag.default", "((T([4, 2], f32), T([4], i64), T([2], i64), False, 1, False, None, False, 3), {})",
            {w, {1, 2, 3, 0}, {0, 2}});
  check_values(m.out(0), {1.5, 15, 0, 0});  // row 3 is padding: the second bag averages row 0 alone
  check_values(m.out(2), {2, 1});
  Fixture x("aten._embedding_bag.default", "((T([4, 2], f32), T([3], i64), T([3], i64), False, 2, False, None, True), {})",
            {w, {1, 3, 2}, {0, 2, 3}});
  // include_last_offset: two bags [0, 2) and [2, 3)
  CHECK(x.out(0).shape == Shape{2, 2});
  check_values(x.out(0), {3, 30, 2, 20});
  check_values(x.out(3), {3, 3, 2, 2});
  Fixture empty("aten._embedding_bag.default", "((T([4, 2], f32), T([2], i64), T([3], i64), False, 2, False), {})",
                {w, {1, 2}, {0, 0, 2}});
  // bags [0, 0), [0, 2), [2, 2): an empty bag gives 0 and max index -1
  check_values(empty.out(0), {0, 0, 2, 20, 0, 0});
  check_values(empty.out(3), {-1, -1, 2, 2, -1, -1});
  Fixture bad("aten._embedding_bag.default", "((T([4, 2], f32), T([2], i64), T([2], i64), False, 1, False, T([2], f32)), {})",
              {w, {1, 2}, {0, 1}, {1, 1}});
  CHECK(bad.error.find("mode sum") != std::string::npos);
}

TEST_CASE("_embedding_bag_per_sample_weights_backward: grad row of the bag dotted with the weight row") {
  Fixture f("aten._embedding_bag_per_sample_weights_backward.default",
            "((T([2, 2], f32), T([3, 2], f32), T([3], i64), T([2], i64), T([3], i64), 0, 2), {})",
            {{1, 2, 3, 4}, {1, 0, 0, 1, 5, 5}, {0, 1, 2}, {0, 1}, {0, 1, 1}});
  check_values(f.out(), {1, 4, 0});  // [1,2].[1,0], [3,4].[0,1], padding row 2 gives 0
}

TEST_CASE("embedding-bag prepare: indices in range, sorted offsets from 0, offset2bag consistent with offsets") {
  for (std::size_t line = 0; line < 5; ++line) {
    auto args = bb::parse_args(
        "((T([50, 8], f16), T([200], i64), T([17], i64), T([200], i64), T([200], i64), 0), {})");
    REQUIRE(args.ok());
    // grad [17, 8]: the backward's argument order, prepared as the runner does
    auto a2 = bb::parse_args("((T([17, 8], f16), T([50, 8], f16), T([200], i64), T([17], i64), T([200], i64), 0), {})");
    REQUIRE(a2.ok());
    auto call = bb::materialize_call("aten._embedding_bag_per_sample_weights_backward.default", *a2, 9, line, false);
    REQUIRE(call.ok());
    const bb::OpInfo* info = bb::find_aten_op("aten._embedding_bag_per_sample_weights_backward.default");
    bb::Rng rng(line + 1);
    REQUIRE(bb::prepare_call(*info, *call, rng).ok());
    auto idx = values(*call->positional[2].tensor), off = values(*call->positional[3].tensor),
         o2b = values(*call->positional[4].tensor);
    CHECK(off[0] == 0);
    for (std::size_t i = 0; i + 1 < off.size(); ++i) CHECK(off[i] <= off[i + 1]);
    for (double v : idx) CHECK((v >= 0 && v < 50));
    for (std::size_t i = 0; i < o2b.size(); ++i) {
      auto b = static_cast<std::size_t>(o2b[i]);
      REQUIRE(b < off.size());
      CHECK(off[b] <= static_cast<double>(i));
      if (b + 1 < off.size()) CHECK(static_cast<double>(i) < off[b + 1]);
    }
    CHECK(bb::run_cpu(*info, *call).ok());
  }
}

TEST_CASE("index.Tensor: adjacent and separated index tensors, None, negative indices, masks") {
  // self = [[0, 1, 2], [3, 4, 5]]
  const std::vector<double> s{0, 1, 2, 3, 4, 5};
  Fixture rows("aten.index.Tensor", "((T([2, 3], f32), [T([3], i64)]), {})", {s, {1, -2, 1}});
  CHECK(rows.out().shape == Shape{3, 3});
  check_values(rows.out(), {3, 4, 5, 0, 1, 2, 3, 4, 5});
  Fixture cols("aten.index.Tensor", "((T([2, 3], f32), [None, T([2, 2], i64)]), {})", {s, {2, 0, 1, 1}});
  CHECK(cols.out().shape == Shape{2, 2, 2});
  check_values(cols.out(), {2, 0, 1, 1, 5, 3, 4, 4});
  Fixture pts("aten.index.Tensor", "((T([2, 3], f32), [T([2], i64), T([1], i64)]), {})", {s, {0, 1}, {2}});
  check_values(pts.out(), {2, 5});  // indices broadcast: (0, 2), (1, 2)
  // [T, None, T] over [2, 2, 3]: separated, so B = [2] goes first: out[b, j] = self[i0[b], j, i2[b]]
  Fixture sep("aten.index.Tensor", "((T([2, 2, 3], f32), [T([2], i64), None, T([2], i64)]), {})",
              {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {1, 0}, {0, 2}});
  CHECK(sep.out().shape == Shape{2, 2});
  check_values(sep.out(), {6, 9, 2, 5});
  Fixture mask("aten.index.Tensor", "((T([2, 3], f32), [T([2, 3], b8)]), {})", {s, {1, 0, 0, 0, 1, 1}});
  check_values(mask.out(), {0, 4, 5});
  Fixture oob("aten.index.Tensor", "((T([2, 3], f32), [T([1], i64)]), {})", {s, {2}});
  CHECK(oob.error.find("out of bounds") != std::string::npos);
}

TEST_CASE("index_put: assignment, accumulation of duplicates, broadcast values, in place") {
  const std::vector<double> s{0, 1, 2, 3, 4, 5};
  Fixture acc("aten.index_put.default", "((T([3, 2], f32), [T([3], i64)], T([3, 2], f32), True), {})",
              {s, {1, 1, 0}, {10, 20, 30, 40, 50, 60}});
  check_values(acc.out(), {50, 61, 42, 63, 4, 5});
  Fixture put("aten.index_put.default", "((T([3, 2], f32), [None, T([1], i64)], T([1], f32)), {})", {s, {1}, {9}});
  check_values(put.out(), {0, 9, 2, 9, 4, 9});
  Fixture ip("aten._index_put_impl_.default", "((T([3, 2], f32), [T([1], i64)], T([2], f32), True, True), {})",
             {s, {2}, {1, 1}});
  check_values(ip.out(), {0, 1, 2, 3, 5, 6});
  check_values(*ip.call.positional[0].tensor, {0, 1, 2, 3, 5, 6});  // self itself was written
  Fixture shape("aten.index_put.default", "((T([3, 2], f32), [T([2], i64)], T([3], f32)), {})", {s, {0, 1}, {1, 2, 3}});
  CHECK(shape.error.find("cannot be broadcast") != std::string::npos);
  // the functional form leaves self alone
  check_values(*put.call.positional[0].tensor, s);
}

TEST_CASE("advanced-index prepare: each index tensor in the range of the dim it indexes") {
  auto args = bb::parse_args("((T([7, 3, 5], f16), [None, T([40], i64), T([40], i64)], T([7, 40], f16), True), {})");
  REQUIRE(args.ok());
  auto call = bb::materialize_call("aten.index_put.default", *args, 2, 0, false);
  REQUIRE(call.ok());
  const bb::OpInfo* info = bb::find_aten_op("aten.index_put.default");
  bb::Rng rng(4);
  REQUIRE(bb::prepare_call(*info, *call, rng).ok());
  for (double v : values(call->positional[1].tensors[0])) CHECK((v >= 0 && v < 3));
  for (double v : values(call->positional[1].tensors[1])) CHECK((v >= 0 && v < 5));
  CHECK(bb::run_cpu(*info, *call).ok());
}

TEST_CASE("nonzero: coordinates in row-major order; a meta call refuses a shape it cannot know") {
  Fixture f("aten.nonzero.default", "((T([2, 3], b8),), {})", {{0, 1, 0, 1, 0, 1}});
  CHECK(f.out().shape == Shape{3, 2});
  check_values(f.out(), {0, 1, 1, 0, 1, 2});
  auto args = bb::parse_args("((T([5], b8),), {})");
  REQUIRE(args.ok());
  auto meta = bb::materialize_call("aten.nonzero.default", *args, 1, 0, true);
  REQUIRE(meta.ok());
  auto r = bb::run_cpu(*bb::find_aten_op("aten.nonzero.default"), *meta);
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("depends on its input's values") != std::string::npos);
  auto empty = bb::parse_args("((T([0], b8),), {})");
  auto em = bb::materialize_call("aten.nonzero.default", *empty, 1, 0, true);
  auto er = bb::run_cpu(*bb::find_aten_op("aten.nonzero.default"), *em);
  REQUIRE(er.ok());
  CHECK((*er)[0].shape == Shape{0, 1});
}

TEST_CASE("group norm: statistics per group, affine, and a backward that matches finite differences") {
  // one sample, 2 groups of one channel of 2 elements: [1, 3] and [2, 6]
  Fixture f("aten.native_group_norm.default", "((T([1, 2, 2], f64), T([2], f64), T([2], f64), 1, 2, 2, 2, 0.0), {})",
            {{1, 3, 2, 6}, {1, 2}, {0, 10}});
  check_values(f.out(0), {-1, 1, 10 - 2, 10 + 2});
  check_values(f.out(1), {2, 4});
  check_values(f.out(2), {1, 0.5});
  // backward against central differences of L = sum(g * group_norm(x)), on a range of shapes and group counts
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  // (named, not structured bindings: the lambdas below capture them, which clang 14 cannot do with bindings)
  for (const auto& shape_case : std::vector<std::array<int, 4>>{{2, 4, 3, 2}, {1, 6, 1, 3}, {3, 2, 5, 1}}) {
    const int n = shape_case[0], c = shape_case[1], hw = shape_case[2], g = shape_case[3];
    const std::string shape = fmt::format("[{}, {}, {}]", n, c, hw);
    std::vector<double> x(static_cast<std::size_t>(n * c * hw)), gy(x.size()), w(static_cast<std::size_t>(c)), b(w.size());
    for (auto* v : {&x, &gy, &w, &b})
      for (double& e : *v) e = u(rng);
    auto fwd = [&](const std::vector<double>& xv, const std::vector<double>& wv) {
      Fixture y("aten.native_group_norm.default",
                fmt::format("((T({}, f64), T([{}], f64), T([{}], f64), {}, {}, {}, {}, 1e-05), {{}})", shape, c, c, n, c, hw, g),
                {xv, wv, b});
      double l = 0;
      auto yv = values(y.out(0));
      for (std::size_t i = 0; i < yv.size(); ++i) l += yv[i] * gy[i];
      return std::make_pair(l, y);
    };
    auto [l0, y0] = fwd(x, w);
    Fixture bw("aten.native_group_norm_backward.default",
               fmt::format("((T({}, f64), T({}, f64), T([{}, {}], f64), T([{}, {}], f64), T([{}], f64), {}, {}, {}, {}, "
                           "[True, True, True]), {{}})",
                           shape, shape, n, g, n, g, c, n, c, hw, g),
               {gy, x, values(y0.out(1)), values(y0.out(2)), w});
    auto dx = values(bw.out(0)), dw = values(bw.out(1)), db = values(bw.out(2));
    const double h = 1e-6;
    for (std::size_t i = 0; i < x.size(); i += 3) {
      auto xp = x, xm = x;
      xp[i] += h;
      xm[i] -= h;
      CHECK(dx[i] == doctest::Approx((fwd(xp, w).first - fwd(xm, w).first) / (2 * h)).epsilon(1e-5));
    }
    for (std::size_t k = 0; k < w.size(); ++k) {
      auto wp = w, wm = w;
      wp[k] += h;
      wm[k] -= h;
      CHECK(dw[k] == doctest::Approx((fwd(x, wp).first - fwd(x, wm).first) / (2 * h)).epsilon(1e-5));
      double sb = 0;
      for (int nn = 0; nn < n; ++nn)
        for (int i = 0; i < hw; ++i) sb += gy[static_cast<std::size_t>((nn * c + static_cast<int>(k)) * hw + i)];
      CHECK(db[k] == doctest::Approx(sb));
    }
  }
}

TEST_CASE("reflection_pad2d: mirrored edges, and the backward as its adjoint") {
  Fixture f("aten.reflection_pad2d.default", "((T([1, 2, 3], f32), [2, 1, 1, 0]), {})", {{1, 2, 3, 4, 5, 6}});
  CHECK(f.out().shape == Shape{1, 3, 6});
  check_values(f.out(), {6, 5, 4, 5, 6, 5, 3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5});
  Fixture big("aten.reflection_pad2d.default", "((T([1, 2, 3], f32), [3, 0, 0, 0]), {})");
  CHECK(big.error.find("smaller than") != std::string::npos);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  for (auto [h, w, l, r, t, b] : std::vector<std::array<int, 6>>{{3, 4, 1, 2, 2, 0}, {5, 2, 1, 1, 4, 3}, {2, 2, 0, 0, 1, 1}}) {
    std::vector<double> x(static_cast<std::size_t>(2 * h * w)), g(static_cast<std::size_t>(2 * (h + t + b) * (w + l + r)));
    for (double& e : x) e = u(rng);
    for (double& e : g) e = u(rng);
    const std::string pad = fmt::format("[{}, {}, {}, {}]", l, r, t, b);
    Fixture y("aten.reflection_pad2d.default", fmt::format("((T([2, {}, {}], f64), {}), {{}})", h, w, pad), {x});
    Fixture gx("aten.reflection_pad2d_backward.default",
               fmt::format("((T([2, {}, {}], f64), T([2, {}, {}], f64), {}), {{}})", h + t + b, w + l + r, h, w, pad),
               {g, std::vector<double>(x.size(), 0.0)});
    double lhs = 0, rhs = 0;
    auto yv = values(y.out()), gv = values(gx.out());
    for (std::size_t i = 0; i < yv.size(); ++i) lhs += yv[i] * g[i];
    for (std::size_t i = 0; i < x.size(); ++i) rhs += x[i] * gv[i];
    CHECK(lhs == doctest::Approx(rhs).epsilon(1e-12));
  }
}

TEST_CASE("im2col and col2im: hand-computed columns, and col2im as im2col's adjoint over shapes") {
  // 1 channel 3x3, kernel 2, stride 1: four windows
  Fixture f("aten.im2col.default", "((T([1, 1, 3, 3], f32), [2, 2], [1, 1], [0, 0], [1, 1]), {})",
            {{1, 2, 3, 4, 5, 6, 7, 8, 9}});
  CHECK(f.out().shape == Shape{1, 4, 4});
  check_values(f.out(), {1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9});
  Fixture c("aten.col2im.default", "((T([1, 4, 4], f32), [3, 3], [2, 2], [1, 1], [0, 0], [1, 1]), {})",
            {std::vector<double>(16, 1.0)});
  check_values(c.out(), {1, 2, 1, 2, 4, 2, 1, 2, 1});  // how many windows cover each pixel
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-1, 1);
  struct Case {
    int c, h, w, kh, kw, dh, dw, ph, pw, sh, sw;
  };
  for (Case k : {Case{2, 5, 6, 3, 2, 1, 2, 1, 0, 2, 1}, Case{1, 4, 4, 2, 2, 1, 1, 1, 1, 2, 2}, Case{3, 7, 3, 1, 3, 2, 1, 0, 1, 3, 1}}) {
    const int oh = (k.h + 2 * k.ph - (k.dh * (k.kh - 1) + 1)) / k.sh + 1, ow = (k.w + 2 * k.pw - (k.dw * (k.kw - 1) + 1)) / k.sw + 1;
    const std::string win = fmt::format("[{}, {}], [{}, {}], [{}, {}], [{}, {}]", k.kh, k.kw, k.dh, k.dw, k.ph, k.pw, k.sh, k.sw);
    std::vector<double> x(static_cast<std::size_t>(k.c * k.h * k.w)), g(static_cast<std::size_t>(k.c * k.kh * k.kw * oh * ow));
    for (double& e : x) e = u(rng);
    for (double& e : g) e = u(rng);
    Fixture col("aten.im2col.default", fmt::format("((T([1, {}, {}, {}], f64), {}), {{}})", k.c, k.h, k.w, win), {x});
    for (const char* back : {"aten.col2im.default", "aten.im2col_backward.default"}) {
      Fixture img(back, fmt::format("((T([1, {}, {}], f64), [{}, {}], {}), {{}})", k.c * k.kh * k.kw, oh * ow, k.h, k.w, win), {g});
      double lhs = 0, rhs = 0;
      auto cv = values(col.out()), iv = values(img.out());
      for (std::size_t i = 0; i < cv.size(); ++i) lhs += cv[i] * g[i];
      for (std::size_t i = 0; i < x.size(); ++i) rhs += x[i] * iv[i];
      CHECK(lhs == doctest::Approx(rhs).epsilon(1e-12));
    }
    Fixture cb("aten.col2im_backward.default", fmt::format("((T([1, {}, {}, {}], f64), {}), {{}})", k.c, k.h, k.w, win), {x});
    CHECK(values(cb.out()) == values(col.out()));
  }
}

TEST_CASE("unfold_backward: overlapping windows sum back into place") {
  // input [5], windows of 3 with step 2: [0, 3) and [2, 5)
  Fixture f("aten.unfold_backward.default", "((T([2, 3], f32), [5], 0, 3, 2), {})", {{1, 2, 3, 10, 20, 30}});
  check_values(f.out(), {1, 2, 13, 20, 30});
  Fixture bad("aten.unfold_backward.default", "((T([2, 4], f32), [5], 0, 3, 2), {})");
  CHECK(!bad.error.empty());
}

TEST_CASE("grid_sampler_2d: corners and centres, padding modes, nearest; the backward's input gradient as adjoint") {
  // 2x2 image [[1, 2], [3, 4]]; align_corners: (-1, -1) is pixel (0, 0), (0, 0) the centre
  Fixture a("aten.grid_sampler_2d.default", "((T([1, 1, 2, 2], f32), T([1, 1, 3, 2], f32), 0, 0, True), {})",
            {{1, 2, 3, 4}, {-1, -1, 0, 0, 1, -1}});
  check_values(a.out(), {1, 2.5, 2});
  // without align_corners, (-1, -1) is the corner pixel's outer corner: a quarter of pixel (0, 0) with zeros, all of it with border
  Fixture z("aten.grid_sampler_2d.default", "((T([1, 1, 2, 2], f32), T([1, 1, 1, 2], f32), 0, 0, False), {})",
            {{1, 2, 3, 4}, {-1, -1}});
  check_values(z.out(), {0.25});
  Fixture b("aten.grid_sampler_2d.default", "((T([1, 1, 2, 2], f32), T([1, 1, 1, 2], f32), 0, 1, False), {})",
            {{1, 2, 3, 4}, {-1, -1}});
  check_values(b.out(), {1});
  Fixture n("aten.grid_sampler_2d.default", "((T([1, 1, 2, 2], f32), T([1, 1, 1, 2], f32), 1, 0, True), {})",
            {{1, 2, 3, 4}, {0.2, 0.9}});
  check_values(n.out(), {4});
  Fixture bic("aten.grid_sampler_2d.default", "((T([1, 1, 2, 2], f32), T([1, 1, 1, 2], f32), 2, 0, True), {})");
  CHECK(bic.error.find("interpolation_mode 2") != std::string::npos);
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<double> u(-1.3, 1.3);
  for (int pad : {0, 1})
    for (bool align : {false, true}) {
      std::vector<double> x(2 * 3 * 4 * 5), grid(2 * 3 * 2 * 2), g(2 * 3 * 3 * 2);
      for (auto* v : {&x, &grid, &g})
        for (double& e : *v) e = u(rng);
      const std::string tail = fmt::format("0, {}, {}", pad, align ? "True" : "False");
      Fixture y("aten.grid_sampler_2d.default", fmt::format("((T([2, 3, 4, 5], f64), T([2, 3, 2, 2], f64), {}), {{}})", tail),
                {x, grid});
      Fixture bw("aten.grid_sampler_2d_backward.default",
                 fmt::format("((T([2, 3, 3, 2], f64), T([2, 3, 4, 5], f64), T([2, 3, 2, 2], f64), {}, [True, False]), {{}})", tail),
                 {g, x, grid});
      CHECK(bw.out(1).undefined);
      double lhs = 0, rhs = 0;
      auto yv = values(y.out()), gx = values(bw.out(0));
      for (std::size_t i = 0; i < yv.size(); ++i) lhs += yv[i] * g[i];
      for (std::size_t i = 0; i < x.size(); ++i) rhs += x[i] * gx[i];
      CHECK(lhs == doctest::Approx(rhs).epsilon(1e-12));
    }
}

TEST_CASE("topk, norm, mse_loss: hand-computed") {
  Fixture t("aten.topk.default", "((T([2, 4], f32), 2), {})", {{3, 1, 4, 1, 5, 9, 2, 6}});
  check_values(t.out(0), {4, 3, 9, 6});
  check_values(t.out(1), {2, 0, 1, 3});
  Fixture ties("aten.topk.default", "((T([4], f32), 3, 0, False), {})", {{2, 1, NAN, 1}});
  check_values(ties.out(0), {1, 1, 2});
  check_values(ties.out(1), {1, 3, 0});  // equal values by index; NaN counts as the largest
  Fixture tn("aten.topk.default", "((T([3], f32), 1), {})", {{2, NAN, 1}});
  check_values(tn.out(1), {1});
  Fixture n2("aten.norm.ScalarOpt_dim", "((T([2, 2], f32), 2, [1], True), {})", {{3, 4, 6, 8}});
  CHECK(n2.out().shape == Shape{2, 1});
  check_values(n2.out(), {5, 10});
  Fixture ninf("aten.norm.ScalarOpt_dim", "((T([2, 2], f32), inf, [0]), {})", {{3, -4, -6, 1}});
  check_values(ninf.out(), {6, 4});
  Fixture m("aten.mse_loss.default", "((T([2], f32), T([2], f32)), {})", {{1, 2}, {3, 2}});
  check_values(m.out(), {2});
  CHECK(m.out().shape.empty());
  Fixture mb("aten.mse_loss_backward.default", "((T([], f32), T([2], f32), T([2], f32), 1), {})", {{1}, {1, 2}, {3, 2}});
  check_values(mb.out(), {-2, 0});
}

TEST_CASE("floor_divide, fmod, remainder: the signs of Python and C, exact integers") {
  Fixture fd("aten.floor_divide.default", "((T([4], i64), 3), {})", {{7, -7, 6, -1}});
  check_values(fd.out(), {2, -3, 2, -1});
  CHECK(fd.out().dtype == Dtype::i64);
  Fixture fm("aten.fmod.Scalar", "((T([4], i64), 3), {})", {{7, -7, 6, -1}});
  check_values(fm.out(), {1, -1, 0, -1});
  Fixture rm("aten.remainder.Scalar", "((T([4], i64), 3), {})", {{7, -7, 6, -1}});
  check_values(rm.out(), {1, 2, 0, 2});
  Fixture rn("aten.remainder.Scalar", "((T([2], i64), -3), {})", {{7, -7}});
  check_values(rn.out(), {-2, -1});
  Fixture ff("aten.floor_divide.default", "((T([2], f32), T([2], f32)), {})", {{7.5, -7.5}, {2, 2}});
  check_values(ff.out(), {3, -4});
  Fixture fr("aten.remainder.Scalar", "((T([1], f32), 2.5), {})", {{-1}});
  check_values(fr.out(), {1.5});
  CHECK(fr.out().dtype == Dtype::f32);
  Fixture z("aten.floor_divide.default", "((T([1], i64), 0), {})", {{1}});
  CHECK(z.error.find("division by zero") != std::string::npos);
}

TEST_CASE("elu_backward from the input and from the result; unsqueeze_ changes self's view") {
  Fixture fx("aten.elu_backward.default", "((T([2], f64), 1.0, 1.0, 1, False, T([2], f64)), {})", {{2, 2}, {1, -1}});
  check_values(fx.out(), {2, 2 * std::exp(-1.0)});
  // from the result y = exp(x) - 1 at x = -1: the gradient is y + alpha
  Fixture fy("aten.elu_backward.default", "((T([1], f64), 1.0, 1.0, 1, True, T([1], f64)), {})", {{2}, {std::exp(-1.0) - 1}});
  check_values(fy.out(), {2 * std::exp(-1.0)});
  Fixture u("aten.unsqueeze_.default", "((T([2, 3], f32), 1), {})", {{1, 2, 3, 4, 5, 6}});
  CHECK(u.out().shape == Shape{2, 1, 3});
  CHECK(u.out().strides == Shape{3, 3, 1});
  CHECK(u.call.positional[0].tensor->shape == Shape{2, 1, 3});
  check_values(u.out(), {1, 2, 3, 4, 5, 6});
}

TEST_CASE("new_empty, new_empty_strided, bernoulli_: metadata, and draws in {0, 1} at about the rate p") {
  Fixture e("aten.new_empty.default", "((T([2, 3], f16), [4, 5]), {'dtype': f32})");
  CHECK(e.out().shape == Shape{4, 5});
  CHECK(e.out().dtype == Dtype::f32);
  Fixture s("aten.new_empty_strided.default", "((T([2], f16), [2, 3], [1, 2]), {})");
  CHECK(s.out().strides == Shape{1, 2});
  CHECK(s.out().dtype == Dtype::f16);
  for (double p : {0.0, 0.25, 0.9, 1.0}) {
    Fixture b("aten.bernoulli_.float", fmt::format("((T([4000], f16), {}), {{}})", p));
    auto v = values(b.out());
    double ones = 0;
    for (double x : v) {
      CHECK((x == 0 || x == 1));
      ones += x;
    }
    CHECK(ones / 4000 == doctest::Approx(p).epsilon(0.1).scale(1.0));
    check_values(*b.call.positional[0].tensor, v);  // in place
  }
  Fixture bad("aten.bernoulli_.float", "((T([4], f16), 1.5), {})");
  CHECK(bad.error.find("p must be") != std::string::npos);
}

TEST_CASE("the new operators agree with PyTorch on f64 cases") {
  const std::string path = std::string(KB_SOURCE_DIR) + "/tests/backendbench/goldens/aten_more.json";
  auto text = kb::json::read_text_file(path);
  REQUIRE_MESSAGE(text.ok(), path);
  auto doc = kb::json::parse(*text, path);
  REQUIRE(doc.ok());
  kb::json::Array cases;
  REQUIRE(!doc->root()["cases"].get_array().get(cases));
  auto number = [](auto v) { return v.is_int64() ? static_cast<double>(v.get_int64().value()) : v.get_double().value(); };
  std::size_t n = 0, compared = 0;
  std::set<std::string> ops;
  for (auto c : cases) {
    std::string_view op, args;
    REQUIRE(!c["op"].get_string().get(op));
    REQUIRE(!c["args"].get_string().get(args));
    std::vector<std::vector<double>> inputs;
    for (auto in : c["inputs"].get_array()) {
      inputs.emplace_back();
      for (auto v : in.get_array()) inputs.back().push_back(number(v));
    }
    INFO(op << " " << args);
    Fixture f(std::string(op), std::string(args), inputs);
    REQUIRE_MESSAGE(f.error.empty(), f.error);
    std::size_t k = 0;
    for (auto o : c["outputs"].get_array()) {
      REQUIRE(k < f.outs.size());
      if (!o.is_null()) {
        const HostTensor& got = f.outs[k];
        std::vector<std::int64_t> shape;
        for (auto d : o["shape"].get_array()) shape.push_back(d.get_int64().value());
        CHECK(got.shape == shape);
        std::string_view dt;
        REQUIRE(!o["dtype"].get_string().get(dt));
        CHECK(std::string(bb::dtype_abbrev(got.dtype)) ==
              (dt == "float64" ? "f64" : dt == "int64" ? "i64" : dt == "bool" ? "b8" : std::string(dt)));
        std::vector<double> want;
        for (auto v : o["values"].get_array()) want.push_back(number(v));
        auto g = values(got);
        REQUIRE(g.size() == want.size());
        for (std::size_t i = 0; i < want.size(); ++i) {
          INFO("output " << k << " element " << i);
          CHECK(g[i] == doctest::Approx(want[i]).epsilon(1e-9).scale(1.0));
        }
        ++compared;
      }
      ++k;
    }
    CHECK(k == f.outs.size());
    ops.insert(std::string(op));
    ++n;
  }
  CHECK(n >= 50);
  CHECK(ops.size() >= 25);
  CHECK(compared >= n);
}

TEST_CASE("the new operators run on trace-shaped lines: prepare, meta and real calls agree") {
  auto rep = bb::parse_text(
      "Operator: aten._embedding_bag.default\n"
      "cnt: 1, ((T([96, 12], f16), T([500], i64), T([64], i64), False, 0, True, T([500], f16)), {})\n"
      "Operator: aten._embedding_bag_per_sample_weights_backward.default\n"
      "cnt: 1, ((T([64, 12], f16, stride=(36, 1)), T([96, 12], f16), T([500], i64), T([64], i64), T([500], i64), 0), {})\n"
      "Operator: aten.index.Tensor\n"
      "cnt: 1, ((T([8, 19], f16), [None, T([7, 19], i64)]), {})\n"
      "Operator: aten._index_put_impl_.default\n"
      "cnt: 1, ((T([6, 47, 8], f16), [T([6, 47], i64, stride=(1, 0)), T([6, 47], i64, stride=(48, 1))], T([6, 47, 8], f16), True, True), {})\n"
      "Operator: aten.index_put_.default\n"
      "cnt: 1, ((T([0, 25, 7, 7], f16), [T([0], i64)], T([0, 25, 7, 7], f16)), {})\n"
      "Operator: aten.new_empty_strided.default\n"
      "cnt: 1, ((T([5, 2, 2, 2], f16, stride=(8, 1, 4, 2)), [5, 2, 2, 2], [8, 4, 2, 1]), {'dtype': f16, 'layout': torch.strided, 'device': 'cuda'})\n"
      "Operator: aten.bernoulli_.float\n"
      "cnt: 1, ((T([64, 1, 1, 1], f16), 0.9782608691602945), {})\n"
      "Operator: aten.topk.default\n"
      "cnt: 1, ((T([4, 108], f16, stride=(359, 1)), 100, 1), {})\n"
      "Operator: aten.native_group_norm_backward.default\n"
      "cnt: 1, ((T([4, 8, 3, 3], f16), T([4, 8, 3, 3], f16), T([4, 1], f16), T([4, 1], f16), T([8], f16), 4, 8, 9, 1, [True, True, True]), {})\n"
      "Operator: aten.grid_sampler_2d_backward.default\n"
      "cnt: 1, ((T([2, 3, 7, 7], f16), T([2, 3, 7, 7], f16), T([2, 7, 7, 2], f16), 0, 0, False, [False, True]), {})\n"
      // nonzero's output shape depends on its input's values: no meta answer, judged by its two runs
      "Operator: aten.nonzero.default\n"
      "cnt: 4, ((T([5000], b8),), {})\n"
      "cnt: 20, ((T([0], b8),), {})\n",
      "t.txt");
  REQUIRE(rep.ok());
  auto r = bb::run_cpu_trace(rep.trace, {});
  REQUIRE(r.ok());
  REQUIRE(r->lines.size() == 12);
  for (const auto& l : r->lines) {
    INFO(l.op << ": " << l.problem);
    CHECK(l.passed);
  }
}

TEST_CASE("--reference torch: kb's oracles judged against PyTorch eager on the same inputs (skipped without torch)") {
  bb::RunOptions opt;
  opt.torch_reference = true;
  auto v = bb::torch_version(opt.torch);
  if (!v) {
    MESSAGE("skipped: no PyTorch for the interpreter the tuning setting `python` (KB_PYTHON) names: " << v.error().message);
    return;
  }
  auto rep = bb::parse_text(
      "Operator: aten.add.Tensor\n"
      "cnt: 1, ((T([3, 4], f16), T([4], f16)), {})\n"
      "cnt: 1, ((T([2, 3], f16, stride=(1, 2)), 1.5), {})\n"
      "Operator: aten._embedding_bag.default\n"
      "cnt: 1, ((T([30, 6], f16), T([70], i64), T([9], i64), False, 0, True, T([70], f16)), {})\n"
      "Operator: aten.index_put.default\n"
      "cnt: 1, ((T([12, 16], f16), [None, T([16, 16], i64)], T([12, 16, 16], f16), True), {})\n"
      "Operator: aten.native_group_norm_backward.default\n"
      "cnt: 1, ((T([4, 8, 3, 3], f16), T([4, 8, 3, 3], f16), T([4, 2], f16), T([4, 2], f16), T([8], f16), 4, 8, 9, 2, [True, True, True]), {})\n"
      "Operator: aten.new_empty_strided.default\n"
      "cnt: 1, ((T([5, 6], f16), [5, 6], [1, 5]), {})\n"
      "Operator: aten.bernoulli_.float\n"
      "cnt: 1, ((T([64, 1, 1, 1], f16), 0.75), {})\n"
      "Operator: aten.floor_divide.default\n"
      "cnt: 1, ((T([50], i64), 7), {})\n"
      "Operator: aten.mse_loss_backward.default\n"
      "cnt: 1, ((T([], f16), T([6, 5], f16), T([6, 5], f16), 1), {})\n",
      "t.txt");
  REQUIRE(rep.ok());
  auto r = bb::run_cpu_trace(rep.trace, opt);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  REQUIRE(r->lines.size() == 9);
  for (const auto& l : r->lines) {
    INFO(l.op << ": " << l.problem);
    CHECK(l.passed);
    if (l.op != "aten.new_empty_strided.default" && l.op != "aten.bernoulli_.float") CHECK(l.max_abs_error.has_value());
  }
}

TEST_CASE("--reference torch: an interpreter that cannot start is an error naming it") {
  bb::TorchOptions o;
  o.python = "/nonexistent/kb-test-python";
  auto v = bb::torch_version(o);
  REQUIRE(!v.ok());
  CHECK(v.error().message.find("/nonexistent/kb-test-python") != std::string::npos);
}
