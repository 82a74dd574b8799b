#include "cuda/nvml.hpp"

#include <dlfcn.h>

#include <mutex>

#if KB_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "cuda/per_device.hpp"

namespace kb::cuda {
namespace {

// The few NVML entry points kb needs; types as the NVML API defines them.
using nvmlReturn = int;
using nvmlDevice = void*;
constexpr int kClockSM = 1;  // NVML_CLOCK_SM

struct Nvml {
  nvmlReturn (*init)() = nullptr;
  nvmlReturn (*handle_by_pci_bus_id)(const char*, nvmlDevice*) = nullptr;
  nvmlReturn (*index)(nvmlDevice, unsigned*) = nullptr;
  nvmlReturn (*clock_info)(nvmlDevice, int, unsigned*) = nullptr;
  nvmlReturn (*max_clock_info)(nvmlDevice, int, unsigned*) = nullptr;
  nvmlReturn (*event_reasons)(nvmlDevice, unsigned long long*) = nullptr;  // optional
  bool ok = false;
};

const Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!h) return;
    n.init = reinterpret_cast<nvmlReturn (*)()>(dlsym(h, "nvmlInit_v2"));
    n.handle_by_pci_bus_id =
        reinterpret_cast<nvmlReturn (*)(const char*, nvmlDevice*)>(dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2"));
    n.index = reinterpret_cast<nvmlReturn (*)(nvmlDevice, unsigned*)>(dlsym(h, "nvmlDeviceGetIndex"));
    n.clock_info = reinterpret_cast<nvmlReturn (*)(nvmlDevice, int, unsigned*)>(dlsym(h, "nvmlDeviceGetClockInfo"));
    n.max_clock_info = reinterpret_cast<nvmlReturn (*)(nvmlDevice, int, unsigned*)>(dlsym(h, "nvmlDeviceGetMaxClockInfo"));
    // Renamed from "throttle" to "clocks event" reasons in newer drivers; same bits.
    n.event_reasons = reinterpret_cast<nvmlReturn (*)(nvmlDevice, unsigned long long*)>(
        dlsym(h, "nvmlDeviceGetCurrentClocksEventReasons"));
    if (!n.event_reasons)
      n.event_reasons = reinterpret_cast<nvmlReturn (*)(nvmlDevice, unsigned long long*)>(
          dlsym(h, "nvmlDeviceGetCurrentClocksThrottleReasons"));
    n.ok = n.init && n.handle_by_pci_bus_id && n.index && n.clock_info && n.max_clock_info && n.init() == 0;
  });
  return n;
}

// The NVML handle of CUDA device `device` (nullptr when there is none), looked
// up once by its PCI bus id.
nvmlDevice handle(int device) {
  const Nvml& n = nvml();
  if (!n.ok) return nullptr;
  static PerDevice<nvmlDevice> handles;
  return handles.get(device, [&] {
    nvmlDevice d = nullptr;
#if KB_HAVE_CUDA
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess || n.handle_by_pci_bus_id(bus, &d) != 0)
      d = nullptr;
#endif
    return d;
  });
}

unsigned read(int device, bool max) {
  const Nvml& n = nvml();
  nvmlDevice d = handle(device);
  if (!d) return 0;
  unsigned mhz = 0;
  if ((max ? n.max_clock_info : n.clock_info)(d, kClockSM, &mhz) != 0) return 0;
  return mhz;
}

}  // namespace

unsigned sm_clock_mhz(int device) { return read(device, false); }
unsigned max_sm_clock_mhz(int device) { return read(device, true); }

unsigned clock_event_reasons(int device) {
  const Nvml& n = nvml();
  nvmlDevice d = handle(device);
  unsigned long long bits = 0;
  if (!d || !n.event_reasons || n.event_reasons(d, &bits) != 0) return 0;
  return static_cast<unsigned>(bits);
}

std::string clock_event_reason_names(unsigned reasons) {
  // The bits as nvml.h defines them (nvmlClocksEventReason*).
  static constexpr struct {
    unsigned bit;
    const char* name;
  } kNames[] = {{0x1, "gpu_idle"},       {0x2, "applications_clocks"}, {0x4, "sw_power_cap"},
                {0x8, "hw_slowdown"},    {0x10, "sync_boost"},         {0x20, "sw_thermal"},
                {0x40, "hw_thermal"},    {0x80, "hw_power_brake"},     {0x100, "display_clocks"}};
  std::string out;
  for (const auto& n : kNames)
    if (reasons & n.bit) out += (out.empty() ? "" : ", ") + std::string(n.name);
  return out;
}

int nvml_index(int device) {
  nvmlDevice d = handle(device);
  unsigned i = 0;
  if (!d || nvml().index(d, &i) != 0) return -1;
  return static_cast<int>(i);
}

}  // namespace kb::cuda
