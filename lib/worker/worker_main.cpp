// kb-worker: the process that runs outside solutions for kb.
//
//   kb-worker PLUGIN.so     (started by kb with fd 3 = control socket, fd 4 = memfd)
//
// It dlopens the plugin, calls kb_plugin_entry_v1, checks the table and sends
// it to the parent, then serves RunRequests until the socket closes. The
// parent watches it: a crash or a hang here costs one evaluation, never kb.
// This program links nothing of kb but kb.h and the wire format, and in CUDA
// builds lib/cuda's timing and anti-gaming (the same code kb's in-process
// CUDA evaluation uses).
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#if KB_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda/anti_gaming.hpp"
#include "cuda/runtime.hpp"
#include "cuda/timing.hpp"
#include "inputs/device_fill.hpp"
#endif

#include "kb/kb.h"
#include "worker/protocol.hpp"

namespace {

using namespace kb::worker;

int g_cuda_device = -1;  // argv[2]: the CUDA device to run CUDA solutions on; -1: the CUDA default

bool write_all(int fd, const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// false on EOF or error.
bool read_all(int fd, void* p, std::size_t n) {
  char* c = static_cast<char*>(p);
  while (n) {
    ssize_t r = ::read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

void set_message(char* dst, std::size_t cap, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
void set_message(char* dst, std::size_t cap, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(dst, cap, fmt, ap);
  va_end(ap);
}

// Copies a plugin string into a fixed field; false when it is NULL, empty or too long.
bool copy_string(char* dst, std::size_t cap, const char* src) {
  if (!src) return false;
  std::size_t n = strnlen(src, cap);
  if (n == 0 || n >= cap) return false;
  std::memcpy(dst, src, n);
  dst[n] = '\0';
  return true;
}

bool name_ok(const char* s) {
  for (; *s; ++s) {
    char c = *s;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-';
    if (!ok) return false;
  }
  return true;
}

int fail_load(std::int32_t status, const char* msg) {
  LoadReply r{};
  r.magic = kMagic;
  r.protocol = kProtocolVersion;
  r.status = status;
  set_message(r.message, sizeof r.message, "%s", msg);
  write_all(kControlFd, &r, sizeof r);
  return 3;
}

struct Mapping {
  void* base = nullptr;
  std::size_t size = 0;
  bool ensure(std::size_t want) {
    if (want <= size) return true;
    if (base) ::munmap(base, size);
    base = nullptr;
    size = 0;
    void* p = ::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_SHARED, kShmFd, 0);
    if (p == MAP_FAILED) return false;
    base = p;
    size = want;
    return true;
  }
};


// An enum a plugin wrote (a table's device, an output's device type), read as
// the 32-bit integer it is: a plugin may store any value there, and loading
// one outside the enum's range as the enum is undefined behaviour.
template <class E>
std::int64_t plugin_enum(const E& e) {
  static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(std::int32_t));
  std::int32_t v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// One request's argument views: DLTensors over shared memory or device copies.
struct Views {
  std::vector<DLTensor> tensors = std::vector<DLTensor>(kMaxArgs);
  std::vector<std::vector<std::int64_t>> shapes = std::vector<std::vector<std::int64_t>>(kMaxArgs),
                                         strides = std::vector<std::vector<std::int64_t>>(kMaxArgs);
  std::vector<kb_plugin_arg> inputs = std::vector<kb_plugin_arg>(kMaxArgs);
  std::vector<void*> saved = std::vector<void*>(kMaxArgs);
  DLDevice device{kDLCPU, 0};  // where every tensor of the call is

  // data[i]: where tensor i's bytes are (device or host).
  void bind(const RunRequest& req, const std::vector<char*>& data, bool on_device) {
    std::size_t n = std::size_t{req.n_inputs} + req.n_outputs;
    device = on_device ? DLDevice{kDLCUDA, 0} : DLDevice{kDLCPU, 0};
    for (std::size_t i = 0; i < n; ++i) {
      const ArgDesc& a = req.args[i];
      DLTensor& t = tensors[i];
      t = DLTensor{};
      if (a.kind == kArgTensor) {
        shapes[i].assign(a.shape, a.shape + a.ndim);
        strides[i].assign(static_cast<std::size_t>(a.ndim), 1);
        for (int d = a.ndim - 2; d >= 0; --d) strides[i][d] = strides[i][d + 1] * shapes[i][d + 1];
        t.data = data[i];
        t.device = device;
        t.ndim = a.ndim;
        t.dtype.code = a.code;
        t.dtype.bits = a.bits;
        t.dtype.lanes = a.lanes;
        t.shape = shapes[i].data();
        t.strides = strides[i].data();
      }
      saved[i] = t.data;
    }
    for (std::size_t i = 0; i < req.n_inputs; ++i) {
      const ArgDesc& a = req.args[i];
      kb_plugin_arg& x = inputs[i];
      x = kb_plugin_arg{};
      x.kind = static_cast<kb_arg_kind>(a.kind);
      if (a.kind == kArgTensor) {
        x.tensor = &tensors[i];
      } else {
        x.int_value = a.int_value;
        x.float_value = a.kind == kArgFloat ? a.float_value : static_cast<double>(a.int_value);
      }
    }
  }
};

// Calls the solution on `v`; kRunOk or why not (in reply.message). The views
// are kb's: a solution that rewrote an output's shape, dtype or data pointer
// produced something other than what the definition asks for.
std::int32_t invoke(const kb_plugin_solution& sol, const RunRequest& req, Views& v, void* stream, RunReply& reply) {
  std::size_t n = std::size_t{req.n_inputs} + req.n_outputs;
  char message[kMessageBytes] = {0};
  kb_plugin_call call{};
  call.struct_size = sizeof call;
  call.definition = sol.definition;
  call.inputs = v.inputs.data();
  call.n_inputs = req.n_inputs;
  call.outputs = v.tensors.data() + req.n_inputs;
  call.n_outputs = req.n_outputs;
  call.stream = stream;
  call.user_data = sol.user_data;
  call.message = message;
  call.message_size = sizeof message;
  // The status as its integer (see plugin_enum): a plugin can return any 32-bit value.
  const kb_plugin_status returned = sol.run(&call);
  const std::int64_t st = plugin_enum(returned);
  const DLDevice given = v.device;
  for (std::size_t i = req.n_inputs; i < n; ++i) {
    const ArgDesc& a = req.args[i];
    const DLTensor& t = v.tensors[i];
    bool shape_same = t.ndim == a.ndim && t.shape == v.shapes[i].data();
    for (int d = 0; shape_same && d < a.ndim; ++d) shape_same = v.shapes[i][d] == a.shape[d];
    if (st != KB_PLUGIN_OK) break;
    if (!shape_same) {
      std::string got = "[";
      for (int d = 0; d < t.ndim && d < static_cast<int>(kMaxRank) && t.shape; ++d)
        got += (d ? ", " : "") + std::to_string(t.shape[d]);
      got += "]";
      std::string want = "[";
      for (int d = 0; d < a.ndim; ++d) want += (d ? ", " : "") + std::to_string(a.shape[d]);
      want += "]";
      set_message(reply.message, sizeof reply.message, "output #%zu: the solution changed its shape from %s to %s",
                  i - req.n_inputs, want.c_str(), got.c_str());
      return kRunWrongShape;
    }
    if (t.dtype.code != a.code || t.dtype.bits != a.bits || t.dtype.lanes != a.lanes) {
      set_message(reply.message, sizeof reply.message,
                  "output #%zu: the solution changed its dtype from {%u, %u, %u} to {%u, %u, %u}", i - req.n_inputs,
                  a.code, a.bits, a.lanes, t.dtype.code, t.dtype.bits, t.dtype.lanes);
      return kRunWrongDtype;
    }
    if (plugin_enum(t.device.device_type) != given.device_type || t.device.device_id != given.device_id) {
      set_message(reply.message, sizeof reply.message,
                  "output #%zu: the solution changed its device from {%d, %d} to {%lld, %d} (results must be written "
                  "in place)", i - req.n_inputs, static_cast<int>(given.device_type), given.device_id,
                  static_cast<long long>(plugin_enum(t.device.device_type)), t.device.device_id);
      return kRunError;
    }
    if (t.data != v.saved[i] || t.byte_offset != 0) {
      set_message(reply.message, sizeof reply.message,
                  "output #%zu: the solution replaced the data pointer kb gave it (results must be written in place)",
                  i - req.n_inputs);
      return kRunError;
    }
  }
  message[sizeof message - 1] = '\0';
  switch (st) {
    case KB_PLUGIN_OK: return kRunOk;
    case KB_PLUGIN_UNSUPPORTED:
      set_message(reply.message, sizeof reply.message, "%s", message[0] ? message : "declined these shapes");
      return kRunUnsupported;
    case KB_PLUGIN_ERROR:
      set_message(reply.message, sizeof reply.message, "%s", message[0] ? message : "failed (no message)");
      return kRunError;
    default:
      set_message(reply.message, sizeof reply.message,
                  "returned %lld, which is not a kb_plugin_status (0 ok, 1 error, 2 unsupported)",
                  static_cast<long long>(st));
      return kRunError;
  }
}

void append_detail(RunReply& reply, const std::string& line) {
  std::size_t have = strnlen(reply.detail, sizeof reply.detail);
  if (have + 1 >= sizeof reply.detail) return;
  std::snprintf(reply.detail + have, sizeof reply.detail - have, "%s%s", have ? "\n" : "", line.c_str());
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

#if KB_HAVE_CUDA
// Device copies of every set's tensors, each guard | data | guard as in shared
// memory (the parent wrote the guard pattern and the poison).
struct DeviceSets {
  std::vector<std::vector<char*>> data;  // [set][arg] -> first data byte
  std::vector<void*> blocks;
  cudaStream_t stream = nullptr;
  ~DeviceSets() {
    for (void* b : blocks) cudaFree(b);
    if (stream) cudaStreamDestroy(stream);
  }
};

// Reports a CUDA error and ends the worker: a sticky error (illegal address,
// launch failure) leaves the context unusable, and nothing else is worth
// trusting either; the parent starts a fresh worker.
[[noreturn]] void device_fault(RunReply& reply, const kb_plugin_solution& sol, cudaError_t e, const char* when) {
  reply.status = kRunDeviceFault;
  set_message(reply.message, sizeof reply.message, "CUDA error in solution \"%s\" %s: %s (%s)", sol.name, when,
              cudaGetErrorName(e), cudaGetErrorString(e));
  std::fflush(stdout);
  std::fflush(stderr);
  write_all(kControlFd, &reply, sizeof reply);
  std::_Exit(5);
}

cudaError_t sync_and_check(cudaStream_t s) {
  cudaError_t e = cudaStreamSynchronize(s);
  if (e == cudaSuccess) e = cudaGetLastError();
  return e;
}
#endif

// While a CPU solution runs, the page-aligned interior of every guard region
// in shared memory is inaccessible in this process: a write (or read) that
// lands there ends the call with SIGSEGV at once, however sparse it is; the
// guard bytes outside whole pages are compared by the parent after the call.
// CUDA solutions never touch this mapping (their guards are on the device).
class GuardPages {
 public:
  GuardPages(const RunRequest& req, char* base, std::size_t sets, std::size_t stride) {
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t n = std::size_t{req.n_inputs} + req.n_outputs;
    const std::size_t passes = stride ? 2 : 1;
    auto protect = [&](char* lo, char* hi) {
      auto a = (reinterpret_cast<std::uintptr_t>(lo) + page - 1) / page * page;
      auto b = reinterpret_cast<std::uintptr_t>(hi) / page * page;
      if (b > a && ::mprotect(reinterpret_cast<void*>(a), b - a, PROT_NONE) == 0)
        regions_.emplace_back(reinterpret_cast<void*>(a), b - a);
    };
    for (std::size_t p = 0; p < passes; ++p)
      for (std::size_t s = 0; s < sets; ++s)
        for (std::size_t i = 0; i < n; ++i) {
          const ArgDesc& a = req.args[i];
          if (a.kind != kArgTensor) continue;
          char* data = base + (p * sets + s) * stride + a.offset;
          protect(data - kGuardBytes, data);
          protect(data + a.nbytes, data + a.nbytes + kGuardBytes);
        }
  }
  ~GuardPages() {
    for (auto& [p, len] : regions_) ::mprotect(p, len, PROT_READ | PROT_WRITE);
  }
  GuardPages(const GuardPages&) = delete;
  GuardPages& operator=(const GuardPages&) = delete;

 private:
  std::vector<std::pair<void*, std::size_t>> regions_;
};

// kOpRun and kOpEvaluate. `base` is shared memory; returns false when the
// parent is gone.
bool serve(const kb_plugin_solution& sol, const RunRequest& req, char* base, Views& v) {
  RunReply reply{};
  reply.magic = kMagic;
  reply.failed_set = -1;
  reply.cuda_device = -1;
  auto respond = [&] {
    std::fflush(stdout);
    std::fflush(stderr);
    return write_all(kControlFd, &reply, sizeof reply);
  };
  const bool eval = req.op == kOpEvaluate;
  const std::size_t sets = eval ? req.n_sets : 1;
  const std::size_t n = std::size_t{req.n_inputs} + req.n_outputs;
  auto at = [&](std::size_t pass, std::size_t set, std::size_t i) {
    return base + (pass * sets + set) * (eval ? req.set_stride : 0) + req.args[i].offset;
  };
  const bool cuda = sol.device == KB_PLUGIN_DEVICE_CUDA;

  if (!cuda) {
    GuardPages guard_pages(req, base, sets, eval ? req.set_stride : 0);
    std::vector<char*> data(n);
    for (std::size_t s = 0; s < sets; ++s) {
      for (std::size_t i = 0; i < n; ++i) data[i] = at(0, s, i);
      v.bind(req, data, false);
      auto t0 = std::chrono::steady_clock::now();
      reply.status = invoke(sol, req, v, nullptr, reply);
      reply.call_ms = ms_since(t0);
      if (reply.status != kRunOk) {
        reply.failed_set = static_cast<std::int32_t>(s);
        return respond();
      }
    }
    if (eval && (req.flags & kFlagTime)) {
      // One warm-up call on set 0's checked inputs, then one timed call on
      // each timed set: inputs the solution has never seen (the parent drew
      // them fresh), outputs poisoned by the parent and judged by it after.
      // No set is visited twice, so neither a result cached by a fingerprint
      // of the inputs nor an output left in place by an earlier call can
      // stand in for the work.
      for (std::size_t i = 0; i < n; ++i) data[i] = at(0, 0, i);
      v.bind(req, data, false);
      reply.status = invoke(sol, req, v, nullptr, reply);
      if (reply.status != kRunOk) {
        reply.failed_set = 0;
        return respond();
      }
      std::vector<double> samples;
      for (std::size_t s = 0; s < sets; ++s) {
        for (std::size_t i = 0; i < n; ++i) data[i] = at(1, s, i);
        v.bind(req, data, false);
        auto t0 = std::chrono::steady_clock::now();
        reply.status = invoke(sol, req, v, nullptr, reply);
        double ms = ms_since(t0);
        if (reply.status != kRunOk) {
          reply.failed_set = static_cast<std::int32_t>(s);
          return respond();
        }
        samples.push_back(ms);
      }
      std::sort(samples.begin(), samples.end());
      reply.timed = 1;
      reply.timing.samples = samples.size();
      reply.timing.median_ms = samples.size() % 2 ? samples[samples.size() / 2]
                                                  : 0.5 * (samples[samples.size() / 2 - 1] + samples[samples.size() / 2]);
      reply.timing.min_ms = samples.front();
      reply.timing.max_ms = samples.back();
      append_detail(reply, "timing: CPU wall time in the worker, one call on each of " + std::to_string(sets) +
                               " fresh input sets");
    }
    reply.status = kRunOk;
    return respond();
  }

#if KB_HAVE_CUDA
  if (g_cuda_device >= 0) {
    if (cudaError_t se = cudaSetDevice(g_cuda_device); se != cudaSuccess) {
      set_message(reply.message, sizeof reply.message, "kb-worker: cannot use CUDA device %d: %s", g_cuda_device,
                  cudaGetErrorString(se));
      reply.status = kRunBadRequest;
      return respond();
    }
  }
  int device = -1;
  if (cudaGetDevice(&device) == cudaSuccess) {
    reply.cuda_device = device;
    (void)cudaDeviceGetPCIBusId(reply.pci_bus_id, sizeof reply.pci_bus_id, device);
  }
  DeviceSets dev;
  cudaError_t e = cudaStreamCreateWithFlags(&dev.stream, cudaStreamNonBlocking);
  dev.data.assign(sets, std::vector<char*>(n, nullptr));
  for (std::size_t s = 0; s < sets && e == cudaSuccess; ++s)
    for (std::size_t i = 0; i < n && e == cudaSuccess; ++i) {
      const ArgDesc& a = req.args[i];
      if (a.kind != kArgTensor) continue;
      void* block = nullptr;
      e = cudaMalloc(&block, a.nbytes + 2 * kGuardBytes);
      if (e != cudaSuccess) break;
      dev.blocks.push_back(block);
      e = cudaMemcpy(block, at(0, s, i) - kGuardBytes, a.nbytes + 2 * kGuardBytes, cudaMemcpyHostToDevice);
      dev.data[s][i] = static_cast<char*>(block) + kGuardBytes;
    }
  // A cudaMemcpy from pageable memory may return before its DMA lands, and dev.stream (non-blocking) does not
  // wait for the legacy stream: wait here so the solution never reads inputs still in flight.
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      reply.status = kRunBadRequest;
      set_message(reply.message, sizeof reply.message, "kb-worker: setting up device buffers: %s", cudaGetErrorString(e));
      return respond();
    }
    device_fault(reply, sol, e, "before the call (setting up device buffers)");
  }
  (void)cudaGetLastError();  // start clean
  auto copy_back = [&](std::size_t pass) {
    for (std::size_t s = 0; s < sets; ++s)
      for (std::size_t i = 0; i < n; ++i) {
        const ArgDesc& a = req.args[i];
        if (a.kind != kArgTensor) continue;
        cudaError_t ce = cudaMemcpy(at(pass, s, i) - kGuardBytes, dev.data[s][i] - kGuardBytes,
                                    a.nbytes + 2 * kGuardBytes, cudaMemcpyDeviceToHost);
        if (ce != cudaSuccess) device_fault(reply, sol, ce, "(copying results back)");
      }
  };
  auto poison_device = [&](std::size_t s) {
    for (std::size_t i = req.n_inputs; i < n; ++i)
      if (req.args[i].nbytes) {
        cudaError_t ce = cudaMemsetAsync(dev.data[s][i], 0xFF, req.args[i].nbytes, dev.stream);
        if (ce != cudaSuccess) device_fault(reply, sol, ce, "(poisoning outputs)");
      }
  };
  for (std::size_t s = 0; s < sets; ++s) {
    v.bind(req, dev.data[s], true);
    auto t0 = std::chrono::steady_clock::now();
    reply.status = invoke(sol, req, v, dev.stream, reply);
    e = sync_and_check(dev.stream);
    reply.call_ms = ms_since(t0);
    if (e != cudaSuccess) device_fault(reply, sol, e, eval ? "(a checked call)" : "");
    if (reply.status != kRunOk) {
      reply.failed_set = static_cast<std::int32_t>(s);
      return respond();
    }
  }
  if (eval && (req.flags & kFlagStreamCheck)) {
    poison_device(0);
    e = sync_and_check(dev.stream);
    if (e != cudaSuccess) device_fault(reply, sol, e, "(before the stream check)");
    std::vector<std::pair<void*, std::size_t>> probe;
    for (std::size_t i = req.n_inputs; i < n; ++i) probe.emplace_back(dev.data[0][i], req.args[i].nbytes);
    std::int32_t call_status = kRunOk;
    auto sc = kb::cuda::check_stream_discipline(
        [&](void* stream) -> kb::Status {
          v.bind(req, dev.data[0], true);
          call_status = invoke(sol, req, v, stream, reply);
          if (call_status != kRunOk) return kb::make_error(kb::Code::invalid_data, reply.message);
          return kb::ok_status();
        },
        probe, dev.stream);
    e = sync_and_check(dev.stream);
    if (e != cudaSuccess) device_fault(reply, sol, e, "(the stream-check call)");
    if (call_status != kRunOk) {
      reply.status = call_status;
      reply.failed_set = 0;
      return respond();
    }
    if (!sc) {
      reply.status = kRunError;
      set_message(reply.message, sizeof reply.message, "stream check: %s", sc.error().message.c_str());
      return respond();
    }
    reply.stream_verdict = sc->verdict == kb::cuda::StreamVerdict::other_stream ? kStreamOther
                           : sc->verdict == kb::cuda::StreamVerdict::inconclusive ? kStreamInconclusive
                                                                                   : kStreamSame;
    append_detail(reply, sc->detail);
  }
  copy_back(0);
  if (eval && (req.flags & kFlagTime)) {
    // The timed pass's inputs (fresh draws, written by the parent) replace the
    // checked ones on the device; the outputs are poisoned again.
    for (std::size_t s = 0; s < sets; ++s)
      for (std::size_t i = 0; i < req.n_inputs; ++i) {
        const ArgDesc& a = req.args[i];
        if (a.kind != kArgTensor) continue;
        cudaError_t ce = cudaMemcpy(dev.data[s][i] - kGuardBytes, at(1, s, i) - kGuardBytes, a.nbytes + 2 * kGuardBytes,
                                    cudaMemcpyHostToDevice);
        if (ce != cudaSuccess) device_fault(reply, sol, ce, "(uploading the timed inputs)");
      }
    e = cudaDeviceSynchronize();
    if (e != cudaSuccess) device_fault(reply, sol, e, "(uploading the timed inputs)");
    for (std::size_t s = 0; s < sets; ++s) poison_device(s);
    e = sync_and_check(dev.stream);
    if (e != cudaSuccess) device_fault(reply, sol, e, "(before timing)");
    std::int32_t call_status = kRunOk;
    // kFlagFreshInputs: every call the timer makes runs on inputs drawn
    // again before it (outside its events) and writes poisoned outputs; a few
    // calls picked on the device keep their outputs for the parent to judge.
    const bool fresh = req.flags & kFlagFreshInputs;
    std::optional<kb::cuda::TimedCallSample> timed_calls;
    if (fresh) {
      std::vector<std::size_t> out_bytes;
      for (std::size_t i = req.n_inputs; i < n; ++i) out_bytes.push_back(req.args[i].nbytes);
      std::random_device rd;
      auto ts = kb::cuda::TimedCallSample::create(req.kept_slots, out_bytes, sets, (std::uint64_t{rd()} << 32) ^ rd());
      if (!ts) {
        (void)cudaGetLastError();
        reply.status = kRunBadRequest;
        set_message(reply.message, sizeof reply.message, "kb-worker: %s", ts.error().message.c_str());
        return respond();
      }
      timed_calls = std::move(*ts);
    }
    auto recipe_of = [&](std::size_t i) {
      const ArgDesc& a = req.args[i];
      return kb::RandomRecipe{a.fresh_key, static_cast<kb::DType>(a.fresh_dtype), a.fresh_numel};
    };
    auto refill = [&](int sample_index, void* stream) -> kb::Status {
      const std::size_t s = static_cast<std::size_t>(sample_index) % sets;
      KB_TRY(timed_calls->begin(s, stream));
      for (std::size_t i = 0; i < req.n_inputs; ++i)
        if (req.args[i].kind == kArgTensor && req.args[i].fresh)
          KB_TRY(kb::device_fill_fresh(dev.data[s][i], recipe_of(i), req.fresh_salt, timed_calls->serial(), stream));
      for (std::size_t i = req.n_inputs; i < n; ++i)
        if (req.args[i].nbytes)
          KB_TRY(kb::cuda::check(cudaMemsetAsync(dev.data[s][i], 0xFF, req.args[i].nbytes, static_cast<cudaStream_t>(stream)),
                                 "poisoning outputs"));
      return kb::ok_status();
    };
    auto keep = [&](int sample_index, void* stream) -> kb::Status {
      const std::size_t s = static_cast<std::size_t>(sample_index) % sets;
      std::vector<const void*> outs;
      for (std::size_t i = req.n_inputs; i < n; ++i) outs.push_back(dev.data[s][i]);
      return timed_calls->keep(s, outs, stream);
    };
    auto run_rotated = [&](int sample, void* stream) -> kb::Status {
      std::size_t s = static_cast<std::size_t>(sample) % sets;
      v.bind(req, dev.data[s], true);
      std::int32_t st = invoke(sol, req, v, stream, reply);
      if (st != kRunOk) {
        call_status = st;
        return kb::make_error(kb::Code::invalid_data, reply.message);
      }
      return kb::ok_status();
    };
    kb::cuda::TimingOptions topt;
    if (req.timing_warmup > 0) topt.warmup = static_cast<int>(std::min<std::uint32_t>(req.timing_warmup, 100000));
    if (req.timing_min_samples > 0)
      topt.min_samples = static_cast<int>(std::min<std::uint32_t>(req.timing_min_samples, 100000));
    topt.max_samples = std::max(topt.max_samples, topt.min_samples);
    if (fresh) {
      topt.before = refill;
      topt.after = keep;
    }
    auto t = kb::cuda::time_gpu(run_rotated, dev.stream, topt);
    e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) device_fault(reply, sol, e, "(while timing)");
    if (!t) {
      reply.status = call_status != kRunOk ? call_status : kRunError;
      set_message(reply.message, sizeof reply.message, "while timing: %s", t.error().message.c_str());
      return respond();
    }
    if (fresh) {
      // Each fresh input must still hold the draw of the last call on its set
      // (the parent cannot compare it: it never saw those bytes); then the
      // kept calls' outputs go to their slots in shared memory.
      auto last = timed_calls->last_serials(dev.stream);
      auto kept = last ? timed_calls->kept(dev.stream) : kb::Result<std::vector<kb::cuda::TimedCallSample::Kept>>(last.error());
      if (!kept) {
        e = cudaGetLastError();
        if (e != cudaSuccess) device_fault(reply, sol, e, "(reading the kept timed calls)");
        reply.status = kRunBadRequest;
        set_message(reply.message, sizeof reply.message, "kb-worker: %s", kept.error().message.c_str());
        return respond();
      }
      for (std::size_t s = 0; s < sets; ++s)
        for (std::size_t i = 0; i < req.n_inputs; ++i) {
          if (req.args[i].kind != kArgTensor || !req.args[i].fresh || (*last)[s] == 0) continue;
          auto changed = kb::device_count_changed(dev.data[s][i], kb::fresh_recipe(recipe_of(i), req.fresh_salt, (*last)[s]),
                                                  dev.stream);
          if (!changed) {
            e = cudaGetLastError();
            if (e != cudaSuccess) device_fault(reply, sol, e, "(checking the timed inputs)");
            reply.status = kRunBadRequest;
            set_message(reply.message, sizeof reply.message, "kb-worker: %s", changed.error().message.c_str());
            return respond();
          }
          if (*changed) {
            reply.status = kRunError;
            reply.failed_set = static_cast<std::int32_t>(s);
            set_message(reply.message, sizeof reply.message,
                        "while timing (input set %zu): modified input #%zu (%lld storage units changed)", s, i,
                        static_cast<long long>(*changed));
            return respond();
          }
        }
      std::uint64_t calls = 0;
      for (std::uint64_t l : *last) calls = std::max(calls, l);
      reply.fresh_calls = calls;
      for (std::size_t j = 0; j < kept->size() && j < kMaxKept; ++j) {
        reply.kept_serial[j] = (*kept)[j].serial;
        reply.kept_set[j] = (*kept)[j].set;
        if (!(*kept)[j].serial) continue;
        for (std::size_t i = req.n_inputs; i < n; ++i) {
          if (!req.args[i].nbytes) continue;
          char* dst = base + (2 * sets + j) * req.set_stride + req.args[i].offset;
          cudaError_t ce = cudaMemcpy(dst, timed_calls->slot_output(j, i - req.n_inputs), req.args[i].nbytes,
                                      cudaMemcpyDeviceToHost);
          if (ce != cudaSuccess) device_fault(reply, sol, ce, "(copying the kept timed calls back)");
        }
      }
    }
    copy_back(1);
    reply.timed = 1;
    reply.timing = *t;
    append_detail(reply, "timing: " + t->method() + " (in the worker, rotating through " + std::to_string(sets) +
                             (fresh ? " input sets, inputs drawn fresh before every call, cold L2)"
                                    : " input sets, cold L2)"));
    // The device's ceilings, measured once per worker process.
    static bool measured = false;
    static kb::cuda::Ceilings ceilings;  // zero where the measurement failed
    if (!measured) {
      auto c = kb::cuda::measure_ceilings(dev.stream);
      if (c) ceilings = *c;
      (void)cudaGetLastError();
      measured = true;
    }
    reply.ceilings = ceilings;
    reply.mma_tflops = kb::cuda::measured_mma_tflops(dev.stream);
    // The kernels alone, from CUPTI's records (after the timed outputs went
    // back, as kb's own solutions do it: gpu_eval.cpp).
    if (req.flags & kFlagCupti) {
      auto kt = kb::cuda::time_kernels_cupti(run_rotated, dev.stream, 20, true, kb::cuda::default_l2_flush(),
                                             fresh ? std::function<kb::Status(int, void*)>(refill)
                                                   : std::function<kb::Status(int, void*)>());
      e = cudaDeviceSynchronize();
      if (e == cudaSuccess) e = cudaGetLastError();
      if (e != cudaSuccess) device_fault(reply, sol, e, "(while timing with CUPTI)");
      if (call_status != kRunOk) {
        const std::string why = kt ? std::string(reply.message) : kt.error().message;
        reply.status = call_status;
        set_message(reply.message, sizeof reply.message, "while timing with CUPTI: %s", why.c_str());
        return respond();
      }
      if (kt) {
        reply.cupti = kCuptiMeasured;
        reply.cupti_timing = *kt;
      } else {
        reply.cupti = kCuptiFailed;
        set_message(reply.cupti_error, sizeof reply.cupti_error, "%s", kt.error().message.c_str());
      }
    }
  }
  reply.status = kRunOk;
  return respond();
#else
  set_message(reply.message, sizeof reply.message, "kb-worker was built without CUDA: cannot run CUDA solution \"%s\"",
              sol.name);
  reply.status = kRunBadRequest;
  return respond();
#endif
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  std::setvbuf(stderr, nullptr, _IONBF, 0);
  std::signal(SIGPIPE, SIG_IGN);
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: kb-worker PLUGIN.so [CUDA_DEVICE] (started by kb, not by hand)\n");
    return 2;
  }
  const char* path = argv[1];
  char msg[kMessageBytes];
  // The CUDA device kb runs on (-1 or absent: the CUDA default), made
  // current when a CUDA solution is first served, so that a worker serving
  // only CPU solutions never creates a CUDA context.
  if (argc == 3) {
    char* end = nullptr;
    const long device = std::strtol(argv[2], &end, 10);
    if (!end || *end || device < -1 || device > 4096) {
      set_message(msg, sizeof msg, "kb-worker: \"%s\" is not a CUDA device ordinal", argv[2]);
      return fail_load(kLoadInvalid, msg);
    }
    g_cuda_device = static_cast<int>(device);
  }

  void* lib = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = ::dlerror();
    set_message(msg, sizeof msg, "cannot load the library: %s", e ? e : "dlopen failed");
    return fail_load(kLoadNotFound, msg);
  }
  ::dlerror();
  void* sym = ::dlsym(lib, KB_PLUGIN_ENTRY_SYMBOL);
  if (!sym) {
    set_message(msg, sizeof msg, "no %s symbol: not a kb plugin (export it with KB_PLUGIN_EXPORT and C linkage)",
                KB_PLUGIN_ENTRY_SYMBOL);
    return fail_load(kLoadNotFound, msg);
  }
  auto entry = reinterpret_cast<kb_plugin_entry_v1_fn>(sym);
  const kb_plugin_table* table = entry(KB_PLUGIN_ABI_VERSION);
  if (!table) {
    set_message(msg, sizeof msg, "%s returned NULL: the plugin refused kb's plugin ABI version %d",
                KB_PLUGIN_ENTRY_SYMBOL, KB_PLUGIN_ABI_VERSION);
    return fail_load(kLoadAbiMismatch, msg);
  }
  if (table->struct_size < sizeof(kb_plugin_table)) {
    set_message(msg, sizeof msg, "malformed table: struct_size is %zu, expected at least %zu", table->struct_size,
                sizeof(kb_plugin_table));
    return fail_load(kLoadInvalid, msg);
  }
  if (table->abi_version != KB_PLUGIN_ABI_VERSION) {
    set_message(msg, sizeof msg, "plugin ABI version %u, but this kb speaks plugin ABI version %d (rebuild the plugin "
                "against this kb.h)", table->abi_version, KB_PLUGIN_ABI_VERSION);
    return fail_load(kLoadAbiMismatch, msg);
  }
  if (table->n_solutions == 0 || table->n_solutions > kMaxSolutions || !table->solutions) {
    set_message(msg, sizeof msg, "malformed table: n_solutions is %u (expected 1..%zu with a non-NULL solutions array)",
                table->n_solutions, kMaxSolutions);
    return fail_load(kLoadInvalid, msg);
  }
  std::vector<SolutionDesc> descs(table->n_solutions);
  std::vector<kb_plugin_solution> sols(table->n_solutions);
  for (std::uint32_t i = 0; i < table->n_solutions; ++i) {
    const kb_plugin_solution& s = table->solutions[i];
    SolutionDesc& d = descs[i];
    if (s.struct_size < sizeof(kb_plugin_solution)) {
      set_message(msg, sizeof msg, "malformed table: solutions[%u].struct_size is %zu, expected at least %zu", i,
                  s.struct_size, sizeof(kb_plugin_solution));
      return fail_load(kLoadInvalid, msg);
    }
    struct {
      const char* field;
      char* dst;
      const char* src;
    } strings[] = {{"definition", d.definition, s.definition}, {"name", d.name, s.name}, {"author", d.author, s.author}};
    for (auto& f : strings) {
      if (!copy_string(f.dst, kMaxNameBytes + 1, f.src) || !name_ok(f.dst)) {
        set_message(msg, sizeof msg,
                    "malformed table: solutions[%u].%s is %s (expected 1..%zu characters from [A-Za-z0-9_.-])", i,
                    f.field, f.src ? "not a valid name" : "NULL", kMaxNameBytes);
        return fail_load(kLoadInvalid, msg);
      }
    }
    if (s.description) {
      d.has_description = 1;
      std::size_t n = strnlen(s.description, kDescriptionBytes - 1);
      std::memcpy(d.description, s.description, n);
      d.description[n] = '\0';
    }
    const std::int64_t device = plugin_enum(s.device);
    if (device != KB_PLUGIN_DEVICE_CPU && device != KB_PLUGIN_DEVICE_CUDA) {
      set_message(msg, sizeof msg, "malformed table: solutions[%u] (\"%s\").device is %lld (expected 0 = cpu or 1 = cuda)",
                  i, d.name, static_cast<long long>(device));
      return fail_load(kLoadInvalid, msg);
    }
    d.device = static_cast<std::uint32_t>(device);
    if (!s.run) {
      set_message(msg, sizeof msg, "malformed table: solutions[%u] (\"%s\").run is NULL", i, d.name);
      return fail_load(kLoadInvalid, msg);
    }
    for (std::uint32_t j = 0; j < i; ++j)
      if (std::strcmp(descs[j].name, d.name) == 0) {
        set_message(msg, sizeof msg, "malformed table: solutions[%u] and solutions[%u] are both named \"%s\"", j, i,
                    d.name);
        return fail_load(kLoadInvalid, msg);
      }
    sols[i] = s;  // keep a copy: a later change of the plugin's table does not move kb's view
  }
  LoadReply ok{};
  ok.magic = kMagic;
  ok.protocol = kProtocolVersion;
  ok.status = kLoadOk;
  ok.n_solutions = table->n_solutions;
  if (!write_all(kControlFd, &ok, sizeof ok) ||
      !write_all(kControlFd, descs.data(), descs.size() * sizeof(SolutionDesc)))
    return 4;

  Mapping shm;
  auto req = std::make_unique<RunRequest>();
  Views views;
  while (read_all(kControlFd, req.get(), sizeof *req)) {
    RunReply reply{};
    reply.magic = kMagic;
    reply.status = kRunBadRequest;
    reply.failed_set = -1;
    auto refuse = [&](const char* why) {
      set_message(reply.message, sizeof reply.message, "kb-worker: %s", why);
      return write_all(kControlFd, &reply, sizeof reply);
    };
    std::size_t n = std::size_t{req->n_inputs} + req->n_outputs;
    bool eval = req->op == kOpEvaluate;
    if (req->magic != kMagic || (req->op != kOpRun && !eval) || req->solution >= sols.size() || n > kMaxArgs ||
        (eval && (req->n_sets == 0 || req->n_sets > kMaxSets))) {
      if (!refuse("malformed request")) return 4;
      continue;
    }
    if (!shm.ensure(req->shm_size)) {
      if (!refuse("cannot map shared memory")) return 4;
      continue;
    }
    // Every tensor of every set and pass, guards included, inside the mapping.
    bool bad = false;
    std::uint64_t span = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const ArgDesc& a = req->args[i];
      if (a.kind != kArgTensor) continue;
      if (a.ndim < 0 || static_cast<std::size_t>(a.ndim) > kMaxRank || a.offset < kGuardBytes ||
          a.nbytes > shm.size || a.offset > shm.size - a.nbytes - kGuardBytes)
        bad = true;
      else
        span = std::max<std::uint64_t>(span, a.offset + a.nbytes + kGuardBytes);
    }
    const bool fresh = eval && (req->flags & kFlagFreshInputs);
    if (fresh && (req->kept_slots == 0 || req->kept_slots > kMaxKept)) bad = true;
#if KB_HAVE_CUDA
    for (std::size_t i = 0; fresh && !bad && i < req->n_inputs; ++i) {
      const ArgDesc& a = req->args[i];
      if (!a.fresh) continue;
      bad = a.kind != kArgTensor || a.fresh_dtype >= static_cast<std::uint32_t>(kb::dtype_count) || a.fresh_numel < 0 ||
            static_cast<std::uint64_t>(kb::dtype_storage_bytes(static_cast<kb::DType>(a.fresh_dtype), a.fresh_numel)) !=
                a.nbytes;
    }
#endif
    if (eval && !bad) {
      const std::uint64_t regions = 2 * std::uint64_t{req->n_sets} + (fresh ? req->kept_slots : 0);
      bad = req->set_stride < span || req->set_stride > shm.size / regions;
    }
    if (bad) {
      if (!refuse("request outside shared memory")) return 4;
      continue;
    }
    if (!serve(sols[req->solution], *req, static_cast<char*>(shm.base), views)) return 4;
  }
  return 0;
}
