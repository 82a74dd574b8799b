// CUDA device discovery through lib/cuda (safe on machines without a GPU and
// in builds without CUDA), and kb_cuda_gemm's race file (a process default,
// common/tuning.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "capi.hpp"
#include "cuda/device.hpp"
#include "common/tuning.hpp"

using kb::capi::fail;

extern "C" {

KB_API kb_status kb_cuda_device_count(int* out) {
  KB_CAPI_REQUIRE(out);
  *out = 0;
  return kb::capi::guarded(__func__, [&] {
    auto n = kb::cuda::device_count();
    if (!n) return fail(n.error());
    *out = *n;
    return KB_OK;
  });
}

KB_API kb_status kb_cuda_device_get(int ordinal, kb_cuda_device_info* out) {
  KB_CAPI_REQUIRE(out);
  // Version 1 of the struct ended at l2_bytes; pci_bus_id is written only when the caller's has it.
  constexpr std::size_t v1_size = offsetof(kb_cuda_device_info, l2_bytes) + sizeof(std::uint64_t);
  if (out->struct_size < v1_size)
    return kb::capi::short_struct(__func__, "out", out->struct_size, v1_size, "KB_CUDA_DEVICE_INFO_INIT");
  return kb::capi::guarded(__func__, [&] {
    auto info = kb::cuda::device_info(ordinal);
    if (!info) return fail(info.error());
    std::size_t n = std::min(info->name.size(), sizeof(out->name) - 1);
    std::memcpy(out->name, info->name.data(), n);
    out->name[n] = '\0';
    out->sm_count = info->sm_count;
    out->compute_major = info->compute_major;
    out->compute_minor = info->compute_minor;
    out->memory_bytes = info->memory_bytes;
    out->l2_bytes = info->l2_bytes;
    if (out->struct_size >= offsetof(kb_cuda_device_info, pci_bus_id) + sizeof(out->pci_bus_id)) {
      const std::size_t b = std::min(info->pci_bus_id.size(), sizeof(out->pci_bus_id) - 1);
      std::memcpy(out->pci_bus_id, info->pci_bus_id.data(), b);
      out->pci_bus_id[b] = '\0';
    }
    return KB_OK;
  });
}

KB_API kb_status kb_gemm_race_file_set(const char* path) {
  return kb::capi::guarded(__func__, [&] {
    kb::tuning::Settings s = kb::tuning::process_default();
    s.gemm_race_file = path ? path : "";
    kb::tuning::set_process_default(s);
    return KB_OK;
  });
}

}  // extern "C"
