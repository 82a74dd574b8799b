#include "cuda/anti_gaming.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "cuda/per_device.hpp"
#include "cuda/runtime.hpp"
#include "cuda/timing.hpp"

namespace kb::cuda {

cudaError_t launch_gate(volatile int* release, volatile int* expired, cudaStream_t stream);
cudaError_t launch_mma_loop(float* sink, int blocks, int iterations, cudaStream_t stream, double* flops);
cudaError_t launch_begin_call(unsigned long long* serial, unsigned long long* last_of_set, cudaStream_t stream);
cudaError_t launch_keep_output(const unsigned long long* serial, unsigned long long secret, unsigned long long slots,
                               unsigned long long* meta, long long set, const void* src, void* dst,
                               unsigned long long slot_bytes, unsigned long long bytes, bool record, int sm_count,
                               cudaStream_t stream);

namespace {

// Host memory the device reads and writes directly.
struct Mapped {
  void* p = nullptr;
  ~Mapped() {
    if (p) cudaFreeHost(p);
  }
};

struct OwnedStream {
  cudaStream_t s = nullptr;
  ~OwnedStream() {
    if (s) cudaStreamDestroy(s);
  }
};

}  // namespace

Result<StreamCheck> check_stream_discipline(const std::function<Status(void*)>& launch,
                                            const std::vector<std::pair<void*, std::size_t>>& outputs,
                                            void* stream_ptr) {
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  Mapped flags;
  KB_TRY(check(cudaHostAlloc(&flags.p, 2 * sizeof(int), cudaHostAllocMapped), "cudaHostAlloc(gate)"));
  auto* host = static_cast<volatile int*>(flags.p);
  host[0] = 0;  // release
  host[1] = 0;  // expired
  void* dev = nullptr;
  KB_TRY(check(cudaHostGetDevicePointer(&dev, flags.p, 0), "cudaHostGetDevicePointer(gate)"));
  auto* dflags = static_cast<volatile int*>(dev);
  // The probe reads a bounded prefix of each output: work elsewhere writes it.
  constexpr std::size_t kProbeBytes = std::size_t{16} << 20;
  std::size_t probe_total = 0;
  for (auto& [p, n] : outputs) probe_total += std::min(n, kProbeBytes);
  Mapped probe_buf;
  if (probe_total)
    KB_TRY(check(cudaHostAlloc(&probe_buf.p, probe_total, cudaHostAllocDefault), "cudaHostAlloc(probe)"));
  OwnedStream probe;
  KB_TRY(check(cudaStreamCreateWithFlags(&probe.s, cudaStreamNonBlocking), "cudaStreamCreate(probe)"));

  KB_TRY(check(launch_gate(dflags, dflags + 1, stream), "launching the stream gate"));
  auto open_gate = [&] {
    host[0] = 1;
    return check(cudaStreamSynchronize(stream), "after the gated call");
  };
  Status st = launch(stream);
  if (!st.ok()) {
    (void)open_gate();
    return st.error();
  }
  // Give work on another stream a moment to land, probing a few times.
  bool changed = false;
  std::string where;
  auto t0 = std::chrono::steady_clock::now();
  for (int round = 0; round < 8 && !changed; ++round) {
    if (round) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::size_t at = 0;
    for (auto& [p, n] : outputs) {
      std::size_t k = std::min(n, kProbeBytes);
      if (k && cudaMemcpyAsync(static_cast<char*>(probe_buf.p) + at, p, k, cudaMemcpyDeviceToHost, probe.s) != cudaSuccess)
        break;
      at += k;
    }
    cudaError_t e = cudaStreamSynchronize(probe.s);
    if (e != cudaSuccess) {
      (void)open_gate();
      return check(e, "probing the outputs").error();
    }
    const auto* b = static_cast<const unsigned char*>(probe_buf.p);
    for (std::size_t i = 0; i < at; ++i)
      if (b[i] != 0xFF) {
        changed = true;
        where = fmt::format("byte {} of the probed outputs", i);
        break;
      }
    if (std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(200)) break;
  }
  bool expired = host[1] != 0;
  KB_TRY(open_gate());
  StreamCheck r;
  if (!changed) {
    r.verdict = StreamVerdict::same_stream;
    r.detail = "stream check: outputs untouched while kb's stream was held (work on the given stream)";
  } else if (expired) {
    r.verdict = StreamVerdict::inconclusive;
    r.detail = "stream check: inconclusive (the gate on kb's stream expired before the probe; the call may have "
               "synchronized it)";
  } else {
    r.verdict = StreamVerdict::other_stream;
    r.detail = fmt::format("launched work on a stream other than the one kb gave it: its outputs changed ({}) while "
                           "kb's stream was still held by a gate kernel",
                           where);
  }
  return r;
}

double measured_mma_tflops(void* stream) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  static PerDevice<double> measured;
  return measured.get(device, [&]() -> double {
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || sms <= 0)
      return 0;
    float* sink = nullptr;
    if (cudaMalloc(reinterpret_cast<void**>(&sink), 1024 * sizeof(float)) != cudaSuccess) return 0;
    double flops = 0;
    TimingOptions o;
    o.flush_l2 = false;
    o.samples_per_graph = 4;
    o.min_samples = 8;
    o.max_time_s = 0.5;
    auto t = time_gpu(
        [&](int, void* s) {
          return check(launch_mma_loop(sink, sms * 8, 2048, static_cast<cudaStream_t>(s), &flops), "mma loop");
        },
        stream, o);
    cudaFree(sink);
    (void)cudaGetLastError();
    return t && t->median_ms > 0 ? flops / (t->median_ms * 1e-3) / 1e12 : 0.0;
  });
}

// ---- TimedCallSample --------------------------------------------------------

Result<TimedCallSample> TimedCallSample::create(std::size_t slots, std::vector<std::size_t> output_bytes,
                                                std::size_t sets, std::uint64_t secret) {
  if (slots == 0 || slots > 64 || sets == 0)
    return make_error(Code::internal, fmt::format("TimedCallSample: {} slots over {} sets", slots, sets));
  TimedCallSample t;
  t.slots_ = slots;
  t.sets_ = sets;
  t.secret_ = secret;
  t.bytes_ = std::move(output_bytes);
  for (std::size_t b : t.bytes_) {
    t.offsets_.push_back(t.slot_bytes_);
    t.slot_bytes_ += (b + 255) / 256 * 256;
  }
  const std::size_t words = 1 + sets + 2 * slots;
  KB_TRY(check(cudaMalloc(reinterpret_cast<void**>(&t.state_), words * sizeof(unsigned long long)),
               "allocating the timed-call counters"));
  KB_TRY(check(cudaMemset(t.state_, 0, words * sizeof(unsigned long long)), "clearing the timed-call counters"));
  if (t.slot_bytes_)
    KB_TRY(check(cudaMalloc(reinterpret_cast<void**>(&t.data_), slots * t.slot_bytes_), "allocating the kept outputs"));
  return t;
}

TimedCallSample::TimedCallSample(TimedCallSample&& o) noexcept { *this = std::move(o); }

TimedCallSample& TimedCallSample::operator=(TimedCallSample&& o) noexcept {
  if (this != &o) {
    release();
    state_ = std::exchange(o.state_, nullptr);
    data_ = std::exchange(o.data_, nullptr);
    slots_ = o.slots_;
    sets_ = o.sets_;
    slot_bytes_ = o.slot_bytes_;
    bytes_ = std::move(o.bytes_);
    offsets_ = std::move(o.offsets_);
    secret_ = o.secret_;
  }
  return *this;
}

TimedCallSample::~TimedCallSample() { release(); }

void TimedCallSample::release() {
  if (state_) cudaFree(state_);
  if (data_) cudaFree(data_);
  state_ = nullptr;
  data_ = nullptr;
}

Status TimedCallSample::begin(std::size_t set, void* stream) {
  if (set >= sets_) return make_error(Code::internal, "TimedCallSample::begin: no such set");
  return check(launch_begin_call(state_, state_ + 1 + set, static_cast<cudaStream_t>(stream)), "counting a timed call");
}

Status TimedCallSample::keep(std::size_t set, const std::vector<const void*>& outputs, void* stream) {
  if (set >= sets_ || outputs.size() != bytes_.size())
    return make_error(Code::internal, "TimedCallSample::keep: outputs or set do not match");
  int device = 0, sms = 0;
  KB_TRY(check(cudaGetDevice(&device), "cudaGetDevice"));
  KB_TRY(check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count"));
  // An evaluation without outputs still records which calls were drawn.
  if (outputs.empty())
    return check(launch_keep_output(state_, secret_, slots_, state_ + 1 + sets_, static_cast<long long>(set), nullptr,
                                    data_, slot_bytes_, 0, true, sms, static_cast<cudaStream_t>(stream)),
                 "keeping a timed call's outputs");
  for (std::size_t o = 0; o < outputs.size(); ++o)
    KB_TRY(check(launch_keep_output(state_, secret_, slots_, state_ + 1 + sets_, static_cast<long long>(set),
                                    outputs[o], data_ + offsets_[o], slot_bytes_, bytes_[o], o == 0, sms,
                                    static_cast<cudaStream_t>(stream)),
                 "keeping a timed call's outputs"));
  return ok_status();
}

Result<std::vector<TimedCallSample::Kept>> TimedCallSample::kept(void* stream) const {
  std::vector<unsigned long long> meta(2 * slots_);
  KB_TRY(check(cudaMemcpyAsync(meta.data(), state_ + 1 + sets_, meta.size() * sizeof meta[0], cudaMemcpyDeviceToHost,
                               static_cast<cudaStream_t>(stream)),
               "reading the kept calls"));
  KB_TRY(check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "reading the kept calls"));
  std::vector<Kept> out(slots_);
  for (std::size_t j = 0; j < slots_; ++j) {
    out[j].serial = meta[2 * j];
    out[j].set = out[j].serial && meta[2 * j + 1] < sets_ ? static_cast<int>(meta[2 * j + 1]) : -1;
    if (out[j].set < 0) out[j].serial = 0;
  }
  return out;
}

Result<std::vector<std::uint64_t>> TimedCallSample::last_serials(void* stream) const {
  std::vector<unsigned long long> last(sets_);
  KB_TRY(check(cudaMemcpyAsync(last.data(), state_ + 1, last.size() * sizeof last[0], cudaMemcpyDeviceToHost,
                               static_cast<cudaStream_t>(stream)),
               "reading the last serials"));
  KB_TRY(check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "reading the last serials"));
  return std::vector<std::uint64_t>(last.begin(), last.end());
}

const void* TimedCallSample::slot_output(std::size_t j, std::size_t o) const {
  return data_ + j * slot_bytes_ + offsets_[o];
}

}  // namespace kb::cuda
