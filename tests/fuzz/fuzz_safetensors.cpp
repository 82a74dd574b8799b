// libFuzzer target: the safetensors reader on arbitrary bytes. Anything may be
// rejected; nothing may crash, leak, read out of bounds or throw. Accepted
// files must also satisfy the invariants the reader promises.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "safetensors/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace st = kb::safetensors;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto file = st::parse(bytes, "fuzz.safetensors");
  auto header = st::parse_header(bytes, "fuzz.safetensors");
  if (file.ok() != header.ok()) std::abort();
  if (!file.ok()) {
    if (file.error().message != header.error().message) std::abort();
    return 0;
  }
  const auto& h = file->header;
  if (h.data_offset + h.data_size != size || file->data.size() != h.data_size) std::abort();
  // Tensors tile the data buffer in order.
  std::uint64_t at = 0;
  std::vector<st::TensorView> views;
  for (const auto& t : h.tensors) {
    if (t.begin != at || t.end < t.begin) std::abort();
    at = t.end;
    if (file->bytes(t).size() != t.end - t.begin) std::abort();
    if (h.find(t.name) == nullptr) std::abort();
    views.push_back({t.name, t.dtype, t.shape, file->bytes(t)});
  }
  if (at != h.data_size) std::abort();
  // What was read can be written, and reads back the same.
  auto blob = st::serialize(views, h.metadata);
  if (!blob.ok()) std::abort();
  auto again = st::parse(*blob, "fuzz.roundtrip");
  if (!again.ok() || again->data != file->data || again->header.metadata != h.metadata ||
      again->header.tensors.size() != h.tensors.size())
    std::abort();
  for (std::size_t i = 0; i < h.tensors.size(); ++i) {
    const auto& a = h.tensors[i];
    const auto& b = again->header.tensors[i];
    if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape || a.begin != b.begin ||
        a.end != b.end)
      std::abort();
  }
  return 0;
}
