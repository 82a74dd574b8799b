// Tests of kb's ATen oracles (kernels/aten) against hand-computed values,
// the strided tensors and materialization, the judge and BackendBench's
// score, and the import into FlashInfer Trace objects.
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "backendbench/import.hpp"
#include "backendbench/materialize.hpp"
#include "backendbench/ops.hpp"
#include "backendbench/run.hpp"
#include "backendbench/score.hpp"
#include "backendbench/tensor.hpp"
#include "schema/io.hpp"
#include "schema/validate.hpp"
#include "fixture.hpp"

namespace bb = kb::backendbench;
using bb::Dtype;
using bb::HostTensor;

using kb_test::check_values;
using kb_test::Fixture;
using kb_test::values;

TEST_CASE("strided tensors: span, overlapping and permuted views") {
  HostTensor t = bb::empty_strided(Dtype::f32, {2, 3}, {0, 1});
  CHECK(t.span() == 3);  // both rows share storage
  for (int i = 0; i < 3; ++i) t.store(i, i + 1);
  CHECK(values(t) == std::vector<double>{1, 2, 3, 1, 2, 3});
  HostTensor p = bb::empty_strided(Dtype::f16, {2, 3}, {1, 2});  // column-major
  CHECK(p.span() == 6);
  for (int i = 0; i < 6; ++i) p.store(i, i);
  CHECK(values(p) == std::vector<double>{0, 2, 4, 1, 3, 5});
  HostTensor g = bb::empty_strided(Dtype::i64, {2, 2}, {5, 2});  // gaps
  CHECK(g.span() == 8);
  CHECK(bb::empty_strided(Dtype::f32, {0, 4}, {4, 1}).span() == 0);
  CHECK(bb::empty_tensor(Dtype::f32, {}).span() == 1);
}

TEST_CASE("promote_types follows PyTorch") {
  CHECK(bb::promote_types(Dtype::f16, Dtype::bf16) == Dtype::f32);
  CHECK(bb::promote_types(Dtype::u8, Dtype::i8) == Dtype::i16);
  CHECK(bb::promote_types(Dtype::i64, Dtype::f16) == Dtype::f16);
  CHECK(bb::promote_types(Dtype::b8, Dtype::i32) == Dtype::i32);
  CHECK(bb::promote_types(Dtype::f32, Dtype::f64) == Dtype::f64);
}

TEST_CASE("materialization: BackendBench's distributions, seeded, every storage element") {
  auto v = bb::parse_value("T([64, 32], f16, stride=(1, 64))");
  REQUIRE(v.ok());
  bb::Rng r1(7), r2(7), r3(8);
  auto a = bb::materialize_tensor(*v, r1, false), b = bb::materialize_tensor(*v, r2, false),
       c = bb::materialize_tensor(*v, r3, false);
  REQUIRE(a.ok());
  CHECK(*a->storage == *b->storage);
  CHECK(*a->storage != *c->storage);
  double lo = 1, hi = 0;
  for (double x : values(*a)) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  CHECK(lo >= 0);
  CHECK(hi < 1);
  CHECK(hi > 0.9);
  auto iv = bb::parse_value("T([1000], i64)");
  bb::Rng r4(1);
  auto it = bb::materialize_tensor(*iv, r4, false);
  double ilo = 0, ihi = 0;
  for (double x : values(*it)) {
    CHECK(x == std::trunc(x));
    ilo = std::min(ilo, x);
    ihi = std::max(ihi, x);
  }
  CHECK(ilo == -9);
  CHECK(ihi == 9);
  auto bv = bb::parse_value("T([1000], b8)");
  auto bt = bb::materialize_tensor(*bv, r4, false);
  double ones = 0;
  for (double x : values(*bt)) ones += x;
  CHECK(ones > 400);
  CHECK(ones < 600);
  // 0-strides: storage of one row; absurd spans refused.
  auto ov = bb::parse_value("T([128, 2048, 8, 8], f16, stride=(2048, 1, 0, 0))");
  auto ot = bb::materialize_tensor(*ov, r4, true);
  REQUIRE(ot.ok());
  CHECK(ot->span() == 127 * 2048 + 2047 + 1);
  auto big = bb::parse_value("T([100000, 1000000], f32)");
  REQUIRE(big.ok());
  auto bt2 = bb::materialize_tensor(*big, r4, true);
  CHECK(!bt2.ok());
  CHECK(bt2.error().message.find("over the limit") != std::string::npos);
}

TEST_CASE("add/sub/mul/div: broadcasting, alpha, scalars and type promotion") {
  Fixture f("aten.add.Tensor", "((T([2, 3], f32), T([3], f32)), {'alpha': 2})",
            {{1, 2, 3, 4, 5, 6}, {10, 20, 30}});
  CHECK(f.out().dtype == Dtype::f32);
  CHECK(f.out().shape == std::vector<std::int64_t>{2, 3});
  check_values(f.out(), {21, 42, 63, 24, 45, 66});

  Fixture s("aten.add.Tensor", "((T([2], f16), 1.0), {})", {{0.5, 0.25}});
  CHECK(s.out().dtype == Dtype::f16);  // a Python float does not promote a f16 tensor
  check_values(s.out(), {1.5, 1.25});

  Fixture i("aten.add.Tensor", "((T([2], i64), 1.5), {})", {{1, 2}});
  CHECK(i.out().dtype == Dtype::f32);  // int tensor + Python float -> default float
  check_values(i.out(), {2.5, 3.5});

  Fixture z("aten.mul.Tensor", "((T([2], f16), T([], f32)), {})", {{2, 4}, {0.5}});
  CHECK(z.out().dtype == Dtype::f16);  // a 0-D tensor does not promote a dimensioned one of the same category
  check_values(z.out(), {1, 2});

  Fixture zi("aten.mul.Tensor", "((T([2], i32), T([], f16)), {})", {{2, 4}, {0.5}});
  CHECK(zi.out().dtype == Dtype::f16);  // ... unless its category is higher

  Fixture d("aten.div.Tensor", "((T([2], i64), 2), {})", {{3, 5}});
  CHECK(d.out().dtype == Dtype::f32);  // true division
  check_values(d.out(), {1.5, 2.5});

  Fixture r("aten.rsub.Scalar", "((T([2], f32), 1), {})", {{0.25, 3}});
  check_values(r.out(), {0.75, -2});

  Fixture sb("aten.sub.Tensor", "((T([2, 1], f32), T([1, 2], f32)), {})", {{1, 2}, {10, 20}});
  CHECK(sb.out().shape == std::vector<std::int64_t>{2, 2});
  check_values(sb.out(), {-9, -19, -8, -18});

  Fixture bad("aten.add.Tensor", "((T([2, 3], f32), T([4], f32)), {})");
  CHECK(bad.error.find("do not broadcast") != std::string::npos);
}

TEST_CASE("elementwise ops read arbitrary strides and write contiguous outputs") {
  // [[0, 1, 2], [3, 4, 5]] stored column-major: storage 0 3 1 4 2 5
  Fixture f("aten.neg.default", "((T([2, 3], f32, stride=(1, 2)),), {})", {{0, 3, 1, 4, 2, 5}});
  check_values(f.out(), {0, -1, -2, -3, -4, -5});
  CHECK(f.out().is_contiguous());
  Fixture e("aten.mul.Tensor", "((T([2, 2], f32, stride=(0, 1)), 2), {})", {{1, 2}});
  check_values(e.out(), {2, 4, 2, 4});
}

TEST_CASE("in-place ops write through self's strides and return self") {
  Fixture f("aten.relu_.default", "((T([2, 2], f32, stride=(1, 2)),), {})", {{-1, 2, 3, -4}});
  const HostTensor& o = f.out();
  CHECK(o.storage == f.call.positional[0].tensor->storage);
  CHECK(values(o) == std::vector<double>{0, 3, 2, 0});
  Fixture m("aten.mul_.Tensor", "((T([2, 2], f16), T([2], f16)), {})", {{1, 2, 3, 4}, {10, 100}});
  check_values(m.out(), {10, 200, 30, 400});
}

TEST_CASE("in-place ops refuse a self whose elements share memory, as PyTorch does") {
  Fixture r("aten.relu_.default", "((T([2, 3], f32, stride=(0, 1)),), {})");
  CHECK(r.outs.empty());
  CHECK(r.error ==
        "aten.relu_.default: unsupported operation: more than one element of the written-to tensor refers to a single "
        "memory location (self has stride 0 in dimension 0 of size 2); PyTorch refuses the write");
  Fixture m("aten.mul_.Tensor", "((T([4, 2], f16, stride=(1, 0)), T([2], f16)), {})");
  CHECK(m.error.find("(self has stride 0 in dimension 1 of size 2)") != std::string::npos);
  // A stride-0 dimension of size 1 shares nothing; a functional op may read overlapping inputs.
  Fixture one("aten.relu_.default", "((T([1, 2], f32, stride=(0, 1)),), {})", {{-1, 2}});
  check_values(one.out(), {0, 2});
  Fixture f("aten.relu.default", "((T([2, 2], f32, stride=(0, 1)),), {})", {{-1, 2}});
  check_values(f.out(), {0, 2, 0, 2});

  // A trace line of it is reported with the reason, not passed.
  bb::ParseReport rep = bb::parse_text(
      "Operator: aten.relu_.default\n"
      "cnt: 1, ((T([3, 4], f32, stride=(0, 1)),), {})\n"
      "cnt: 1, ((T([3, 4], f32),), {})\n",
      "overlap.txt");
  REQUIRE(rep.ok());
  auto run = bb::run_cpu_trace(rep.trace, bb::RunOptions{});
  REQUIRE(run.ok());
  REQUIRE(run->lines.size() == 2);
  CHECK_FALSE(run->lines[0].passed);
  CHECK(run->lines[0].problem ==
        "meta: aten.relu_.default: unsupported operation: more than one element of the written-to tensor refers to a "
        "single memory location (self has stride 0 in dimension 0 of size 3); PyTorch refuses the write");
  CHECK_MESSAGE(run->lines[1].passed, run->lines[1].problem);
}

TEST_CASE("activations and their backwards") {
  const double x = 0.5;
  Fixture s("aten.sigmoid.default", "((T([1], f32),), {})", {{x}});
  check_values(s.out(), {1 / (1 + std::exp(-x))});
  Fixture g("aten.gelu.default", "((T([2], f32),), {})", {{1.0, -1.0}});
  check_values(g.out(), {0.8413447460685429, -0.15865525393145707});
  Fixture gt("aten.gelu.default", "((T([1], f32),), {'approximate': 'tanh'})", {{1.0}});
  check_values(gt.out(), {0.8411919906082768}, 1e-6);
  Fixture gb("aten.gelu_backward.default", "((T([1], f32), T([1], f32)), {})", {{1.0}, {1.0}});
  check_values(gb.out(), {1.0833154705876864});
  Fixture sb("aten.silu_backward.default", "((T([1], f32), T([1], f32)), {})", {{2.0}, {0.0}});
  check_values(sb.out(), {1.0});  // d/dx x*sigmoid(x) at 0 is 0.5, times grad 2
  Fixture tb("aten.threshold_backward.default", "((T([3], f32), T([3], f32), 0), {})", {{1, 2, 3}, {-1, 0, 1}});
  check_values(tb.out(), {0, 0, 3});
  Fixture hb("aten.hardswish_backward.default", "((T([3], f32), T([3], f32)), {})", {{1, 1, 1}, {-4, 0, 4}});
  check_values(hb.out(), {0, 0.5, 1});
  Fixture hs("aten.hardswish.default", "((T([3], f32),), {})", {{-4, 1, 4}});
  check_values(hs.out(), {0, 4.0 / 6.0, 4});
  Fixture lr("aten.leaky_relu_backward.default", "((T([2], f32), T([2], f32), 0.01, True), {})", {{1, 1}, {-1, 1}});
  check_values(lr.out(), {0.01, 1});
  Fixture ht("aten.hardtanh_backward.default", "((T([3], f32), T([3], f32), 0.0, 6.0), {})", {{1, 1, 1}, {0, 3, 6}});
  check_values(ht.out(), {0, 1, 0});
  Fixture sg("aten.sigmoid_backward.default", "((T([1], f32), T([1], f32)), {})", {{2}, {0.25}});
  check_values(sg.out(), {2 * 0.75 * 0.25});
  Fixture th("aten.tanh_backward.default", "((T([1], f32), T([1], f32)), {})", {{2}, {0.5}});
  check_values(th.out(), {1.5});
  Fixture rs("aten.rsqrt.default", "((T([2], i64),), {})", {{4, 16}});
  CHECK(rs.out().dtype == Dtype::f32);
  check_values(rs.out(), {0.5, 0.25});
  Fixture p("aten.pow.Tensor_Scalar", "((T([2], f16), 2), {})", {{3, 0.5}});
  check_values(p.out(), {9, 0.25});
}

TEST_CASE("NaN handling: relu, clamp and amax propagate NaN") {
  const double nan = std::nan("");
  Fixture r("aten.relu.default", "((T([2], f32),), {})", {{nan, -1}});
  check_values(r.out(), {nan, 0});
  Fixture c("aten.clamp.default", "((T([3], f32), 0.0, 1.0), {})", {{nan, -1, 2}});
  check_values(c.out(), {nan, 0, 1});
  Fixture a("aten.amax.default", "((T([2, 2], f32), [1]), {})", {{1, nan, 3, 4}});
  check_values(a.out(), {nan, 4});
}

TEST_CASE("comparisons, where and masked_fill") {
  Fixture e("aten.eq.Scalar", "((T([3], i64), 2), {})", {{1, 2, 3}});
  CHECK(e.out().dtype == Dtype::b8);
  check_values(e.out(), {0, 1, 0});
  Fixture w("aten.where.self", "((T([2, 1], b8), T([2], f16), T([2], f32)), {})", {{1, 0}, {1, 2}, {3, 4}});
  CHECK(w.out().dtype == Dtype::f32);
  CHECK(w.out().shape == std::vector<std::int64_t>{2, 2});
  check_values(w.out(), {1, 2, 3, 4});
  Fixture m("aten.masked_fill.Scalar", "((T([2, 2], f16), T([2], b8), -65504.0), {})", {{1, 2, 3, 4}, {0, 1}});
  check_values(m.out(), {1, -65504, 3, -65504});
}

TEST_CASE("reductions") {
  Fixture s("aten.sum.dim_IntList", "((T([2, 3], f16), [0], True), {})", {{1, 2, 3, 4, 5, 6}});
  CHECK(s.out().shape == std::vector<std::int64_t>{1, 3});
  check_values(s.out(), {5, 7, 9});
  Fixture si("aten.sum.default", "((T([2, 2], i32),), {})", {{1, 2, 3, 4}});
  CHECK(si.out().dtype == Dtype::i64);
  CHECK(si.out().rank() == 0);
  check_values(si.out(), {10});
  Fixture m("aten.mean.dim", "((T([2, 3], f32), [-1]), {})", {{1, 2, 3, 4, 5, 6}});
  CHECK(m.out().shape == std::vector<std::int64_t>{2});
  check_values(m.out(), {2, 5});
  Fixture vm("aten.var_mean.correction", "((T([1, 4], f32), [1]), {'correction': 0, 'keepdim': True})", {{1, 2, 3, 4}});
  check_values(vm.out(0), {1.25});
  check_values(vm.out(1), {2.5});
  Fixture v1("aten.var_mean.correction", "((T([4], f32),), {})", {{1, 2, 3, 4}});
  check_values(v1.out(0), {5.0 / 3.0});  // default correction 1
  Fixture cs("aten.cumsum.default", "((T([1, 3], i32), 1), {})", {{1, 2, 3}});
  CHECK(cs.out().dtype == Dtype::i64);
  check_values(cs.out(), {1, 3, 6});
  // Strided input: [[1, 3], [2, 4]] from storage 1 2 3 4 with strides (1, 2).
  Fixture st("aten.sum.dim_IntList", "((T([2, 2], f32, stride=(1, 2)), [1]), {})", {{1, 2, 3, 4}});
  check_values(st.out(), {4, 6});
}

TEST_CASE("softmax, log_softmax and their backwards") {
  Fixture s("aten._softmax.default", "((T([1, 2], f16), -1, True), {})", {{0, std::log(3.0)}});
  CHECK(s.out().dtype == Dtype::f32);
  check_values(s.out(), {0.25, 0.75}, 1e-3);
  Fixture l("aten._log_softmax.default", "((T([2], f32), 0, False), {})", {{0, std::log(3.0)}});
  check_values(l.out(), {std::log(0.25), std::log(0.75)}, 1e-5);
  // y = [0.25, 0.75], g = [1, 0]: sum(g*y) = 0.25, grad = y * (g - 0.25) = [0.1875, -0.1875]
  Fixture b("aten._softmax_backward_data.default", "((T([2], f32), T([2], f32), 0, f32), {})", {{1, 0}, {0.25, 0.75}});
  check_values(b.out(), {0.1875, -0.1875});
  Fixture lb("aten._log_softmax_backward_data.default", "((T([2], f32), T([2], f32), 0, f32), {})",
             {{1, 0}, {std::log(0.25), std::log(0.75)}});
  check_values(lb.out(), {0.75, -0.75});
  Fixture h("aten._softmax_backward_data.default", "((T([2], f32), T([2], f32), 0, f16), {})", {{1, 0}, {0.25, 0.75}});
  CHECK(h.out().dtype == Dtype::f16);
}

TEST_CASE("native_layer_norm and its backward") {
  Fixture f("aten.native_layer_norm.default", "((T([1, 2], f16), [2], T([2], f16), T([2], f16), 0.0), {})",
            {{1, 3}, {2, 1}, {0, 10}});
  check_values(f.out(0), {-2, 11});
  CHECK(f.out(1).dtype == Dtype::f32);
  CHECK(f.out(1).shape == std::vector<std::int64_t>{1, 1});
  check_values(f.out(1), {2});
  check_values(f.out(2), {1});
  // x = [1, 3], mean 2, rstd 1, w = 1: xhat = [-1, 1]; g = [1, 0]:
  // dx = (2*g - sum(g) - xhat*sum(g*xhat)) / 2 = ([2, 0] - 1 - [-1, 1]*(-1)) / 2 = [0, 0]
  Fixture b("aten.native_layer_norm_backward.default",
            "((T([1, 2], f32), T([1, 2], f32), [2], T([1, 1], f32), T([1, 1], f32), T([2], f32), T([2], f32), "
            "[True, True, True]), {})",
            {{1, 0}, {1, 3}, {2}, {1}, {1, 1}, {0, 0}});
  check_values(b.out(0), {0, 0});
  check_values(b.out(1), {-1, 0});
  check_values(b.out(2), {1, 0});
  Fixture b2("aten.native_layer_norm_backward.default",
             "((T([1, 2], f32), T([1, 2], f32), [2], T([1, 1], f32), T([1, 1], f32), T([2], f32), T([2], f32), "
             "[True, True, True]), {})",
             {{1, 1}, {1, 3}, {2}, {1}, {1, 1}, {0, 0}});
  check_values(b2.out(0), {0, 0});  // a constant gradient has no component after normalization
}

TEST_CASE("native_batch_norm: training statistics and eval mode") {
  // N=2, C=1, S=1: x = [1, 3] -> mean 2, var 1
  Fixture t("aten.native_batch_norm.default",
            "((T([2, 1], f16), T([1], f16), T([1], f16), T([1], f16), T([1], f16), True, 0.1, 0.0), {})",
            {{1, 3}, {1}, {0}, {0}, {1}});
  check_values(t.out(0), {-1, 1});
  CHECK(t.out(1).dtype == Dtype::f32);
  check_values(t.out(1), {2});
  check_values(t.out(2), {1});
  Fixture e("aten.native_batch_norm.default",
            "((T([2, 1], f32), T([1], f32), T([1], f32), T([1], f32), T([1], f32), False, 0.1, 0.0), {})",
            {{1, 3}, {2}, {1}, {1}, {4}});
  check_values(e.out(0), {1, 3});  // (x - 1) / 2 * 2 + 1
  CHECK(e.out(1).shape == std::vector<std::int64_t>{0});
  // Backward in training mode with output_mask [True, True, False]: grad_bias is None.
  // x = [1, 3], mean 2, invstd 1, w = 1, g = [1, 0]: xhat = [-1, 1], sum g = 1, sum g*xhat = -1
  //   dx = (2*g - 1 - xhat*(-1)) / 2 = [0, 0]; grad_weight = -1
  Fixture b("aten.native_batch_norm_backward.default",
            "((T([2, 1], f32), T([2, 1], f32), T([1], f32), None, None, T([1], f32), T([1], f32), True, 1e-05, "
            "[True, True, False]), {})",
            {{1, 0}, {1, 3}, {1}, {2}, {1}});
  check_values(b.out(0), {0, 0});
  check_values(b.out(1), {-1});
  CHECK(b.out(2).undefined);
}

TEST_CASE("mm, bmm, addmm with transposed operands") {
  // a = [[1, 2], [3, 4]]; b given column-major = [[5, 6], [7, 8]]
  Fixture m("aten.mm.default", "((T([2, 2], f16), T([2, 2], f16, stride=(1, 2))), {})", {{1, 2, 3, 4}, {5, 7, 6, 8}});
  check_values(m.out(), {19, 22, 43, 50});
  Fixture a("aten.addmm.default", "((T([2], f32), T([1, 2], f32), T([2, 2], f32)), {'beta': 2, 'alpha': 0.5})",
            {{1, 10}, {1, 2}, {5, 6, 7, 8}});
  check_values(a.out(), {2 + 9.5, 20 + 11});
  Fixture b("aten.bmm.default", "((T([2, 1, 1], f32), T([2, 1, 2], f32)), {})", {{2, 3}, {1, 2, 3, 4}});
  check_values(b.out(), {2, 4, 9, 12});
  Fixture bad("aten.mm.default", "((T([2, 3], f16), T([2, 3], f16)), {})");
  CHECK(bad.error.find("cannot multiply") != std::string::npos);
}

TEST_CASE("copies, cat, stack, padding and slice/select backwards") {
  Fixture t("aten._to_copy.default", "((T([2], f32),), {'dtype': f16})", {{0.1, 70000}});
  CHECK(t.out().dtype == Dtype::f16);
  CHECK(std::isinf(values(t.out())[1]));
  Fixture c("aten.cat.default", "(([T([1, 2], f32), T([1, 1], f32, stride=(5, 1))], 1), {})", {{1, 2}, {3}});
  check_values(c.out(), {1, 2, 3});
  Fixture s("aten.stack.default", "(([T([2], f32), T([2], f32)], 1), {})", {{1, 2}, {3, 4}});
  CHECK(s.out().shape == std::vector<std::int64_t>{2, 2});
  check_values(s.out(), {1, 3, 2, 4});
  Fixture p("aten.constant_pad_nd.default", "((T([1, 2], f32), [1, -1], 9.0), {})", {{1, 2}});
  check_values(p.out(), {9, 1});
  Fixture sb("aten.slice_backward.default", "((T([2], f32), [5], 0, 1, 9223372036854775807, 2), {})", {{7, 8}});
  check_values(sb.out(), {0, 7, 0, 8, 0});
  Fixture sel("aten.select_backward.default", "((T([2], f32), [2, 2], 1, -1), {})", {{7, 8}});
  check_values(sel.out(), {0, 7, 0, 8});
  Fixture v("aten._unsafe_view.default", "((T([2, 2], f32, stride=(1, 2)), [4]), {})", {{1, 2, 3, 4}});
  check_values(v.out(), {1, 3, 2, 4});
  Fixture cp("aten.copy_.default", "((T([2, 2], f32), T([2], f16)), {})", {{0, 0, 0, 0}, {1, 2}});
  check_values(cp.out(), {1, 2, 1, 2});
  Fixture sp("aten.split.Tensor", "((T([5], f32), 2), {})", {{1, 2, 3, 4, 5}});
  REQUIRE(sp.outs.size() == 3);
  check_values(sp.out(2), {5});
  Fixture nz("aten.new_zeros.default", "((T([2], f16), [3]), {'dtype': f32})");
  CHECK(nz.out().dtype == Dtype::f32);
  check_values(nz.out(), {0, 0, 0});
}

TEST_CASE("index operators: gather, index_select, embedding, nll_loss, and valid indices from prepare") {
  Fixture g("aten.gather.default", "((T([2, 3], f32), 1, T([2, 1], i64)), {})", {{1, 2, 3, 4, 5, 6}, {2, 0}});
  check_values(g.out(), {3, 4});
  Fixture is("aten.index_select.default", "((T([3, 2], f32), 0, T([2], i64)), {})", {{1, 2, 3, 4, 5, 6}, {2, 2}});
  check_values(is.out(), {5, 6, 5, 6});
  Fixture oob("aten.gather.default", "((T([2, 3], f32), 1, T([2, 1], i64)), {})", {{1, 2, 3, 4, 5, 6}, {3, 0}});
  CHECK(oob.error.find("out of bounds") != std::string::npos);
  Fixture nll("aten.nll_loss_forward.default", "((T([2, 3], f32), T([2], i64), None, 1, -100), {})",
              {{1, 2, 3, 4, 5, 6}, {2, 0}});
  check_values(nll.out(0), {-(3 + 4) / 2.0});
  check_values(nll.out(1), {2});
  // prepare: BackendBench's random ints in [-9, 9] become valid indices.
  auto args = bb::parse_args("((T([4, 3], f16), 0, T([500], i64)), {})");
  REQUIRE(args.ok());
  auto call = bb::materialize_call("aten.index_select.default", *args, 3, 0, false);
  REQUIRE(call.ok());
  const bb::OpInfo* info = bb::find_aten_op("aten.index_select.default");
  bb::Rng rng(5);
  REQUIRE(bb::prepare_call(*info, *call, rng).ok());
  std::set<double> seen;
  for (double x : values(*call->positional[2].tensor)) seen.insert(x);
  CHECK(seen == std::set<double>{0, 1, 2, 3});
  CHECK(bb::run_cpu(*info, *call).ok());
}

TEST_CASE("judge: BackendBench's tolerances, NaN equal to NaN, dtype and shape") {
  auto t = [](Dtype d, std::vector<std::int64_t> shape, std::vector<double> v) {
    HostTensor x = bb::empty_tensor(d, shape);
    for (std::size_t i = 0; i < v.size(); ++i) x.store(static_cast<std::int64_t>(i), v[i]);
    return x;
  };
  const double nan = std::nan("");
  auto e = t(Dtype::f32, {3}, {1.0, nan, 100.0});
  CHECK(bb::judge({e}, {t(Dtype::f32, {3}, {1.019, nan, 101.0})}).verdict == bb::Verdict::passed);
  auto j = bb::judge({e}, {t(Dtype::f32, {3}, {1.021, nan, 100.0})});
  CHECK(j.verdict == bb::Verdict::incorrect_numerical);
  CHECK(j.max_abs_error == doctest::Approx(0.021).epsilon(1e-4));
  CHECK(bb::judge({e}, {t(Dtype::f32, {3}, {1.0, 1.0, 100.0})}).verdict == bb::Verdict::incorrect_numerical);
  CHECK(bb::judge({e}, {t(Dtype::f16, {3}, {1.0, nan, 100.0})}).verdict == bb::Verdict::incorrect_dtype);
  CHECK(bb::judge({e}, {t(Dtype::f32, {1, 3}, {1.0, nan, 100.0})}).verdict == bb::Verdict::incorrect_shape);
  CHECK(bb::judge({e}, {}).verdict == bb::Verdict::incorrect_count);
  auto inf = t(Dtype::f32, {1}, {INFINITY});
  CHECK(bb::judge({inf}, {t(Dtype::f32, {1}, {INFINITY})}).verdict == bb::Verdict::passed);
  CHECK(bb::judge({inf}, {t(Dtype::f32, {1}, {-INFINITY})}).verdict == bb::Verdict::incorrect_numerical);
  // Strides are ignored: a transposed view with the same values passes.
  HostTensor a = t(Dtype::f32, {2, 2}, {1, 2, 3, 4});
  HostTensor b = bb::empty_strided(Dtype::f32, {2, 2}, {1, 2});
  for (int i = 0; i < 4; ++i) b.store(i, std::vector<double>{1, 3, 2, 4}[i]);
  CHECK(bb::judge({a}, {b}).verdict == bb::Verdict::passed);
}

TEST_CASE("score: per-operator geometric mean, failures count 1.0, perf@p") {
  // op A: speedups 2 and 8 -> 4; op B: 0.5 and a failure -> sqrt(0.5 * 1) = 0.7071
  auto a = bb::score_op("A", {{true, 2.0}, {true, 8.0}});
  auto b = bb::score_op("B", {{true, 0.5}, {false, 100.0}});
  CHECK(a.score == doctest::Approx(4.0));
  CHECK(a.fully_correct());
  CHECK(b.score == doctest::Approx(std::sqrt(0.5)));
  CHECK(!b.fully_correct());
  auto s = bb::summarize({a, b}, {1.0, 5.0});
  CHECK(s.geomean == doctest::Approx(std::sqrt(4.0 * std::sqrt(0.5))));  // 1.6818
  CHECK(s.fraction_correct == doctest::Approx(0.5));
  CHECK(s.perf_at[0].second == doctest::Approx(0.5));  // A is correct and faster than 1
  CHECK(s.perf_at[1].second == doctest::Approx(0.0));  // nothing beats 5
  auto untimed = bb::score_op("C", {{true, std::nullopt}});
  CHECK(untimed.score == doctest::Approx(1.0));
}

TEST_CASE("import: definitions per signature, workloads per line, strides and counts as axes") {
  auto rep = bb::parse_text(
      "Operator: aten.add.Tensor\n"
      "cnt: 156, ((T([1, 512, 768], f16), T([1, 512, 768], f16)), {})\n"
      "cnt: 3, ((T([2, 8, 4], f16), T([2, 8, 4], f16, stride=(1, 2, 16))), {})\n"
      "cnt: 7, ((T([4, 4, 4], f16), T([4, 4, 4], f16)), {})\n"
      "Operator: aten.bogus_op.default\n"
      "cnt: 1, ((T([2], f64), [1, 2], None), {})\n"
      "cnt: 1, ((T([2], f16), [1, 2], None), {})\n",
      "t.txt");
  REQUIRE(rep.ok());
  auto r = bb::import_trace(rep.trace);
  CHECK(r.lines.size() == 4);
  REQUIRE(r.skipped.size() == 1);
  CHECK(r.skipped[0].source_line == 6);
  CHECK(r.skipped[0].reason.find("f64") != std::string::npos);
  REQUIRE(r.definitions.size() == 3);  // two add signatures (strided or not) and one bogus_op
  CHECK(r.lines[0].definition == r.lines[2].definition);
  CHECK(r.lines[0].definition != r.lines[1].definition);
  for (const auto& l : r.lines) {
    const kb::Definition* d = nullptr;
    for (const auto& def : r.definitions)
      if (def.name == l.definition) d = &def;
    REQUIRE(d != nullptr);
    kb::Diagnostics diags;
    kb::CheckContext ctx;
    ctx.origin = "import";
    kb::validate_definition(*d, ctx, diags);
    kb::validate_workload(l.workload, ctx, diags);
    kb::validate_workload_against(l.workload, *d, ctx, diags);
    CHECK_MESSAGE(diags.error_count() == 0, diags.first_error());
    // Round trip through the JSON writer and reader.
    auto back = kb::read_definition(kb::to_json(*d), "def");
    REQUIRE(back.ok());
    CHECK(*back == *d);
  }
  const auto& strided = r.lines[1].workload;
  CHECK(*strided.find_axis("a1_s2") == 16);
  CHECK(*strided.find_axis("count") == 3);
  CHECK(*strided.find_axis("out0_d2") == 4);
  CHECK(r.lines[3].workload.find_input("a1_1") != nullptr);  // [1, 2] -> two scalar inputs
  CHECK(r.lines[0].text == "cnt: 156, ((T([1, 512, 768], f16), T([1, 512, 768], f16)), {})");
}

TEST_CASE("run: CPU invariants pass on a small trace and the sample takes the smallest lines") {
  auto rep = bb::parse_text(
      "Operator: aten.relu_.default\n"
      "cnt: 1, ((T([64, 64], f16),), {})\n"
      "cnt: 1, ((T([4, 4], f16, stride=(1, 4)),), {})\n"
      "Operator: aten.gather.default\n"
      "cnt: 1, ((T([3, 5], f16), 1, T([3, 2], i64, stride=(1, 0))), {})\n"
      "Operator: aten.sum.SymInt\n"
      "cnt: 1, ((T([3, 5], f16), [0], True), {})\n"
      "Operator: aten.sum.dim_IntList\n"
      "cnt: 1, ((T([3, 5], f16), [1]), {})\n"
      "Operator: aten._cudnn_ctc_loss.default\n"
      "cnt: 9, ((T([1, 1, 3, 3], f16), T([1, 1, 1, 1], f16)), {})\n",
      "t.txt");
  REQUIRE(rep.ok());
  bb::RunOptions opt;
  opt.limit_per_op = 1;
  opt.baseline["aten.gather.default"][0] = 1000.0;
  auto r = bb::run_cpu_trace(rep.trace, opt);
  REQUIRE(r.ok());
  REQUIRE(r->ops.size() == 3);
  CHECK(r->ops[0].op == "aten.relu_.default");
  CHECK(r->ops[0].lines == 1);
  CHECK(r->lines[0].source_line == 3);  // the 4x4 line is the smaller
  CHECK(r->ops[2].op == "aten.sum.dim_IntList");
  CHECK(r->ops[2].lines == 1);  // the merged operator, sampled
  for (const auto& l : r->lines) CHECK_MESSAGE(l.passed, l.op << ": " << l.problem);
  CHECK(r->ops[1].score > 1.0);  // a baseline of 1 s beats the oracle
  REQUIRE(r->unimplemented.size() == 1);
  CHECK(r->unimplemented[0].op == "aten._cudnn_ctc_loss.default");
  CHECK(r->unimplemented[0].count == 9);
  CHECK(r->total_lines == 6);
}
