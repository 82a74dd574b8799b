// time_gpu's batch sizing and throttle handling (cuda/timing.hpp):
//  - batches are cut to about batch_target_ms of work: a call of four 1 GiB
//    copies (milliseconds) runs in batches of a few samples, a copy of
//    16 MiB in full batches of samples_per_graph;
//  - a threshold above the maximum clock (every batch reads "throttled")
//    sets every batch aside, rests, and at the time cap uses the set-aside
//    samples after all: a median, flagged throttled, none left set aside;
//  - threshold 0 never sets anything aside;
//  - the clock sampler (clock_sampler.hpp) reads an average SM clock over a
//    few milliseconds of copies between 20% and 105% of the maximum, and
//    the timer reports the lowest kept batch's average.
// Exit 77 without a CUDA device. The throttle cases need NVML's clock
// readings; where NVML is absent they say so and check only the sizing.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda/clock_sampler.hpp"
#include "cuda/device.hpp"
#include "cuda/nvml.hpp"
#include "cuda/timing.hpp"
#include "timing_test_support.hpp"

using kb_timing_test::cuda_status;
using kb_timing_test::expect;
using kb_timing_test::g_failures;

int main() {
  cudaStream_t stream = nullptr;
  int sms = 0;
  if (int code = kb_timing_test::open_device(&stream, &sms)) return code;
  constexpr std::size_t kBig = std::size_t{1} << 30, kSmall = std::size_t{16} << 20;
  void *src = nullptr, *dst = nullptr;
  if (cudaMalloc(&src, kBig) != cudaSuccess || cudaMalloc(&dst, kBig) != cudaSuccess) {
    std::printf("FAIL: cudaMalloc\n");
    return 1;
  }
  auto copy = [&](std::size_t bytes, int times) {
    return [=](int, void* s) -> kb::Status {
      for (int i = 0; i < times; ++i)
        if (cudaError_t e = kb::cuda::launch_copy_kernel(dst, src, bytes, sms, static_cast<cudaStream_t>(s));
            e != cudaSuccess)
          return cuda_status(e);
      return kb::ok_status();
    };
  };
  auto report = [](const char* what, const kb::Result<kb::cuda::TimingResult>& t) {
    if (t) std::printf("%s: %s\n", what, t->method().c_str());
    else std::printf("%s: error %s\n", what, t.error().message.c_str());
    return static_cast<bool>(t);
  };

  // Sizing: four 1 GiB copies (2 GiB moved each, about 0.6 ms apiece on an H100 / H200) a call.
  kb::cuda::TimingOptions sized;
  sized.max_time_s = 0.5;
  auto long_call = kb::cuda::time_gpu(copy(kBig, 4), stream, sized);
  auto short_call = kb::cuda::time_gpu(copy(kSmall, 1), stream, sized);
  if (!report("4 x 1 GiB copy", long_call) || !report("16 MiB copy", short_call)) return 1;
  expect(long_call->samples_per_batch >= 1 && long_call->samples_per_batch < 16,
         "a call of milliseconds runs in short batches: " + std::to_string(long_call->samples_per_batch));
  expect(short_call->samples_per_batch == 16,
         "a short call runs in batches of samples_per_graph: " + std::to_string(short_call->samples_per_batch));
  kb::cuda::TimingOptions unsized = sized;
  unsized.batch_target_ms = 0;
  auto long_unsized = kb::cuda::time_gpu(copy(kBig, 4), stream, unsized);
  if (!report("4 x 1 GiB copy, batch_target_ms 0", long_unsized)) return 1;
  expect(long_unsized->samples_per_batch == 16, "batch_target_ms 0: batches of samples_per_graph");

  // The clock sampler directly: sample, 2 GiB of copies, sample.
  {
    constexpr std::size_t kWords = 2 * kb::cuda::kClockSamplerSlots;
    unsigned long long* slots = nullptr;
    std::vector<unsigned long long> host(2 * kWords);
    bool ok = cudaMalloc(reinterpret_cast<void**>(&slots), host.size() * 8) == cudaSuccess &&
              cudaMemsetAsync(slots, 0, host.size() * 8, stream) == cudaSuccess &&
              kb::cuda::launch_clock_sampler(slots, sms, stream) == cudaSuccess;
    for (int i = 0; ok && i < 2; ++i) ok = copy(kBig, 1)(0, stream).ok();
    ok = ok && kb::cuda::launch_clock_sampler(slots + kWords, sms, stream) == cudaSuccess &&
         cudaStreamSynchronize(stream) == cudaSuccess &&
         cudaMemcpy(host.data(), slots, host.size() * 8, cudaMemcpyDeviceToHost) == cudaSuccess;
    int khz = 0;
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
    const double mhz = ok ? kb::cuda::average_sm_clock_mhz(host.data(), host.data() + kWords) : 0;
    std::printf("clock sampler over 2 x 1 GiB copies: %.0f MHz (peak %d MHz)\n", mhz, khz / 1000);
    expect(ok && mhz > 0.2 * khz / 1000 && mhz < 1.05 * khz / 1000, "the sampled average clock is plausible");
    cudaFree(slots);
  }
  expect(long_call->sm_clock_mhz_lowest_kept > 0 && long_call->sm_clock_mhz_lowest_kept <= 1.05 * long_call->sm_clock_mhz_max,
         "the timer reports its lowest kept batch clock: " + std::to_string(long_call->sm_clock_mhz_lowest_kept) + " MHz");

  if (kb::cuda::max_sm_clock_mhz(0) == 0) {
    std::printf("throttle cases not run: NVML reads no SM clock here\n");
  } else {
    // Every batch "throttled": set aside, rest, re-warm; at the time cap the set-aside samples are used.
    kb::cuda::TimingOptions always = sized;
    always.throttle_threshold = 2.0;
    always.max_time_s = 0.3;
    auto t0 = std::chrono::steady_clock::now();
    auto forced = kb::cuda::time_gpu(copy(kSmall, 1), stream, always);
    double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!report("16 MiB copy, threshold 2.0", forced)) return 1;
    expect(forced->samples > 0 && forced->throttled && forced->throttled_samples_set_aside == 0,
           "all batches set aside: the set-aside samples measured, flagged throttled (" +
               std::to_string(forced->samples) + " samples)");
    expect(wall_s >= always.max_time_s, "it ran to the time cap, resting between batches: " + std::to_string(wall_s) + " s");
    // The rests hold the GPU idle: with 50 ms rests, at most a batch per 25 ms of the 0.3 s.
    expect(forced->samples <= static_cast<std::size_t>(16 * (always.max_time_s / 0.025 + 2)),
           "rests between the batches: " + std::to_string(forced->samples) + " samples");

    kb::cuda::TimingOptions never = sized;
    never.throttle_threshold = 0;
    auto kept = kb::cuda::time_gpu(copy(kSmall, 1), stream, never);
    if (!report("16 MiB copy, threshold 0", kept)) return 1;
    expect(kept->throttled_samples_set_aside == 0 && kept->samples >= 10, "threshold 0: nothing set aside");
  }
  cudaFree(src);
  cudaFree(dst);
  std::printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "passed", g_failures);
  return g_failures ? 1 : 0;
}
