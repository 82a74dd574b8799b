// SM clock readings through NVML, opened at run time (libnvidia-ml ships with
// the driver; kb does not link it). Everything answers 0 when NVML is absent.
//
// `device` is a CUDA ordinal. NVML numbers GPUs its own way (PCI order, all
// of them), CUDA after CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, so the
// NVML device is found by the CUDA device's PCI bus id, never by index.
#pragma once

#include <string>

namespace kb::cuda {
unsigned sm_clock_mhz(int device);
unsigned max_sm_clock_mhz(int device);
// Why the clocks are where they are now: NVML's clock event ("throttle")
// reason bits, 0 when NVML cannot say. The names, comma-separated
// ("sw_power_cap, hw_slowdown"); "" for 0.
unsigned clock_event_reasons(int device);
std::string clock_event_reason_names(unsigned reasons);
// NVML's index of CUDA device `device` (what nvidia-smi shows), or -1 when
// NVML or the device is not there.
int nvml_index(int device);
}  // namespace kb::cuda
