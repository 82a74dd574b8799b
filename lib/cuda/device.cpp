#include "cuda/device.hpp"

#include <fmt/format.h>

#if KB_HAVE_CUDA
#include <dlfcn.h>
#include <cuda_runtime_api.h>
#endif

namespace kb::cuda {

#if KB_HAVE_CUDA

namespace {
std::string version_text(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }
}  // namespace

bool built_with_cuda() noexcept { return true; }

Result<int> device_count() {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    // No driver, no device, or a driver older than the runtime: all mean
    // "this process cannot use a GPU"; say which.
    return make_error(Code::no_cuda_device, fmt::format("no CUDA device: {} ({})", cudaGetErrorString(err),
                                                        cudaGetErrorName(err)));
  }
  if (n == 0) return make_error(Code::no_cuda_device, "no CUDA device: the driver reports 0 devices");
  return n;
}

Result<DeviceInfo> device_info(int ordinal) {
  auto n = device_count();
  if (!n) return n.error();
  if (ordinal < 0 || ordinal >= *n)
    return make_error(Code::invalid_argument, fmt::format("device {} does not exist ({} present)", ordinal, *n));
  cudaDeviceProp p{};
  cudaError_t err = cudaGetDeviceProperties(&p, ordinal);
  if (err != cudaSuccess)
    return make_error(Code::cuda_error, fmt::format("cudaGetDeviceProperties({}): {}", ordinal, cudaGetErrorString(err)));
  DeviceInfo info;
  info.ordinal = ordinal;
  info.name = p.name;
  info.sm_count = p.multiProcessorCount;
  info.compute_major = p.major;
  info.compute_minor = p.minor;
  info.memory_bytes = p.totalGlobalMem;
  info.l2_bytes = static_cast<std::size_t>(p.l2CacheSize);
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal) == cudaSuccess) info.pci_bus_id = bus;
  return info;
}

Result<int> current_device() {
  if (auto n = device_count(); !n) return n.error();
  int d = 0;
  if (cudaError_t err = cudaGetDevice(&d); err != cudaSuccess)
    return make_error(Code::cuda_error, fmt::format("cudaGetDevice: {}", cudaGetErrorString(err)));
  return d;
}

Status select_device(int ordinal) {
  auto n = device_count();
  if (!n) return n.error();
  if (ordinal < 0 || ordinal >= *n)
    return make_error(Code::invalid_argument, fmt::format("CUDA device {} does not exist ({} present: 0..{})", ordinal,
                                                          *n, *n - 1));
  if (cudaError_t err = cudaSetDevice(ordinal); err != cudaSuccess)
    return make_error(Code::cuda_error, fmt::format("cudaSetDevice({}): {}", ordinal, cudaGetErrorString(err)));
  return ok_status();
}

std::vector<std::pair<std::string, std::string>> library_versions() {
  std::vector<std::pair<std::string, std::string>> out;
  int v = 0;
  if (cudaRuntimeGetVersion(&v) == cudaSuccess) out.emplace_back("cuda_runtime", version_text(v));
  if (cudaDriverGetVersion(&v) == cudaSuccess && v > 0) out.emplace_back("cuda_driver", version_text(v));
  // cuBLASLt is opened at run time (not linked) so libkb loads without it.
  for (const char* name : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}) {
    void* h = dlopen(name, RTLD_LAZY | RTLD_LOCAL);
    if (!h) continue;
    using GetVersion = std::size_t (*)();
    if (auto fn = reinterpret_cast<GetVersion>(dlsym(h, "cublasLtGetVersion"))) {
      std::size_t lt = fn();
      out.emplace_back("cublasLt", fmt::format("{}.{}.{}", lt / 10000, (lt % 10000) / 100, lt % 100));
    }
    dlclose(h);
    break;
  }
  return out;
}

#else  // built without CUDA

bool built_with_cuda() noexcept { return false; }

Result<int> device_count() {
  return make_error(Code::unsupported, "kb was built without CUDA (meson option -Dcuda=enabled)");
}

Result<DeviceInfo> device_info(int) { return device_count().error(); }
Result<int> current_device() { return device_count().error(); }
Status select_device(int) { return device_count().error(); }

std::vector<std::pair<std::string, std::string>> library_versions() { return {}; }

#endif

Result<DeviceInfo> current_device_info() {
  auto current = current_device();
  if (!current) return current.error();
  return device_info(*current);
}

Result<int> parse_cuda_device(const std::string& text) {
  if (text == "cuda") return -1;
  const std::string digits = text.rfind("cuda:", 0) == 0 ? text.substr(5) : std::string();
  bool ok = !digits.empty() && digits.size() <= 6;
  for (char c : digits) ok = ok && c >= '0' && c <= '9';
  if (!ok)
    return make_error(Code::invalid_argument,
                      fmt::format("\"{}\" is not a CUDA device (expected cuda or cuda:N, N a device ordinal)", text));
  return std::stoi(digits);
}

}  // namespace kb::cuda
