// GPU anti-gaming shared by kb's in-process CUDA evaluation (harness/gpu_eval.cpp)
// and kb-worker (outside CUDA solutions):
//  - other-stream detection: the solution is called on a stream held shut by a
//    gate kernel; its outputs (poisoned) are then read on a separate
//    non-blocking stream. If they changed while kb's stream was still held,
//    the work ran on another stream (and would escape kb's timing). The gate
//    gives up after ~2 s on its own, so nothing here can hang; a gate that
//    expired before the probe makes the check inconclusive, never a verdict;
//  - the tensor-core ceiling: a measured bf16 MMA rate (mma.sync), next to
//    measure_ceilings()' copy bandwidth;
//  - plausibility (plausible.hpp) of achieved bytes/s and FLOP/s against them.
// No CUDA types here: CPU-only code may include it (CUDA builds define it).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.hpp"

namespace kb::cuda {

enum class StreamVerdict { same_stream, other_stream, inconclusive };

struct StreamCheck {
  StreamVerdict verdict = StreamVerdict::same_stream;
  std::string detail;  // one line for the log
};

// `launch(stream)` enqueues the solution's work on `stream` without
// synchronizing. `outputs` are (device pointer, bytes) of its outputs, every
// byte already 0xFF. Returns after the work finished (the gate opened and the
// stream synchronized); the error is launch's or a CUDA error.
Result<StreamCheck> check_stream_discipline(const std::function<Status(void* stream)>& launch,
                                            const std::vector<std::pair<void*, std::size_t>>& outputs, void* stream);

// Dense bf16 tensor-core FLOP/s of this device through mma.sync (wmma), in
// TFLOP/s, of the current device, measured once per device per process with time_gpu. 0 when it cannot be measured.
double measured_mma_tflops(void* stream);

}  // namespace kb::cuda
