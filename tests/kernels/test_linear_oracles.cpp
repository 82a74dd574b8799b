// The gdn, mamba_ssu and dsa_paged CPU oracles against naive computations
// written here from the definitions' references (float32, the reference's own
// operation order), on the shipped definitions with their constants shrunk to
// several small shapes, plus the edge cases the references define (absent
// state, empty sequences, padding slots and indices) and the inputs they
// refuse.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "linear_test_util.hpp"

using kb::DType;
using kb::Tensor;
using namespace linear_test;

namespace {

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// ---- gdn ---------------------------------------------------------------------

struct GdnShape {
  std::int64_t hq, hv, d;
};

// The reference's per-token update of one head, literally: state [K][V]
// (transposed from k-last), in float32.
void naive_gdn_token(const float* q, const float* k, const float* v, float g, float beta, float scale,
                     std::vector<float>& kv_state, std::int64_t D, float* out) {
  std::vector<float> old_state(kv_state.size()), old_v(D, 0.0f), new_v(D);
  for (std::size_t i = 0; i < kv_state.size(); ++i) old_state[i] = g * kv_state[i];
  for (std::int64_t j = 0; j < D; ++j)
    for (std::int64_t i = 0; i < D; ++i) old_v[j] += k[i] * old_state[i * D + j];
  for (std::int64_t j = 0; j < D; ++j) new_v[j] = beta * v[j] + (1 - beta) * old_v[j];
  for (std::int64_t i = 0; i < D; ++i)
    for (std::int64_t j = 0; j < D; ++j)
      kv_state[i * D + j] = old_state[i * D + j] - k[i] * old_v[j] + k[i] * new_v[j];
  for (std::int64_t j = 0; j < D; ++j) {
    float acc = 0;
    for (std::int64_t i = 0; i < D; ++i) acc += q[i] * kv_state[i * D + j];
    out[j] = scale * acc;
  }
}

// Runs the naive recurrence over `len` tokens starting at token `first` of
// flat [tokens, H, D] inputs; state_vk: [HV][V][K] (k-last), updated.
void naive_gdn_sequence(const GdnShape& s, const std::vector<float>& q, const std::vector<float>& k,
                        const std::vector<float>& v, const std::vector<float>& a, const std::vector<float>& b,
                        const std::vector<float>& a_log, const std::vector<float>& dt_bias, float scale,
                        std::int64_t first, std::int64_t len, std::vector<float>& state_vk, std::vector<float>& out) {
  const std::int64_t D = s.d;
  for (std::int64_t t = first; t < first + len; ++t)
    for (std::int64_t h = 0; h < s.hv; ++h) {
      std::vector<float> kv(D * D);
      for (std::int64_t i = 0; i < D; ++i)
        for (std::int64_t j = 0; j < D; ++j) kv[i * D + j] = state_vk[(h * D + j) * D + i];
      const float g = std::exp(-std::exp(a_log[h]) * softplus(a[t * s.hv + h] + dt_bias[h]));
      const float beta = 1.0f / (1.0f + std::exp(-b[t * s.hv + h]));
      const std::int64_t qh = h / (s.hv / s.hq);
      naive_gdn_token(&q[(t * s.hq + qh) * D], &k[(t * s.hq + qh) * D], &v[(t * s.hv + h) * D], g, beta, scale, kv, D,
                      &out[(t * s.hv + h) * D]);
      for (std::int64_t i = 0; i < D; ++i)
        for (std::int64_t j = 0; j < D; ++j) state_vk[(h * D + j) * D + i] = kv[i * D + j];
    }
}

kb::Definition gdn_def(const std::string& name, const GdnShape& s) {
  auto d = shipped("gdn", name);
  set_const(d, "num_q_heads", s.hq);
  set_const(d, "num_k_heads", s.hq);
  set_const(d, "num_v_heads", s.hv);
  set_const(d, "head_size", s.d);
  return d;
}

void check_close(const Tensor& got, const std::vector<float>& want, double tol, const char* what) {
  auto g = kb::to_float(got);
  REQUIRE(g.size() == want.size());
  std::int64_t bad = 0;
  double worst = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    double e = std::fabs(static_cast<double>(g[i]) - want[i]);
    if (!(e <= tol * (1 + std::fabs(want[i])))) ++bad;
    worst = std::max(worst, e);
  }
  INFO(what << ": worst abs error " << worst);
  CHECK(bad == 0);
}

const GdnShape kGdnShapes[] = {{1, 1, 4}, {2, 4, 8}, {4, 8, 5}, {3, 3, 16}};

TEST_CASE("gdn decode matches the reference's recurrence, state given or absent") {
  std::mt19937 rng(1);
  for (const auto& s : kGdnShapes) {
    for (bool with_state : {true, false}) {
      INFO("hq " << s.hq << " hv " << s.hv << " d " << s.d << " state " << with_state);
      auto d = gdn_def("gdn_decode_qk4_v8_d128_k_last", s);
      const std::int64_t B = 3, D = s.d;
      Call c{d, bind(d, {{"batch_size", B}})};
      auto q = rounded(DType::bfloat16, uniform(rng, B * s.hq * D, -1, 1));
      auto k = rounded(DType::bfloat16, uniform(rng, B * s.hq * D, -0.5f, 0.5f));
      auto v = rounded(DType::bfloat16, uniform(rng, B * s.hv * D, -1, 1));
      auto a = rounded(DType::bfloat16, uniform(rng, B * s.hv, -2, 2));
      auto b = rounded(DType::bfloat16, uniform(rng, B * s.hv, -3, 3));
      auto a_log = uniform(rng, s.hv, -1, 1), dt_bias = uniform(rng, s.hv, -1, 1);
      auto state = uniform(rng, B * s.hv * D * D, -1, 1);
      c.tensors.emplace("q", make(DType::bfloat16, {B, 1, s.hq, D}, q));
      c.tensors.emplace("k", make(DType::bfloat16, {B, 1, s.hq, D}, k));
      c.tensors.emplace("v", make(DType::bfloat16, {B, 1, s.hv, D}, v));
      c.tensors.emplace("a", make(DType::bfloat16, {B, 1, s.hv}, a));
      c.tensors.emplace("b", make(DType::bfloat16, {B, 1, s.hv}, b));
      c.tensors.emplace("A_log", make(DType::float32, {s.hv}, a_log));
      c.tensors.emplace("dt_bias", make(DType::float32, {s.hv}, dt_bias));
      if (with_state) c.tensors.emplace("state", make(DType::float32, {B, s.hv, D, D}, state));
      c.scalars["scale"] = 0.0;  // the reference's default 1 / sqrt(K)
      REQUIRE(c.run().ok());
      std::vector<float> out(B * s.hv * D), new_state(B * s.hv * D * D);
      for (std::int64_t bi = 0; bi < B; ++bi) {
        std::vector<float> st(s.hv * D * D, 0.0f);
        if (with_state) std::copy_n(&state[bi * s.hv * D * D], st.size(), st.begin());
        naive_gdn_sequence(s, q, k, v, a, b, a_log, dt_bias, 1.0f / std::sqrt(static_cast<float>(D)), bi, 1, st, out);
        std::copy(st.begin(), st.end(), new_state.begin() + bi * s.hv * D * D);
      }
      check_close(c.out("output"), rounded(DType::bfloat16, out), 1e-2, "output");
      check_close(c.out("new_state"), new_state, 1e-5, "new_state");
    }
  }
}

TEST_CASE("gdn mtp runs T tokens from the pool rows it names and returns the pool unchanged") {
  std::mt19937 rng(2);
  for (const auto& s : kGdnShapes) {
    INFO("hq " << s.hq << " hv " << s.hv << " d " << s.d);
    auto d = gdn_def("gdn_mtp_qk4_v8_d128_k_last", s);
    const std::int64_t B = 2, T = 3, P = 3, D = s.d;
    Call c{d, bind(d, {{"batch_size", B}, {"seq_len", T}, {"pool_size", P}})};
    auto q = rounded(DType::bfloat16, uniform(rng, B * T * s.hq * D, -1, 1));
    auto k = rounded(DType::bfloat16, uniform(rng, B * T * s.hq * D, -0.5f, 0.5f));
    auto v = rounded(DType::bfloat16, uniform(rng, B * T * s.hv * D, -1, 1));
    auto a = rounded(DType::bfloat16, uniform(rng, B * T * s.hv, -2, 2));
    auto b = rounded(DType::bfloat16, uniform(rng, B * T * s.hv, -3, 3));
    auto a_log = uniform(rng, s.hv, -1, 1), dt_bias = uniform(rng, s.hv, -1, 1);
    auto pool = uniform(rng, P * s.hv * D * D, -1, 1);
    const std::vector<std::int64_t> idx{2, 0};
    c.tensors.emplace("q", make(DType::bfloat16, {B, T, s.hq, D}, q));
    c.tensors.emplace("k", make(DType::bfloat16, {B, T, s.hq, D}, k));
    c.tensors.emplace("v", make(DType::bfloat16, {B, T, s.hv, D}, v));
    c.tensors.emplace("a", make(DType::bfloat16, {B, T, s.hv}, a));
    c.tensors.emplace("b", make(DType::bfloat16, {B, T, s.hv}, b));
    c.tensors.emplace("A_log", make(DType::float32, {s.hv}, a_log));
    c.tensors.emplace("dt_bias", make(DType::float32, {s.hv}, dt_bias));
    c.tensors.emplace("initial_state", make(DType::float32, {P, s.hv, D, D}, pool));
    c.tensors.emplace("initial_state_indices", make_ints(DType::int32, {B}, idx));
    c.scalars["scale"] = 0.3;
    REQUIRE(c.run().ok());
    std::vector<float> out(B * T * s.hv * D);
    for (std::int64_t bi = 0; bi < B; ++bi) {
      std::vector<float> st(&pool[idx[bi] * s.hv * D * D], &pool[(idx[bi] + 1) * s.hv * D * D]);
      naive_gdn_sequence(s, q, k, v, a, b, a_log, dt_bias, 0.3f, bi * T, T, st, out);
    }
    check_close(c.out("output"), rounded(DType::bfloat16, out), 1e-2, "output");
    const Tensor& fs = c.out("final_state");
    CHECK(std::memcmp(fs.bytes(), c.tensors.at("initial_state").bytes(), fs.nbytes()) == 0);

    // A pool index outside the pool is refused.
    c.tensors.at("initial_state_indices").data<std::int32_t>()[1] = static_cast<std::int32_t>(P);
    CHECK(c.run().error().code == kb::Code::invalid_argument);
  }
}

TEST_CASE("gdn prefill runs each cu_seqlens sequence from its state; an empty one leaves a zero state") {
  std::mt19937 rng(3);
  for (const auto& s : kGdnShapes) {
    for (bool with_state : {true, false}) {
      INFO("hq " << s.hq << " hv " << s.hv << " d " << s.d << " state " << with_state);
      auto d = gdn_def("gdn_prefill_qk8_v16_d128_k_last", s);
      const std::vector<std::int64_t> cu{0, 4, 4, 11};
      const std::int64_t N = 3, total = 11, D = s.d;
      Call c{d, bind(d, {{"total_seq_len", total}, {"num_seqs", N}, {"len_cu_seqlens", N + 1}})};
      auto q = rounded(DType::bfloat16, uniform(rng, total * s.hq * D, -1, 1));
      auto k = rounded(DType::bfloat16, uniform(rng, total * s.hq * D, -0.5f, 0.5f));
      auto v = rounded(DType::bfloat16, uniform(rng, total * s.hv * D, -1, 1));
      auto a = rounded(DType::bfloat16, uniform(rng, total * s.hv, -2, 2));
      auto b = rounded(DType::bfloat16, uniform(rng, total * s.hv, -3, 3));
      auto a_log = uniform(rng, s.hv, -1, 1), dt_bias = uniform(rng, s.hv, -1, 1);
      auto state = uniform(rng, N * s.hv * D * D, -1, 1);
      c.tensors.emplace("q", make(DType::bfloat16, {total, s.hq, D}, q));
      c.tensors.emplace("k", make(DType::bfloat16, {total, s.hq, D}, k));
      c.tensors.emplace("v", make(DType::bfloat16, {total, s.hv, D}, v));
      c.tensors.emplace("a", make(DType::bfloat16, {total, s.hv}, a));
      c.tensors.emplace("b", make(DType::bfloat16, {total, s.hv}, b));
      c.tensors.emplace("A_log", make(DType::float32, {s.hv}, a_log));
      c.tensors.emplace("dt_bias", make(DType::float32, {s.hv}, dt_bias));
      c.tensors.emplace("cu_seqlens", make_ints(DType::int64, {N + 1}, cu));
      if (with_state) c.tensors.emplace("state", make(DType::float32, {N, s.hv, D, D}, state));
      c.scalars["scale"] = 0.25;
      REQUIRE(c.run().ok());
      std::vector<float> out(total * s.hv * D, 0.0f), new_state(N * s.hv * D * D, 0.0f);
      for (std::int64_t n = 0; n < N; ++n) {
        if (cu[n + 1] == cu[n]) continue;
        std::vector<float> st(s.hv * D * D, 0.0f);
        if (with_state) std::copy_n(&state[n * s.hv * D * D], st.size(), st.begin());
        naive_gdn_sequence(s, q, k, v, a, b, a_log, dt_bias, 0.25f, cu[n], cu[n + 1] - cu[n], st, out);
        std::copy(st.begin(), st.end(), new_state.begin() + n * s.hv * D * D);
      }
      check_close(c.out("output"), rounded(DType::bfloat16, out), 1e-2, "output");
      check_close(c.out("new_state"), new_state, 1e-4, "new_state");
      auto ns = kb::to_float(c.out("new_state"));
      CHECK(std::all_of(ns.begin() + s.hv * D * D, ns.begin() + 2 * s.hv * D * D, [](float x) { return x == 0.0f; }));
    }
  }
}

TEST_CASE("gdn oracle refuses what it does not compute") {
  auto d = gdn_def("gdn_decode_qk4_v8_d128_k_last", {2, 4, 8});
  CHECK(kb::find_oracle(d).ok());
  auto other = d;
  other.tags.clear();
  other.reference = "def run(q, k, v, state, A_log, a, dt_bias, b, scale): pass";
  CHECK(kb::find_oracle(other).error().code == kb::Code::unsupported);  // no k-last layout
  auto uneven = gdn_def("gdn_decode_qk4_v8_d128_k_last", {3, 4, 8});
  Call c{uneven, bind(uneven, {{"batch_size", 1}})};
  c.tensors.emplace("q", make(DType::bfloat16, {1, 1, 3, 8}, std::vector<float>(24, 0.1f)));
  c.tensors.emplace("k", make(DType::bfloat16, {1, 1, 3, 8}, std::vector<float>(24, 0.1f)));
  c.tensors.emplace("v", make(DType::bfloat16, {1, 1, 4, 8}, std::vector<float>(32, 0.1f)));
  c.tensors.emplace("a", make(DType::bfloat16, {1, 1, 4}, std::vector<float>(4, 0.1f)));
  c.tensors.emplace("b", make(DType::bfloat16, {1, 1, 4}, std::vector<float>(4, 0.1f)));
  c.tensors.emplace("A_log", make(DType::float32, {4}, std::vector<float>(4, 0.1f)));
  c.tensors.emplace("dt_bias", make(DType::float32, {4}, std::vector<float>(4, 0.1f)));
  c.scalars["scale"] = 0.0;
  CHECK(c.run().error().code == kb::Code::invalid_argument);  // 4 value heads over 3 query heads
}

// ---- mamba_ssu ---------------------------------------------------------------

struct MambaShape {
  std::int64_t h, p, n, g;
};

TEST_CASE("mamba_ssu updates the named slots in order, pads with -1, leaves the rest") {
  std::mt19937 rng(4);
  for (const MambaShape& s : {MambaShape{2, 3, 5, 1}, MambaShape{4, 2, 8, 2}, MambaShape{6, 4, 3, 3}, MambaShape{8, 1, 16, 8}}) {
    INFO("h " << s.h << " p " << s.p << " n " << s.n << " g " << s.g);
    auto d = shipped("mamba_ssu", "mamba_ssu_decode_h128_d64_s128_ng8");
    set_const(d, "nheads", s.h);
    set_const(d, "head_dim", s.p);
    set_const(d, "dstate", s.n);
    set_const(d, "ngroups", s.g);
    const std::vector<std::int64_t> slots{2, -1, 0, 2};  // slot 2 twice: the second sees the first's update
    const std::int64_t B = 4, C = 4, H = s.h, P = s.p, N = s.n, G = s.g;
    Call c{d, bind(d, {{"batch_size", B}, {"state_cache_size", C}})};
    auto state = rounded(DType::bfloat16, uniform(rng, C * H * P * N, -1, 1));
    auto x = rounded(DType::bfloat16, uniform(rng, B * H * P, -1, 1));
    auto dt = rounded(DType::bfloat16, uniform(rng, B * H * P, -2, 1));
    auto A = uniform(rng, H * P * N, -2, 0);
    auto Bm = rounded(DType::bfloat16, uniform(rng, B * G * N, -1, 1));
    auto Cm = rounded(DType::bfloat16, uniform(rng, B * G * N, -1, 1));
    auto D = rounded(DType::bfloat16, uniform(rng, H * P, -1, 1));
    auto bias = rounded(DType::bfloat16, uniform(rng, H * P, -1, 1));
    c.tensors.emplace("state", make(DType::bfloat16, {C, H, P, N}, state));
    c.tensors.emplace("x", make(DType::bfloat16, {B, H, P}, x));
    c.tensors.emplace("dt", make(DType::bfloat16, {B, H, P}, dt));
    c.tensors.emplace("A", make(DType::float32, {H, P, N}, A));
    c.tensors.emplace("B", make(DType::bfloat16, {B, G, N}, Bm));
    c.tensors.emplace("C", make(DType::bfloat16, {B, G, N}, Cm));
    c.tensors.emplace("D", make(DType::bfloat16, {H, P}, D));
    c.tensors.emplace("dt_bias", make(DType::bfloat16, {H, P}, bias));
    c.tensors.emplace("state_batch_indices", make_ints(DType::int32, {B}, slots));
    REQUIRE(c.run().ok());
    std::vector<float> ns = state, y(B * H * P, 0.0f);
    for (std::int64_t b = 0; b < B; ++b) {
      if (slots[b] < 0) continue;
      std::vector<float> snew(H * P * N);
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t p = 0; p < P; ++p) {
          const std::int64_t g = h / (H / G);
          const float dtf = softplus(dt[(b * H + h) * P + p] + bias[h * P + p]);
          float acc = 0;
          for (std::int64_t n = 0; n < N; ++n) {
            const std::int64_t e = (h * P + p) * N + n;
            const float sv = ns[slots[b] * H * P * N + e] * std::exp(A[e] * dtf) +
                             dtf * x[(b * H + h) * P + p] * Bm[(b * G + g) * N + n];
            snew[e] = sv;
            acc += sv * Cm[(b * G + g) * N + n];
          }
          y[(b * H + h) * P + p] = acc + x[(b * H + h) * P + p] * D[h * P + p];
        }
      auto r = rounded(DType::bfloat16, snew);
      std::copy(r.begin(), r.end(), ns.begin() + slots[b] * H * P * N);
    }
    check_close(c.out("output"), rounded(DType::bfloat16, y), 1e-2, "output");
    check_close(c.out("new_state"), ns, 1e-2, "new_state");
    // Slots 1 and 3 are bit for bit the input's; the padded element's output is 0.
    const Tensor& out_state = c.out("new_state");
    const std::size_t slot_bytes = static_cast<std::size_t>(H * P * N) * 2;
    for (std::int64_t slot : {1, 3})
      CHECK(std::memcmp(out_state.bytes() + slot * slot_bytes, c.tensors.at("state").bytes() + slot * slot_bytes,
                        slot_bytes) == 0);
    auto yo = kb::to_float(c.out("output"));
    CHECK(std::all_of(yo.begin() + H * P, yo.begin() + 2 * H * P, [](float v) { return v == 0.0f; }));

    c.tensors.at("state_batch_indices").data<std::int32_t>()[0] = static_cast<std::int32_t>(C);
    CHECK(c.run().error().code == kb::Code::invalid_argument);
  }
}

TEST_CASE("mamba_ssu's exponent A * dt_f is the reference's float32 product") {
  // Two state terms of about e^20 that cancel in y, with neighbouring float32
  // A values whose float32 products with dt_f round to the same value: the
  // reference's y is 0, an exponent kept in double gives about 900.
  auto d = shipped("mamba_ssu", "mamba_ssu_decode_h128_d64_s128_ng8");
  set_const(d, "nheads", 1);
  set_const(d, "head_dim", 1);
  set_const(d, "dstate", 2);
  set_const(d, "ngroups", 1);
  Call c{d, bind(d, {{"batch_size", 1}, {"state_cache_size", 1}})};
  const float dt = 7.75f;  // bf16-exact
  const auto dtf = static_cast<float>(std::log1p(std::exp(static_cast<double>(dt))));
  std::vector<float> A{20.0f / 7.75f, 0.0f};
  for (int i = 0; i < 64; ++i, A[0] = std::nextafter(A[0], 3.0f)) {
    A[1] = std::nextafter(A[0], 3.0f);
    if (A[0] * dtf == A[1] * dtf) break;
  }
  REQUIRE(A[0] * dtf == A[1] * dtf);
  const double by_double = std::exp(static_cast<double>(A[1]) * dtf) - std::exp(static_cast<double>(A[0]) * dtf);
  REQUIRE(by_double > 100.0);
  c.tensors.emplace("state", make(DType::bfloat16, {1, 1, 1, 2}, {1.0f, 1.0f}));
  c.tensors.emplace("x", make(DType::bfloat16, {1, 1, 1}, {0.0f}));
  c.tensors.emplace("dt", make(DType::bfloat16, {1, 1, 1}, {dt}));
  c.tensors.emplace("A", make(DType::float32, {1, 1, 2}, A));
  c.tensors.emplace("B", make(DType::bfloat16, {1, 1, 2}, {0.0f, 0.0f}));
  c.tensors.emplace("C", make(DType::bfloat16, {1, 1, 2}, {-1.0f, 1.0f}));
  c.tensors.emplace("D", make(DType::bfloat16, {1, 1}, {0.0f}));
  c.tensors.emplace("dt_bias", make(DType::bfloat16, {1, 1}, {0.0f}));
  c.tensors.emplace("state_batch_indices", make_ints(DType::int32, {1}, {0}));
  REQUIRE(c.run().ok());
  CHECK(kb::to_float(c.out("output"))[0] == 0.0f);
}

// ---- dsa_paged sparse attention ----------------------------------------------

TEST_CASE("dsa sparse attention attends over the selected rows, skips -1, empty rows give 0 and -inf") {
  std::mt19937 rng(5);
  // Named, not structured bindings: INFO captures them, which clang 14 cannot do with bindings.
  for (const auto& shape : {std::array<std::int64_t, 5>{2, 8, 4, 1, 5}, {3, 16, 8, 4, 7}, {1, 4, 2, 3, 9}}) {
    const std::int64_t heads = shape[0], ckv = shape[1], kpe = shape[2], ps = shape[3], topk = shape[4];
    INFO("heads " << heads << " ckv " << ckv << " kpe " << kpe << " page " << ps << " topk " << topk);
    auto d = shipped("dsa_paged", ps == 1 ? "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps1"
                                          : "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64");
    set_const(d, "num_qo_heads", heads);
    set_const(d, "head_dim_ckv", ckv);
    set_const(d, "head_dim_kpe", kpe);
    set_const(d, "page_size", ps);
    set_const(d, "topk", topk);
    const std::int64_t T = 3, pages = 6, rows = pages * ps;
    Call c{d, bind(d, {{"num_tokens", T}, {"num_pages", pages}})};
    auto qn = rounded(DType::bfloat16, uniform(rng, T * heads * ckv, -2, 2));
    auto qp = rounded(DType::bfloat16, uniform(rng, T * heads * kpe, -2, 2));
    auto kc = rounded(DType::bfloat16, uniform(rng, rows * ckv, -1, 1));
    auto kp = rounded(DType::bfloat16, uniform(rng, rows * kpe, -1, 1));
    std::vector<std::int64_t> idx(T * topk, -1);
    for (std::int64_t j = 0; j < topk; ++j) idx[j] = (j * 5 + 1) % rows;        // row 0: full
    for (std::int64_t j = 0; j < topk; j += 2) idx[topk + j] = (j * 3) % rows;   // row 1: -1 between
    c.tensors.emplace("q_nope", make(DType::bfloat16, {T, heads, ckv}, qn));
    c.tensors.emplace("q_pe", make(DType::bfloat16, {T, heads, kpe}, qp));
    c.tensors.emplace("ckv_cache", make(DType::bfloat16, {pages, ps, ckv}, kc));
    c.tensors.emplace("kpe_cache", make(DType::bfloat16, {pages, ps, kpe}, kp));
    c.tensors.emplace("sparse_indices", make_ints(DType::int32, {T, topk}, idx));
    c.scalars["sm_scale"] = 0.3;
    REQUIRE(c.run().ok());
    std::vector<float> out(T * heads * ckv, 0.0f), lse(T * heads, -std::numeric_limits<float>::infinity());
    for (std::int64_t t = 0; t < T; ++t) {
      std::vector<std::int64_t> sel;
      for (std::int64_t j = 0; j < topk; ++j)
        if (idx[t * topk + j] != -1) sel.push_back(idx[t * topk + j]);
      if (sel.empty()) continue;
      for (std::int64_t h = 0; h < heads; ++h) {
        std::vector<double> l;
        for (auto r : sel) {
          double s = 0;
          for (std::int64_t e = 0; e < ckv; ++e) s += qn[(t * heads + h) * ckv + e] * kc[r * ckv + e];
          for (std::int64_t e = 0; e < kpe; ++e) s += qp[(t * heads + h) * kpe + e] * kp[r * kpe + e];
          l.push_back(s * 0.3);
        }
        double mx = *std::max_element(l.begin(), l.end()), z = 0;
        for (double x : l) z += std::exp(x - mx);
        lse[t * heads + h] = static_cast<float>((mx + std::log(z)) / std::log(2.0));
        for (std::int64_t e = 0; e < ckv; ++e) {
          double acc = 0;
          for (std::size_t i = 0; i < sel.size(); ++i) acc += std::exp(l[i] - mx) / z * kc[sel[i] * ckv + e];
          out[(t * heads + h) * ckv + e] = static_cast<float>(acc);
        }
      }
    }
    check_close(c.out("output"), rounded(DType::bfloat16, out), 1e-2, "output");
    auto lo = kb::to_float(c.out("lse"));
    for (std::int64_t i = 0; i < T * heads; ++i) {
      if (std::isinf(lse[i])) CHECK(lo[i] == lse[i]);
      else CHECK(lo[i] == doctest::Approx(lse[i]).epsilon(1e-5));
    }
    c.tensors.at("sparse_indices").data<std::int32_t>()[0] = static_cast<std::int32_t>(rows);
    CHECK(c.run().error().code == kb::Code::invalid_argument);
    c.tensors.at("sparse_indices").data<std::int32_t>()[0] = -2;
    CHECK(c.run().error().code == kb::Code::invalid_argument);
  }
}

// ---- dsa_paged fp8 top-k indexer ---------------------------------------------

TEST_CASE("dsa indexer picks the top-k weighted relu scores of each sequence's tokens, then -1") {
  std::mt19937 rng(6);
  // Named, not structured bindings: INFO captures them, which clang 14 cannot do with bindings.
  for (const auto& shape : {std::array<std::int64_t, 4>{3, 8, 4, 6}, {4, 16, 2, 5}, {1, 4, 8, 20}}) {
    const std::int64_t heads = shape[0], dim = shape[1], ps = shape[2], topk = shape[3];
    INFO("heads " << heads << " dim " << dim << " page " << ps << " topk " << topk);
    auto d = shipped("dsa_paged", "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64");
    set_const(d, "num_index_heads", heads);
    set_const(d, "index_head_dim", dim);
    set_const(d, "page_size", ps);
    set_const(d, "topk", topk);
    set_const(d, "head_dim_with_scale", dim + 4);
    const std::int64_t B = 4, max_pages = 5, pages = 8;
    const std::vector<std::int64_t> lens{9, 3, 0, max_pages * ps};
    std::vector<std::int64_t> table;
    for (std::int64_t b = 0; b < B; ++b) {
      std::vector<std::int64_t> perm(pages);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      table.insert(table.end(), perm.begin(), perm.begin() + max_pages);
    }
    Call c{d, bind(d, {{"batch_size", B}, {"max_num_pages", max_pages}, {"num_pages", pages}})};
    auto q = rounded(DType::float8_e4m3fn, uniform(rng, B * heads * dim, -3, 3));
    auto w = uniform(rng, B * heads, -1, 1);
    std::vector<float> keys_deq;
    c.tensors.emplace("q_index_fp8", make(DType::float8_e4m3fn, {B, heads, dim}, q));
    c.tensors.emplace("k_index_cache_fp8", pack_keys(uniform(rng, pages * ps * dim, -2, 2), pages, ps, dim, &keys_deq));
    c.tensors.emplace("weights", make(DType::float32, {B, heads}, w));
    c.tensors.emplace("seq_lens", make_ints(DType::int32, {B}, lens));
    c.tensors.emplace("block_table", make_ints(DType::int32, {B, max_pages}, table));
    REQUIRE(c.run().ok());
    const Tensor& out = c.out("topk_indices");
    for (std::int64_t b = 0; b < B; ++b) {
      std::vector<std::pair<double, std::int64_t>> all;  // (score, global index)
      for (std::int64_t j = 0; j < lens[b]; ++j) {
        const std::int64_t page = table[b * max_pages + j / ps], global = page * ps + j % ps;
        double s = 0;
        for (std::int64_t h = 0; h < heads; ++h) {
          double dot = 0;
          for (std::int64_t e = 0; e < dim; ++e) dot += q[(b * heads + h) * dim + e] * keys_deq[global * dim + e];
          s += std::max(dot, 0.0) * w[b * heads + h];
        }
        all.emplace_back(s, global);
      }
      std::stable_sort(all.begin(), all.end(), [](auto& x, auto& y) { return x.first > y.first; });
      const std::int64_t k = std::min<std::int64_t>(topk, lens[b]);
      for (std::int64_t i = 0; i < topk; ++i) {
        const std::int64_t got = out.data<std::int32_t>()[b * topk + i];
        if (i < k) CHECK(got == all[i].second);
        else CHECK(got == -1);
      }
    }
    c.tensors.at("seq_lens").data<std::int32_t>()[0] = static_cast<std::int32_t>(max_pages * ps + 1);
    CHECK(c.run().error().code == kb::Code::invalid_argument);
    c.tensors.at("seq_lens").data<std::int32_t>()[0] = 9;
    c.tensors.at("block_table").data<std::int32_t>()[0] = static_cast<std::int32_t>(pages);
    CHECK(c.run().error().code == kb::Code::invalid_argument);
  }
}

}  // namespace

// ---- random workloads get valid inputs (lib/inputs) --------------------------

namespace {

kb::Materialized materialize_random(const kb::Definition& d, const std::map<std::string, std::int64_t>& vars,
                                    std::uint64_t seed) {
  kb::Workload w;
  w.uuid = "test";
  for (const auto& [k, v] : vars) w.axes.emplace_back(k, v);
  for (const auto& t : d.inputs) {
    kb::InputSpec s;
    if (t.is_scalar()) {
      s.kind = kb::InputKind::scalar;
      s.value = 0.125;
    }
    w.inputs.emplace_back(t.name, s);
  }
  auto m = kb::materialize(d, w, {seed, std::nullopt});
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  kb::rebind_args(*m);
  REQUIRE(kb::check_constraints_on(d, *m).ok());
  return std::move(*m);
}

const Tensor& input(const kb::Definition& d, const kb::Materialized& m, const char* name) {
  return m.tensors[*kb::input_index(d, name)];
}

std::vector<std::int64_t> ints(const Tensor& t) {
  std::vector<std::int64_t> v;
  for (std::int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<std::int64_t>(kb::element_as_double(t, i)));
  return v;
}

TEST_CASE("random workloads get valid pool rows, token rows, block tables, packed fp8 keys and unit q/k") {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    {  // gdn mtp: distinct pool rows; q and k rows of unit norm
      auto d = shipped("gdn", "gdn_mtp_qk4_v8_d128_k_last");
      auto m = materialize_random(d, {{"batch_size", 5}, {"seq_len", 2}, {"pool_size", 7}}, seed);
      auto rows = ints(input(d, m, "initial_state_indices"));
      std::sort(rows.begin(), rows.end());
      CHECK(std::adjacent_find(rows.begin(), rows.end()) == rows.end());
      CHECK(rows.front() >= 0);
      CHECK(rows.back() < 7);
      for (const char* n : {"q", "k"}) {
        auto v = kb::to_float(input(d, m, n));
        std::int64_t off = 0;
        for (std::size_t r = 0; r < v.size(); r += 128) {
          double ss = 0;
          for (std::size_t e = 0; e < 128; ++e) ss += static_cast<double>(v[r + e]) * v[r + e];
          off += std::fabs(std::sqrt(ss) - 1.0) > 0.02;  // bf16 rounding
        }
        CHECK(off == 0);
      }
      // The whole call stays finite.
      Call c{d, m.axes};
      for (std::size_t i = 0; i < d.inputs.size(); ++i)
        if (m.args[i].tensor) c.tensors.emplace(d.inputs[i].name, m.tensors[i].clone());
      c.scalars["scale"] = 0.0;
      REQUIRE(c.run().ok());
      for (float x : kb::to_float(c.out("output"))) REQUIRE(std::isfinite(x));
    }
    {  // mamba: distinct slots of the cache
      auto d = shipped("mamba_ssu", "mamba_ssu_decode_h128_d64_s128_ng8");
      set_const(d, "nheads", 8);
      set_const(d, "ngroups", 2);
      auto m = materialize_random(d, {{"batch_size", 6}, {"state_cache_size", 6}}, seed);
      auto slots = ints(input(d, m, "state_batch_indices"));
      std::sort(slots.begin(), slots.end());
      for (std::int64_t i = 0; i < 6; ++i) CHECK(slots[static_cast<std::size_t>(i)] == i);
    }
    {  // dsa sparse attention: distinct cache rows per token, -1 past the cache's size
      auto d = shipped("dsa_paged", "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64");
      set_const(d, "topk", 200);
      auto m = materialize_random(d, {{"num_tokens", 3}, {"num_pages", 2}}, seed);
      auto idx = ints(input(d, m, "sparse_indices"));
      for (std::int64_t t = 0; t < 3; ++t) {
        std::vector<std::int64_t> row(idx.begin() + t * 200, idx.begin() + (t + 1) * 200);
        CHECK(std::all_of(row.begin(), row.begin() + 128, [](std::int64_t x) { return x >= 0 && x < 128; }));
        CHECK(std::all_of(row.begin() + 128, row.end(), [](std::int64_t x) { return x == -1; }));
        std::sort(row.begin(), row.begin() + 128);
        CHECK(std::adjacent_find(row.begin(), row.begin() + 128) == row.begin() + 128);
      }
    }
    {  // dsa indexer: seq_lens within the table, distinct pages per row, finite packed keys
      auto d = shipped("dsa_paged", "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64");
      auto m = materialize_random(d, {{"batch_size", 3}, {"max_num_pages", 40}, {"num_pages", 50}}, seed);
      auto lens = ints(input(d, m, "seq_lens"));
      for (auto l : lens) CHECK((l >= 1 && l <= 40 * 64));
      auto table = ints(input(d, m, "block_table"));
      for (std::int64_t b = 0; b < 3; ++b) {
        std::vector<std::int64_t> row(table.begin() + b * 40, table.begin() + (b + 1) * 40);
        std::sort(row.begin(), row.end());
        CHECK(std::adjacent_find(row.begin(), row.end()) == row.end());
        CHECK((row.front() >= 0 && row.back() < 50));
      }
      const Tensor& cache = input(d, m, "k_index_cache_fp8");
      const auto* bytes = reinterpret_cast<const std::uint8_t*>(cache.bytes());
      std::int64_t bad = 0;
      for (std::int64_t p = 0; p < 50; ++p)
        for (std::int64_t s = 0; s < 64; ++s) {
          float scale;
          std::memcpy(&scale, bytes + p * 64 * 132 + 64 * 128 + s * 4, 4);
          bad += !(std::isfinite(scale) && scale > 0);
          float amax = 0;
          for (std::int64_t e = 0; e < 128; ++e) {
            float x = kb::fp8_e4m3fn_to_float(bytes[p * 64 * 132 + s * 128 + e]);
            bad += !std::isfinite(x);
            amax = std::max(amax, std::fabs(x));
          }
          // each token's largest key element maps to fp8's largest value
          bad += amax != 448.0f;
        }
      CHECK(bad == 0);
    }
  }
}

}  // namespace
