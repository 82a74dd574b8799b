#include "safetensors/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <iterator>
#include <memory>
#include <new>
#include <unordered_set>

#include <fmt/format.h>
#include <simdjson.h>

#include "common/limits.hpp"

namespace kb::safetensors {

namespace {

// ---------------------------------------------------------------------------
// dtype codes

struct CodeRow {
  DType type;
  std::string_view code;
};
// Indexed by DType value.
constexpr CodeRow kCodes[dtype_count] = {
    {DType::float32, "F32"},     {DType::float16, "F16"},      {DType::bfloat16, "BF16"},
    {DType::float8_e4m3fn, "F8_E4M3"}, {DType::float8_e5m2, "F8_E5M2"},
    {DType::float4_e2m1, "F4"},  {DType::int64, "I64"},        {DType::int32, "I32"},
    {DType::int16, "I16"},       {DType::int8, "I8"},          {DType::bool_, "BOOL"},
};
// Codes of the format that kb has no dtype for.
constexpr std::string_view kUnsupportedCodes[] = {
    "U8", "U16", "U32", "U64", "F64", "C64", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ",
    "F6_E2M3", "F6_E3M2",
};
constexpr std::string_view kSupportedList = "F32 F16 BF16 F8_E4M3 F8_E5M2 F4 I64 I32 I16 I8 BOOL";

bool valid_dtype(DType t) noexcept { return static_cast<unsigned>(t) < dtype_count; }

constexpr std::string_view kMetadataKey = "__metadata__";

// ---------------------------------------------------------------------------
// text helpers

// JSON string body escapes, matching the reference writer (serde_json):
// \" \\ \b \f \n \r \t, other control characters as \u00xx, everything else raw.
void append_json_escaped(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xF];
        } else {
          out += ch;
        }
    }
  }
}

// A name quoted for an error message: escaped, bytes of invalid UTF-8 as \xNN,
// cut after ~120 bytes.
std::string qname(std::string_view s) {
  constexpr std::size_t kMax = 120;
  bool cut = false;
  if (s.size() > kMax) {
    std::size_t n = kMax;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    s = s.substr(0, n);
    cut = true;
  }
  std::string out;
  out.reserve(s.size() + 8);
  out += '"';
  if (simdjson::validate_utf8(s.data(), s.size())) {
    append_json_escaped(out, s);
  } else {
    for (char ch : s) {
      auto c = static_cast<unsigned char>(ch);
      if (c >= 0x80) {
        fmt::format_to(std::back_inserter(out), "\\x{:02x}", c);
      } else {
        append_json_escaped(out, std::string_view(&ch, 1));
      }
    }
  }
  out += '"';
  if (cut) out += "...";
  return out;
}

std::string shape_text(std::span<const std::int64_t> shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    fmt::format_to(std::back_inserter(out), "{}", shape[i]);
  }
  out += ']';
  return out;
}

template <class... A>
Error fail(Code code, std::string_view origin, fmt::format_string<A...> f, A&&... args) {
  std::string msg(origin);
  msg += ": ";
  fmt::format_to(std::back_inserter(msg), f, std::forward<A>(args)...);
  return Error{code, std::move(msg)};
}

// strerror_r comes in a GNU (char*) and an XSI (int) flavour.
[[maybe_unused]] const char* pick_strerror(int rc, const char* buf) {
  return rc == 0 ? buf : "unknown error";
}
[[maybe_unused]] const char* pick_strerror(const char* s, const char*) { return s; }

std::string errno_text(int err) {
  char buf[256] = {};
  return pick_strerror(strerror_r(err, buf, sizeof buf), buf);
}

Error io_fail(std::string_view path, std::string_view what, int err) {
  return fail(Code::io_error, path, "cannot {}: {}", what, errno_text(err));
}

// Runs f, turning exceptions (allocation failure) into errors.
template <class F>
auto guarded(std::string_view origin, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return Error{Code::out_of_memory, std::string(origin) + ": out of memory"};
  } catch (const std::exception& e) {
    return Error{Code::internal, std::string(origin) + ": " + e.what()};
  } catch (...) {
    return Error{Code::internal, std::string(origin) + ": unexpected exception"};
  }
}

// ---------------------------------------------------------------------------
// shape rules shared by reader and writer

// Checks rank, dims and element count; on success sets `bytes` to the storage
// size. `prefix` is "tensor \"x\"" for messages.
Result<std::uint64_t> shape_bytes(std::string_view origin, std::string_view prefix, DType dtype,
                                  std::span<const std::int64_t> shape, Code bad_code) {
  if (shape.size() > limits::max_tensor_rank)
    return fail(Code::limit_exceeded, origin, "{}: shape has {} dimensions, more than the limit of {}",
                prefix, shape.size(), limits::max_tensor_rank);
  bool zero = false;
  for (std::int64_t d : shape) {
    if (d < 0) return fail(bad_code, origin, "{}: shape {} has a negative dimension", prefix, shape_text(shape));
    if (d > limits::max_tensor_elements)
      return fail(Code::limit_exceeded, origin, "{}: dimension {} of shape {} exceeds the limit of {} elements",
                  prefix, d, shape_text(shape), limits::max_tensor_elements);
    if (d == 0) zero = true;
  }
  std::uint64_t count = 1;
  if (zero) {
    count = 0;
  } else {
    const auto max = static_cast<std::uint64_t>(limits::max_tensor_elements);
    for (std::int64_t d : shape) {
      auto u = static_cast<std::uint64_t>(d);
      if (u > max / count)
        return fail(Code::limit_exceeded, origin, "{}: shape {} has more than the limit of {} elements",
                    prefix, shape_text(shape), limits::max_tensor_elements);
      count *= u;
    }
  }
  if (dtype == DType::float4_e2m1 && count % 2 != 0)
    return fail(bad_code, origin,
                "{}: shape {} of float4_e2m1 has an odd element count ({}); safetensors stores "
                "float4 two a byte and cannot hold half a byte",
                prefix, shape_text(shape), count);
  return storage_bytes(dtype, count);
}

// ---------------------------------------------------------------------------
// header parsing

enum class IntKind { ok, negative, not_integer };

IntKind as_u64(simdjson::dom::element e, std::uint64_t& out) {
  switch (e.type()) {
    case simdjson::dom::element_type::INT64: {
      std::int64_t v = 0;
      if (e.get_int64().get(v)) return IntKind::not_integer;
      if (v < 0) return IntKind::negative;
      out = static_cast<std::uint64_t>(v);
      return IntKind::ok;
    }
    case simdjson::dom::element_type::UINT64:
      if (e.get_uint64().get(out)) return IntKind::not_integer;
      return IntKind::ok;
    default:
      return IntKind::not_integer;
  }
}

const char* type_word(simdjson::dom::element e) {
  switch (e.type()) {
    case simdjson::dom::element_type::ARRAY: return "an array";
    case simdjson::dom::element_type::OBJECT: return "an object";
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64: return "an integer";
    case simdjson::dom::element_type::DOUBLE: return "a non-integer number";
    case simdjson::dom::element_type::STRING: return "a string";
    case simdjson::dom::element_type::BOOL: return "a boolean";
    case simdjson::dom::element_type::NULL_VALUE: return "null";
  }
  return "a value";
}

Result<TensorInfo> parse_tensor(std::string_view origin, std::string_view name,
                                simdjson::dom::element value, std::uint64_t data_size) {
  const std::string who = "tensor " + qname(name);
  simdjson::dom::object entry;
  if (value.get(entry))
    return fail(Code::invalid_data, origin, "{}: entry is {}, not an object", who, type_word(value));

  simdjson::dom::element dtype_el, shape_el, offsets_el;
  bool have_dtype = false, have_shape = false, have_offsets = false;
  for (auto field : entry) {
    std::string_view key = field.key;
    bool* have = nullptr;
    simdjson::dom::element* slot = nullptr;
    if (key == "dtype") {
      have = &have_dtype, slot = &dtype_el;
    } else if (key == "shape") {
      have = &have_shape, slot = &shape_el;
    } else if (key == "data_offsets") {
      have = &have_offsets, slot = &offsets_el;
    } else {
      return fail(Code::invalid_data, origin,
                  "{}: unknown field {} (expected \"dtype\", \"shape\", \"data_offsets\")", who,
                  qname(key));
    }
    if (*have) return fail(Code::invalid_data, origin, "{}: field {} appears twice", who, qname(key));
    *have = true;
    *slot = field.value;
  }
  if (!have_dtype) return fail(Code::invalid_data, origin, "{}: missing \"dtype\"", who);
  if (!have_shape) return fail(Code::invalid_data, origin, "{}: missing \"shape\"", who);
  if (!have_offsets) return fail(Code::invalid_data, origin, "{}: missing \"data_offsets\"", who);

  TensorInfo info;
  info.name = std::string(name);

  // dtype
  std::string_view code;
  if (dtype_el.get(code))
    return fail(Code::invalid_data, origin, "{}: \"dtype\" is {}, not a string", who, type_word(dtype_el));
  auto dtype = dtype_from_code(code);
  if (!dtype) {
    bool known = std::find(std::begin(kUnsupportedCodes), std::end(kUnsupportedCodes), code) !=
                 std::end(kUnsupportedCodes);
    if (known)
      return fail(Code::unsupported, origin, "{}: unsupported dtype {} (kb reads {})", who,
                  qname(code), kSupportedList);
    return fail(Code::invalid_data, origin, "{}: unknown dtype {} (kb reads {})", who, qname(code),
                kSupportedList);
  }
  info.dtype = *dtype;

  // shape
  simdjson::dom::array shape_arr;
  if (shape_el.get(shape_arr))
    return fail(Code::invalid_data, origin, "{}: \"shape\" is {}, not an array", who, type_word(shape_el));
  for (auto d : shape_arr) {
    if (info.shape.size() >= limits::max_tensor_rank)
      return fail(Code::limit_exceeded, origin, "{}: shape has more than the limit of {} dimensions",
                  who, limits::max_tensor_rank);
    std::uint64_t u = 0;
    switch (as_u64(d, u)) {
      case IntKind::negative: {
        std::int64_t v = 0;
        if (d.get_int64().get(v)) v = -1;
        return fail(Code::invalid_data, origin, "{}: shape has negative dimension {}", who, v);
      }
      case IntKind::not_integer:
        return fail(Code::invalid_data, origin, "{}: shape holds {}, not a non-negative integer", who,
                    type_word(d));
      case IntKind::ok: break;
    }
    if (u > static_cast<std::uint64_t>(limits::max_tensor_elements))
      return fail(Code::limit_exceeded, origin, "{}: shape dimension {} exceeds the limit of {} elements",
                  who, u, limits::max_tensor_elements);
    info.shape.push_back(static_cast<std::int64_t>(u));
  }
  auto need = shape_bytes(origin, who, info.dtype, info.shape, Code::invalid_data);
  if (!need) return std::move(need).error();

  // data_offsets
  simdjson::dom::array off_arr;
  if (offsets_el.get(off_arr))
    return fail(Code::invalid_data, origin, "{}: \"data_offsets\" is {}, not an array", who,
                type_word(offsets_el));
  std::uint64_t off[2] = {0, 0};
  std::size_t count = 0;
  for (auto o : off_arr) {
    if (count >= 2) {
      count = 3;
      break;
    }
    if (as_u64(o, off[count]) != IntKind::ok)
      return fail(Code::invalid_data, origin, "{}: \"data_offsets\" holds {}, not a non-negative integer",
                  who, type_word(o));
    ++count;
  }
  if (count != 2)
    return fail(Code::invalid_data, origin, "{}: \"data_offsets\" must hold exactly two integers", who);
  info.begin = off[0];
  info.end = off[1];
  if (info.end < info.begin)
    return fail(Code::invalid_data, origin, "{}: data_offsets [{}, {}) end before they begin", who,
                info.begin, info.end);
  if (info.end > data_size)
    return fail(Code::invalid_data, origin,
                "{}: data_offsets [{}, {}) run past the end of the data buffer ({} bytes)", who,
                info.begin, info.end, data_size);
  if (info.end - info.begin != *need)
    return fail(Code::invalid_data, origin, "{}: data_offsets [{}, {}) hold {} bytes but shape {} of {} needs {}",
                who, info.begin, info.end, info.end - info.begin, shape_text(info.shape),
                dtype_name(info.dtype), *need);
  return info;
}

Result<std::vector<std::pair<std::string, std::string>>> parse_metadata(std::string_view origin,
                                                                         simdjson::dom::element value) {
  simdjson::dom::object obj;
  if (value.get(obj))
    return fail(Code::invalid_data, origin, "\"__metadata__\" is {}, not an object", type_word(value));
  std::vector<std::pair<std::string, std::string>> out;
  std::unordered_set<std::string_view> seen;
  for (auto field : obj) {
    std::string_view key = field.key;
    if (!seen.insert(key).second)
      return fail(Code::invalid_data, origin, "\"__metadata__\" has key {} twice", qname(key));
    std::string_view text;
    if (field.value.get(text))
      return fail(Code::invalid_data, origin, "\"__metadata__\" value of {} is {}, not a string",
                  qname(key), type_word(field.value));
    out.emplace_back(std::string(key), std::string(text));
  }
  return out;
}

// `json` must stay readable for n + SIMDJSON_PADDING bytes.
Result<Header> parse_header_json(std::string_view origin, const char* json, std::size_t n,
                                 std::uint64_t data_size) {
  simdjson::dom::parser parser;
  if (auto e = parser.allocate(std::max<std::size_t>(n, 64), limits::max_json_depth)) {
    if (e == simdjson::MEMALLOC) return fail(Code::out_of_memory, origin, "out of memory parsing the header");
    return fail(Code::internal, origin, "cannot prepare the JSON parser: {}", simdjson::error_message(e));
  }
  simdjson::dom::element root;
  if (auto e = parser.parse(json, n, false).get(root)) {
    if (e == simdjson::MEMALLOC) return fail(Code::out_of_memory, origin, "out of memory parsing the header");
    if (e == simdjson::DEPTH_ERROR)
      return fail(Code::limit_exceeded, origin, "header nests deeper than {} levels", limits::max_json_depth);
    return fail(Code::parse_error, origin, "header is not valid JSON: {}", simdjson::error_message(e));
  }
  simdjson::dom::object obj;
  if (root.get(obj))
    return fail(Code::invalid_data, origin, "header is {}, not a JSON object", type_word(root));

  Header header;
  header.data_size = data_size;
  std::unordered_set<std::string_view> seen;
  for (auto field : obj) {
    std::string_view key = field.key;
    if (!seen.insert(key).second) {
      if (key == kMetadataKey) return fail(Code::invalid_data, origin, "\"__metadata__\" appears twice");
      return fail(Code::invalid_data, origin, "tensor {} appears twice in the header", qname(key));
    }
    if (key == kMetadataKey) {
      auto meta = parse_metadata(origin, field.value);
      if (!meta) return std::move(meta).error();
      header.metadata = std::move(*meta);
      continue;
    }
    auto info = parse_tensor(origin, key, field.value, data_size);
    if (!info) return std::move(info).error();
    header.tensors.push_back(std::move(*info));
  }

  std::stable_sort(header.tensors.begin(), header.tensors.end(),
                   [](const TensorInfo& a, const TensorInfo& b) {
                     return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                   });
  std::uint64_t at = 0;
  const TensorInfo* prev = nullptr;
  for (const auto& t : header.tensors) {
    if (t.begin < at)
      return fail(Code::invalid_data, origin, "tensor {}: data_offsets [{}, {}) overlap tensor {} at [{}, {})",
                  qname(t.name), t.begin, t.end, qname(prev->name), prev->begin, prev->end);
    if (t.begin > at) {
      if (prev)
        return fail(Code::invalid_data, origin,
                    "tensor {}: data_offsets [{}, {}) leave bytes [{}, {}) after tensor {} unused "
                    "(the format forbids holes)",
                    qname(t.name), t.begin, t.end, at, t.begin, qname(prev->name));
      return fail(Code::invalid_data, origin,
                  "tensor {}: data_offsets [{}, {}) leave bytes [0, {}) at the start of the data "
                  "buffer unused (the format forbids holes)",
                  qname(t.name), t.begin, t.end, t.begin);
    }
    at = t.end;
    prev = &t;
  }
  if (at != data_size) {
    if (prev)
      return fail(Code::invalid_data, origin,
                  "data buffer holds {} bytes but the last tensor, {}, ends at {}: bytes [{}, {}) "
                  "belong to no tensor",
                  data_size, qname(prev->name), at, at, data_size);
    return fail(Code::invalid_data, origin, "data buffer holds {} bytes but the header lists no tensors",
                data_size);
  }
  return header;
}

std::uint64_t read_le64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Checks the header length N read from the first 8 bytes against the file size.
Result<std::uint64_t> header_length(std::string_view origin, std::uint64_t file_size,
                                    const unsigned char* prefix) {
  std::uint64_t n = read_le64(prefix);
  if (n > limits::max_safetensors_header_bytes)
    return fail(Code::limit_exceeded, origin, "header length {} exceeds the limit of {} bytes", n,
                limits::max_safetensors_header_bytes);
  if (n > file_size - 8)
    return fail(Code::invalid_data, origin,
                "header length {} runs past the end of the file ({} bytes after the length field)", n,
                file_size - 8);
  return n;
}

Error too_short(std::string_view origin, std::uint64_t size) {
  return fail(Code::invalid_data, origin,
              "file is {} bytes, too short to hold the 8-byte header length", size);
}

// A buffer of n bytes plus simdjson's padding, zeroed.
std::unique_ptr<char[]> padded_buffer(std::size_t n) {
  std::unique_ptr<char[]> p(new (std::nothrow) char[n + simdjson::SIMDJSON_PADDING]);
  if (p) std::memset(p.get(), 0, n + simdjson::SIMDJSON_PADDING);
  return p;
}

Result<Header> header_from_memory(std::span<const std::byte> bytes, std::string_view origin) {
  if (bytes.size() < 8) return too_short(origin, bytes.size());
  auto prefix = reinterpret_cast<const unsigned char*>(bytes.data());
  auto n = header_length(origin, bytes.size(), prefix);
  if (!n) return std::move(n).error();
  auto buf = padded_buffer(*n);
  if (!buf) return fail(Code::out_of_memory, origin, "out of memory reading the header");
  std::memcpy(buf.get(), bytes.data() + 8, *n);
  auto header = parse_header_json(origin, buf.get(), *n, bytes.size() - 8 - *n);
  if (!header) return header;
  header->data_offset = 8 + *n;
  return header;
}

// ---------------------------------------------------------------------------
// file input

struct Fd {
  int fd = -1;
  Fd() = default;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// pread until n bytes or EOF; returns bytes read, or -1 with errno set.
long long read_at(int fd, void* dst, std::size_t n, std::uint64_t offset) {
  auto* p = static_cast<char*>(dst);
  std::size_t done = 0;
  while (done < n) {
    std::size_t chunk = std::min<std::size_t>(n - done, std::size_t{1} << 30);
    ssize_t r = ::pread(fd, p + done, chunk, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) break;
    done += static_cast<std::size_t>(r);
  }
  return static_cast<long long>(done);
}

Status read_exact(const std::string& path, int fd, void* dst, std::size_t n, std::uint64_t offset) {
  long long got = read_at(fd, dst, n, offset);
  if (got < 0) return io_fail(path, "read", errno);
  if (static_cast<std::size_t>(got) != n)
    return fail(Code::io_error, path, "cannot read: file ended at byte {} (it changed while being read?)",
                offset + static_cast<std::uint64_t>(got));
  return ok_status();
}

Result<std::uint64_t> open_file(const std::string& path, Fd& fd) {
  // O_NONBLOCK: opening a FIFO returns at once (and is refused below) instead
  // of waiting for a writer; reads of a regular file are unaffected.
  do {
    fd.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  } while (fd.fd < 0 && errno == EINTR);
  if (fd.fd < 0) return io_fail(path, "open", errno);
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) return io_fail(path, "stat", errno);
  if (S_ISDIR(st.st_mode)) return io_fail(path, "read", EISDIR);
  if (!S_ISREG(st.st_mode)) return fail(Code::io_error, path, "cannot read: not a regular file");
  return static_cast<std::uint64_t>(st.st_size);
}

Result<Header> header_from_fd(const std::string& path, int fd, std::uint64_t size) {
  if (size < 8) return too_short(path, size);
  unsigned char prefix[8];
  KB_TRY(read_exact(path, fd, prefix, 8, 0));
  auto n = header_length(path, size, prefix);
  if (!n) return std::move(n).error();
  auto buf = padded_buffer(*n);
  if (!buf) return fail(Code::out_of_memory, path, "out of memory reading the header");
  KB_TRY(read_exact(path, fd, buf.get(), *n, 8));
  auto header = parse_header_json(path, buf.get(), *n, size - 8 - *n);
  if (!header) return header;
  header->data_offset = 8 + *n;
  return header;
}

// ---------------------------------------------------------------------------
// writer

struct Prepared {
  std::string header;  // padded JSON
  std::uint64_t data_bytes = 0;
};

bool valid_utf8(std::string_view s) { return simdjson::validate_utf8(s.data(), s.size()); }

Result<Prepared> prepare(std::string_view origin, std::span<const TensorView> tensors,
                         const std::vector<std::pair<std::string, std::string>>& metadata) {
  Prepared out;
  std::string& h = out.header;
  h += '{';
  if (!metadata.empty()) {
    std::unordered_set<std::string_view> keys;
    h += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!valid_utf8(k))
        return fail(Code::invalid_argument, origin, "metadata key {} is not valid UTF-8", qname(k));
      if (!valid_utf8(v))
        return fail(Code::invalid_argument, origin, "metadata value of {} is not valid UTF-8", qname(k));
      if (!keys.insert(k).second)
        return fail(Code::invalid_argument, origin, "metadata key {} given twice", qname(k));
      if (!first) h += ',';
      first = false;
      h += '"';
      append_json_escaped(h, k);
      h += "\":\"";
      append_json_escaped(h, v);
      h += '"';
    }
    h += '}';
  }
  std::unordered_set<std::string_view> names;
  std::uint64_t offset = 0;
  bool first = metadata.empty();
  for (const auto& t : tensors) {
    const std::string who = "tensor " + qname(t.name);
    if (!valid_utf8(t.name))
      return fail(Code::invalid_argument, origin, "{}: name is not valid UTF-8", who);
    if (t.name == kMetadataKey)
      return fail(Code::invalid_argument, origin, "{}: the name is reserved for metadata", who);
    if (!names.insert(t.name).second)
      return fail(Code::invalid_argument, origin, "{}: name given twice", who);
    if (!valid_dtype(t.dtype))
      return fail(Code::invalid_argument, origin, "{}: invalid dtype value {}", who,
                  static_cast<unsigned>(t.dtype));
    auto need = shape_bytes(origin, who, t.dtype, t.shape, Code::invalid_argument);
    if (!need) return std::move(need).error();
    if (t.bytes.size() != *need)
      return fail(Code::invalid_argument, origin, "{}: {} bytes given but shape {} of {} needs {}", who,
                  t.bytes.size(), shape_text(t.shape), dtype_name(t.dtype), *need);
    if (!first) h += ',';
    first = false;
    h += '"';
    append_json_escaped(h, t.name);
    fmt::format_to(std::back_inserter(h), "\":{{\"dtype\":\"{}\",\"shape\":[", dtype_code(t.dtype));
    for (std::size_t i = 0; i < t.shape.size(); ++i) {
      if (i) h += ',';
      fmt::format_to(std::back_inserter(h), "{}", t.shape[i]);
    }
    fmt::format_to(std::back_inserter(h), "],\"data_offsets\":[{},{}]}}", offset, offset + *need);
    offset += *need;
  }
  h += '}';
  h.append((8 - h.size() % 8) % 8, ' ');
  if (h.size() > limits::max_safetensors_header_bytes)
    return fail(Code::limit_exceeded, origin, "header would be {} bytes, above the limit of {}", h.size(),
                limits::max_safetensors_header_bytes);
  out.data_bytes = offset;
  return out;
}

void le64(std::uint64_t v, unsigned char* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}

Status write_all(const std::string& path, int fd, const void* src, std::size_t n) {
  auto* p = static_cast<const char*>(src);
  while (n > 0) {
    std::size_t chunk = std::min<std::size_t>(n, std::size_t{1} << 30);
    ssize_t w = ::write(fd, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      return io_fail(path, "write", errno);
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return ok_status();
}

Status write_impl(const std::string& path, std::span<const TensorView> tensors,
                  const std::vector<std::pair<std::string, std::string>>& metadata) {
  auto prep = prepare(path, tensors, metadata);
  if (!prep) return std::move(prep).error();
  int fd = -1;
  do {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return io_fail(path, "create", errno);
  auto body = [&]() -> Status {
    unsigned char len[8];
    le64(prep->header.size(), len);
    KB_TRY(write_all(path, fd, len, 8));
    KB_TRY(write_all(path, fd, prep->header.data(), prep->header.size()));
    for (const auto& t : tensors)
      if (!t.bytes.empty()) KB_TRY(write_all(path, fd, t.bytes.data(), t.bytes.size()));
    return ok_status();
  };
  Status st = body();
  if (::close(fd) != 0 && st.ok()) st = io_fail(path, "close", errno);
  if (!st.ok()) ::unlink(path.c_str());
  return st;
}

}  // namespace

// ---------------------------------------------------------------------------
// public API

std::string_view dtype_code(DType t) noexcept {
  return valid_dtype(t) ? kCodes[static_cast<unsigned>(t)].code : std::string_view("?");
}

std::optional<DType> dtype_from_code(std::string_view code) noexcept {
  for (const auto& row : kCodes)
    if (row.code == code) return row.type;
  return std::nullopt;
}

std::uint64_t storage_bytes(DType t, std::uint64_t elements) noexcept {
  if (t == DType::float4_e2m1) return (elements + 1) / 2;
  return elements * static_cast<std::uint64_t>(dtype_bits(t) / 8);
}

const TensorInfo* Header::find(std::string_view name) const noexcept {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::span<const std::byte> File::bytes(const TensorInfo& info) const noexcept {
  if (info.begin > info.end || info.end > data.size()) return {};
  return {data.data() + info.begin, static_cast<std::size_t>(info.end - info.begin)};
}

Result<Header> read_header(const std::string& path) {
  return guarded(path, [&]() -> Result<Header> {
    Fd fd;
    auto size = open_file(path, fd);
    if (!size) return std::move(size).error();
    return header_from_fd(path, fd.fd, *size);
  });
}

Result<File> read_file(const std::string& path) {
  return guarded(path, [&]() -> Result<File> {
    Fd fd;
    auto size = open_file(path, fd);
    if (!size) return std::move(size).error();
    auto header = header_from_fd(path, fd.fd, *size);
    if (!header) return std::move(header).error();
    File file;
    file.header = std::move(*header);
    // data_size was checked against the real file size above.
    file.data.resize(static_cast<std::size_t>(file.header.data_size));
    KB_TRY(read_exact(path, fd.fd, file.data.data(), file.data.size(), file.header.data_offset));
    return file;
  });
}

Result<Header> parse_header(std::span<const std::byte> bytes, std::string_view origin) {
  return guarded(origin, [&]() -> Result<Header> { return header_from_memory(bytes, origin); });
}

Result<File> parse(std::span<const std::byte> bytes, std::string_view origin) {
  return guarded(origin, [&]() -> Result<File> {
    auto header = header_from_memory(bytes, origin);
    if (!header) return std::move(header).error();
    File file;
    file.header = std::move(*header);
    auto data = bytes.subspan(static_cast<std::size_t>(file.header.data_offset));
    file.data.assign(data.begin(), data.end());
    return file;
  });
}

Result<std::vector<std::byte>> serialize(std::span<const TensorView> tensors,
                                         const std::vector<std::pair<std::string, std::string>>& metadata) {
  constexpr std::string_view origin = "safetensors writer";
  return guarded(origin, [&]() -> Result<std::vector<std::byte>> {
    auto prep = prepare(origin, tensors, metadata);
    if (!prep) return std::move(prep).error();
    std::vector<std::byte> out;
    out.reserve(8 + prep->header.size() + static_cast<std::size_t>(prep->data_bytes));
    unsigned char len[8];
    le64(prep->header.size(), len);
    for (unsigned char c : len) out.push_back(static_cast<std::byte>(c));
    for (char c : prep->header) out.push_back(static_cast<std::byte>(c));
    for (const auto& t : tensors) out.insert(out.end(), t.bytes.begin(), t.bytes.end());
    return out;
  });
}

Status write_file(const std::string& path, std::span<const TensorView> tensors,
                  const std::vector<std::pair<std::string, std::string>>& metadata) {
  return guarded(path, [&]() -> Status { return write_impl(path, tensors, metadata); });
}

}  // namespace kb::safetensors
