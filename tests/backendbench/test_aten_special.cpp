// Tests of kb's _fft_c2c, _sparse_coo_tensor_with_dims_and_tensors and LSTM
// (_cudnn_rnn, _cudnn_rnn_backward) oracles (kernels/aten/spectral, sparse,
// rnn), complex elements and the complex judge: FFTs against a direct DFT,
// an LSTM step against its formulas, the backward against finite
// differences, sparse parts with duplicates, and PyTorch's own outputs on
// f64 / c128 cases (tests/backendbench/goldens/aten_special.json, from
// tests/backendbench/goldens/make/aten_special.py).
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <numbers>
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
using kb_test::values;
using cd = std::complex<double>;
using Shape = std::vector<std::int64_t>;

namespace {

// A call from trace text whose tensors get the given storage: a complex tensor's as [re, im] pairs.
struct Call {
  bb::Args args;
  bb::Call call;
  std::vector<HostTensor> outs;
  std::string error;
  Call(const std::string& op, const std::string& text, const std::vector<std::vector<double>>& storage = {}) {
    auto a = bb::parse_args(text);
    REQUIRE_MESSAGE(a.ok(), text);
    args = std::move(*a);
    auto c = bb::materialize_call(op, args, 1, 0, false);
    REQUIRE_MESSAGE(c.ok(), (c.ok() ? "" : c.error().message));
    call = std::move(*c);
    std::size_t k = 0;
    auto fill = [&](HostTensor& t) {
      if (k >= storage.size()) return;
      const auto& s = storage[k++];
      const bool cx = bb::is_complex(t.dtype);
      REQUIRE(static_cast<std::int64_t>(s.size()) == t.span() * (cx ? 2 : 1));
      for (std::int64_t i = 0; i < t.span(); ++i) {
        const auto u = static_cast<std::size_t>(i);
        if (cx) t.store_complex(i, {s[2 * u], s[2 * u + 1]});
        else t.store(i, s[u]);
      }
    };
    for (auto& p : call.positional) {
      if (p.tensor) fill(*p.tensor);
      for (auto& t : p.tensors) fill(t);
    }
    for (auto& kv : call.kwargs)
      if (kv.second.tensor) fill(*kv.second.tensor);
    const bb::OpInfo* info = bb::find_aten_op(op);
    REQUIRE_MESSAGE(info != nullptr, op);
    auto r = bb::run_cpu(*info, call);
    if (r) outs = std::move(*r);
    else error = r.error().message;
  }
  const HostTensor& out(std::size_t k = 0) {
    REQUIRE_MESSAGE(error.empty(), error);
    REQUIRE(k < outs.size());
    return outs[k];
  }
};

std::vector<cd> complex_values(const HostTensor& t) {
  std::vector<cd> v(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i) v[static_cast<std::size_t>(i)] = t.at_complex(i);
  return v;
}

std::vector<double> pairs(const std::vector<cd>& v) {
  std::vector<double> r;
  for (cd c : v) {
    r.push_back(c.real());
    r.push_back(c.imag());
  }
  return r;
}

std::vector<cd> random_complex(std::size_t n, unsigned seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<cd> v(n);
  for (cd& c : v) c = {u(g), u(g)};
  return v;
}

// The DFT by its definition, O(n^2), angles reduced mod n.
std::vector<cd> direct_dft(const std::vector<cd>& x, int sign) {
  const std::size_t n = x.size();
  std::vector<cd> y(n);
  for (std::size_t k = 0; k < n; ++k)
    for (std::size_t j = 0; j < n; ++j) {
      const double a = 2 * std::numbers::pi * static_cast<double>((j * k) % n) / static_cast<double>(n);
      y[k] += x[j] * cd(std::cos(a), sign * std::sin(a));
    }
  return y;
}

}  // namespace

TEST_CASE("complex elements: c32, c64 and c128 parts stored and loaded, the complex judge") {
  for (Dtype d : {Dtype::c32, Dtype::c64, Dtype::c128}) {
    HostTensor t = bb::empty_tensor(d, {2});
    t.store_complex(0, {1.5, -2.25});
    t.store_complex(1, {1e6, 0.1});
    CHECK(t.load_complex(0) == cd(1.5, -2.25));
    if (d == Dtype::c32) CHECK(std::isinf(t.load_complex(1).real()));  // past f16's 65504
    else CHECK(t.load_complex(1).real() == 1e6);
    CHECK(std::isnan(t.at(0)));  // a complex element has no single double
  }
  HostTensor e = bb::empty_tensor(Dtype::c64, {3}), a = bb::empty_tensor(Dtype::c64, {3});
  for (std::int64_t i = 0; i < 3; ++i) {
    e.store_complex(i, {3.0 * static_cast<double>(i), 4.0});
    a.store_complex(i, {3.0 * static_cast<double>(i), 4.0});
  }
  CHECK(bb::judge({e}, {a}).verdict == bb::Verdict::passed);
  CHECK(bb::identical({e}, {a}));
  // |e| = 5 at element 1: tolerance 0.01 + 0.05 = 0.06 on the modulus of the difference
  a.store_complex(1, {3.04, 4.04});  // |diff| = 0.0566
  CHECK(bb::judge({e}, {a}).verdict == bb::Verdict::passed);
  CHECK(!bb::identical({e}, {a}));
  a.store_complex(1, {3.045, 4.045});  // each part within 0.06, the modulus 0.0636 is not
  auto j = bb::judge({e}, {a});
  CHECK(j.verdict == bb::Verdict::incorrect_numerical);
  CHECK(j.detail.find("element 1") != std::string::npos);
  // a NaN part on both sides matches; on one side it does not
  e.store_complex(1, {NAN, 0});
  a.store_complex(1, {1, NAN});
  CHECK(bb::judge({e}, {a}).verdict == bb::Verdict::passed);
  a.store_complex(1, {3, 4});
  CHECK(bb::judge({e}, {a}).verdict == bb::Verdict::incorrect_numerical);
  e.store_complex(1, {INFINITY, 1});
  a.store_complex(1, {INFINITY, 1});
  CHECK(bb::judge({e}, {a}).verdict == bb::Verdict::passed);
}

TEST_CASE("_fft_c2c: 1-D transforms of every length to 130 and larger ones against the direct DFT") {
  std::vector<std::int64_t> lengths;
  for (std::int64_t n = 1; n <= 130; ++n) lengths.push_back(n);
  for (std::int64_t n : {243, 256, 331, 512, 768, 1000}) lengths.push_back(n);  // 331: a Bluestein prime
  for (std::int64_t n : lengths)
    for (int fwd = 0; fwd < 2; ++fwd) {
      INFO("n = " << n << " forward = " << fwd);
      auto x = random_complex(static_cast<std::size_t>(n), static_cast<unsigned>(n));
      Call f("aten._fft_c2c.default", fmt::format("((T([{}], c128), [0], 0, {}), {{}})", n, fwd ? "True" : "False"),
             {pairs(x)});
      auto got = complex_values(f.out());
      auto want = direct_dft(x, fwd ? -1 : 1);
      double err = 0, scale = 0;
      for (std::size_t k = 0; k < want.size(); ++k) {
        err = std::max(err, std::abs(got[k] - want[k]));
        scale = std::max(scale, std::abs(want[k]));
      }
      CHECK(err <= 1e-12 * std::max(1.0, scale));
    }
}

TEST_CASE("_fft_c2c: normalization modes, dims, strides, dtypes, and f16 overflow in complex32") {
  // x = [1, 2, 3, 4]: forward sums give X0 = 10, X1 = -2 + 2i; by_root_n divides by 2, by_n by 4
  const std::vector<double> x{1, 0, 2, 0, 3, 0, 4, 0};
  for (auto [norm, scale] : {std::pair{0, 1.0}, std::pair{1, 0.5}, std::pair{2, 0.25}}) {
    Call f("aten._fft_c2c.default", fmt::format("((T([4], c128), [0], {}, True), {{}})", norm), {x});
    auto v = complex_values(f.out());
    CHECK(std::abs(v[0] - cd(10 * scale, 0)) < 1e-14);
    CHECK(std::abs(v[1] - cd(-2 * scale, 2 * scale)) < 1e-14);
    Call inv("aten._fft_c2c.default", fmt::format("((T([4], c128), [0], {}, False), {{}})", norm), {x});
    CHECK(std::abs(complex_values(inv.out())[1] - cd(-2 * scale, -2 * scale)) < 1e-14);  // conjugate twiddles
  }
  // 2-D over [1, 2] of a [2, 3, 4] tensor equals the separable direct DFT
  auto x3 = random_complex(24, 7);
  Call f("aten._fft_c2c.default", "((T([2, 3, 4], c128), [1, 2], 0, False), {})", {pairs(x3)});
  auto got = complex_values(f.out());
  for (int b = 0; b < 2; ++b)
    for (int k1 = 0; k1 < 3; ++k1)
      for (int k2 = 0; k2 < 4; ++k2) {
        cd want = 0;
        for (int j1 = 0; j1 < 3; ++j1)
          for (int j2 = 0; j2 < 4; ++j2)
            want += x3[static_cast<std::size_t>(b * 12 + j1 * 4 + j2)] *
                    std::polar(1.0, 2 * std::numbers::pi * (k1 * j1 / 3.0 + k2 * j2 / 4.0));
        CHECK(std::abs(got[static_cast<std::size_t>(b * 12 + k1 * 4 + k2)] - want) < 1e-12);
      }
  // complex32 as traced: dtype kept; all-ones over 256 x 300 puts 76800 (past f16's range) in the DC term
  Call h("aten._fft_c2c.default", "((T([1, 256, 300], c32), [1, 2], 0, False), {})",
         {std::vector<double>(2 * 256 * 300, 0.0)});
  CHECK(h.out().dtype == Dtype::c32);
  HostTensor ones = bb::empty_tensor(Dtype::c32, {1, 256, 300});
  for (std::int64_t i = 0; i < ones.numel(); ++i) ones.store_complex(i, {1, 0});
  h.call.positional[0].tensor = ones;
  auto r = bb::run_cpu(*bb::find_aten_op("aten._fft_c2c.default"), h.call);
  REQUIRE(r.ok());
  auto dc = (*r)[0].at_complex(0);
  CHECK(std::isinf(dc.real()));
  CHECK(dc.imag() == 0);
  CHECK((*r)[0].at_complex(1) == cd(0, 0));
  Call bad("aten._fft_c2c.default", "((T([4], f32), [0], 0, True), {})");
  CHECK(bad.error.find("complex") != std::string::npos);
  Call negative("aten._fft_c2c.default", "((T([4], c64), [-1], 0, True), {})");
  CHECK(negative.error.find("wrapped") != std::string::npos);
  Call badnorm("aten._fft_c2c.default", "((T([4], c64), [0], 3, True), {})");
  CHECK(badnorm.error.find("fft_norm_mode") != std::string::npos);
}

TEST_CASE("_sparse_coo_tensor_with_dims_and_tensors: the parts kept uncoalesced, duplicates included") {
  // indices [[2, 0, 2]] (row 2 twice), values [[1, 2], [3, 4], [5, 6]]
  Call f("aten._sparse_coo_tensor_with_dims_and_tensors.default",
         "((1, 1, [3, 2], T([1, 3], i64), T([3, 2], f16)), {'dtype': f16, 'layout': torch.sparse_coo, 'device': "
         "'cuda', 'pin_memory': None})",
         {{2, 0, 2}, {1, 2, 3, 4, 5, 6}});
  REQUIRE(f.outs.size() == 2);
  CHECK(f.out(0).dtype == Dtype::i64);
  CHECK(f.out(0).shape == Shape{1, 3});
  CHECK(values(f.out(0)) == std::vector<double>{2, 0, 2});
  CHECK(f.out(1).dtype == Dtype::f16);
  CHECK(values(f.out(1)) == std::vector<double>{1, 2, 3, 4, 5, 6});
  Call bad("aten._sparse_coo_tensor_with_dims_and_tensors.default",
           "((1, 1, [3, 2], T([1, 3], i64), T([3, 3], f16)), {'dtype': f16})");
  CHECK(bad.error.find("values must be") != std::string::npos);
  Call dims("aten._sparse_coo_tensor_with_dims_and_tensors.default",
            "((1, 0, [3, 2], T([1, 3], i64), T([3, 2], f16)), {})");
  CHECK(dims.error.find("sparse_dim (1) + dense_dim (0)") != std::string::npos);
  Call dt("aten._sparse_coo_tensor_with_dims_and_tensors.default",
          "((1, 1, [3, 2], T([1, 3], i64), T([3, 2], f16)), {'dtype': f32})");
  CHECK(dt.error.find("dtype") != std::string::npos);
}

TEST_CASE("sparse prepare: every index within its sparse dim, duplicates present, runs pass their own checks") {
  const bb::OpInfo* info = bb::find_aten_op("aten._sparse_coo_tensor_with_dims_and_tensors.default");
  REQUIRE(info);
  for (const char* text : {"((1, 1, [965, 192], T([1, 4000], i64), T([4000, 192], f16)), {'dtype': f16})",
                           "((2, 1, [5, 7, 3], T([2, 60], i64, stride=(1, 2)), T([60, 3], f32)), {})"}) {
    auto args = bb::parse_args(text);
    REQUIRE(args.ok());
    for (std::size_t line = 0; line < 3; ++line) {
      auto call = bb::materialize_call(info->name, *args, 5, line, false);
      REQUIRE(call.ok());
      bb::Rng rng(line + 11);
      REQUIRE(bb::prepare_call(*info, *call, rng).ok());
      const HostTensor& idx = *call->positional[3].tensor;
      auto size = args->positional[2].children;
      std::set<std::vector<std::int64_t>> seen;
      bool dup = false;
      for (std::int64_t i = 0; i < idx.shape[1]; ++i) {
        std::vector<std::int64_t> key;
        for (std::int64_t d = 0; d < idx.shape[0]; ++d) {
          const std::int64_t at[2] = {d, i};
          const auto v = static_cast<std::int64_t>(idx.load(idx.index_of(at)));
          CHECK(v >= 0);
          CHECK(v < *size[static_cast<std::size_t>(d)].int_value);
          key.push_back(v);
        }
        dup |= !seen.insert(key).second;
      }
      CHECK(dup);
      CHECK(bb::run_cpu(*info, *call).ok());
    }
  }
}

namespace {
double sig(double a) { return 1 / (1 + std::exp(-a)); }
}  // namespace

TEST_CASE("_cudnn_rnn: one LSTM step against the gate formulas; reserve and weight_buf not produced") {
  // in = 2, H = 1, B = 1, T = 2: w_ih rows (i, f, g, o), w_hh, b_ih, b_hh
  const std::vector<double> x{0.5, -1.0, 0.25, 0.75};
  const std::vector<double> wih{0.1, 0.2, -0.3, 0.4, 0.5, -0.6, 0.7, 0.8}, whh{0.9, -0.1, 0.2, 0.3},
      bih{0.01, 0.02, 0.03, 0.04}, bhh{-0.05, 0.06, -0.07, 0.08};
  Call f("aten._cudnn_rnn.default",
         "((T([1, 2, 2], f64), [T([4, 2], f64), T([4, 1], f64), T([4], f64), T([4], f64)], 4, None, T([1, 1, 1], f64), "
         "T([1, 1, 1], f64), 2, 1, 0, 1, True, 0.0, True, False, [], None), {})",
         {x, wih, whh, bih, bhh, {0.3}, {-0.2}});
  double h = 0.3, c = -0.2;
  std::vector<double> hs;
  for (int t = 0; t < 2; ++t) {
    double a[4];
    for (int r = 0; r < 4; ++r)
      a[r] = wih[static_cast<std::size_t>(2 * r)] * x[static_cast<std::size_t>(2 * t)] +
             wih[static_cast<std::size_t>(2 * r + 1)] * x[static_cast<std::size_t>(2 * t + 1)] +
             whh[static_cast<std::size_t>(r)] * h + bih[static_cast<std::size_t>(r)] + bhh[static_cast<std::size_t>(r)];
    c = sig(a[1]) * c + sig(a[0]) * std::tanh(a[2]);
    h = sig(a[3]) * std::tanh(c);
    hs.push_back(h);
  }
  kb_test::check_values(f.out(0), hs, 1e-14);
  kb_test::check_values(f.out(1), {h}, 1e-14);
  kb_test::check_values(f.out(2), {c}, 1e-14);
  REQUIRE(f.outs.size() == 5);
  CHECK(f.outs[3].undefined);
  CHECK(f.outs[4].undefined);
  Call gru("aten._cudnn_rnn.default",
           "((T([1, 2, 2], f64), [T([3, 2], f64), T([3, 1], f64)], 2, None, T([1, 1, 1], f64), None, 3, 1, 0, 1, True, "
           "0.0, True, False, [], None), {})");
  CHECK(gru.error.find("only 2, LSTM") != std::string::npos);
}

TEST_CASE("_cudnn_rnn_backward: gradients against central differences of the forward, output_mask") {
  const std::string fwd_text =
      "((T([2, 3, 3], f64), [T([12, 3], f64), T([12, 3], f64), T([12], f64), T([12], f64), T([12, 3], f64), "
      "T([12, 3], f64), T([12], f64), T([12], f64)], 4, None, T([2, 3, 3], f64), T([2, 3, 3], f64), 2, 3, 0, 1, "
      "False, 0.0, True, True, [], None), {})";
  const std::string bwd_text =
      "((T([2, 3, 3], f64), [T([12, 3], f64), T([12, 3], f64), T([12], f64), T([12], f64), T([12, 3], f64), "
      "T([12, 3], f64), T([12], f64), T([12], f64)], 4, None, T([2, 3, 3], f64), T([2, 3, 3], f64), "
      "T([2, 3, 6], f64), T([2, 3, 6], f64), T([2, 3, 3], f64), T([2, 3, 3], f64), 2, 3, 0, 1, False, 0.0, True, "
      "True, [], None, T([8], u8), [True, True, True, True]), {})";
  std::mt19937_64 g(3);
  std::uniform_real_distribution<double> u(-0.6, 0.6);
  auto rnd = [&](std::size_t n) {
    std::vector<double> v(n);
    for (double& e : v) e = u(g);
    return v;
  };
  // forward inputs: x, 8 weights, hx, cx
  std::vector<std::vector<double>> in{rnd(6 * 3)};
  for (int d = 0; d < 2; ++d)
    for (std::size_t n : {36u, 36u, 12u, 12u}) in.push_back(rnd(n));
  in.push_back(rnd(18));
  in.push_back(rnd(18));
  const auto gy = rnd(36), ghy = rnd(18), gcy = rnd(18);
  auto loss = [&](const std::vector<std::vector<double>>& fin) {
    Call f("aten._cudnn_rnn.default", fwd_text, fin);
    double s = 0;
    auto y = values(f.out(0)), hy = values(f.out(1)), cy = values(f.out(2));
    for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * gy[i];
    for (std::size_t i = 0; i < hy.size(); ++i) s += hy[i] * ghy[i] + cy[i] * gcy[i];
    return s;
  };
  std::vector<std::vector<double>> bin(in.begin(), in.begin() + 9);
  bin.push_back(in[9]);
  bin.push_back(in[10]);
  bin.push_back(rnd(36));  // output: not read
  bin.push_back(gy);
  bin.push_back(ghy);
  bin.push_back(gcy);
  Call b("aten._cudnn_rnn_backward.default", bwd_text, bin);
  REQUIRE(b.error.empty());
  REQUIRE(b.outs.size() == 3 + 8);
  // input k of the forward <-> gradient output: x -> 0, weights -> 3 + w, hx -> 1, cx -> 2
  auto grad_of = [&](std::size_t k) { return k == 0 ? 0 : k <= 8 ? 3 + (k - 1) : k == 9 ? 1 : 2; };
  for (std::size_t k = 0; k < in.size(); ++k) {
    auto grad = values(b.out(grad_of(k)));
    for (std::size_t i = 0; i < in[k].size(); i += 5) {
      auto p = in, m = in;
      p[k][i] += 1e-6;
      m[k][i] -= 1e-6;
      const double fd = (loss(p) - loss(m)) / 2e-6;
      INFO("input " << k << " element " << i);
      CHECK(grad[i] == doctest::Approx(fd).epsilon(1e-6).scale(1));
    }
  }
  // output_mask: [False, False, False, True] leaves three Nones and the weight list
  std::string masked = bwd_text;
  masked.replace(masked.find("[True, True, True, True]"), 24, "[False, False, False, True]");
  Call m("aten._cudnn_rnn_backward.default", masked, bin);
  REQUIRE(m.outs.size() == 11);
  CHECK(m.outs[0].undefined);
  CHECK(m.outs[2].undefined);
  CHECK(values(m.outs[3]) == values(b.out(3)));
  masked.replace(masked.find("[False, False, False, True]"), 27, "[True, False, False, False]");
  Call n("aten._cudnn_rnn_backward.default", masked, bin);
  CHECK(n.outs.size() == 3);
}

TEST_CASE("LSTM backward prepare: weight_buf holds the weights packed back to back") {
  auto args = bb::parse_args(
      "((T([2, 3, 4], f16), [T([12, 4], f16), T([12, 3], f16), T([12], f16), T([12], f16)], 4, T([108], f16), "
      "T([1, 2, 3], f16), T([1, 2, 3], f16), T([2, 3, 3], f16), T([2, 3, 3], f16), None, None, 2, 3, 0, 1, True, "
      "0.0, True, False, [], None, T([16], u8), [True, False, False, True]), {})");
  REQUIRE(args.ok());
  const bb::OpInfo* info = bb::find_aten_op("aten._cudnn_rnn_backward.default");
  auto call = bb::materialize_call(info->name, *args, 1, 0, false);
  REQUIRE(call.ok());
  bb::Rng rng(1);
  REQUIRE(bb::prepare_call(*info, *call, rng).ok());
  std::vector<double> packed;
  for (const HostTensor& w : call->positional[1].tensors)
    for (double v : values(w)) packed.push_back(v);
  CHECK(values(*call->positional[3].tensor) == packed);
}

TEST_CASE("the FFT, sparse and LSTM operators agree with PyTorch on f64 and c128 cases") {
  const std::string path = std::string(KB_SOURCE_DIR) + "/tests/backendbench/goldens/aten_special.json";
  auto text = kb::json::read_text_file(path);
  REQUIRE_MESSAGE(text.ok(), path);
  auto doc = kb::json::parse(*text, path);
  REQUIRE(doc.ok());
  kb::json::Array cases;
  REQUIRE(!doc->root()["cases"].get_array().get(cases));
  auto number = [](auto v) { return v.is_int64() ? static_cast<double>(v.get_int64().value()) : v.get_double().value(); };
  std::size_t compared = 0;
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
    Call f(std::string(op), std::string(args), inputs);
    REQUIRE_MESSAGE(f.error.empty(), f.error);
    std::size_t k = 0;
    for (auto o : c["outputs"].get_array()) {
      REQUIRE(k < f.outs.size());
      const HostTensor& got = f.outs[k];
      if (o.is_null()) {
        CHECK(got.undefined);
        ++k;
        continue;
      }
      std::vector<std::int64_t> shape;
      for (auto d : o["shape"].get_array()) shape.push_back(d.get_int64().value());
      CHECK(got.shape == shape);
      std::string_view dt;
      REQUIRE(!o["dtype"].get_string().get(dt));
      CHECK(std::string(bb::dtype_abbrev(got.dtype)) ==
            (dt == "float64" ? "f64" : dt == "int64" ? "i64" : dt == "complex128" ? "c128" : std::string(dt)));
      std::vector<double> want;
      for (auto v : o["values"].get_array()) want.push_back(number(v));
      auto g = bb::is_complex(got.dtype) ? pairs(complex_values(got)) : values(got);
      REQUIRE(g.size() == want.size());
      for (std::size_t i = 0; i < want.size(); ++i) {
        INFO("output " << k << " element " << i);
        CHECK(g[i] == doctest::Approx(want[i]).epsilon(1e-9).scale(1e-3));
      }
      ++compared;
      ++k;
    }
    CHECK(k == f.outs.size());
    ops.insert(std::string(op));
  }
  CHECK(ops.size() == 4);
  CHECK(compared > 40);
}
