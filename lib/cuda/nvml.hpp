// SM clock readings through NVML, opened at run time (libnvidia-ml ships with
// the driver; kb does not link it). Everything answers 0 when NVML is absent.
#pragma once

namespace kb::cuda {
unsigned sm_clock_mhz(int device);
unsigned max_sm_clock_mhz(int device);
}  // namespace kb::cuda
