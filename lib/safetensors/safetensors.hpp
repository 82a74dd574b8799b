// safetensors reader and writer.
//
// Layout: an 8-byte little-endian uint64 N, then N bytes of UTF-8 JSON (the
// header), then the data buffer. The header is an object mapping each tensor
// name to {"dtype", "shape", "data_offsets": [begin, end)} (offsets relative
// to the data buffer) plus an optional "__metadata__" object of strings.
//
// The reader is strict: every tensor's byte span must match its shape and
// dtype exactly, spans may not overlap, and together they must cover the data
// buffer with no holes and nothing after the last tensor (as the reference
// implementation requires). Every error message starts with the origin (file
// path) and names the tensor it is about. Nothing here throws or prints.
//
// Dtype codes (the reference implementation's spelling):
//   F32 F16 BF16 F8_E4M3 (float8_e4m3fn) F8_E5M2 F4 (float4_e2m1, two a byte)
//   I64 I32 I16 I8 BOOL
// Other codes of the format (U8, F64, F8_E8M0, ...) are reported as
// unsupported. float4 tensors need an even element count: the format has no
// padding for a half-filled last byte, and the reference reader rejects one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "schema/dtype.hpp"

namespace kb::safetensors {

struct TensorInfo {
  std::string name;
  DType dtype = DType::float32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // offsets into the data buffer, end exclusive
  std::uint64_t end = 0;

  std::uint64_t byte_size() const noexcept { return end - begin; }
};

struct Header {
  // In file order of data_offsets (ties between empty tensors keep the
  // header's order).
  std::vector<TensorInfo> tensors;
  // "__metadata__" entries in header order.
  std::vector<std::pair<std::string, std::string>> metadata;
  std::uint64_t data_offset = 0;  // 8 + N: where the data buffer starts in the file
  std::uint64_t data_size = 0;    // bytes in the data buffer

  // Linear search by name; nullptr when absent.
  const TensorInfo* find(std::string_view name) const noexcept;
};

struct File {
  Header header;
  std::vector<std::byte> data;  // the data buffer

  // The tensor's bytes within `data` (empty if `info` does not fit in it).
  std::span<const std::byte> bytes(const TensorInfo& info) const noexcept;
};

// The format's dtype code ("F32", "F8_E4M3", "F4", ...).
std::string_view dtype_code(DType t) noexcept;
// The kb dtype for a code; nullopt for codes kb does not support or unknown text.
std::optional<DType> dtype_from_code(std::string_view code) noexcept;
// Bytes a tensor of `elements` elements occupies (float4: elements / 2).
std::uint64_t storage_bytes(DType t, std::uint64_t elements) noexcept;

// Reads and validates only the header (reads 8 + N bytes of the file).
Result<Header> read_header(const std::string& path);
// Reads and validates the whole file.
Result<File> read_file(const std::string& path);
// Parses a whole file image held in memory; `origin` prefixes messages.
Result<File> parse(std::span<const std::byte> bytes, std::string_view origin);
// Validates the header of a file image in memory (data buffer not copied).
Result<Header> parse_header(std::span<const std::byte> bytes, std::string_view origin);

struct TensorView {
  std::string_view name;
  DType dtype = DType::float32;
  std::span<const std::int64_t> shape;
  std::span<const std::byte> bytes;
};

// Serializes tensors (in the order given) and metadata (omitted when empty).
// The header is compact JSON padded with spaces to a multiple of 8 bytes.
// Rejects (Code::invalid_argument / Code::limit_exceeded) duplicate names, the
// name "__metadata__", names or metadata that are not valid UTF-8, duplicate
// metadata keys, bad shapes, and byte spans whose size differs from
// shape * dtype size.
Result<std::vector<std::byte>> serialize(
    std::span<const TensorView> tensors,
    const std::vector<std::pair<std::string, std::string>>& metadata = {});
// Same bytes as serialize(), written to `path` (replaced if it exists).
Status write_file(const std::string& path, std::span<const TensorView> tensors,
                  const std::vector<std::pair<std::string, std::string>>& metadata = {});

}  // namespace kb::safetensors
