// The wire format between kb (the parent) and kb-worker, the process that
// runs outside solutions. Fixed-size, trivially copyable messages over a
// stream socket; tensor bytes never travel on the socket but live in one
// shared memory file (memfd) that both processes map.
//
//   parent                                   kb-worker <plugin.so>
//     spawn (fd 3: socket, fd 4: memfd,
//            fd 1/2: a pipe the parent drains)
//                                       <-   LoadReply + n SolutionDesc
//     RunRequest (argument layout)      ->
//                                       <-   RunReply
//   kOpRun: one call on the tensors at args[].offset.
//   kOpEvaluate: n_sets argument sets per pass (inputs and poisoned outputs,
//     written by the parent), set s of pass p at (p * n_sets + s) * set_stride
//     + args[].offset; pass 1's inputs may be other draws than pass 0's. The
//     worker calls the solution once per pass-0 set, optionally once more on
//     set 0 behind a stream gate (kFlagStreamCheck), writes pass 0 back; with
//     kFlagTime it times calls on pass 1 (CPU: one call per set; CUDA: poisoned
//     again, events, cold L2, rotating through the sets, lib/cuda/timing.hpp)
//     and writes pass 1 back. The parent judges both passes of every set.
//     With kFlagFreshInputs (CUDA), the inputs whose ArgDesc::fresh is set are
//     drawn again on the device before every timed call (the key fresh_key of
//     (ArgDesc::fresh_key, RunRequest::fresh_salt, the call's serial), counted
//     from 1 on the device), the outputs poisoned, and the outputs of
//     kept_slots calls picked at random on the device written to kept slot j
//     at (2 * n_sets + j) * set_stride + args[].offset; the reply names each
//     slot's serial and set. The parent judges those calls instead of pass 1's
//     outputs (which the worker still writes back, with the last draws).
//     ... (EOF on the socket: the worker exits)
//
// Nothing the worker sends is trusted: the parent checks every field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cuda/timing.hpp"

namespace kb::worker {

inline constexpr std::uint32_t kMagic = 0x6b62776bu;  // "kbwk"
inline constexpr std::uint32_t kProtocolVersion = 9;
inline constexpr int kControlFd = 3;  // in the worker
inline constexpr int kShmFd = 4;      // in the worker
inline constexpr std::size_t kMaxArgs = 64;
inline constexpr std::size_t kMaxRank = 16;
inline constexpr std::size_t kMaxSolutions = 4096;
inline constexpr std::size_t kMaxNameBytes = 128;
inline constexpr std::size_t kMessageBytes = 1024;
inline constexpr std::size_t kDescriptionBytes = 512;
// Guard bytes before and after every buffer in shared memory (and on the
// device for CUDA solutions), and the alignment of every buffer's first byte.
// 64 KiB catches the overruns a kernel plausibly makes (a tile or a row past
// the end); for CPU solutions the whole pages inside it are also unmapped for
// the call (worker_main.cpp: GuardPages).
inline constexpr std::size_t kGuardBytes = 64 * 1024;
inline constexpr std::size_t kAlign = 256;

// Load outcome codes (LoadReply::status); values mirror kb::Code where one fits.
enum LoadStatus : std::int32_t {
  kLoadOk = 0,
  kLoadNotFound = 5,     // dlopen failed or no entry symbol
  kLoadAbiMismatch = 11, // table abi_version differs, or the entry returned NULL
  kLoadInvalid = 3,      // malformed table
};

struct LoadReply {
  std::uint32_t magic;
  std::uint32_t protocol;
  std::int32_t status;  // LoadStatus
  std::uint32_t n_solutions;
  char message[kMessageBytes];
};

struct SolutionDesc {
  std::uint32_t device;  // kb_plugin_device
  std::uint32_t has_description;
  char definition[kMaxNameBytes + 1];
  char name[kMaxNameBytes + 1];
  char author[kMaxNameBytes + 1];
  char description[kDescriptionBytes];
};

enum ArgKind : std::uint32_t { kArgTensor = 0, kArgInt = 1, kArgFloat = 2, kArgBool = 3 };

struct ArgDesc {
  std::uint32_t kind;  // ArgKind
  std::uint8_t code, bits;
  std::uint16_t lanes;
  std::int32_t ndim;
  std::int32_t reserved;
  std::int64_t shape[kMaxRank];
  std::uint64_t offset;  // of the data in shared memory
  std::uint64_t nbytes;
  std::int64_t int_value;
  double float_value;
  // kFlagFreshInputs: this input is drawn again before every timed call, as
  // random::unit of dtype `fresh_dtype` (kb::DType) over fresh_numel elements.
  std::uint32_t fresh;
  std::uint32_t fresh_dtype;
  std::int64_t fresh_numel;
  std::uint64_t fresh_key;
};

enum Op : std::uint32_t { kOpRun = 1, kOpEvaluate = 2 };
// kFlagCupti (with kFlagTime): after the event timing, time the kernels alone
// from CUPTI's records in the worker (kb bench --cupti), cuda::time_kernels_cupti.
enum Flags : std::uint32_t { kFlagTime = 1, kFlagStreamCheck = 2, kFlagCupti = 4, kFlagFreshInputs = 8 };
inline constexpr std::size_t kMaxSets = 64;
inline constexpr std::size_t kMaxKept = 8;  // kept timed calls (kFlagFreshInputs)

struct RunRequest {
  std::uint32_t magic;
  std::uint32_t op;
  std::uint32_t solution;  // index into the table
  std::uint32_t n_inputs;
  std::uint32_t n_outputs;
  std::uint32_t n_sets;    // kOpEvaluate: 1..kMaxSets
  std::uint32_t flags;     // kOpEvaluate: Flags
  std::uint32_t reserved;
  std::uint64_t set_stride;  // kOpEvaluate: bytes between consecutive sets
  std::uint64_t shm_size;  // bytes of the memfd the worker must map
  ArgDesc args[kMaxArgs];  // inputs then outputs
  // kOpEvaluate with kFlagTime, CUDA: the timer's minimum warm-up calls and
  // samples (cuda::TimingOptions); 0: its defaults.
  std::uint32_t timing_warmup;
  std::uint32_t timing_min_samples;
  // kFlagFreshInputs: the evaluation's salt, and how many timed calls to keep (1..kMaxKept).
  std::uint64_t fresh_salt;
  std::uint32_t kept_slots;
  std::uint32_t reserved2;
};

enum RunStatus : std::int32_t {
  kRunOk = 0,
  kRunError = 1,        // the solution returned KB_PLUGIN_ERROR
  kRunUnsupported = 2,  // the solution declined the shapes
  kRunBadRequest = 3,   // the worker could not set up the call (kb's fault or limits)
  kRunDeviceFault = 4,  // a sticky CUDA error: the worker exits after replying
  kRunWrongShape = 5,   // the solution changed an output's ndim or shape (INCORRECT_SHAPE)
  kRunWrongDtype = 6,   // the solution changed an output's dtype (INCORRECT_DTYPE)
};

enum CuptiState : std::uint32_t { kCuptiNotAsked = 0, kCuptiMeasured = 1, kCuptiFailed = 2 };

enum StreamVerdict : std::int32_t { kStreamNotChecked = 0, kStreamSame = 1, kStreamOther = 2, kStreamInconclusive = 3 };

struct RunReply {
  std::uint32_t magic;
  std::int32_t status;  // RunStatus
  double call_ms;       // wall time of the solution's run function (device work synchronized)
  char message[kMessageBytes];
  // kOpEvaluate:
  std::int32_t failed_set;      // the set whose call failed, or -1
  std::int32_t stream_verdict;  // StreamVerdict
  // The worker and kb are built together, so the timers' own result structs
  // cross as they are.
  std::uint32_t timed;              // timing ran
  kb::cuda::TimingResult timing;    // CUDA: time_gpu's result; CPU: wall-clock median, min, max, samples
  kb::cuda::Ceilings ceilings;      // measured once per worker (CUDA), zero otherwise
  double mma_tflops;                // measured once per worker (CUDA)
  char detail[kMessageBytes];             // the stream check's and the timing's lines for the log
  // kFlagCupti: CUPTI's kernel time, or why not.
  std::uint32_t cupti;  // CuptiState
  kb::cuda::KernelTimingResult cupti_timing;  // kCuptiMeasured
  char cupti_error[kMessageBytes];            // kCuptiFailed: CUPTI's reason
  // CUDA solutions: the device the evaluation ran on (its ordinal and PCI bus
  // id), so kb can check the worker used the device it was told to.
  std::int32_t cuda_device;  // -1 for CPU solutions
  char pci_bus_id[32];
  // kFlagFreshInputs: each kept slot's call (serial 0: never filled) and its set.
  std::uint64_t kept_serial[kMaxKept];
  std::int32_t kept_set[kMaxKept];
  std::uint64_t fresh_calls;  // the serial of the last timed call: how many ran on fresh inputs
};

static_assert(std::is_trivially_copyable_v<kb::cuda::KernelTimingResult> &&
              std::is_trivially_copyable_v<kb::cuda::TimingResult> && std::is_trivially_copyable_v<kb::cuda::Ceilings>);
static_assert(std::is_trivially_copyable_v<LoadReply> && std::is_trivially_copyable_v<SolutionDesc> &&
              std::is_trivially_copyable_v<RunRequest> && std::is_trivially_copyable_v<RunReply>);

}  // namespace kb::worker
