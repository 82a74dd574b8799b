// Tests of lib/safetensors: round trips, the reader's rejection rules on
// hand-built files, and compatibility with golden.safetensors, written by the
// reference implementation (make_golden.py).
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/limits.hpp"
#include "common/result.hpp"
#include "safetensors/safetensors.hpp"
#include "schema/dtype.hpp"

namespace st = kb::safetensors;
using kb::Code;
using kb::DType;

namespace {

constexpr std::string_view kOrigin = "blob/x.safetensors";

std::vector<std::byte> to_bytes(std::string_view s) {
  std::vector<std::byte> out(s.size());
  if (!s.empty()) std::memcpy(out.data(), s.data(), s.size());
  return out;
}

std::string to_string(std::span<const std::byte> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

void put_le64(std::vector<std::byte>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i)));
}

// A file image: length field (the real header length unless overridden), the
// header text, then `data_bytes` bytes 0, 1, 2, ...
std::vector<std::byte> image(std::string_view header, std::size_t data_bytes,
                             std::optional<std::uint64_t> length = std::nullopt) {
  std::vector<std::byte> out;
  put_le64(out, length ? *length : header.size());
  auto h = to_bytes(header);
  out.insert(out.end(), h.begin(), h.end());
  for (std::size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<std::byte>(i));
  return out;
}

template <class T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

std::vector<std::byte> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  if (!chars.empty()) std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

// Parses `file` expecting failure with `code`; the message must start with the
// origin and contain each of `parts`.
void expect_error(const std::vector<std::byte>& file, Code code,
                  std::initializer_list<std::string_view> parts) {
  auto r = st::parse(file, kOrigin);
  REQUIRE_FALSE(r.ok());
  const auto& msg = r.error().message;
  INFO("message: " << msg);
  CHECK(r.error().code == code);
  CHECK(msg.rfind(std::string(kOrigin) + ": ", 0) == 0);
  for (auto p : parts) CHECK(msg.find(p) != std::string::npos);
  // The header-only reader agrees.
  auto h = st::parse_header(file, kOrigin);
  REQUIRE_FALSE(h.ok());
  CHECK(h.error().code == code);
  CHECK(h.error().message == msg);
}

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((i * 37 + seed * 11 + 5) & 0xFF);
  return out;
}

constexpr std::array<DType, kb::dtype_count> kAllDtypes = {
    DType::float32, DType::float16, DType::bfloat16, DType::float8_e4m3fn,
    DType::float8_e5m2, DType::float4_e2m1, DType::int64, DType::int32,
    DType::int16, DType::int8, DType::bool_,
};

std::filesystem::path temp_dir() {
  auto dir = std::filesystem::temp_directory_path() /
             ("kb_test_safetensors_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

template <class T>
T load_le(std::span<const std::byte> b, std::size_t index) {
  static_assert(std::endian::native == std::endian::little, "tests assume a little-endian host");
  T v;
  std::memcpy(&v, b.data() + index * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

TEST_CASE("dtype codes follow the safetensors spelling") {
  const std::pair<DType, std::string_view> rows[] = {
      {DType::float32, "F32"},        {DType::float16, "F16"},     {DType::bfloat16, "BF16"},
      {DType::float8_e4m3fn, "F8_E4M3"}, {DType::float8_e5m2, "F8_E5M2"}, {DType::float4_e2m1, "F4"},
      {DType::int64, "I64"},          {DType::int32, "I32"},       {DType::int16, "I16"},
      {DType::int8, "I8"},            {DType::bool_, "BOOL"},
  };
  for (auto [t, code] : rows) {
    CHECK(st::dtype_code(t) == code);
    CHECK(st::dtype_from_code(code) == t);
  }
  for (std::string_view code : {"U8", "F64", "U16", "F8_E8M0", "f32", "float32", ""})
    CHECK_FALSE(st::dtype_from_code(code).has_value());
  CHECK(st::storage_bytes(DType::float4_e2m1, 6) == 3);
  CHECK(st::storage_bytes(DType::int64, 3) == 24);
  CHECK(st::storage_bytes(DType::bool_, 3) == 3);
}

TEST_CASE("round trip of every dtype, 0-D and zero-size shapes") {
  for (DType t : kAllDtypes) {
    CAPTURE(kb::dtype_name(t));
    std::vector<std::vector<std::int64_t>> shapes = {{0}, {3, 0}, {2, 3}, {1, 1, 4}, {0, 1099511627776}};
    if (t != DType::float4_e2m1) shapes.push_back({});  // 0-D: one element
    std::vector<std::string> names;
    std::vector<std::vector<std::byte>> datas;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      std::uint64_t n = 1;
      for (auto d : shapes[i]) n *= static_cast<std::uint64_t>(d);
      names.push_back("t" + std::to_string(i));
      datas.push_back(pattern(st::storage_bytes(t, n), static_cast<unsigned>(i)));
    }
    std::vector<st::TensorView> views;
    for (std::size_t i = 0; i < shapes.size(); ++i)
      views.push_back({names[i], t, shapes[i], datas[i]});

    auto blob = st::serialize(views);
    REQUIRE(blob.ok());
    auto file = st::parse(*blob, "mem");
    REQUIRE(file.ok());
    const auto& h = file->header;
    CHECK((h.data_offset - 8) % 8 == 0);
    CHECK(h.metadata.empty());
    REQUIRE(h.tensors.size() == shapes.size());
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const auto* info = h.find(names[i]);
      REQUIRE(info != nullptr);
      CHECK(info->dtype == t);
      CHECK(info->shape == shapes[i]);
      auto b = file->bytes(*info);
      CHECK(std::vector<std::byte>(b.begin(), b.end()) == datas[i]);
      total += datas[i].size();
    }
    CHECK(h.data_size == total);
    CHECK(file->data.size() == total);
  }
  // No tensors at all: "{}" padded to 8 bytes.
  auto blob = st::serialize(std::vector<st::TensorView>{});
  REQUIRE(blob.ok());
  CHECK(to_string(*blob) == std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
  auto empty = st::parse(*blob, "mem");
  REQUIRE(empty.ok());
  CHECK(empty->header.tensors.empty());
  CHECK(empty->header.data_size == 0);
}

TEST_CASE("writer keeps the given order, pads to 8 and matches the reference layout") {
  std::vector<std::int32_t> a = {1, 2, 3};
  std::vector<std::int8_t> b = {-1};
  std::vector<std::int64_t> sa = {3}, sb = {};
  std::vector<st::TensorView> views = {
      {"zeta", DType::int32, sa, bytes_of(a)},
      {"alpha", DType::int8, sb, bytes_of(b)},
  };
  auto blob = st::serialize(views, {{"k", "v"}});
  REQUIRE(blob.ok());
  std::string text = to_string(*blob);
  std::string json =
      R"({"__metadata__":{"k":"v"},"zeta":{"dtype":"I32","shape":[3],"data_offsets":[0,12]},)"
      R"("alpha":{"dtype":"I8","shape":[],"data_offsets":[12,13]}})";
  std::string padded = json + std::string((8 - json.size() % 8) % 8, ' ');
  std::string expect;
  for (int i = 0; i < 8; ++i) expect += static_cast<char>((padded.size() >> (8 * i)) & 0xFF);
  expect += padded;
  expect += std::string("\x01\0\0\0\x02\0\0\0\x03\0\0\0\xff", 13);
  CHECK(text == expect);

  auto file = st::parse(*blob, "mem");
  REQUIRE(file.ok());
  REQUIRE(file->header.tensors.size() == 2);
  CHECK(file->header.tensors[0].name == "zeta");
  CHECK(file->header.tensors[1].name == "alpha");
  CHECK(file->header.tensors[1].begin == 12);
}

TEST_CASE("metadata and names with characters JSON must escape") {
  std::vector<std::uint8_t> d = {1, 0};
  std::vector<std::int64_t> shape = {2};
  const std::string names[] = {
      "quote\"back\\slash",
      std::string("ctl\x01\x1f\n\t\r\b\f end", 15),  // with its NUL byte
      "unicode é 日本 /",
      "",
  };
  std::vector<st::TensorView> views;
  std::vector<std::vector<std::byte>> datas;
  for (const auto& n : names) views.push_back({n, DType::bool_, shape, bytes_of(d)});
  std::vector<std::pair<std::string, std::string>> meta = {
      {"format", "pt"},
      {"note", std::string("a \"b\" \\ c\n\x02 é", 15)},
      {"", ""},
      {"__metadata__", "nested name is fine"},
  };
  auto blob = st::serialize(views, meta);
  REQUIRE(blob.ok());
  auto file = st::parse(*blob, "mem");
  REQUIRE(file.ok());
  CHECK(file->header.metadata == meta);
  REQUIRE(file->header.tensors.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) CHECK(file->header.tensors[i].name == names[i]);
  // Control characters are written as escapes, never raw.
  std::string text = to_string(*blob);
  CHECK(text.find("\\u0001") != std::string::npos);
  CHECK(text.find("\\u001f") != std::string::npos);
  CHECK(text.find("\\\"b\\\"") != std::string::npos);
}

TEST_CASE("writer rejects bad input") {
  std::vector<std::int32_t> four = {1, 2, 3, 4};
  std::vector<std::int64_t> s4 = {4}, s3 = {3}, sneg = {-1}, s0 = {};
  auto bad = [](std::vector<st::TensorView> views, Code code, std::string_view part,
                std::vector<std::pair<std::string, std::string>> meta = {}) {
    auto r = st::serialize(views, meta);
    REQUIRE_FALSE(r.ok());
    INFO("message: " << r.error().message);
    CHECK(r.error().code == code);
    CHECK(r.error().message.find(part) != std::string::npos);
  };
  bad({{"a", DType::int32, s4, bytes_of(four)}, {"a", DType::int32, s4, bytes_of(four)}},
      Code::invalid_argument, "tensor \"a\": name given twice");
  bad({{"kv_indptr", DType::int32, s3, bytes_of(four)}}, Code::invalid_argument,
      "tensor \"kv_indptr\": 16 bytes given but shape [3] of int32 needs 12");
  bad({{"a", DType::int32, sneg, {}}}, Code::invalid_argument, "negative dimension");
  bad({{"__metadata__", DType::int32, s4, bytes_of(four)}}, Code::invalid_argument, "reserved");
  bad({{std::string_view("\xff\xfe", 2), DType::int8, s0, bytes_of(four).first(1)}},
      Code::invalid_argument, "tensor \"\\xff\\xfe\": name is not valid UTF-8");
  bad({{"a", static_cast<DType>(42), s4, bytes_of(four)}}, Code::invalid_argument, "invalid dtype");
  bad({{"f4", DType::float4_e2m1, s3, bytes_of(four).first(2)}}, Code::invalid_argument,
      "odd element count");
  bad({{"f4", DType::float4_e2m1, s0, bytes_of(four).first(1)}}, Code::invalid_argument,
      "odd element count");
  std::vector<std::int64_t> deep(17, 1);
  bad({{"deep", DType::int8, deep, bytes_of(four).first(1)}}, Code::limit_exceeded, "17 dimensions");
  std::vector<std::int64_t> huge = {std::int64_t{1} << 30, std::int64_t{1} << 30};
  bad({{"huge", DType::int8, huge, {}}}, Code::limit_exceeded, "limit");
  bad({}, Code::invalid_argument, "metadata key \"k\" given twice", {{"k", "1"}, {"k", "2"}});
  bad({}, Code::invalid_argument, "not valid UTF-8", {{"k", "\xc3"}});
}

TEST_CASE("write_file, read_file and read_header") {
  auto dir = temp_dir();
  const std::string path = (dir / "rt.safetensors").string();
  std::vector<float> f = {1.5f, -2.0f};
  std::vector<std::int64_t> shape = {2};
  std::vector<st::TensorView> views = {{"w", DType::float32, shape, bytes_of(f)}};
  REQUIRE(st::write_file(path, views, {{"who", "kb"}}).ok());

  auto header = st::read_header(path);
  REQUIRE(header.ok());
  REQUIRE(header->tensors.size() == 1);
  CHECK(header->find("w") != nullptr);
  CHECK(header->find("nope") == nullptr);
  CHECK(header->data_size == 8);
  CHECK(header->data_offset + header->data_size == std::filesystem::file_size(path));

  auto file = st::read_file(path);
  REQUIRE(file.ok());
  auto b = file->bytes(*file->header.find("w"));
  REQUIRE(b.size() == 8);
  CHECK(load_le<float>(b, 0) == 1.5f);
  CHECK(load_le<float>(b, 1) == -2.0f);
  CHECK(file->header.metadata == std::vector<std::pair<std::string, std::string>>{{"who", "kb"}});

  // Same bytes as serialize().
  auto blob = st::serialize(views, {{"who", "kb"}});
  REQUIRE(blob.ok());
  CHECK(read_all(path) == *blob);

  // A rejected write leaves no file behind.
  const std::string bad_path = (dir / "bad.safetensors").string();
  std::vector<st::TensorView> bad = {{"w", DType::float32, shape, bytes_of(f).first(4)}};
  auto w = st::write_file(bad_path, bad);
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().message.rfind(bad_path + ": tensor \"w\"", 0) == 0);
  CHECK_FALSE(std::filesystem::exists(bad_path));

  // Validation errors from a file name the path.
  {
    auto img = image(R"({"a":{"dtype":"I8","shape":[2],"data_offsets":[0,2]}})", 3);
    std::ofstream(bad_path, std::ios::binary).write(reinterpret_cast<const char*>(img.data()),
                                                   static_cast<std::streamsize>(img.size()));
    auto r = st::read_file(bad_path);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Code::invalid_data);
    CHECK(r.error().message.rfind(bad_path + ": ", 0) == 0);
    auto rh = st::read_header(bad_path);
    REQUIRE_FALSE(rh.ok());
    CHECK(rh.error().message == r.error().message);
  }

  // I/O errors.
  auto missing = st::read_file((dir / "missing.safetensors").string());
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == Code::io_error);
  CHECK(missing.error().message.find("missing.safetensors") != std::string::npos);
  CHECK(missing.error().message.find("No such file") != std::string::npos);
  auto missing_h = st::read_header((dir / "missing.safetensors").string());
  REQUIRE_FALSE(missing_h.ok());
  CHECK(missing_h.error().code == Code::io_error);
  auto is_dir = st::read_file(dir.string());
  REQUIRE_FALSE(is_dir.ok());
  CHECK(is_dir.error().code == Code::io_error);
  auto unwritable = st::write_file((dir / "no/such/dir/x.safetensors").string(), views);
  REQUIRE_FALSE(unwritable.ok());
  CHECK(unwritable.error().code == Code::io_error);

  std::filesystem::remove_all(dir);
}

TEST_CASE("reader: file too short, header length out of range") {
  expect_error({}, Code::invalid_data, {"0 bytes", "too short"});
  expect_error(to_bytes(std::string_view("\x02\0\0\0", 4)), Code::invalid_data, {"4 bytes", "too short"});
  // Header length larger than the file.
  expect_error(image("{}", 0, 3), Code::invalid_data, {"header length 3", "past the end"});
  expect_error(image("{}", 0, 1000), Code::invalid_data, {"header length 1000"});
  // Above the header limit, and the largest uint64 (no wrap-around).
  expect_error(image("{}", 0, std::uint64_t{200} << 20), Code::limit_exceeded, {"exceeds the limit"});
  expect_error(image("{}", 0, ~std::uint64_t{0}), Code::limit_exceeded, {"exceeds the limit"});
  // Length field only, empty header.
  expect_error(image("", 0), Code::parse_error, {"not valid JSON"});
}

TEST_CASE("reader: truncating or extending a valid file is an error") {
  std::vector<std::int32_t> v = {7, 8, 9, 10};
  std::vector<std::int64_t> shape = {2, 2};
  std::vector<st::TensorView> views = {{"kv", DType::int32, shape, bytes_of(v)}};
  auto blob = st::serialize(views, {{"m", "x"}});
  REQUIRE(blob.ok());
  REQUIRE(st::parse(*blob, kOrigin).ok());
  for (std::size_t n = 0; n < blob->size(); ++n) {
    std::vector<std::byte> cut(blob->begin(), blob->begin() + static_cast<std::ptrdiff_t>(n));
    auto r = st::parse(cut, kOrigin);
    CAPTURE(n);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.rfind(std::string(kOrigin) + ": ", 0) == 0);
  }
  auto longer = *blob;
  longer.push_back(std::byte{0});
  expect_error(longer, Code::invalid_data, {"data buffer holds 17 bytes", "\"kv\"", "[16, 17)"});
}

TEST_CASE("reader: header is not JSON or not an object") {
  expect_error(image("{\"a\":", 0), Code::parse_error, {"not valid JSON"});
  expect_error(image("hello", 0), Code::parse_error, {"not valid JSON"});
  expect_error(image("[1,2]", 0), Code::invalid_data, {"an array, not a JSON object"});
  expect_error(image("\"s\"", 0), Code::invalid_data, {"not a JSON object"});
  expect_error(image("{} {}", 0), Code::parse_error, {});
  // Invalid UTF-8 inside a string.
  expect_error(image("{\"\xff\":1}", 0), Code::parse_error, {});
  // Nesting past the depth limit.
  std::string deep = "{\"__metadata__\":" + std::string(100, '[') + std::string(100, ']') + "}";
  expect_error(image(deep, 0), Code::limit_exceeded, {"deeper"});
  // Entry not an object; missing, unknown and repeated fields.
  expect_error(image(R"({"a":5})", 0), Code::invalid_data, {"tensor \"a\": entry is an integer"});
  expect_error(image(R"({"a":{"shape":[],"data_offsets":[0,1]}})", 1), Code::invalid_data,
               {"tensor \"a\": missing \"dtype\""});
  expect_error(image(R"({"a":{"dtype":"I8","data_offsets":[0,1]}})", 1), Code::invalid_data,
               {"tensor \"a\": missing \"shape\""});
  expect_error(image(R"({"a":{"dtype":"I8","shape":[]}})", 1), Code::invalid_data,
               {"tensor \"a\": missing \"data_offsets\""});
  expect_error(image(R"({"a":{"dtype":"I8","shape":[],"data_offsets":[0,1],"x":1}})", 1),
               Code::invalid_data, {"tensor \"a\": unknown field \"x\""});
  expect_error(image(R"({"a":{"dtype":"I8","dtype":"I8","shape":[],"data_offsets":[0,1]}})", 1),
               Code::invalid_data, {"tensor \"a\": field \"dtype\" appears twice"});
  expect_error(image(R"({"a":{"dtype":8,"shape":[],"data_offsets":[0,1]}})", 1), Code::invalid_data,
               {"tensor \"a\": \"dtype\" is an integer, not a string"});
}

TEST_CASE("reader: dtypes") {
  expect_error(image(R"({"w":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}})", 1), Code::invalid_data,
               {"tensor \"w\": unknown dtype \"Q7\""});
  expect_error(image(R"({"w":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", 4), Code::invalid_data,
               {"unknown dtype \"f32\""});
  expect_error(image(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1), Code::unsupported,
               {"tensor \"w\": unsupported dtype \"U8\""});
  expect_error(image(R"({"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8), Code::unsupported,
               {"unsupported dtype \"F64\""});
  expect_error(image(R"({"w":{"dtype":"F8_E8M0","shape":[1],"data_offsets":[0,1]}})", 1),
               Code::unsupported, {"unsupported dtype \"F8_E8M0\""});
  // float4: two a byte, no half bytes.
  auto ok = st::parse(image(R"({"w":{"dtype":"F4","shape":[2,3],"data_offsets":[0,3]}})", 3), kOrigin);
  REQUIRE(ok.ok());
  CHECK(ok->header.tensors[0].dtype == DType::float4_e2m1);
  expect_error(image(R"({"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2), Code::invalid_data,
               {"tensor \"w\": shape [3] of float4_e2m1 has an odd element count (3)"});
  expect_error(image(R"({"w":{"dtype":"F4","shape":[],"data_offsets":[0,1]}})", 1), Code::invalid_data,
               {"odd element count (1)"});
  expect_error(image(R"({"w":{"dtype":"F4","shape":[4],"data_offsets":[0,4]}})", 4), Code::invalid_data,
               {"hold 4 bytes but shape [4] of float4_e2m1 needs 2"});
}

TEST_CASE("reader: shapes") {
  expect_error(image(R"({"w":{"dtype":"I8","shape":[2,-1],"data_offsets":[0,0]}})", 0),
               Code::invalid_data, {"tensor \"w\": shape has negative dimension -1"});
  expect_error(image(R"({"w":{"dtype":"I8","shape":[1.5],"data_offsets":[0,1]}})", 1), Code::invalid_data,
               {"tensor \"w\": shape holds a non-integer number"});
  expect_error(image(R"({"w":{"dtype":"I8","shape":["2"],"data_offsets":[0,2]}})", 2), Code::invalid_data,
               {"shape holds a string"});
  expect_error(image(R"({"w":{"dtype":"I8","shape":2,"data_offsets":[0,2]}})", 2), Code::invalid_data,
               {"\"shape\" is an integer, not an array"});
  // Dims whose product overflows 64 bits, or only the 2^40 element limit.
  expect_error(
      image(R"({"w":{"dtype":"I8","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,0]}})", 0),
      Code::limit_exceeded, {"tensor \"w\"", "limit"});
  expect_error(image(R"({"w":{"dtype":"I8","shape":[1048576,1048577],"data_offsets":[0,0]}})", 0),
               Code::limit_exceeded, {"more than the limit of 1099511627776 elements"});
  expect_error(image(R"({"w":{"dtype":"I8","shape":[18446744073709551615],"data_offsets":[0,0]}})", 0),
               Code::limit_exceeded, {"tensor \"w\": shape dimension 18446744073709551615"});
  expect_error(image(R"({"w":{"dtype":"I8","shape":[9223372036854775808],"data_offsets":[0,0]}})", 0),
               Code::limit_exceeded, {});
  // Beyond uint64: simdjson refuses the number itself.
  expect_error(image(R"({"w":{"dtype":"I8","shape":[99999999999999999999999],"data_offsets":[0,0]}})", 0),
               Code::parse_error, {});
  // Rank above the limit.
  expect_error(
      image(R"({"w":{"dtype":"I8","shape":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}})", 1),
      Code::limit_exceeded, {"tensor \"w\"", "dimensions"});
  // A zero dim makes any other dim (within the limit) harmless.
  auto zero = st::parse(
      image(R"({"w":{"dtype":"I64","shape":[0,1099511627776,1099511627776],"data_offsets":[0,0]}})", 0),
      kOrigin);
  REQUIRE(zero.ok());
  CHECK(zero->header.tensors[0].shape == std::vector<std::int64_t>{0, 1099511627776, 1099511627776});
  // 16 dims is fine.
  auto rank16 = st::parse(
      image(R"({"w":{"dtype":"I8","shape":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,2],"data_offsets":[0,2]}})", 2),
      kOrigin);
  CHECK(rank16.ok());
}

TEST_CASE("reader: data_offsets") {
  expect_error(image(R"({"kv_indptr":{"dtype":"I32","shape":[4],"data_offsets":[0,12]}})", 12),
               Code::invalid_data,
               {"blob/x.safetensors: tensor \"kv_indptr\": data_offsets [0, 12) hold 12 bytes but shape "
                "[4] of int32 needs 16"});
  expect_error(image(R"({"w":{"dtype":"I8","shape":[2],"data_offsets":[2,0]}})", 2), Code::invalid_data,
               {"tensor \"w\": data_offsets [2, 0) end before they begin"});
  expect_error(image(R"({"w":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}})", 2), Code::invalid_data,
               {"tensor \"w\": data_offsets [0, 4) run past the end of the data buffer (2 bytes)"});
  expect_error(image(R"({"w":{"dtype":"I8","shape":[1],"data_offsets":[18446744073709551615,0]}})", 0),
               Code::invalid_data, {"end before they begin"});
  expect_error(image(R"({"w":{"dtype":"I8","shape":[1],"data_offsets":[0]}})", 1), Code::invalid_data,
               {"exactly two"});
  expect_error(image(R"({"w":{"dtype":"I8","shape":[1],"data_offsets":[0,1,2]}})", 1), Code::invalid_data,
               {"exactly two"});
  expect_error(image(R"({"w":{"dtype":"I8","shape":[1],"data_offsets":[-1,0]}})", 1), Code::invalid_data,
               {"not a non-negative integer"});
  expect_error(image(R"({"w":{"dtype":"I8","shape":[1],"data_offsets":{"a":0}}})", 1), Code::invalid_data,
               {"\"data_offsets\" is an object"});
}

TEST_CASE("reader: overlap, holes and coverage") {
  // Overlap.
  expect_error(image(R"({"a":{"dtype":"I8","shape":[4],"data_offsets":[0,4]},)"
                     R"("b":{"dtype":"I8","shape":[4],"data_offsets":[2,6]}})",
                     6),
               Code::invalid_data, {"tensor \"b\": data_offsets [2, 6) overlap tensor \"a\" at [0, 4)"});
  // Same span twice.
  expect_error(image(R"({"a":{"dtype":"I8","shape":[4],"data_offsets":[0,4]},)"
                     R"("b":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}})",
                     4),
               Code::invalid_data, {"overlap"});
  // An empty tensor inside another one.
  expect_error(image(R"({"a":{"dtype":"I8","shape":[4],"data_offsets":[0,4]},)"
                     R"("e":{"dtype":"I8","shape":[0],"data_offsets":[2,2]}})",
                     4),
               Code::invalid_data, {"tensor \"e\"", "overlap tensor \"a\""});
  // Hole between tensors.
  expect_error(image(R"({"a":{"dtype":"I8","shape":[2],"data_offsets":[0,2]},)"
                     R"("b":{"dtype":"I8","shape":[2],"data_offsets":[4,6]}})",
                     6),
               Code::invalid_data, {"tensor \"b\"", "bytes [2, 4) after tensor \"a\" unused"});
  // Hole at the start.
  expect_error(image(R"({"b":{"dtype":"I8","shape":[2],"data_offsets":[1,3]}})", 3), Code::invalid_data,
               {"tensor \"b\"", "bytes [0, 1) at the start"});
  // Bytes after the last tensor.
  expect_error(image(R"({"a":{"dtype":"I8","shape":[2],"data_offsets":[0,2]}})", 5), Code::invalid_data,
               {"data buffer holds 5 bytes", "\"a\", ends at 2"});
  expect_error(image(R"({})", 3), Code::invalid_data, {"holds 3 bytes but the header lists no tensors"});
  // Header order need not follow offsets; tensors come back sorted by offset.
  auto ok = st::parse(image(R"({"b":{"dtype":"I16","shape":[1],"data_offsets":[2,4]},)"
                            R"("e":{"dtype":"I8","shape":[0],"data_offsets":[4,4]},)"
                            R"("a":{"dtype":"I8","shape":[2],"data_offsets":[0,2]}})",
                            4),
                      kOrigin);
  REQUIRE(ok.ok());
  REQUIRE(ok->header.tensors.size() == 3);
  CHECK(ok->header.tensors[0].name == "a");
  CHECK(ok->header.tensors[1].name == "b");
  CHECK(ok->header.tensors[2].name == "e");
  auto b = ok->bytes(ok->header.tensors[1]);
  REQUIRE(b.size() == 2);
  CHECK(b[0] == std::byte{2});
}

TEST_CASE("reader: duplicate keys and metadata rules") {
  expect_error(image(R"({"a":{"dtype":"I8","shape":[1],"data_offsets":[0,1]},)"
                     R"("a":{"dtype":"I8","shape":[1],"data_offsets":[1,2]}})",
                     2),
               Code::invalid_data, {"tensor \"a\" appears twice"});
  expect_error(image(R"({"__metadata__":{},"__metadata__":{}})", 0), Code::invalid_data,
               {"\"__metadata__\" appears twice"});
  expect_error(image(R"({"__metadata__":{"k":1}})", 0), Code::invalid_data,
               {"\"__metadata__\" value of \"k\" is an integer, not a string"});
  expect_error(image(R"({"__metadata__":{"k":null}})", 0), Code::invalid_data, {"null, not a string"});
  expect_error(image(R"({"__metadata__":["a"]})", 0), Code::invalid_data, {"not an object"});
  expect_error(image(R"({"__metadata__":{"k":"1","k":"2"}})", 0), Code::invalid_data,
               {"\"__metadata__\" has key \"k\" twice"});
  // Names in messages are escaped and cut short.
  std::string longname(500, 'n');
  auto r = st::parse(image("{\"" + longname + "\\n\":{\"dtype\":\"X\",\"shape\":[],\"data_offsets\":[0,0]}}", 0),
                     kOrigin);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.size() < 400);
  CHECK(r.error().message.find("...") != std::string::npos);
  // Padding spaces (and other JSON whitespace) around the header are fine.
  auto padded = st::parse(image("  {\"__metadata__\":{\"k\":\"v\"}}\n\t      ", 0), kOrigin);
  REQUIRE(padded.ok());
  CHECK(padded->header.metadata.size() == 1);
}

TEST_CASE("golden file from the reference writer") {
  // Written by make_golden.py with the safetensors package (0.8.0).
  const std::string path = "golden.safetensors";
  auto file = st::read_file(path);
  REQUIRE(file.ok());
  const auto& h = file->header;
  CHECK(h.data_offset == 8 + 840);
  CHECK(h.data_size == 97);
  CHECK(h.tensors.size() == 13);

  std::vector<std::pair<std::string, std::string>> meta = h.metadata;
  std::sort(meta.begin(), meta.end());
  CHECK(meta == std::vector<std::pair<std::string, std::string>>{
                    {"format", "pt"}, {"note", "kb golden \"quoted\"\n\xc3\xa9 \\ /"}});

  auto get = [&](std::string_view name, DType dtype, std::vector<std::int64_t> shape) {
    const auto* t = h.find(name);
    REQUIRE_MESSAGE(t != nullptr, name);
    CHECK(t->dtype == dtype);
    CHECK(t->shape == shape);
    return file->bytes(*t);
  };
  auto f32 = get("f32", DType::float32, {2, 3});
  const float f32v[] = {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f};
  for (std::size_t i = 0; i < 6; ++i) CHECK(load_le<float>(f32, i) == f32v[i]);
  auto f16 = get("f16", DType::float16, {4});
  const std::uint16_t f16v[] = {0x3C00, 0xC000, 0x3800, 0x7BFF};  // 1, -2, 0.5, 65504
  for (std::size_t i = 0; i < 4; ++i) CHECK(load_le<std::uint16_t>(f16, i) == f16v[i]);
  auto bf16 = get("bf16", DType::bfloat16, {3});
  const std::uint16_t bf16v[] = {0x3F80, 0xC000, 0x3F00};
  for (std::size_t i = 0; i < 3; ++i) CHECK(load_le<std::uint16_t>(bf16, i) == bf16v[i]);
  auto i64 = get("i64", DType::int64, {2});
  CHECK(load_le<std::int64_t>(i64, 0) == -1);
  CHECK(load_le<std::int64_t>(i64, 1) == (std::int64_t{1} << 40) + 7);
  auto i32 = get("i32", DType::int32, {2, 2});
  const std::int32_t i32v[] = {1, -2, 3, -4};
  for (std::size_t i = 0; i < 4; ++i) CHECK(load_le<std::int32_t>(i32, i) == i32v[i]);
  auto i16 = get("i16", DType::int16, {3});
  const std::int16_t i16v[] = {-32768, 0, 32767};
  for (std::size_t i = 0; i < 3; ++i) CHECK(load_le<std::int16_t>(i16, i) == i16v[i]);
  auto i8 = get("i8", DType::int8, {4});
  const std::int8_t i8v[] = {-128, -1, 0, 127};
  for (std::size_t i = 0; i < 4; ++i) CHECK(load_le<std::int8_t>(i8, i) == i8v[i]);
  auto mask = get("mask", DType::bool_, {3});
  CHECK(std::vector<std::byte>(mask.begin(), mask.end()) ==
        std::vector<std::byte>{std::byte{1}, std::byte{0}, std::byte{1}});
  auto f8a = get("f8e4m3", DType::float8_e4m3fn, {4});
  CHECK(std::vector<std::byte>(f8a.begin(), f8a.end()) ==
        std::vector<std::byte>{std::byte{0x38}, std::byte{0xC0}, std::byte{0x30}, std::byte{0x7E}});
  auto f8b = get("f8e5m2", DType::float8_e5m2, {2});
  CHECK(std::vector<std::byte>(f8b.begin(), f8b.end()) ==
        std::vector<std::byte>{std::byte{0x3C}, std::byte{0xC0}});
  auto f4 = get("f4", DType::float4_e2m1, {2, 4});  // logical shape; 4 bytes
  CHECK(std::vector<std::byte>(f4.begin(), f4.end()) ==
        std::vector<std::byte>{std::byte{0x21}, std::byte{0x43}, std::byte{0x65}, std::byte{0xF7}});
  auto scalar = get("scalar", DType::float32, {});
  REQUIRE(scalar.size() == 4);
  CHECK(load_le<float>(scalar, 0) == 3.5f);
  auto empty = get("empty", DType::int32, {0, 3});
  CHECK(empty.empty());

  // parse() and read_header() agree with read_file().
  auto raw = read_all(path);
  REQUIRE(raw.size() == 945);
  auto mem = st::parse(raw, path);
  REQUIRE(mem.ok());
  CHECK(mem->data == file->data);
  auto hdr = st::read_header(path);
  REQUIRE(hdr.ok());
  CHECK(hdr->tensors.size() == h.tensors.size());
  CHECK(hdr->metadata == h.metadata);

  // kb writes the same tensors (in file order, same metadata order) byte for byte.
  std::vector<st::TensorView> views;
  for (const auto& t : h.tensors) views.push_back({t.name, t.dtype, t.shape, file->bytes(t)});
  auto blob = st::serialize(views, h.metadata);
  REQUIRE(blob.ok());
  CHECK(*blob == raw);
}
