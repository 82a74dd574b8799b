// CUPTI's kernel time (cuda/timing.hpp, time_kernels_cupti) against the CUDA
// events of time_gpu on kernels whose cost is known:
//  - kb's copy kernel over 512 MiB (hundreds of us): CUPTI at 0.9 to 1.05 of
//    the events (which also hold the launch and event overhead, a few us; the
//    upper slack is for the clock, which the events' graph replay keeps high
//    and CUPTI's one-call-at-a-time samples may not);
//  - the same bytes in two launches of 256 MiB: two kernels a call, the span
//    within 10% of the one launch;
//  - an empty kernel: one kernel a call, shorter than the events' time (the
//    launch floor that CUPTI leaves out);
//  - two empty kernels with 300 us of host work between their launches (as
//    cuBLASLt's split-K GEMM and its reduction have some): the span holds the
//    kernels, not the host's gap, because each call is replayed from a graph.
// Exit 77 without a CUDA device, or where CUPTI cannot record (it says why).
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <string>

#include "cuda/cupti.hpp"
#include "cuda/device.hpp"
#include "cuda/timing.hpp"
#include "timing_test_support.hpp"

using kb_timing_test::cuda_status;
using kb_timing_test::expect;
using kb_timing_test::g_failures;

int main() {
  cudaStream_t stream = nullptr;
  int sms = 0;
  if (int code = kb_timing_test::open_device(&stream, &sms)) return code;
  std::string why;
  if (!kb::cuda::cupti_available(&why)) {
    std::printf("skipped: CUPTI cannot record here: %s\n", why.c_str());
    return 77;
  }
  constexpr std::size_t kBytes = std::size_t{512} << 20;
  void *src = nullptr, *dst = nullptr;
  if (cudaMalloc(&src, kBytes) != cudaSuccess || cudaMalloc(&dst, kBytes) != cudaSuccess) {
    std::printf("FAIL: cudaMalloc\n");
    return 1;
  }
  auto copy_once = [&](int, void* s) {
    return cuda_status(kb::cuda::launch_copy_kernel(dst, src, kBytes, sms, static_cast<cudaStream_t>(s)));
  };
  auto copy_twice = [&](int, void* s) -> kb::Status {
    const std::size_t half = kBytes / 2;
    auto st = static_cast<cudaStream_t>(s);
    if (cudaError_t e = kb::cuda::launch_copy_kernel(dst, src, half, sms, st); e != cudaSuccess) return cuda_status(e);
    return cuda_status(kb::cuda::launch_copy_kernel(static_cast<char*>(dst) + half, static_cast<const char*>(src) + half,
                                                    half, sms, st));
  };
  auto empty = [&](int, void* s) { return cuda_status(kb::cuda::launch_empty_kernel(static_cast<cudaStream_t>(s))); };
  auto empty_host_gap_empty = [&](int, void* s) -> kb::Status {
    auto st = static_cast<cudaStream_t>(s);
    if (cudaError_t e = kb::cuda::launch_empty_kernel(st); e != cudaSuccess) return cuda_status(e);
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    return cuda_status(kb::cuda::launch_empty_kernel(st));
  };

  auto ev_copy = kb::cuda::time_gpu(copy_once, stream);
  auto cu_copy = kb::cuda::time_kernels_cupti(copy_once, stream);
  auto cu_copy2 = kb::cuda::time_kernels_cupti(copy_twice, stream);
  auto ev_empty = kb::cuda::time_gpu(empty, stream);
  auto cu_empty = kb::cuda::time_kernels_cupti(empty, stream);
  auto cu_gap = kb::cuda::time_kernels_cupti(empty_host_gap_empty, stream, 10);
  if (!cu_gap) {
    std::printf("FAIL: %s\n", cu_gap.error().message.c_str());
    return 1;
  }
  if (!ev_copy || !ev_empty || !cu_copy || !cu_copy2 || !cu_empty) {
    std::printf("FAIL: %s\n", (!ev_copy    ? ev_copy.error().message
                               : !ev_empty ? ev_empty.error().message
                               : !cu_copy  ? cu_copy.error().message
                               : !cu_copy2 ? cu_copy2.error().message
                                           : cu_empty.error().message)
                                  .c_str());
    return 1;
  }
  std::printf("copy 512 MiB: events %.4f ms, CUPTI %.4f ms (%zu kernel a call); as two launches: CUPTI %.4f ms (%zu)\n",
              ev_copy->median_ms, cu_copy->median_ms, cu_copy->kernels_per_call, cu_copy2->median_ms,
              cu_copy2->kernels_per_call);
  std::printf("empty kernel: events %.4f ms, CUPTI %.4f ms (%zu kernel a call)\n", ev_empty->median_ms,
              cu_empty->median_ms, cu_empty->kernels_per_call);
  const double r = cu_copy->median_ms / ev_copy->median_ms;
  expect(cu_copy->kernels_per_call == 1 && cu_empty->kernels_per_call == 1 && cu_copy2->kernels_per_call == 2,
         "kernels counted per call: 1, 1 and 2");
  expect(r > 0.9 && r <= 1.05, "copy: CUPTI / events = " + std::to_string(r) + " (in (0.9, 1.05])");
  const double r2 = cu_copy2->median_ms / cu_copy->median_ms;
  expect(r2 > 0.9 && r2 < 1.1, "two launches / one: " + std::to_string(r2) + " (in (0.9, 1.1))");
  expect(cu_empty->median_ms > 0 && cu_empty->median_ms < ev_empty->median_ms,
         "empty kernel: CUPTI " + std::to_string(cu_empty->median_ms * 1e3) + " us below the events' " +
             std::to_string(ev_empty->median_ms * 1e3) + " us");
  std::printf("two empty kernels, 300 us of host work between their launches: CUPTI %.4f ms (%zu kernels a call)\n",
              cu_gap->median_ms, cu_gap->kernels_per_call);
  expect(cu_copy->graph && cu_copy2->graph && cu_empty->graph && cu_gap->graph, "every call replayed from a graph");
  expect(cu_gap->kernels_per_call == 2 && cu_gap->median_ms < 0.05,
         "host gap left out: span " + std::to_string(cu_gap->median_ms * 1e3) + " us (under 50)");
  cudaFree(src);
  cudaFree(dst);
  std::printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "passed", g_failures);
  return g_failures ? 1 : 0;
}
