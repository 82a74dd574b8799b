// kb's seeded random inputs (lib/inputs/random.hpp) are counter-based and
// stable: element i depends only on (seed, input name, i), never on the
// tensor's size or the thread count; pinned values for a few (seed, name, i)
// fail on any change of the generator (the device generator computes the same
// functions: tests/gpu/test_device_inputs compares its bytes); the portable
// logarithm and cosine agree with libm; materialize()'s deferred inputs get
// the bytes a plain materialize() gives them.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "inputs/inputs.hpp"
#include "inputs/random.hpp"
#include "schema/io.hpp"
#include "tensor/convert.hpp"

namespace {

using kb::DType;
namespace random = kb::random;

constexpr DType kAllDtypes[] = {DType::float32, DType::float16,  DType::bfloat16, DType::float8_e4m3fn,
                                DType::float8_e5m2, DType::float4_e2m1, DType::int64, DType::int32,
                                DType::int16,   DType::int8,     DType::bool_};

std::uint32_t bits_of(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

kb::Tensor random_tensor(DType t, std::int64_t numel, std::uint64_t key) {
  auto x = kb::Tensor::allocate(t, {numel});
  REQUIRE(x.ok());
  kb::fill_random(*x, key);
  return std::move(*x);
}

// Storage unit j of a tensor of dtype t, as the generator's function gives it (bytes, little-endian).
std::vector<std::uint8_t> unit_bytes(DType t, std::uint64_t key, std::uint64_t j) {
  std::vector<std::uint8_t> out;
  auto put = [&](auto v) {
    out.resize(sizeof v);
    std::memcpy(out.data(), &v, sizeof v);
  };
  switch (t) {
    case DType::float32: put(random::unit<DType::float32>(key, j)); break;
    case DType::float16: put(random::unit<DType::float16>(key, j)); break;
    case DType::bfloat16: put(random::unit<DType::bfloat16>(key, j)); break;
    case DType::float8_e4m3fn: put(random::unit<DType::float8_e4m3fn>(key, j)); break;
    case DType::float8_e5m2: put(random::unit<DType::float8_e5m2>(key, j)); break;
    case DType::float4_e2m1: put(random::unit<DType::float4_e2m1>(key, j)); break;
    case DType::int64: put(random::unit<DType::int64>(key, j)); break;
    case DType::int32: put(random::unit<DType::int32>(key, j)); break;
    case DType::int16: put(random::unit<DType::int16>(key, j)); break;
    case DType::int8: put(random::unit<DType::int8>(key, j)); break;
    case DType::bool_: put(random::unit<DType::bool_>(key, j)); break;
  }
  return out;
}

}  // namespace

TEST_CASE("draws are splitmix64's outputs, a function of (key, k)") {
  // splitmix64 from state 0: its published first outputs.
  CHECK(random::draw(0, 1) == 0xE220A8397B1DCDAFull);
  CHECK(random::draw(0, 2) == 0x6E789E6AA1B965F4ull);
  CHECK(random::draw(0, 3) == 0x06C45D188009454Full);
  // A sequential Rng walks the same draws.
  kb::random::Rng rng(42, "k_cache");
  const std::uint64_t key = random::stream_key(42, "k_cache");
  CHECK(key == 0x13FF899F2F172209ull);
  for (std::uint64_t k = 1; k <= 5; ++k) CHECK(rng.next() == random::draw(key, k));
}

TEST_CASE("pinned values: a change of the generator changes these") {
  struct Pin {
    std::uint64_t seed;
    const char* name;
    std::uint64_t i;
    std::uint32_t f32;  // float32 bits
    std::uint16_t bf16, f16;
    std::uint8_t e4m3, e5m2, fp4;  // fp4: the byte of elements 2i and 2i+1
    std::int64_t i64;
    int i8, b;
  };
  const Pin pins[] = {
      {0, "q", 0, 0xbf5ce845, 0xbf5d, 0xbae7, 0xb6, 0xbb, 0x8a, -620, 20, 0},
      {0, "q", 1, 0xbe21b60e, 0xbe22, 0xb10e, 0xa2, 0xb1, 0x10, 899, 3, 1},
      {0, "q", 1048576, 0x40134fc3, 0x4013, 0x409a, 0x40, 0x40, 0x98, 383, -1, 1},
      {0, "q", 123456789, 0x3f359476, 0x3f36, 0x39ad, 0x33, 0x3a, 0x9a, -331, 53, 1},
      {42, "k_cache", 0, 0x3f2c8610, 0x3f2d, 0x3964, 0x33, 0x39, 0x91, 1023, 127, 1},
      {42, "k_cache", 1000, 0xbfcb2789, 0xbfcb, 0xbe59, 0xbd, 0xbe, 0x98, 923, 27, 1},
      {42, "k_cache", 123456789, 0xbec9f58f, 0xbeca, 0xb650, 0xad, 0xb6, 0xb2, -114, 14, 0},
      {7, "weight", 1, 0x3d14844e, 0x3d15, 0x28a4, 0x11, 0x29, 0x80, 354, -30, 0},
      {7, "weight", 1048576, 0xbebad20a, 0xbebb, 0xb5d7, 0xac, 0xb6, 0xc9, 468, 84, 0},
  };
  for (const Pin& p : pins) {
    const std::uint64_t key = random::stream_key(p.seed, p.name);
    INFO("seed " << p.seed << ", " << p.name << ", element " << p.i);
    CHECK(bits_of(random::unit<DType::float32>(key, p.i)) == p.f32);
    CHECK(random::unit<DType::bfloat16>(key, p.i) == p.bf16);
    CHECK(random::unit<DType::float16>(key, p.i) == p.f16);
    CHECK(random::unit<DType::float8_e4m3fn>(key, p.i) == p.e4m3);
    CHECK(random::unit<DType::float8_e5m2>(key, p.i) == p.e5m2);
    CHECK(random::unit<DType::float4_e2m1>(key, p.i) == p.fp4);
    CHECK(random::unit<DType::int64>(key, p.i) == p.i64);
    CHECK(random::unit<DType::int32>(key, p.i) == p.i64);
    CHECK(random::unit<DType::int16>(key, p.i) == p.i64);
    CHECK(random::unit<DType::int8>(key, p.i) == p.i8);
    CHECK(random::unit<DType::bool_>(key, p.i) == p.b);
  }
}

TEST_CASE("the narrow dtypes are the float32 value converted by kb's conversions") {
  const std::uint64_t key = random::stream_key(11, "x");
  for (std::uint64_t i = 0; i < 20000; ++i) {
    const float v = random::unit<DType::float32>(key, i);
    const float c = random::normal_element(key, i, true);  // clamped to [-2, 2]
    CHECK(c == std::fmin(2.0f, std::fmax(-2.0f, v)));
    CHECK(random::unit<DType::bfloat16>(key, i) == kb::float_to_bf16(v));
    CHECK(random::unit<DType::float16>(key, i) == kb::float_to_half(v));
    CHECK(random::unit<DType::float8_e4m3fn>(key, i) == kb::float_to_fp8_e4m3fn(c));
    CHECK(random::unit<DType::float8_e5m2>(key, i) == kb::float_to_fp8_e5m2(c));
    const std::uint8_t lo = kb::float_to_fp4_e2m1(random::normal_element(key, 2 * i, true));
    const std::uint8_t hi = kb::float_to_fp4_e2m1(random::normal_element(key, 2 * i + 1, true));
    CHECK(random::unit<DType::float4_e2m1>(key, i) == static_cast<std::uint8_t>(lo | (hi << 4)));
  }
}

TEST_CASE("element i does not depend on the tensor's size, the chunking or the thread count") {
  const std::uint64_t key = random::stream_key(5, "kv_cache");
  // 3 chunks of 1M storage units and a tail: filled on several threads.
  const std::int64_t sizes[] = {2, 2000, (3 << 20) + 6};
  for (DType t : kAllDtypes) {
    INFO(kb::dtype_name(t));
    std::vector<kb::Tensor> filled;
    for (auto n : sizes) filled.push_back(random_tensor(t, n, key));
    for (std::size_t a = 0; a + 1 < filled.size(); ++a)
      CHECK(std::memcmp(filled[a].bytes(), filled[a + 1].bytes(), filled[a].nbytes()) == 0);
    // Against the element function itself, at the chunk boundaries too.
    const kb::Tensor& big = filled.back();
    const std::int64_t units = random::units(t, big.numel());
    const std::size_t width = big.nbytes() / static_cast<std::size_t>(units);
    for (std::int64_t j : {std::int64_t{0}, std::int64_t{1}, std::int64_t{(1 << 20) - 1}, std::int64_t{1 << 20},
                           std::int64_t{(2 << 20) + 17}, units - 1}) {
      if (j >= units) continue;  // float4_e2m1: half as many bytes
      auto want = unit_bytes(t, key, static_cast<std::uint64_t>(j));
      REQUIRE(want.size() == width);
      CHECK(std::memcmp(reinterpret_cast<const std::uint8_t*>(big.bytes()) + static_cast<std::size_t>(j) * width,
                        want.data(), width) == 0);
    }
  }
}

TEST_CASE("the portable logarithm and cosine agree with libm; the values are N(0, 1)") {
  const std::uint64_t key = random::stream_key(3, "x");
  double worst_log = 0, worst_cos = 0, sum = 0, sum2 = 0;
  int float_differs = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t a = random::draw(key, 2 * static_cast<std::uint64_t>(i) + 1);
    const std::uint64_t b = random::draw(key, 2 * static_cast<std::uint64_t>(i) + 2);
    const double u1 = std::fmax(random::uniform(a), 1e-300), u2 = random::uniform(b);
    const double lg = std::log(u1), cs = std::cos(6.283185307179586 * u2);
    worst_log = std::fmax(worst_log, std::fabs(random::log_positive(u1) - lg) / std::fmax(std::fabs(lg), 1e-300));
    worst_cos = std::fmax(worst_cos, std::fabs(random::cos_turns(u2) - cs));
    const double x = random::normal(a, b);
    float_differs += static_cast<float>(x) != static_cast<float>(std::sqrt(-2.0 * lg) * cs);
    sum += x;
    sum2 += x * x;
  }
  CHECK(worst_log < 4e-15);
  CHECK(worst_cos < 4e-15);
  // As float32, the values libm's Box-Muller gives (glibc: all 200000; another libm, a
  // last-place difference of its own can round a rare value the other way).
  CHECK(float_differs <= 2);
  CHECK(std::fabs(sum / n) < 0.01);
  CHECK(sum2 / n == doctest::Approx(1.0).epsilon(0.01));
  // The extremes of the inputs: the smallest u1 kb uses, and the quadrant edges.
  CHECK(random::log_positive(1e-300) == doctest::Approx(std::log(1e-300)).epsilon(1e-15));
  CHECK(random::log_positive(0x1p-53) == doctest::Approx(std::log(0x1p-53)).epsilon(1e-15));
  CHECK(random::log_positive(1.0) == 0.0);
  for (double u : {0.0, 0.125, 0.25, 0.5, 0.75, 1.0 - 0x1p-53})
    CHECK(std::fabs(random::cos_turns(u) - std::cos(6.283185307179586 * u)) < 1e-15);
}

TEST_CASE("materialize: deferred inputs get the bytes of a plain materialize, at any batch size") {
  const char* def = R"J({"name": "mix", "op_type": "mix",
    "axes": {"rows": {"type": "var"}, "dim": {"type": "const", "value": 96}},
    "inputs": {"a": {"shape": ["rows", "dim"], "dtype": "bfloat16"},
               "w": {"shape": ["dim", "dim"], "dtype": "float8_e4m3fn"},
               "s": {"shape": ["rows", "dim"], "dtype": "float4_e2m1"},
               "ids": {"shape": ["rows"], "dtype": "int32"},
               "mask": {"shape": ["rows"], "dtype": "bool"},
               "eps": {"shape": null, "dtype": "float32"}},
    "outputs": {"o": {"shape": ["rows", "dim"], "dtype": "float32"}}, "reference": "def run(a, w, s, ids, mask, eps):\n  pass"})J";
  auto d = kb::read_definition(def, "d");
  REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().message));
  auto workload = [](std::int64_t rows) {
    kb::Workload w;
    w.uuid = "u" + std::to_string(rows);
    w.axes = {{"rows", rows}};
    kb::InputSpec eps;
    eps.kind = kb::InputKind::scalar;
    eps.value = 1e-6;
    w.inputs = {{"a", kb::InputSpec{}}, {"w", kb::InputSpec{}}, {"s", kb::InputSpec{}},
                {"ids", kb::InputSpec{}}, {"mask", kb::InputSpec{}}, {"eps", eps}};
    return w;
  };
  kb::MaterializeOptions plain{9, std::nullopt};
  kb::MaterializeOptions deferring = plain;
  deferring.defer_random_floats = true;
  auto small = kb::materialize(*d, workload(3), plain);
  auto big = kb::materialize(*d, workload(50), plain);
  auto lazy = kb::materialize(*d, workload(50), deferring);
  REQUIRE((small.ok() && big.ok() && lazy.ok()));
  // Rows 0..2 of the larger batch are the smaller batch's rows.
  for (std::size_t i = 0; i < 5; ++i) {
    INFO(d->inputs[i].name);
    const kb::Tensor& s = small->tensors[i];
    const kb::Tensor& b = big->tensors[i];
    CHECK(std::memcmp(s.bytes(), b.bytes(), s.nbytes()) == 0);  // w whole, the rest a prefix (rows first)
  }
  // Floating inputs deferred: shape and size, no storage, a recipe; the rest made as always.
  for (std::size_t i = 0; i < 3; ++i) {
    INFO(d->inputs[i].name);
    REQUIRE(lazy->deferred[i].has_value());
    CHECK(lazy->tensors[i].empty_storage());
    CHECK(lazy->tensors[i].shape() == big->tensors[i].shape());
    CHECK(lazy->tensors[i].nbytes() == big->tensors[i].nbytes());
    CHECK(lazy->deferred[i]->key == random::stream_key(9, d->inputs[i].name));
    CHECK(lazy->deferred[i]->numel == big->tensors[i].numel());
  }
  for (std::size_t i = 3; i < 6; ++i) CHECK_FALSE(lazy->deferred[i].has_value());
  CHECK(std::memcmp(lazy->tensors[3].bytes(), big->tensors[3].bytes(), big->tensors[3].nbytes()) == 0);
  CHECK(lazy->args[5].scalar.has_value());
  kb::rebind_args(*lazy);
  // Constraints and sizes need no values of the deferred inputs.
  auto unchecked = kb::check_constraints_on(*d, *lazy);
  CHECK(unchecked.ok());
  REQUIRE(kb::fill_deferred(*lazy).ok());
  for (std::size_t i = 0; i < 5; ++i) {
    INFO(d->inputs[i].name);
    CHECK_FALSE(lazy->deferred[i].has_value());
    REQUIRE_FALSE(lazy->tensors[i].empty_storage());
    CHECK(lazy->args[i].tensor == &lazy->tensors[i]);
    CHECK(std::memcmp(lazy->tensors[i].bytes(), big->tensors[i].bytes(), big->tensors[i].nbytes()) == 0);
  }
}
