// Tests of lib/tensor: the dtype conversions, bit for bit, against reference
// tables made independently of kb (tests/tensor/tables/make_tables.py: ml_dtypes
// and numpy with PyTorch's rules; README.md there gives the file formats), and
// the Tensor container (limits, guards, clone, fill, float4 packing).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/limits.hpp"
#include "tensor/convert.hpp"
#include "tensor/tensor.hpp"

namespace {

using kb::DType;
using kb::Tensor;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// ---------------------------------------------------------------------------
// The formats, as the tables describe them (independent of convert.cpp)
// ---------------------------------------------------------------------------

enum class Special { ieee, fn, none };  // exponent all ones = inf/NaN; only S.1111.111 = NaN; no NaN

struct Format {
  const char* name;
  int bits;
  int exp_bits;
  int man_bits;
  Special special;
  std::uint32_t (*encode)(float);
  float (*decode)(std::uint32_t);

  std::uint32_t sign_bit() const { return 1u << (exp_bits + man_bits); }
  std::uint32_t mag_mask() const { return sign_bit() - 1; }
  std::uint32_t max_pattern() const {  // largest positive finite pattern
    switch (special) {
      case Special::ieee: return (((1u << exp_bits) - 1) << man_bits) - 1;
      case Special::fn: return mag_mask() - 1;
      case Special::none: return mag_mask();
    }
    return 0;
  }
  bool is_nan(std::uint32_t p) const {
    std::uint32_t mag = p & mag_mask();
    switch (special) {
      case Special::ieee:
        return (mag >> man_bits) == (1u << exp_bits) - 1 && (mag & ((1u << man_bits) - 1)) != 0;
      case Special::fn: return mag == mag_mask();
      case Special::none: return false;
    }
    return false;
  }
};

const Format kFormats[] = {
    {"float16", 16, 5, 10, Special::ieee, [](float v) -> std::uint32_t { return kb::float_to_half(v); },
     [](std::uint32_t b) { return kb::half_to_float(static_cast<std::uint16_t>(b)); }},
    {"bfloat16", 16, 8, 7, Special::ieee, [](float v) -> std::uint32_t { return kb::float_to_bf16(v); },
     [](std::uint32_t b) { return kb::bf16_to_float(static_cast<std::uint16_t>(b)); }},
    {"float8_e4m3fn", 8, 4, 3, Special::fn, [](float v) -> std::uint32_t { return kb::float_to_fp8_e4m3fn(v); },
     [](std::uint32_t b) { return kb::fp8_e4m3fn_to_float(static_cast<std::uint8_t>(b)); }},
    {"float8_e5m2", 8, 5, 2, Special::ieee, [](float v) -> std::uint32_t { return kb::float_to_fp8_e5m2(v); },
     [](std::uint32_t b) { return kb::fp8_e5m2_to_float(static_cast<std::uint8_t>(b)); }},
    {"float4_e2m1", 4, 2, 1, Special::none, [](float v) -> std::uint32_t { return kb::float_to_fp4_e2m1(v); },
     [](std::uint32_t b) { return kb::fp4_e2m1_to_float(static_cast<std::uint8_t>(b)); }},
};

const Format& find_format(const char* name) {
  for (const auto& f : kFormats)
    if (std::strcmp(f.name, name) == 0) return f;
  FAIL("no format " << name);
  return kFormats[0];
}

std::uint32_t bits_of(float f) { return std::bit_cast<std::uint32_t>(f); }
float float_of(std::uint32_t b) { return std::bit_cast<float>(b); }

// ---------------------------------------------------------------------------
// Table files
// ---------------------------------------------------------------------------

std::vector<unsigned char> read_table(const std::string& file) {
  const char* dir = std::getenv("KB_TABLES_DIR");
  REQUIRE_MESSAGE(dir != nullptr, "set KB_TABLES_DIR to tests/tensor/tables");
  std::string path = std::string(dir) + "/" + file;
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class Reader {
 public:
  explicit Reader(std::vector<unsigned char> data) : d_(std::move(data)) {}
  void expect_magic(const char (&magic)[9]) {
    REQUIRE(d_.size() >= 8);
    REQUIRE(std::memcmp(d_.data(), magic, 8) == 0);
    pos_ = 8;
  }
  std::uint64_t uint(int bytes) {  // little-endian
    if (pos_ + static_cast<std::size_t>(bytes) > d_.size()) FAIL("table file too short");
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < static_cast<std::size_t>(bytes); ++i) v |= static_cast<std::uint64_t>(d_[pos_ + i]) << (8 * i);
    pos_ += static_cast<std::size_t>(bytes);
    return v;
  }
  std::uint32_t u32() { return static_cast<std::uint32_t>(uint(4)); }
  bool at_end() const { return pos_ == d_.size(); }

 private:
  std::vector<unsigned char> d_;
  std::size_t pos_ = 0;
};

constexpr std::uint32_t kCanonicalNaN = 0x7FC00000;

// Every pattern's float32 bits; NaN stored as kCanonicalNaN.
std::vector<std::uint32_t> load_decode(const Format& f) {
  Reader r(read_table(std::string(f.name) + ".decode.bin"));
  r.expect_magic("KBDEC01\0");
  std::uint32_t bits = r.u32(), shift = r.u32(), nbytes = r.u32(), count = r.u32();
  REQUIRE(bits == static_cast<std::uint32_t>(f.bits));
  REQUIRE(count == (1u << f.bits));
  std::vector<std::uint32_t> out(count);
  for (auto& v : out) v = static_cast<std::uint32_t>(r.uint(static_cast<int>(nbytes))) << shift;
  REQUIRE(r.at_end());
  return out;
}

struct EncodeTable {
  std::vector<std::uint32_t> special_in, special_out, grid_out, random_out;
  std::uint32_t n_grid = 0, exp_lo = 0, exp_hi = 0;
  std::uint64_t seed = 0, checksum = 0;
};

EncodeTable load_encode(const Format& f) {
  Reader r(read_table(std::string(f.name) + ".encode.bin"));
  r.expect_magic("KBENC01\0");
  EncodeTable t;
  int out_bytes = static_cast<int>(r.u32());
  std::uint32_t n_special = r.u32();
  t.n_grid = r.u32();
  std::uint32_t n_random = r.u32();
  t.exp_lo = r.u32();
  t.exp_hi = r.u32();
  t.seed = r.uint(8);
  t.checksum = r.uint(8);
  REQUIRE(out_bytes == (f.bits == 16 ? 2 : 1));
  REQUIRE(t.n_grid == f.max_pattern() + 1);
  for (std::uint32_t i = 0; i < n_special; ++i) t.special_in.push_back(r.u32());
  for (std::uint32_t i = 0; i < n_special; ++i) t.special_out.push_back(static_cast<std::uint32_t>(r.uint(out_bytes)));
  for (std::uint32_t i = 0; i < 4 * t.n_grid; ++i) t.grid_out.push_back(static_cast<std::uint32_t>(r.uint(out_bytes)));
  for (std::uint32_t i = 0; i < n_random; ++i) t.random_out.push_back(static_cast<std::uint32_t>(r.uint(out_bytes)));
  REQUIRE(r.at_end());
  return t;
}

// The generator's input derivations, restated (make_tables.py: grid_inputs,
// SplitMix64, random_inputs, fnv1a_words); the table's checksum proves both
// produce the same inputs.
std::vector<std::uint32_t> grid_inputs(const Format& f, const std::vector<std::uint32_t>& dec) {
  std::uint32_t maxp = f.max_pattern();
  std::vector<std::uint32_t> g;
  for (std::uint32_t p = 0; p <= maxp; ++p) {
    double v = float_of(dec[p]);
    double next = p < maxp ? double{float_of(dec[p + 1])} : 2 * v - double{float_of(dec[p - 1])};
    auto mid = static_cast<float>((v + next) / 2);  // exact (the generator checks)
    std::uint32_t m = bits_of(mid);
    g.insert(g.end(), {dec[p], m - 1, m, m + 1});
  }
  return g;
}

struct SplitMix64 {
  std::uint64_t s;
  std::uint64_t next() {
    s += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

std::vector<std::uint32_t> random_inputs(const EncodeTable& t) {
  SplitMix64 rng{t.seed};
  std::vector<std::uint32_t> out;
  for (std::size_t k = 0; k < t.random_out.size(); ++k) {
    std::uint64_t r = rng.next();
    auto low = static_cast<std::uint32_t>(r);
    if (((r >> 32) & 3) == 0) {
      out.push_back(low);
    } else {
      auto e = static_cast<std::uint32_t>(t.exp_lo + (r >> 34) % (t.exp_hi - t.exp_lo + 1));
      out.push_back((low & 0x807FFFFFu) | (e << 23));
    }
  }
  return out;
}

std::uint64_t fnv1a_words(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (auto w : a) h = (h ^ w) * 0x100000001B3ull;
  for (auto w : b) h = (h ^ w) * 0x100000001B3ull;
  return h;
}

// Collects mismatches; reports the count and the first few.
struct Mismatches {
  std::size_t checked = 0, count = 0;
  std::string first;
  void add(const std::string& what) {
    if (++count <= 12) first += what + "\n";
  }
};

void check_encode(const Format& f, std::uint32_t in, std::uint32_t expected, Mismatches& m) {
  ++m.checked;
  std::uint32_t got = f.encode(float_of(in));
  // NaN: any NaN pattern (torch's own NaN sign/payload differ by code path).
  bool ok = f.is_nan(expected) ? f.is_nan(got) : got == expected;
  if (!ok)
    m.add(fmt::format("  {} <- {:#010x} ({}): got {:#x}, expected {:#x}", f.name, in, float_of(in), got, expected));
}

void check_encode_table(const char* name) {
  const Format& f = find_format(name);
  auto dec = load_decode(f);
  auto t = load_encode(f);
  auto grid = grid_inputs(f, dec);
  auto rand = random_inputs(t);
  REQUIRE_MESSAGE(fnv1a_words(grid, rand) == t.checksum, "grid/random inputs differ from the generator's");

  Mismatches special, grid_pos, grid_neg, random;
  for (std::size_t i = 0; i < t.special_in.size(); ++i) check_encode(f, t.special_in[i], t.special_out[i], special);
  for (std::size_t i = 0; i < grid.size(); ++i) {
    check_encode(f, grid[i], t.grid_out[i], grid_pos);
    // Sign symmetry (confirmed on the reference by the generator).
    check_encode(f, grid[i] | 0x80000000u, t.grid_out[i] | f.sign_bit(), grid_neg);
  }
  for (std::size_t i = 0; i < rand.size(); ++i) check_encode(f, rand[i], t.random_out[i], random);

  CHECK(special.checked > 40);
  CHECK(grid_pos.checked == 4 * static_cast<std::size_t>(f.max_pattern() + 1));
  CHECK(random.checked == 50000);
  CHECK_MESSAGE(special.count == 0, special.count << " special mismatches:\n" << special.first);
  CHECK_MESSAGE(grid_pos.count == 0, grid_pos.count << " grid mismatches:\n" << grid_pos.first);
  CHECK_MESSAGE(grid_neg.count == 0, grid_neg.count << " negated-grid mismatches:\n" << grid_neg.first);
  CHECK_MESSAGE(random.count == 0, random.count << " random mismatches:\n" << random.first);
}

void check_decode_table(const char* name) {
  const Format& f = find_format(name);
  auto dec = load_decode(f);
  Mismatches m;
  for (std::uint32_t p = 0; p < dec.size(); ++p) {
    ++m.checked;
    float got = f.decode(p);
    bool ok = dec[p] == kCanonicalNaN ? std::isnan(got) : bits_of(got) == dec[p];
    if (!ok) m.add(fmt::format("  {} {:#x}: got {:#010x} ({}), expected {:#010x}", f.name, p, bits_of(got), got, dec[p]));
    // NaN-ness of the pattern agrees with the format's definition.
    if (f.is_nan(p) != (dec[p] == kCanonicalNaN)) m.add(fmt::format("  {} {:#x}: table NaN-ness", f.name, p));
  }
  CHECK(m.checked == (1u << f.bits));
  CHECK_MESSAGE(m.count == 0, m.count << " decode mismatches:\n" << m.first);
}

// ---------------------------------------------------------------------------
// Tensor helpers
// ---------------------------------------------------------------------------

Tensor make(DType dt, std::vector<std::int64_t> shape) {
  auto r = Tensor::allocate(dt, std::move(shape));
  REQUIRE(r.ok());
  return std::move(r).value();
}

Tensor stored(DType dt, const std::vector<float>& values) {
  Tensor t = make(dt, {static_cast<std::int64_t>(values.size())});
  REQUIRE(kb::store_float(values, t).ok());
  CHECK(t.guards_intact());
  return t;
}

std::vector<std::uint8_t> raw_bytes(const Tensor& t) {
  auto s = t.span();
  std::vector<std::uint8_t> out;
  for (auto b : s) out.push_back(static_cast<std::uint8_t>(b));
  return out;
}

// Same value, NaN equal to NaN, signed zeros told apart.
bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

// to_float, element_as_double and the expected values all agree.
void check_reads(const Tensor& t, const std::vector<double>& expected) {
  REQUIRE(t.numel() == static_cast<std::int64_t>(expected.size()));
  auto f = kb::to_float(t);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO(kb::dtype_name(t.dtype()) << " element " << i);
    CHECK(same(kb::element_as_double(t, static_cast<std::int64_t>(i)), expected[i]));
    CHECK(same(f[i], static_cast<float>(expected[i])));
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Reference tables
// ---------------------------------------------------------------------------

TEST_CASE("decode: every float16 pattern") { check_decode_table("float16"); }
TEST_CASE("decode: every bfloat16 pattern") { check_decode_table("bfloat16"); }
TEST_CASE("decode: every float8_e4m3fn pattern") { check_decode_table("float8_e4m3fn"); }
TEST_CASE("decode: every float8_e5m2 pattern") { check_decode_table("float8_e5m2"); }
TEST_CASE("decode: every float4_e2m1 pattern") { check_decode_table("float4_e2m1"); }

TEST_CASE("encode: float16 (values, midpoints +-1 ulp, boundaries, random)") { check_encode_table("float16"); }
TEST_CASE("encode: bfloat16 (values, midpoints +-1 ulp, boundaries, random)") { check_encode_table("bfloat16"); }
TEST_CASE("encode: float8_e4m3fn (values, midpoints +-1 ulp, boundaries, random)") {
  check_encode_table("float8_e4m3fn");
}
TEST_CASE("encode: float8_e5m2 (values, midpoints +-1 ulp, boundaries, random)") { check_encode_table("float8_e5m2"); }
TEST_CASE("encode: float4_e2m1 (values, midpoints +-1 ulp, boundaries, random)") { check_encode_table("float4_e2m1"); }

TEST_CASE("encode: the NaN patterns kb writes (torch's scalar c10 conversions)") {
  // Pinned so a change is deliberate; the tables only demand NaN-ness.
  CHECK(kb::float_to_half(kNaN) == 0x7E00);
  CHECK(kb::float_to_half(-kNaN) == 0xFE00);
  CHECK(kb::float_to_bf16(kNaN) == 0x7FC0);
  CHECK(kb::float_to_bf16(-kNaN) == 0x7FC0);  // c10::detail::round_to_nearest_even drops the sign
  CHECK(kb::float_to_fp8_e4m3fn(kNaN) == 0x7F);
  CHECK(kb::float_to_fp8_e4m3fn(-kNaN) == 0xFF);
  CHECK(kb::float_to_fp8_e5m2(kNaN) == 0x7F);
  CHECK(kb::float_to_fp8_e5m2(-kNaN) == 0xFF);
  // float4 has no NaN: kb saturates it like inf (see make_tables.py).
  CHECK(kb::float_to_fp4_e2m1(kNaN) == 0x7);
  CHECK(kb::float_to_fp4_e2m1(-kNaN) == 0xF);
}

TEST_CASE("encode: float8_e4m3fn overflow follows torch, not saturation") {
  CHECK(kb::float_to_fp8_e4m3fn(448.0f) == 0x7E);
  CHECK(kb::float_to_fp8_e4m3fn(464.0f) == 0x7E);  // tie: 448 has the even mantissa
  CHECK(kb::float_to_fp8_e4m3fn(std::nextafter(464.0f, kInf)) == 0x7F);
  CHECK(kb::float_to_fp8_e4m3fn(-480.0f) == 0xFF);
  CHECK(kb::float_to_fp8_e4m3fn(kInf) == 0x7F);
  CHECK(kb::float_to_fp8_e4m3fn(-kInf) == 0xFF);
}

// ---------------------------------------------------------------------------
// Tensors
// ---------------------------------------------------------------------------

TEST_CASE("store_float / to_float / element_as_double: float dtypes") {
  SUBCASE("float32") {
    std::vector<float> v = {1.5f, -0.0f, kInf, kNaN, 1e-45f, -3.4028235e38f};
    Tensor t = stored(DType::float32, v);
    check_reads(t, {1.5, -0.0, kInf, kNaN, 1e-45f, -3.4028235e38f});
  }
  SUBCASE("float16") {
    Tensor t = stored(DType::float16, {1.0f, -2.0f, 65504.0f, 65520.0f, -1e-8f, 0x1p-24f, 0.1f, kNaN});
    CHECK(t.data<std::uint16_t>()[3] == 0x7C00);
    check_reads(t, {1.0, -2.0, 65504.0, kInf, -0.0, 0x1p-24, 0.0999755859375, kNaN});
  }
  SUBCASE("bfloat16") {
    Tensor t = stored(DType::bfloat16, {1.0f, -2.0f, 1.00390625f, 1.01171875f, 3.39e38f, -kInf, 0x1p-133f, kNaN});
    check_reads(t, {1.0, -2.0, 1.0, 1.015625, 3.3895313892515355e38, -kInf, 0x1p-133, kNaN});
  }
  SUBCASE("float8_e4m3fn") {
    Tensor t = stored(DType::float8_e4m3fn, {1.0f, -2.0f, 448.0f, 464.0f, 465.0f, -kInf, 0x1p-9f, 0x1p-10f});
    check_reads(t, {1.0, -2.0, 448.0, 448.0, kNaN, kNaN, 0x1p-9, 0.0});
  }
  SUBCASE("float8_e5m2") {
    Tensor t = stored(DType::float8_e5m2, {1.0f, -2.0f, 57344.0f, 61440.0f, -61439.0f, 0x1p-16f, 0x1p-17f, kNaN});
    check_reads(t, {1.0, -2.0, 57344.0, kInf, -57344.0, 0x1p-16, 0.0, kNaN});
  }
  SUBCASE("float4_e2m1") {
    Tensor t = stored(DType::float4_e2m1, {0.25f, 0.75f, 2.5f, 5.0f, 7.0f, -100.0f, kNaN, -kNaN, -0.1f, kInf});
    CHECK(t.nbytes() == 5);
    check_reads(t, {0.0, 1.0, 2.0, 4.0, 6.0, -6.0, 6.0, -6.0, -0.0, 6.0});
  }
}

TEST_CASE("float4_e2m1 packing: element 2k in the low nibble of byte k") {
  // torch's float4_e2m1fn_x2 has no conversion of its own; its tests pack with
  // `uint8_data[1::2] << 4 | uint8_data[::2]` (test/test_matmul_cuda.py,
  // pack_uint4): element 2k low, 2k+1 high. ml_dtypes' float4_e2m1fn keeps
  // one value a byte (no packing).
  Tensor t = stored(DType::float4_e2m1, {1.0f, -6.0f, 0.5f, 3.0f});
  CHECK(raw_bytes(t) == std::vector<std::uint8_t>{0xF2, 0x51});
  Tensor u = make(DType::float4_e2m1, {2, 2});
  u.data<std::uint8_t>()[0] = 0x21;  // low nibble 0x1 = 0.5, high 0x2 = 1.0
  u.data<std::uint8_t>()[1] = 0x9E;  // low 0xE = -4, high 0x9 = -0.5
  check_reads(u, {0.5, 1.0, -4.0, -0.5});
  // Storing rewrites both nibbles of every byte.
  REQUIRE(kb::store_float(std::vector<float>{0, 0, 0, 6}, u).ok());
  CHECK(raw_bytes(u) == std::vector<std::uint8_t>{0x00, 0x70});
}

TEST_CASE("store_float: integers clamp, truncate toward zero, NaN -> 0") {
  // C++ leaves out-of-range float->int casts undefined and torch inherits that
  // (x86 CPUs give INT_MIN for int32/int64 and wrap through it for int8/int16);
  // CUDA's cvt.rzi saturates and maps NaN to 0. kb saturates everywhere and
  // maps NaN to 0, so results never depend on the machine.
  const std::vector<float> v = {1.9f, -1.9f, -0.5f, kNaN, 1e10f, -1e10f, kInf, -kInf, 127.99f, -128.5f};
  SUBCASE("int8") {
    Tensor t = stored(DType::int8, v);
    check_reads(t, {1, -1, 0, 0, 127, -128, 127, -128, 127, -128});
  }
  SUBCASE("int16") {
    Tensor t = stored(DType::int16, v);
    check_reads(t, {1, -1, 0, 0, 32767, -32768, 32767, -32768, 127, -128});
  }
  SUBCASE("int32") {
    Tensor t = stored(DType::int32, v);
    check_reads(t, {1, -1, 0, 0, 2147483647, -2147483648.0, 2147483647, -2147483648.0, 127, -128});
    Tensor u = stored(DType::int32, {2147483520.0f, -2147483648.0f, 2147483648.0f});
    CHECK(u.data<std::int32_t>()[0] == 2147483520);
    CHECK(u.data<std::int32_t>()[1] == std::numeric_limits<std::int32_t>::min());
    CHECK(u.data<std::int32_t>()[2] == std::numeric_limits<std::int32_t>::max());
  }
  SUBCASE("int64") {
    Tensor t = stored(DType::int64, {0x1p62f, -0x1p63f, 0x1p63f, kNaN, -kInf, -7.99f});
    const std::int64_t* d = t.data<std::int64_t>();
    CHECK(d[0] == (std::int64_t{1} << 62));
    CHECK(d[1] == std::numeric_limits<std::int64_t>::min());
    CHECK(d[2] == std::numeric_limits<std::int64_t>::max());
    CHECK(d[3] == 0);
    CHECK(d[4] == std::numeric_limits<std::int64_t>::min());
    CHECK(d[5] == -7);
  }
  SUBCASE("bool") {
    Tensor t = stored(DType::bool_, {0.0f, -0.0f, kNaN, 0.1f, -3.0f, kInf});
    CHECK(raw_bytes(t) == std::vector<std::uint8_t>{0, 0, 1, 1, 1, 1});  // bool(NaN) is True in torch
    check_reads(t, {0, 0, 1, 1, 1, 1});
  }
}

TEST_CASE("to_float: integers round once, to nearest even (as torch's .float())") {
  // 2^62 + 2^38 + 1 lies just above the midpoint of two floats: one rounding
  // goes up; rounding through double first lands on the midpoint and then
  // ties down to 2^62.
  Tensor t = make(DType::int64, {3});
  t.data<std::int64_t>()[0] = (std::int64_t{1} << 62) + (std::int64_t{1} << 38) + 1;
  t.data<std::int64_t>()[1] = -((std::int64_t{1} << 62) + (std::int64_t{1} << 38) + 1);
  t.data<std::int64_t>()[2] = std::numeric_limits<std::int64_t>::min();
  auto f = kb::to_float(t);
  CHECK(f[0] == 0x1p62f + 0x1p39f);
  CHECK(f[1] == -(0x1p62f + 0x1p39f));
  CHECK(f[2] == -0x1p63f);
  Tensor u = make(DType::int32, {2});
  u.data<std::int32_t>()[0] = 16777217;  // 2^24 + 1: tie, to even
  u.data<std::int32_t>()[1] = 16777219;  // 2^24 + 3: tie, to even (up)
  auto g = kb::to_float(u);
  CHECK(g[0] == 16777216.0f);
  CHECK(g[1] == 16777220.0f);
  Tensor w = make(DType::int8, {2});
  w.data<std::int8_t>()[0] = -128;
  w.data<std::int8_t>()[1] = 127;
  check_reads(w, {-128, 127});
  Tensor s = make(DType::int16, {1});
  s.data<std::int16_t>()[0] = -32768;
  check_reads(s, {-32768});
}

TEST_CASE("store_float: the value count must match") {
  Tensor t = make(DType::float16, {2, 3});
  auto st = kb::store_float(std::vector<float>(5, 1.0f), t);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == kb::Code::invalid_argument);
  CHECK(t.guards_intact());
  Tensor e = make(DType::float32, {0});
  CHECK(kb::store_float(std::vector<float>{}, e).ok());
  CHECK(kb::to_float(e).empty());
}

TEST_CASE("to_float: large float16 / bfloat16 tensors match the element functions") {
  Tensor h = make(DType::float16, {256, 256});
  Tensor b = make(DType::bfloat16, {256, 256});
  for (std::uint32_t p = 0; p < 65536; ++p) {
    h.data<std::uint16_t>()[p] = static_cast<std::uint16_t>(p);
    b.data<std::uint16_t>()[p] = static_cast<std::uint16_t>(p);
  }
  auto fh = kb::to_float(h);
  auto fb = kb::to_float(b);
  std::size_t bad = 0;
  for (std::uint32_t p = 0; p < 65536; ++p) {
    auto x = static_cast<std::uint16_t>(p);
    if (!same(fh[p], kb::half_to_float(x)) || !same(fb[p], kb::bf16_to_float(x))) ++bad;
  }
  CHECK(bad == 0);
  // And back: every non-NaN value re-encodes to its own pattern.
  Tensor h2 = make(DType::float16, {256, 256});
  Tensor b2 = make(DType::bfloat16, {256, 256});
  REQUIRE(kb::store_float(fh, h2).ok());
  REQUIRE(kb::store_float(fb, b2).ok());
  bad = 0;
  for (std::uint32_t p = 0; p < 65536; ++p) {
    if (!std::isnan(fh[p]) && h2.data<std::uint16_t>()[p] != p) ++bad;
    if (!std::isnan(fb[p]) && b2.data<std::uint16_t>()[p] != p) ++bad;
  }
  CHECK(bad == 0);
}

TEST_CASE("Tensor::allocate: shapes, limits, zero fill") {
  Tensor t = make(DType::float32, {2, 3, 4});
  CHECK(t.numel() == 24);
  CHECK(t.nbytes() == 96);
  CHECK(t.rank() == 3);
  CHECK(t.dim(1) == 3);
  for (auto b : raw_bytes(t)) CHECK(b == 0);
  Tensor s = make(DType::int64, {});  // a scalar
  CHECK(s.numel() == 1);
  CHECK(s.nbytes() == 8);
  Tensor z = make(DType::bfloat16, {4, 0, 3});
  CHECK(z.numel() == 0);
  CHECK(z.nbytes() == 0);
  CHECK(z.guards_intact());
  Tensor f4 = make(DType::float4_e2m1, {3, 2});
  CHECK(f4.nbytes() == 3);

  auto rank = Tensor::allocate(DType::float32, std::vector<std::int64_t>(kb::limits::max_tensor_rank + 1, 1));
  REQUIRE_FALSE(rank.ok());
  CHECK(rank.error().code == kb::Code::limit_exceeded);
  CHECK(Tensor::allocate(DType::float32, std::vector<std::int64_t>(kb::limits::max_tensor_rank, 1)).ok());

  auto neg = Tensor::allocate(DType::float32, {2, -1});
  REQUIRE_FALSE(neg.ok());
  CHECK(neg.error().code == kb::Code::limit_exceeded);

  auto big = Tensor::allocate(DType::int8, {std::int64_t{1} << 20, (std::int64_t{1} << 20) + 1});
  REQUIRE_FALSE(big.ok());
  CHECK(big.error().code == kb::Code::limit_exceeded);
  // Products that would overflow int64 are refused, not wrapped.
  auto wrap2 = Tensor::allocate(DType::int8, {std::int64_t{1} << 32, std::int64_t{1} << 32});
  CHECK_FALSE(wrap2.ok());
  CHECK(kb::checked_numel(std::vector<std::int64_t>{std::int64_t{1} << 40}) == (std::int64_t{1} << 40));
  CHECK_FALSE(kb::checked_numel(std::vector<std::int64_t>{(std::int64_t{1} << 40) + 1}).has_value());

  auto odd = Tensor::allocate(DType::float4_e2m1, {3, 3});
  REQUIRE_FALSE(odd.ok());
  CHECK(odd.error().code == kb::Code::invalid_argument);
}

TEST_CASE("guards_intact detects writes just outside the data") {
  for (DType dt : {DType::float32, DType::float16, DType::float4_e2m1, DType::bool_}) {
    INFO(kb::dtype_name(dt));
    Tensor t = make(dt, {4, 2});
    CHECK(t.guards_intact());
    t.fill_bytes(0x5A);  // writes inside the data leave the guards alone
    CHECK(t.guards_intact());
    Tensor after = t.clone();
    after.bytes()[after.nbytes()] = std::byte{0};  // one past the end
    CHECK_FALSE(after.guards_intact());
    Tensor last = t.clone();
    last.bytes()[last.nbytes() + Tensor::guard_bytes - 1] = std::byte{0xFF};
    CHECK_FALSE(last.guards_intact());
    Tensor before = t.clone();
    (before.bytes() - 1)[0] = std::byte{0};  // one before the start
    CHECK_FALSE(before.guards_intact());
    CHECK(t.guards_intact());
  }
  CHECK(Tensor{}.guards_intact());
}

TEST_CASE("clone: deep, same dtype, shape, bytes and guards") {
  Tensor t = stored(DType::float8_e5m2, {1.0f, -2.0f, 3.0f, 4.0f});
  Tensor c = t.clone();
  CHECK(c.dtype() == DType::float8_e5m2);
  CHECK(c.shape() == t.shape());
  CHECK(c.nbytes() == t.nbytes());
  CHECK(raw_bytes(c) == raw_bytes(t));
  CHECK(c.bytes() != t.bytes());
  c.data<std::uint8_t>()[0] = 0;
  CHECK(kb::element_as_double(t, 0) == 1.0);
  CHECK(kb::element_as_double(c, 0) == 0.0);
  t.bytes()[t.nbytes()] = std::byte{1};
  CHECK_FALSE(t.clone().guards_intact());  // a broken guard is copied as it is
  CHECK(Tensor{}.clone().empty_storage());
}

TEST_CASE("fill_bytes(0xFF): NaN in every float dtype but float4 (-6)") {
  for (DType dt : {DType::float32, DType::float16, DType::bfloat16, DType::float8_e4m3fn, DType::float8_e5m2}) {
    INFO(kb::dtype_name(dt));
    Tensor t = make(dt, {3, 2});
    t.fill_bytes(0xFF);
    CHECK(t.guards_intact());
    auto f = kb::to_float(t);
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      CHECK(std::isnan(kb::element_as_double(t, i)));
      CHECK(std::isnan(f[static_cast<std::size_t>(i)]));
    }
  }
  // float4_e2m1 has no NaN: nibble 0xF is -6.0, its most negative value.
  Tensor t = make(DType::float4_e2m1, {3, 2});
  t.fill_bytes(0xFF);
  check_reads(t, {-6, -6, -6, -6, -6, -6});
}
