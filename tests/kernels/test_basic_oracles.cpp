// The gemm, rmsnorm, rope and sampling CPU oracles against naive
// computations written independently here, on small shapes (the shipped
// definitions with their axes shrunk), plus which definitions they accept.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <numbers>
#include <string>
#include <vector>

#include "oracle/oracle.hpp"
#include "sampling/sampling_oracle.hpp"
#include "schema/io.hpp"
#include "tensor/convert.hpp"

namespace fs = std::filesystem;
using kb::Code;
using kb::DType;
using kb::Tensor;

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

fs::path definitions_dir() { return fs::path(env_or("KB_SHARED_DIR", "../shared")) / "flashinfer-trace" / "definitions"; }

kb::Definition load(const fs::path& p) {
  auto d = kb::read_definition_file(p.string());
  INFO(p.string());
  REQUIRE(d.ok());
  return *d;
}

kb::Definition shipped(const std::string& op, const std::string& name) {
  return load(definitions_dir() / op / (name + ".json"));
}

void set_const(kb::Definition& d, const std::string& axis, std::int64_t v) {
  for (auto& a : d.axes)
    if (a.name == axis) {
      REQUIRE(a.kind == kb::AxisKind::const_);
      a.value = v;
      return;
    }
  FAIL("no axis " << axis);
}

// Every axis of d: const values from d, var values from `vars`.
kb::AxisValues bind(const kb::Definition& d, const std::map<std::string, std::int64_t>& vars) {
  kb::AxisValues ax;
  for (const auto& a : d.axes) {
    if (a.kind == kb::AxisKind::const_) {
      ax.values.emplace_back(a.name, a.value);
    } else {
      auto it = vars.find(a.name);
      REQUIRE_MESSAGE(it != vars.end(), "unbound axis " << a.name);
      ax.values.emplace_back(a.name, it->second);
    }
  }
  return ax;
}

Tensor make(DType t, std::vector<std::int64_t> shape, const std::vector<float>& v) {
  auto x = Tensor::allocate(t, std::move(shape));
  REQUIRE(x.ok());
  REQUIRE(static_cast<std::int64_t>(v.size()) == x->numel());
  REQUIRE(kb::store_float(v, *x).ok());
  return std::move(*x);
}

Tensor zeros(DType t, std::vector<std::int64_t> shape) {
  auto x = Tensor::allocate(t, std::move(shape));
  REQUIRE(x.ok());
  x->fill_bytes(0xFF);
  return std::move(*x);
}

// Deterministic values in [-1, 1) (a 64-bit LCG; unrelated to kb's generators).
std::vector<float> noise(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  std::uint64_t s = seed * 2862933555777941757ull + 3037000493ull;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<double>(s >> 40) / 8388608.0 - 1.0);
  }
  return v;
}

kb::Status run(const kb::Definition& d, const kb::AxisValues& ax, std::vector<const Tensor*> ins,
               std::vector<Tensor>& outs, std::uint64_t seed = 0) {
  std::vector<kb::Arg> args(ins.size());
  for (std::size_t i = 0; i < ins.size(); ++i) args[i].tensor = ins[i];
  auto o = kb::find_oracle(d);
  if (!o) return std::move(o).error();
  kb::OracleCall call{d, ax, args, outs, seed};
  return (*o)->run(call);
}

float round_as(DType t, double v) {
  auto x = make(t, {1}, {static_cast<float>(v)});
  return kb::to_float(x)[0];
}

double ulp_of(DType t, double v) {
  int e;
  std::frexp(v == 0 ? 1e-30 : v, &e);
  int mant = t == DType::bfloat16 ? 8 : t == DType::float16 ? 11 : 24;
  return std::ldexp(1.0, e - mant);
}

// ---- which definitions ---------------------------------------------------------

TEST_CASE("every shipped and bundled gemm/rmsnorm/rope/sampling definition has its oracle") {
  int count = 0;
  std::vector<fs::path> dirs;
  for (const char* op : {"gemm", "rmsnorm", "rope", "sampling"}) dirs.push_back(definitions_dir() / op);
  const fs::path src = env_or("KB_SOURCE_DIR", ".");
  for (const char* op : {"gemm", "rmsnorm", "rope", "sampling"}) dirs.push_back(src / "kernels" / op / "definitions");
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() != ".json") continue;
      kb::Definition d = load(e.path());
      auto o = kb::find_oracle(d);
      INFO(e.path().string());
      CHECK_MESSAGE(o.ok(), (o.ok() ? std::string() : o.error().message));
      if (o.ok()) CHECK((*o)->op_type == d.op_type);
      ++count;
    }
  }
  // 28 gemm + 13 rmsnorm + 1 rope + 18 sampling shipped.
  CHECK(count >= 60);
}

TEST_CASE("definitions the oracles cannot serve are refused with a reason") {
  auto expect_refused = [](const kb::Definition& d, const char* part) {
    auto o = kb::find_oracle(d);
    REQUIRE_FALSE(o.ok());
    CHECK(o.error().code == Code::unsupported);
    INFO(o.error().message);
    CHECK(o.error().message.find(part) != std::string::npos);
  };
  {
    auto d = shipped("gemm", "gemm_n128_k2048");
    d.reference = "import torch\n\ndef run(A, B):\n    return torch.matmul(A, B.T) + bias\n";
    expect_refused(d, "bias");
    d = shipped("gemm", "gemm_n128_k2048");
    d.inputs[1].dtype = DType::float8_e4m3fn;
    expect_refused(d, "float32/float16/bfloat16");
  }
  {
    auto d = shipped("rmsnorm", "rmsnorm_h128");
    auto pos = d.reference.find("EPS = 1e-6");
    REQUIRE(pos != std::string::npos);
    d.reference.replace(pos, 10, "eps = 1e-6");
    expect_refused(d, "EPS");
    d = shipped("rmsnorm", "rmsnorm_h128");
    pos = d.reference.find("weight.to(torch.float32)");
    REQUIRE(pos != std::string::npos);
    d.reference.replace(pos, 24, "(1.0 + weight.to(torch.float32))");
    expect_refused(d, "Gemma");
  }
  {
    auto d = shipped("rope", "rope_with_cos_sin_cache_neox_style_d128_rd64");
    std::string r = d.reference;
    for (std::size_t p; (p = r.find("neox")) != std::string::npos;) r.replace(p, 4, "rot");
    for (std::size_t p; (p = r.find("NeoX")) != std::string::npos;) r.replace(p, 4, "Some");
    d.reference = r;
    expect_refused(d, "layout");
  }
  {
    auto d = shipped("sampling", "top_k_sampling_from_probs_v128256");
    auto pos = d.reference.find("0 < k < vocab_size");
    REQUIRE(pos != std::string::npos);
    d.reference.replace(pos, 18, "0 < k <= vocab_size");
    expect_refused(d, "top-k rule");
    d = shipped("sampling", "top_p_sampling_from_probs_v128256");
    pos = d.reference.find("to_remove[0] = False");
    REQUIRE(pos != std::string::npos);
    d.reference.replace(pos, 20, "pass");
    expect_refused(d, "top-p rule");
  }
  kb::Definition other = shipped("gemm", "gemm_n128_k2048");
  other.op_type = "moe";
  CHECK_FALSE(kb::find_oracle(other).ok());
}

// ---- gemm ---------------------------------------------------------------------------

// C[m][n] = sum_k A[m][k] * B[n][k], summed from the last k down in long double.
std::vector<long double> naive_gemm(const std::vector<float>& a, const std::vector<float>& b, int M, int N, int K) {
  std::vector<long double> c(static_cast<std::size_t>(M) * N, 0.0L);
  for (int n = 0; n < N; ++n)
    for (int m = 0; m < M; ++m)
      for (int k = K - 1; k >= 0; --k) c[m * N + n] += static_cast<long double>(a[m * K + k]) * b[n * K + k];
  return c;
}

TEST_CASE("gemm 3x5x7 equals the naive product rounded once, for each dtype") {
  for (DType t : {DType::float16, DType::bfloat16, DType::float32}) {
    INFO(kb::dtype_name(t));
    auto d = shipped("gemm", "gemm_n128_k2048");
    set_const(d, "N", 5);
    set_const(d, "K", 7);
    d.inputs[0].dtype = d.inputs[1].dtype = d.outputs[0].dtype = t;
    auto ax = bind(d, {{"M", 3}});
    Tensor A = make(t, {3, 7}, noise(21, 1));
    Tensor B = make(t, {5, 7}, noise(35, 2));
    std::vector<Tensor> outs;
    outs.push_back(zeros(t, {3, 5}));
    REQUIRE(run(d, ax, {&A, &B}, outs).ok());
    auto c = naive_gemm(kb::to_float(A), kb::to_float(B), 3, 5, 7);
    auto got = kb::to_float(outs[0]);
    for (int i = 0; i < 15; ++i) {
      INFO("element ", i);
      // 7 products of <= 24-bit values: the long double sum is exact, so both round the same.
      CHECK(got[i] == round_as(t, static_cast<double>(static_cast<float>(c[i]))));
    }
  }
}

TEST_CASE("gemm: threaded, ragged N, deterministic") {
  auto d = shipped("gemm", "gemm_n128_k2048");
  const int M = 2, N = 1003, K = 3001;
  set_const(d, "N", N);
  set_const(d, "K", K);
  d.inputs[0].dtype = d.inputs[1].dtype = d.outputs[0].dtype = DType::float32;
  auto ax = bind(d, {{"M", M}});
  auto a = noise(M * K, 3), b = noise(static_cast<std::size_t>(N) * K, 4);
  Tensor A = make(DType::float32, {M, K}, a);
  Tensor B = make(DType::float32, {N, K}, b);
  std::vector<Tensor> outs;
  outs.push_back(zeros(DType::float32, {M, N}));
  REQUIRE(run(d, ax, {&A, &B}, outs).ok());
  auto c = naive_gemm(a, b, M, N, K);
  auto got = kb::to_float(outs[0]);
  int bad = 0;
  for (int i = 0; i < M * N; ++i)
    if (std::fabs(got[i] - static_cast<double>(c[i])) > ulp_of(DType::float32, static_cast<double>(c[i])) + 1e-12) ++bad;
  CHECK(bad == 0);
  std::vector<Tensor> again;
  again.push_back(zeros(DType::float32, {M, N}));
  REQUIRE(run(d, ax, {&A, &B}, again).ok());
  CHECK(std::equal(outs[0].span().begin(), outs[0].span().end(), again[0].span().begin()));

  std::vector<Tensor> wrong;
  wrong.push_back(zeros(DType::float32, {M, N - 1}));
  auto st = run(d, ax, {&A, &B}, wrong);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == Code::invalid_argument);
}

TEST_CASE("gemm on the shipped fp16 definition with M = 0") {
  auto d = shipped("gemm", "gemm_n128_k2048");
  auto ax = bind(d, {{"M", 0}});
  Tensor A = make(DType::float16, {0, 2048}, {});
  Tensor B = make(DType::float16, {128, 2048}, noise(128 * 2048, 5));
  std::vector<Tensor> outs;
  outs.push_back(zeros(DType::float16, {0, 128}));
  CHECK(run(d, ax, {&A, &B}, outs).ok());
}

// ---- rmsnorm ------------------------------------------------------------------------

TEST_CASE("rmsnorm with known values, plain and fused, EPS from the reference") {
  for (DType t : {DType::float32, DType::bfloat16}) {
    INFO(kb::dtype_name(t));
    for (bool fused : {false, true}) {
      INFO("fused ", fused);
      auto d = fused ? shipped("rmsnorm", "fused_add_rmsnorm_h2048") : shipped("rmsnorm", "rmsnorm_h128");
      set_const(d, "hidden_size", 4);
      for (auto& s : d.inputs) s.dtype = t;
      d.outputs[0].dtype = t;
      auto ax = bind(d, {{"batch_size", 2}});
      // Row 0: x = [1, 2, 3, 4] (mean square 7.5); row 1: x = 0 (output 0).
      Tensor hs = fused ? make(t, {2, 4}, {0.5f, 1, 1.5f, 2, 0, 0, 0, 0}) : make(t, {2, 4}, {1, 2, 3, 4, 0, 0, 0, 0});
      Tensor res = make(t, {2, 4}, {0.5f, 1, 1.5f, 2, 0, 0, 0, 0});
      Tensor w = make(t, {4}, {1, 0.5f, 2, -1});
      std::vector<Tensor> outs;
      outs.push_back(zeros(t, {2, 4}));
      std::vector<const Tensor*> ins = fused ? std::vector<const Tensor*>{&hs, &res, &w}
                                             : std::vector<const Tensor*>{&hs, &w};
      REQUIRE(run(d, ax, ins, outs).ok());
      auto y = kb::to_float(outs[0]);
      const double x[4] = {1, 2, 3, 4}, wt[4] = {1, 0.5, 2, -1};
      for (int i = 0; i < 4; ++i) {
        double expect = x[i] * wt[i] / std::sqrt(7.5 + 1e-6);
        CHECK(std::fabs(y[i] - expect) <= ulp_of(t, expect));
        CHECK(y[4 + i] == 0.0f);
      }
    }
  }
  // A different EPS in the reference changes the result accordingly.
  auto d = shipped("rmsnorm", "rmsnorm_h128");
  set_const(d, "hidden_size", 4);
  for (auto& s : d.inputs) s.dtype = DType::float32;
  d.outputs[0].dtype = DType::float32;
  auto pos = d.reference.find("EPS = 1e-6");
  REQUIRE(pos != std::string::npos);
  d.reference.replace(pos, 10, "EPS = 0.5");
  auto ax = bind(d, {{"batch_size", 1}});
  Tensor hs = make(DType::float32, {1, 4}, {1, 2, 3, 4});
  Tensor w = make(DType::float32, {4}, {1, 1, 1, 1});
  std::vector<Tensor> outs;
  outs.push_back(zeros(DType::float32, {1, 4}));
  REQUIRE(run(d, ax, {&hs, &w}, outs).ok());
  CHECK(kb::to_float(outs[0])[3] == doctest::Approx(4 / std::sqrt(8.0)).epsilon(1e-6));
}

TEST_CASE("rmsnorm on a shipped bf16 definition against a naive float64 row norm") {
  auto d = shipped("rmsnorm", "rmsnorm_h7168");
  const int H = 7168, Bt = 3;
  auto ax = bind(d, {{"batch_size", Bt}});
  Tensor hs = make(DType::bfloat16, {Bt, H}, noise(Bt * H, 7));
  Tensor w = make(DType::bfloat16, {H}, noise(H, 8));
  std::vector<Tensor> outs;
  outs.push_back(zeros(DType::bfloat16, {Bt, H}));
  REQUIRE(run(d, ax, {&hs, &w}, outs).ok());
  auto x = kb::to_float(hs), wf = kb::to_float(w), y = kb::to_float(outs[0]);
  int bad = 0;
  for (int b = 0; b < Bt; ++b) {
    long double ss = 0;
    for (int i = H - 1; i >= 0; --i) ss += static_cast<long double>(x[b * H + i]) * x[b * H + i];
    double r = 1.0 / std::sqrt(static_cast<double>(ss / H) + *kb::reference_constant(d, "EPS"));
    for (int i = 0; i < H; ++i) {
      double e = x[b * H + i] * r * wf[i];
      if (std::fabs(y[b * H + i] - e) > ulp_of(DType::bfloat16, e)) ++bad;
    }
  }
  CHECK(bad == 0);
}

// ---- rope ---------------------------------------------------------------------------

const char* kGptjReference = R"(import torch


@torch.no_grad()
def run(q, k, cos_sin_cache, positions):
    head_size = 8
    rotary_dim = 4
    cos, sin = cos_sin_cache[positions].chunk(2, dim=-1)

    def rotate(x, cos, sin):
        cos = cos.unsqueeze(-2).to(x.dtype)
        sin = sin.unsqueeze(-2).to(x.dtype)
        x1 = x[..., ::2]
        x2 = x[..., 1::2]
        o1 = x1 * cos - x2 * sin
        o2 = x2 * cos + x1 * sin
        return torch.stack((o1, o2), dim=-1).flatten(-2)

    q_f = q.to(torch.float32)
    k_f = k.to(torch.float32)
    q_out = torch.cat((rotate(q_f[..., :rotary_dim], cos, sin), q_f[..., rotary_dim:]), dim=-1).to(q.dtype)
    k_out = torch.cat((rotate(k_f[..., :rotary_dim], cos, sin), k_f[..., rotary_dim:]), dim=-1).to(k.dtype)
    return q_out, k_out
)";

TEST_CASE("rope: quarter and half turns by hand, NeoX and GPT-J layouts") {
  // head_size 8, rotary_dim 4; cache row 1 = [cos0, cos1, sin0, sin1] = [0, -1, 1, 0]
  // (90 degrees for pair 0, 180 degrees for pair 1); row 0 is the identity.
  // NeoX twice: with the reference's constants edited too, and with the axes alone changed (the
  // definition's axes are what its tensors have; the reference's copies of them do not override them).
  for (int layout : {0, 1, 2}) {
    const bool gptj = layout == 1;
    INFO((gptj ? "GPT-J" : layout == 0 ? "NeoX" : "NeoX, the reference's constants left at 128 / 64"));
    auto d = shipped("rope", "rope_with_cos_sin_cache_neox_style_d128_rd64");
    set_const(d, "head_size", 8);
    set_const(d, "rotary_dim", 4);
    if (gptj) {
      d.reference = kGptjReference;
    } else if (layout == 0) {
      auto& r = d.reference;
      r.replace(r.find("head_size = 128"), 15, "head_size = 8");
      r.replace(r.find("rotary_dim = 64"), 15, "rotary_dim = 4");
    }
    REQUIRE(kb::find_oracle(d).ok());
    auto ax = bind(d, {{"num_tokens", 2}, {"num_qo_heads", 1}, {"num_kv_heads", 1}, {"max_seq_len", 2}});
    std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
    std::vector<float> two = x;
    two.insert(two.end(), x.begin(), x.end());
    Tensor q = make(DType::bfloat16, {2, 1, 8}, two);
    Tensor k = make(DType::bfloat16, {2, 1, 8}, two);
    Tensor cache = make(DType::float32, {2, 4}, {1, 1, 0, 0, 0, -1, 1, 0});
    auto pos = Tensor::allocate(DType::int64, {2});
    REQUIRE(pos.ok());
    pos->data<std::int64_t>()[0] = 1;  // token 0 rotated, token 1 at position 0 untouched
    pos->data<std::int64_t>()[1] = 0;
    std::vector<Tensor> outs;
    outs.push_back(zeros(DType::bfloat16, {2, 1, 8}));
    outs.push_back(zeros(DType::bfloat16, {2, 1, 8}));
    REQUIRE(run(d, ax, {&q, &k, &cache, &*pos}, outs).ok());
    // NeoX pairs (x0, x2) and (x1, x3); GPT-J pairs (x0, x1) and (x2, x3).
    std::vector<float> want = gptj ? std::vector<float>{-2, 1, -3, -4, 5, 6, 7, 8}
                                   : std::vector<float>{-3, -2, 1, -4, 5, 6, 7, 8};
    for (int o = 0; o < 2; ++o) {
      auto y = kb::to_float(outs[o]);
      for (int i = 0; i < 8; ++i) {
        CHECK(y[i] == want[i]);
        CHECK(y[8 + i] == x[i]);
      }
    }
    // Positions outside the cache are refused, never read.
    for (std::int64_t bad : {std::int64_t{2}, std::int64_t{-1}}) {
      pos->data<std::int64_t>()[1] = bad;
      auto st = run(d, ax, {&q, &k, &cache, &*pos}, outs);
      REQUIRE_FALSE(st.ok());
      CHECK(st.error().code == Code::invalid_argument);
    }
  }
}

TEST_CASE("rope: shipped definition against a naive NeoX rotation with a real cache") {
  auto d = shipped("rope", "rope_with_cos_sin_cache_neox_style_d128_rd64");
  const int T = 3, HQ = 2, HK = 1, D = 128, R = 64, S = 16;
  auto ax = bind(d, {{"num_tokens", T}, {"num_qo_heads", HQ}, {"num_kv_heads", HK}, {"max_seq_len", S}});
  std::vector<float> cs(S * R);
  for (int p = 0; p < S; ++p)
    for (int i = 0; i < R / 2; ++i) {
      double theta = p * std::pow(10000.0, -2.0 * i / R);
      cs[p * R + i] = static_cast<float>(std::cos(theta));
      cs[p * R + R / 2 + i] = static_cast<float>(std::sin(theta));
    }
  Tensor cache = make(DType::float32, {S, R}, cs);
  Tensor q = make(DType::bfloat16, {T, HQ, D}, noise(T * HQ * D, 9));
  Tensor k = make(DType::bfloat16, {T, HK, D}, noise(T * HK * D, 10));
  auto pos = Tensor::allocate(DType::int64, {T});
  REQUIRE(pos.ok());
  const std::int64_t positions[T] = {15, 0, 7};
  for (int t = 0; t < T; ++t) pos->data<std::int64_t>()[t] = positions[t];
  std::vector<Tensor> outs;
  outs.push_back(zeros(DType::bfloat16, {T, HQ, D}));
  outs.push_back(zeros(DType::bfloat16, {T, HK, D}));
  REQUIRE(run(d, ax, {&q, &k, &cache, &*pos}, outs).ok());
  for (int o = 0; o < 2; ++o) {
    const Tensor& in = o == 0 ? q : k;
    const int H = o == 0 ? HQ : HK;
    auto x = kb::to_float(in), y = kb::to_float(outs[o]);
    int bad = 0;
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) {
        const float* xr = x.data() + (t * H + h) * D;
        const float* yr = y.data() + (t * H + h) * D;
        const float* row = cs.data() + positions[t] * R;
        for (int i = 0; i < R / 2; ++i) {
          double c = row[i], s = row[R / 2 + i];
          double lo = xr[i] * c - xr[R / 2 + i] * s;
          double hi = xr[R / 2 + i] * c + xr[i] * s;
          if (std::fabs(yr[i] - lo) > ulp_of(DType::bfloat16, lo)) ++bad;
          if (std::fabs(yr[R / 2 + i] - hi) > ulp_of(DType::bfloat16, hi)) ++bad;
        }
        for (int i = R; i < D; ++i)
          if (yr[i] != xr[i]) ++bad;
      }
    CHECK(bad == 0);
  }
}

// ---- sampling -----------------------------------------------------------------------

struct SamplingCase {
  kb::Definition def;
  Tensor probs, top_k, top_p;
  kb::AxisValues axes;
};

// The shipped definition `name` with vocab_size `vocab`; every row of probs is `row`.
SamplingCase sampling_case(const std::string& name, const std::vector<float>& row, std::int64_t batch,
                           std::vector<std::int32_t> ks, std::vector<float> ps) {
  SamplingCase c{shipped("sampling", name), {}, {}, {}, {}};
  const auto vocab = static_cast<std::int64_t>(row.size());
  set_const(c.def, "vocab_size", vocab);
  c.axes = bind(c.def, {{"batch_size", batch}});
  std::vector<float> all;
  for (std::int64_t b = 0; b < batch; ++b) all.insert(all.end(), row.begin(), row.end());
  c.probs = make(DType::float32, {batch, vocab}, all);
  auto k = Tensor::allocate(DType::int32, {batch});
  REQUIRE(k.ok());
  for (std::int64_t b = 0; b < batch; ++b) k->data<std::int32_t>()[b] = ks[static_cast<std::size_t>(b) % ks.size()];
  c.top_k = std::move(*k);
  std::vector<float> pv;
  for (std::int64_t b = 0; b < batch; ++b) pv.push_back(ps[static_cast<std::size_t>(b) % ps.size()]);
  c.top_p = make(DType::float32, {batch}, pv);
  return c;
}

std::vector<kb::Arg> sampling_args(const SamplingCase& c) {
  std::vector<kb::Arg> args;
  for (const auto& s : c.def.inputs) {
    kb::Arg a;
    a.tensor = s.name == "probs" ? &c.probs : s.name == "top_k" ? &c.top_k : &c.top_p;
    args.push_back(a);
  }
  return args;
}

std::vector<std::vector<double>> distribution(const SamplingCase& c) {
  auto args = sampling_args(c);
  std::vector<Tensor> outs;
  outs.push_back(zeros(DType::int64, {c.probs.dim(0)}));
  kb::OracleCall call{c.def, c.axes, args, outs, 0};
  auto d = kb::sampling_distribution(call);
  REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().message));
  return *d;
}

std::vector<std::int64_t> draw(const SamplingCase& c, std::uint64_t seed) {
  auto args = sampling_args(c);
  std::vector<Tensor> outs;
  outs.push_back(zeros(DType::int64, {c.probs.dim(0)}));
  auto o = kb::find_oracle(c.def);
  REQUIRE(o.ok());
  kb::OracleCall call{c.def, c.axes, args, outs, seed};
  auto st = (*o)->run(call);
  REQUIRE_MESSAGE(st.ok(), (st.ok() ? "" : st.error().message));
  return {outs[0].data<std::int64_t>(), outs[0].data<std::int64_t>() + outs[0].numel()};
}

void check_row(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
}

const std::vector<float> kRow = {0.1f, 0.4f, 0.2f, 0.3f};

TEST_CASE("top-k: the k largest, renormalised; no filtering unless 0 < k < vocab") {
  auto c = sampling_case("top_k_sampling_from_probs_v128256", kRow, 5, {2, 0, 4, -1, 1}, {1});
  auto d = distribution(c);
  check_row(d[0], {0, 0.4 / 0.7, 0, 0.3 / 0.7});
  for (int r : {1, 2, 3}) check_row(d[r], {0.1, 0.4, 0.2, 0.3});
  check_row(d[4], {0, 1, 0, 0});
}

TEST_CASE("top-p: keep tokens until the cdf before them exceeds p; p <= 0 is argmax") {
  // sorted 0.4 0.3 0.2 0.1, cdf 0.4 0.7 0.9 1.0
  auto c = sampling_case("top_p_sampling_from_probs_v128256", kRow, 6, {0}, {0.5f, 0.3f, 0.75f, 1.0f, 0.0f, -1.0f});
  auto d = distribution(c);
  check_row(d[0], {0, 0.4 / 0.7, 0, 0.3 / 0.7});          // 0.4 <= 0.5: the next one is kept
  check_row(d[1], {0, 1, 0, 0});                          // the first token always stays
  check_row(d[2], {0, 0.4 / 0.9, 0.2 / 0.9, 0.3 / 0.9});  // 0.7 <= 0.75
  check_row(d[3], {0.1, 0.4, 0.2, 0.3});
  check_row(d[4], {0, 1, 0, 0});
  check_row(d[5], {0, 1, 0, 0});
}

TEST_CASE("top-k then top-p on the renormalised row") {
  // k = 3 keeps 0.4 0.3 0.2 -> 4/9 3/9 2/9; p = 0.5: cdf 0.444 0.777 -> keep two.
  auto c = sampling_case("top_k_top_p_sampling_from_probs_v128256", kRow, 3, {3, 3, 0}, {0.5f, 0.0f, 0.5f});
  auto d = distribution(c);
  check_row(d[0], {0, 4.0 / 7, 0, 3.0 / 7});
  check_row(d[1], {0, 1, 0, 0});
  check_row(d[2], {0, 0.4 / 0.7, 0, 0.3 / 0.7});
}

TEST_CASE("sampling distributions on a large vocabulary: sums, support sizes, nucleus rule") {
  const int V = 5000;
  std::vector<float> row(V);
  auto n = noise(V, 11);
  double total = 0;
  for (int i = 0; i < V; ++i) total += row[i] = std::exp(6.0f * n[i]);
  for (auto& v : row) v = static_cast<float>(v / total);
  auto c = sampling_case("top_k_top_p_sampling_from_probs_v128256", row, 3, {50, 0, 0}, {1.0f, 0.9f, 1.0f});
  auto d = distribution(c);
  for (const auto& r : d) {
    double s = 0;
    for (double v : r) s += v;
    CHECK(s == doctest::Approx(1.0).epsilon(1e-12));
  }
  CHECK(std::count_if(d[0].begin(), d[0].end(), [](double v) { return v > 0; }) == 50);
  // Row 1: the kept set is the largest probabilities, and its mass minus the smallest kept one is <= p < its mass.
  double kept = 0, smallest = 1, largest_dropped = 0;
  for (int i = 0; i < V; ++i) {
    if (d[1][i] > 0) {
      kept += row[i];
      smallest = std::min<double>(smallest, row[i]);
    } else {
      largest_dropped = std::max<double>(largest_dropped, row[i]);
    }
  }
  CHECK(largest_dropped <= smallest);
  CHECK(kept > 0.9);
  CHECK(kept - smallest <= 0.9 + 1e-6);
  CHECK(std::count_if(d[2].begin(), d[2].end(), [](double v) { return v > 0; }) == V);
}

TEST_CASE("samples follow the distribution, reproducibly per seed") {
  const int N = 40000;
  auto c = sampling_case("top_k_top_p_sampling_from_probs_v128256", kRow, N, {3}, {1.0f});
  auto s = draw(c, 1234);
  std::vector<double> freq(4, 0);
  for (auto v : s) {
    REQUIRE((v >= 0 && v < 4));
    freq[static_cast<std::size_t>(v)] += 1.0 / N;
  }
  CHECK(freq[0] == 0);  // filtered out by top-k
  CHECK(freq[1] == doctest::Approx(4.0 / 9).epsilon(0.03));
  CHECK(freq[2] == doctest::Approx(2.0 / 9).epsilon(0.05));
  CHECK(freq[3] == doctest::Approx(3.0 / 9).epsilon(0.04));
  CHECK(draw(c, 1234) == s);
  CHECK(draw(c, 99) != s);
}

TEST_CASE("sampling refuses rows torch.multinomial would refuse") {
  for (float bad : {-0.1f, NAN, INFINITY}) {
    auto c = sampling_case("top_p_sampling_from_probs_v128256", {0.5f, bad, 0.5f, 0.1f}, 1, {0}, {1.0f});
    auto args = sampling_args(c);
    std::vector<Tensor> outs;
    outs.push_back(zeros(DType::int64, {1}));
    kb::OracleCall call{c.def, c.axes, args, outs, 0};
    auto o = kb::find_oracle(c.def);
    REQUIRE(o.ok());
    auto st = (*o)->run(call);
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().code == Code::invalid_argument);
  }
  auto c = sampling_case("top_k_sampling_from_probs_v128256", {0, 0, 0, 0}, 1, {2}, {1.0f});
  auto args = sampling_args(c);
  std::vector<Tensor> outs;
  outs.push_back(zeros(DType::int64, {1}));
  kb::OracleCall call{c.def, c.axes, args, outs, 0};
  CHECK_FALSE(kb::sampling_distribution(call).ok());
}

}  // namespace
