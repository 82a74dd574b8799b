#include "cuda/timing.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <thread>
#include <vector>

#include "cuda/clock_sampler.hpp"
#include "cuda/cupti.hpp"
#include "cuda/nvml.hpp"
#include "cuda/per_device.hpp"
#include "cuda/runtime.hpp"

namespace kb::cuda {

cudaError_t launch_blocking_kernel(volatile int* host_flag, cudaStream_t stream);
cudaError_t launch_copy_kernel(void* dst, const void* src, std::size_t bytes, int sm_count, cudaStream_t stream);
cudaError_t launch_empty_kernel(cudaStream_t stream);
cudaError_t launch_one_read_kernel(void* dst, const void* src, cudaStream_t stream);
cudaError_t launch_read_kernel(const void* src, std::size_t bytes, cudaStream_t stream);

namespace {

// One flush buffer per device, twice the L2 size, allocated on first use.
Result<std::pair<void*, std::size_t>> flush_buffer(int device) {
  static PerDevice<std::pair<void*, std::size_t>> buffers;
  return buffers.try_get(device, [&]() -> Result<std::pair<void*, std::size_t>> {
    int l2 = 0;
    KB_TRY(check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), "L2 size"));
    std::size_t bytes = std::max<std::size_t>(2 * static_cast<std::size_t>(l2), 1 << 20);
    void* p = nullptr;
    KB_TRY(check(cudaMalloc(&p, bytes), "allocating the L2 flush buffer"));
    return std::pair<void*, std::size_t>{p, bytes};
  });
}

// Queues one cold sample's flush (L2Flush): the memset, and for clean the
// read of the whole buffer after it.
Status enqueue_flush(const std::pair<void*, std::size_t>& buffer, int k, L2Flush mode, cudaStream_t stream) {
  KB_TRY(check(cudaMemsetAsync(buffer.first, k & 0xFF, buffer.second, stream), "L2 flush"));
  if (mode == L2Flush::clean) KB_TRY(check(launch_read_kernel(buffer.first, buffer.second, stream), "L2 flush (read)"));
  return ok_status();
}

struct Stats {
  double median, min, max, mean, rel_noise;
};

Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(n);
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  double sd = n > 1 ? std::sqrt(var / static_cast<double>(n - 1)) : 0;
  double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return {median, v.front(), v.back(), mean, mean > 0 ? sd / mean : 0};
}

// The adaptive stop: the relative standard error of the mean is at most `target`.
bool precise_enough(const std::vector<double>& v, double target) {
  if (v.empty()) return false;
  return stats(v).rel_noise / std::sqrt(static_cast<double>(v.size())) <= target;
}

class EventPool {
 public:
  ~EventPool() {
    for (auto e : events_) cudaEventDestroy(e);
  }
  Status ensure(std::size_t n) {
    while (events_.size() < n) {
      cudaEvent_t e;
      KB_TRY(check(cudaEventCreate(&e), "cudaEventCreate"));
      events_.push_back(e);
    }
    return ok_status();
  }
  cudaEvent_t operator[](std::size_t i) const { return events_[i]; }

 private:
  std::vector<cudaEvent_t> events_;
};

// Work captured from a stream as a CUDA graph, instantiated (time_gpu's batch
// of samples, time_kernels_cupti's one call). capture() is false where the
// work refused capture; the stream is then usable again.
class GraphExec {
 public:
  GraphExec() = default;
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  ~GraphExec() {
    if (exec_) cudaGraphExecDestroy(exec_);
  }
  bool capture(const std::function<Status()>& work, cudaStream_t stream) {
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    Status st = work();
    cudaGraph_t graph = nullptr;
    cudaError_t end = cudaStreamEndCapture(stream, &graph);
    bool ok = st.ok() && end == cudaSuccess && graph && cudaGraphInstantiate(&exec_, graph, 0) == cudaSuccess;
    if (graph) cudaGraphDestroy(graph);
    if (!ok) exec_ = nullptr;
    (void)cudaGetLastError();  // a refused capture leaves an error behind; it is not the work's
    return ok;
  }
  cudaGraphExec_t get() const { return exec_; }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace

std::string TimingResult::method() const {
  std::string aside;
  if (throttled_samples_set_aside > 0)
    aside = fmt::format(", {} samples set aside (clock under the throttle threshold{}{})", throttled_samples_set_aside,
                        throttle_reasons ? ": " : "", clock_event_reason_names(throttle_reasons));
  return fmt::format("CUDA events, {} samples ({}, batches of {}, L2 flush {}), median {:.6f} ms [min {:.6f}, max {:.6f}], noise {:.2f}%, "
                     "SM clock {}->{} MHz of {}{}{}{}",
                     samples, graph ? "CUDA graph replay" : "stream behind a blocking kernel", samples_per_batch,
                     l2_flush_name(), median_ms, min_ms,
                     max_ms, rel_noise * 100, sm_clock_mhz_before, sm_clock_mhz_after, sm_clock_mhz_max,
                     sm_clock_mhz_lowest_kept ? fmt::format(" (lowest batch average kept {} MHz)", sm_clock_mhz_lowest_kept)
                                              : std::string(),
                     aside,
                     throttled ? " (THROTTLED)" : "");
}

Result<TimingResult> time_gpu(const std::function<Status(int, void*)>& launch, void* stream_ptr,
                              const TimingOptions& opt, std::vector<double>* samples_out) {
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  int device = 0;
  KB_TRY(check(cudaGetDevice(&device), "cudaGetDevice"));
  auto flush = flush_buffer(device);
  if (!flush) return flush.error();

  // One call outside the timed batches (warm-up, pace), with the hooks around it.
  auto call = [&](int sample) -> Status {
    if (opt.before) KB_TRY(opt.before(sample, stream));
    KB_TRY(launch(sample, stream));
    if (opt.after) KB_TRY(opt.after(sample, stream));
    return ok_status();
  };

  // Warm-up: opt.warmup calls, then doubling rounds until opt.warmup_ms of
  // wall time has passed, so the SM clock has left its idle state (an idle
  // H100 sits at a few hundred MHz and needs milliseconds to boost).
  double call_ms = 0;  // one call's wall time, launch and synchronization included: the pace that sizes the batches
  {
    auto w0 = std::chrono::steady_clock::now();
    int done = 0, round = opt.warmup;
    while (round > 0) {
      for (int w = 0; w < round; ++w) KB_TRY(call(done + w));
      done += round;
      KB_TRY(check(cudaStreamSynchronize(stream), "warm-up"));
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - w0).count();
      if (ms >= opt.warmup_ms || done >= (1 << 16)) break;
      round = done;
    }
    // Timed alone, after the warm-up: the first calls may hold one-time work (plans, autotuning).
    if (opt.batch_target_ms > 0 && opt.samples_per_graph > 1) {
      auto c0 = std::chrono::steady_clock::now();
      KB_TRY(call(done));
      KB_TRY(check(cudaStreamSynchronize(stream), "warm-up"));
      call_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count();
    }
  }

  TimingResult r;
  r.l2_flushed = opt.flush_l2;
  r.l2_flush = opt.l2_flush;
  r.sm_clock_mhz_max = max_sm_clock_mhz(device);
  if (r.sm_clock_mhz_max == 0) {  // no NVML: the device's peak clock from CUDA
    int khz = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device) == cudaSuccess && khz > 0)
      r.sm_clock_mhz_max = static_cast<unsigned>(khz / 1000);
  }
  r.sm_clock_mhz_before = sm_clock_mhz(device);
  int sm_count = 0;
  KB_TRY(check(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device), "SM count"));

  // The clock sampler's buffer: start and end slots (clock_sampler.hpp), only
  // where throttled batches are set aside.
  const unsigned threshold_mhz =
      opt.throttle_threshold > 0 ? static_cast<unsigned>(opt.throttle_threshold * r.sm_clock_mhz_max) : 0;
  constexpr std::size_t kSlotWords = 2 * kClockSamplerSlots;
  std::vector<unsigned long long> clock_host(threshold_mhz ? 2 * kSlotWords : 0);
  DeviceBuffer clock_buffer;
  if (threshold_mhz) {
    auto b = DeviceBuffer::allocate(clock_host.size() * sizeof(unsigned long long));
    if (!b) return b.error();
    clock_buffer = std::move(*b);
  }
  auto* clock_slots = static_cast<unsigned long long*>(clock_buffer.data());

  int per_batch = std::max(1, opt.samples_per_graph);
  if (opt.batch_target_ms > 0 && call_ms > 0)
    per_batch = std::clamp(static_cast<int>(opt.batch_target_ms / call_ms), 1, per_batch);
  r.samples_per_batch = per_batch;
  EventPool events;
  KB_TRY(events.ensure(2 * static_cast<std::size_t>(per_batch)));

  // Enqueues one batch of samples (flush, start, work, stop) on `stream`.
  // Under stream capture an event becomes a graph node (recorded on every
  // replay) only when recorded with cudaEventRecordExternal.
  bool capturing = false;
  auto record = [&](cudaEvent_t e) {
    return check(capturing ? cudaEventRecordWithFlags(e, stream, cudaEventRecordExternal) : cudaEventRecord(e, stream),
                 "cudaEventRecord");
  };
  auto enqueue_batch = [&](int first_sample) -> Status {
    if (clock_slots) {
      KB_TRY(check(cudaMemsetAsync(clock_slots, 0, 2 * kSlotWords * sizeof(unsigned long long), stream),
                   "clock sampler reset"));
      KB_TRY(check(launch_clock_sampler(clock_slots, sm_count, stream), "clock sampler"));
    }
    for (int k = 0; k < per_batch; ++k) {
      if (opt.before) KB_TRY(opt.before(first_sample + k, stream));
      if (opt.flush_l2) KB_TRY(enqueue_flush(*flush, k, opt.l2_flush, stream));
      KB_TRY(record(events[2 * k]));
      KB_TRY(launch(first_sample + k, stream));
      KB_TRY(record(events[2 * k + 1]));
      if (opt.after) KB_TRY(opt.after(first_sample + k, stream));
    }
    if (clock_slots) KB_TRY(check(launch_clock_sampler(clock_slots + kSlotWords, sm_count, stream), "clock sampler"));
    return ok_status();
  };

  // Graph mode: capture one batch, replay it.
  GraphExec exec;
  capturing = true;
  r.graph = exec.capture([&] { return enqueue_batch(0); }, stream);
  capturing = false;
  std::vector<int> host_flag_storage;
  volatile int* host_flag = nullptr;
  if (!r.graph) {
    int* p = nullptr;
    KB_TRY(check(cudaHostAlloc(reinterpret_cast<void**>(&p), sizeof(int), cudaHostAllocMapped), "cudaHostAlloc"));
    host_flag = p;
  }

  std::vector<double> samples;       // kept, in the order they ran
  std::vector<double> set_aside;     // throttled batches and the warm-up batch after each rest
  unsigned lowest_kept_clock = 0;  // 0 until a kept batch's clock is known
  bool rewarming = false;  // the batch now running follows a rest
  auto start = std::chrono::steady_clock::now();
  Status status = ok_status();
  int batch = 0;
  while (true) {
    if (r.graph) {
      status = check(cudaGraphLaunch(exec.get(), stream), "cudaGraphLaunch");
    } else {
      *host_flag = 0;
      status = check(launch_blocking_kernel(host_flag, stream), "blocking kernel");
      if (status.ok()) status = enqueue_batch(batch * per_batch);
      *host_flag = 1;
    }
    if (status.ok()) status = check(cudaStreamSynchronize(stream), "timed samples");
    if (!status.ok()) break;
    // The batch's average SM clock, from the GPU's counters (NVML's reading
    // at this moment where the sampler could not tell).
    unsigned clock = 0;
    if (threshold_mhz) {
      status = check(cudaMemcpy(clock_host.data(), clock_slots, clock_host.size() * sizeof(unsigned long long),
                                cudaMemcpyDeviceToHost),
                     "clock sampler read");
      if (!status.ok()) break;
      const double avg = average_sm_clock_mhz(clock_host.data(), clock_host.data() + kSlotWords);
      clock = avg > 0 ? static_cast<unsigned>(avg + 0.5) : sm_clock_mhz(device);
    }
    const bool throttled_now = threshold_mhz && clock > 0 && clock < threshold_mhz;
    const bool keep = !throttled_now && !rewarming;
    if (throttled_now) r.throttle_reasons |= clock_event_reasons(device);
    for (int k = 0; k < per_batch; ++k) {
      float ms = 0;
      status = check(cudaEventElapsedTime(&ms, events[2 * k], events[2 * k + 1]), "cudaEventElapsedTime");
      if (!status.ok()) break;
      (keep ? samples : set_aside).push_back(ms);
    }
    if (!status.ok()) break;
    if (keep && clock > 0) lowest_kept_clock = lowest_kept_clock ? std::min(lowest_kept_clock, clock) : clock;
    rewarming = false;
    if (throttled_now) {
      // Rest: the power and thermal limits average over time, and an idle GPU
      // brings both back. The next batch warms the clock up again.
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(opt.throttle_recovery_ms));
      rewarming = true;
    }
    ++batch;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const int kept = static_cast<int>(samples.size());
    bool enough = kept >= opt.min_samples && precise_enough(samples, opt.target_rel_error);
    if (enough || kept + static_cast<int>(set_aside.size()) >= opt.max_samples || elapsed >= opt.max_time_s) break;
  }
  if (host_flag) cudaFreeHost(const_cast<int*>(host_flag));
  if (!status.ok()) {
    (void)cudaGetLastError();  // do not leave a non-sticky error for the next caller to find
    return status.error();
  }

  r.sm_clock_mhz_after = sm_clock_mhz(device);
  bool used_set_aside = false;
  if (static_cast<int>(samples.size()) < std::max(1, opt.min_samples) && !set_aside.empty()) {
    // The clock never held long enough: measure what ran rather than nothing, flagged.
    samples.insert(samples.end(), set_aside.begin(), set_aside.end());
    set_aside.clear();
    used_set_aside = true;
  }
  r.throttled_samples_set_aside = set_aside.size();
  r.sm_clock_mhz_lowest_kept = threshold_mhz && !used_set_aside ? lowest_kept_clock : 0;
  if (samples_out) *samples_out = samples;
  auto s = stats(samples);
  r.median_ms = s.median;
  r.min_ms = s.min;
  r.max_ms = s.max;
  r.mean_ms = s.mean;
  r.rel_noise = s.rel_noise;
  r.samples = samples.size();
  // Where batches were checked, throttled means the median holds samples run
  // under the threshold. Not "under 90% of the maximum": measured over the
  // batch, an H200 running bf16 GEMMs at 700 W averages 1.5-1.65 GHz of its
  // 1.98 while NVML reads 1980 before and after.
  if (threshold_mhz)
    r.throttled = used_set_aside;
  else if (r.sm_clock_mhz_max > 0)
    r.throttled = std::min(r.sm_clock_mhz_before, r.sm_clock_mhz_after) < 0.9 * r.sm_clock_mhz_max;
  return r;
}

Result<KernelTimingResult> time_kernels_cupti(const std::function<Status(int, void*)>& launch, void* stream_ptr,
                                              int samples, bool flush_l2, L2Flush l2_flush,
                                              const std::function<Status(int, void*)>& before) {
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  std::string why;
  if (!cupti_available(&why)) return make_error(Code::unsupported, "CUPTI: " + why);
  int device = 0;
  KB_TRY(check(cudaGetDevice(&device), "cudaGetDevice"));
  auto flush = flush_buffer(device);
  if (!flush) return flush.error();
  if (before) KB_TRY(before(0, stream));
  KB_TRY(launch(0, stream));  // warm-up: first-call work (plans, autotuning) stays out of the records
  KB_TRY(check(cudaStreamSynchronize(stream), "CUPTI warm-up"));
  KernelTimingResult r;
  r.graph = true;
  std::vector<double> ms;
  for (int i = 0; i < std::max(1, samples); ++i) {
    // The call as a graph, so its kernels run back to back (see timing.hpp).
    GraphExec exec;
    if (r.graph && !exec.capture([&] { return launch(i, stream); }, stream)) r.graph = false;
    if (before) KB_TRY(before(i, stream));
    if (flush_l2) KB_TRY(enqueue_flush(*flush, i, l2_flush, stream));
    KB_TRY(check(cudaStreamSynchronize(stream), "L2 flush"));  // the flush's work stays out of the records
    KernelRecorder rec;
    KB_TRY(rec.begin());
    Status st = r.graph ? check(cudaGraphLaunch(exec.get(), stream), "cudaGraphLaunch") : launch(i, stream);
    cudaError_t synced = cudaStreamSynchronize(stream);
    auto spans = rec.end();
    KB_TRY(st);
    KB_TRY(check(synced, "CUPTI sample"));
    if (!spans) return spans.error();
    if (spans->empty()) return make_error(Code::internal, "CUPTI recorded no kernel for a call (did it launch any?)");
    std::uint64_t first = spans->front().start_ns, last = spans->front().end_ns;
    for (const KernelSpan& k : *spans) first = std::min(first, k.start_ns), last = std::max(last, k.end_ns);
    ms.push_back(static_cast<double>(last - first) * 1e-6);
    r.kernels_per_call = std::max(r.kernels_per_call, spans->size());
  }
  Stats st = stats(ms);
  r.median_ms = st.median, r.min_ms = st.min, r.max_ms = st.max;
  r.samples = ms.size();
  return r;
}

Result<Ceilings> measure_ceilings(void* stream) {
  std::size_t free_b = 0, total_b = 0;
  KB_TRY(check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo"));
  std::size_t bytes = std::min<std::size_t>(std::size_t{1} << 30, free_b / 4);
  void *a = nullptr, *b = nullptr;
  KB_TRY(check(cudaMalloc(&a, bytes), "ceiling buffers"));
  if (auto st = check(cudaMalloc(&b, bytes), "ceiling buffers"); !st.ok()) {
    cudaFree(a);
    return st.error();
  }
  cudaMemset(a, 1, bytes);
  TimingOptions o;
  o.flush_l2 = false;  // 1 GiB is far larger than L2 anyway
  o.samples_per_graph = 4;
  o.min_samples = 8;
  auto t = time_gpu(
      [&](int, void* s) {
        return check(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(s)), "copy");
      },
      stream, o);
  // The same copy by an SM kernel; the ceiling is the faster of the two (see copy_kernel.cu).
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    sms = 0;
  auto tk = time_gpu(
      [&](int, void* s) {
        return check(launch_copy_kernel(b, a, bytes & ~std::size_t{15}, sms, static_cast<cudaStream_t>(s)),
                     "copy kernel");
      },
      stream, o);
  // The launch floors, timed exactly as solutions are (default options: cold L2, graph replay).
  auto te = time_gpu([](int, void* s) { return check(launch_empty_kernel(static_cast<cudaStream_t>(s)), "empty kernel"); },
                     stream);
  auto tr = time_gpu(
      [&](int, void* s) { return check(launch_one_read_kernel(b, a, static_cast<cudaStream_t>(s)), "one-read kernel"); },
      stream);
  cudaFree(a);
  cudaFree(b);
  if (!t) return t.error();
  if (!tk) return tk.error();
  if (!te) return te.error();
  if (!tr) return tr.error();
  Ceilings c;
  c.empty_kernel_ms = te->median_ms;
  c.one_read_kernel_ms = tr->median_ms;
  const double memcpy_gbs = 2.0 * static_cast<double>(bytes) / (t->median_ms * 1e-3) / 1e9;
  const double kernel_gbs = 2.0 * static_cast<double>(bytes & ~std::size_t{15}) / (tk->median_ms * 1e-3) / 1e9;
  c.copy_bandwidth_gbs = std::max(memcpy_gbs, kernel_gbs);
  return c;
}

}  // namespace kb::cuda
