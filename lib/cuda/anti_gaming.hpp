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
//  - plausibility (plausible.hpp) of achieved bytes/s and FLOP/s against them;
//  - TimedCallSample: the serial of each timed call, counted on the device
//    (fresh inputs are drawn from it), and the outputs of a few timed calls,
//    picked on the device by reservoir sampling, kept to be judged after
//    timing.
// No CUDA types here: CPU-only code may include it (CUDA builds define it).
#pragma once

#include <cstddef>
#include <cstdint>
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

// The timed calls of an untrusted solution, seen from the device. Each call
// is bracketed by begin() (before it, outside its events: the serial counter
// moves on, so fills that read serial() draw new values) and keep() (after
// its stop event: its outputs are copied into a slot when the reservoir draw
// picks this serial). Reservoir sampling (Vitter's algorithm R) over however
// many calls the adaptive timer makes: serial n <= slots goes to slot n - 1,
// a later one replaces slot j when a draw keyed by a secret gives j < slots
// out of n, so each call is kept with the same probability and the solution
// cannot tell which ones will be judged. Everything is decided on the device
// from the counter, so a CUDA graph that replays begin/keep nodes samples
// correctly. Not thread-safe; one per evaluation.
class TimedCallSample {
 public:
  struct Kept {
    std::uint64_t serial = 0;  // 0: the slot was never filled (fewer calls than slots)
    int set = -1;              // the input set the call ran on
  };
  // `slots` kept calls (1..64), each holding every output (`output_bytes`,
  // the same for every set) of a call on one of `sets` input sets.
  static Result<TimedCallSample> create(std::size_t slots, std::vector<std::size_t> output_bytes, std::size_t sets,
                                        std::uint64_t secret);
  TimedCallSample() = default;
  TimedCallSample(TimedCallSample&& o) noexcept;
  TimedCallSample& operator=(TimedCallSample&& o) noexcept;
  TimedCallSample(const TimedCallSample&) = delete;
  TimedCallSample& operator=(const TimedCallSample&) = delete;
  ~TimedCallSample();

  // The device counter: the serial of the call begun last (0 before any).
  const unsigned long long* serial() const { return state_; }
  // Before a call on `set` (enqueued on `stream`): the serial moves on, and
  // is recorded as the set's last.
  Status begin(std::size_t set, void* stream);
  // After that call: `outputs` (device pointers, in output order, sizes as
  // created) copied into a slot if this serial is drawn.
  Status keep(std::size_t set, const std::vector<const void*>& outputs, void* stream);
  // After the calls (synchronizes `stream`): each slot's serial and set.
  Result<std::vector<Kept>> kept(void* stream) const;
  // Each set's last serial (0: no call ran on it), the draw its inputs hold.
  Result<std::vector<std::uint64_t>> last_serials(void* stream) const;
  // Output o of slot j on the device.
  const void* slot_output(std::size_t j, std::size_t o) const;
  std::size_t slots() const { return slots_; }

 private:
  void release();
  unsigned long long* state_ = nullptr;  // [serial, last serial of each set..., (serial, set) per slot...]
  unsigned char* data_ = nullptr;        // slots_ * slot_bytes_
  std::size_t slots_ = 0, sets_ = 0, slot_bytes_ = 0;
  std::vector<std::size_t> bytes_, offsets_;
  std::uint64_t secret_ = 0;
};

}  // namespace kb::cuda
