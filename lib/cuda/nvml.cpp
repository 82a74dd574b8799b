#include "cuda/nvml.hpp"

#include <dlfcn.h>

#include <mutex>

namespace kb::cuda {
namespace {

// The few NVML entry points kb needs; types as the NVML API defines them.
using nvmlReturn = int;
using nvmlDevice = void*;
constexpr int kClockSM = 1;  // NVML_CLOCK_SM

struct Nvml {
  nvmlReturn (*init)() = nullptr;
  nvmlReturn (*handle_by_index)(unsigned, nvmlDevice*) = nullptr;
  nvmlReturn (*clock_info)(nvmlDevice, int, unsigned*) = nullptr;
  nvmlReturn (*max_clock_info)(nvmlDevice, int, unsigned*) = nullptr;
  bool ok = false;
};

const Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!h) return;
    n.init = reinterpret_cast<nvmlReturn (*)()>(dlsym(h, "nvmlInit_v2"));
    n.handle_by_index = reinterpret_cast<nvmlReturn (*)(unsigned, nvmlDevice*)>(dlsym(h, "nvmlDeviceGetHandleByIndex_v2"));
    n.clock_info = reinterpret_cast<nvmlReturn (*)(nvmlDevice, int, unsigned*)>(dlsym(h, "nvmlDeviceGetClockInfo"));
    n.max_clock_info = reinterpret_cast<nvmlReturn (*)(nvmlDevice, int, unsigned*)>(dlsym(h, "nvmlDeviceGetMaxClockInfo"));
    n.ok = n.init && n.handle_by_index && n.clock_info && n.max_clock_info && n.init() == 0;
  });
  return n;
}

unsigned read(int device, bool max) {
  const Nvml& n = nvml();
  if (!n.ok) return 0;
  nvmlDevice d = nullptr;
  if (n.handle_by_index(static_cast<unsigned>(device), &d) != 0) return 0;
  unsigned mhz = 0;
  if ((max ? n.max_clock_info : n.clock_info)(d, kClockSM, &mhz) != 0) return 0;
  return mhz;
}

}  // namespace

unsigned sm_clock_mhz(int device) { return read(device, false); }
unsigned max_sm_clock_mhz(int device) { return read(device, true); }

}  // namespace kb::cuda
