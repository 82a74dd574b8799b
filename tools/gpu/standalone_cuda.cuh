// Shared by the one-file GPU experiments in tools/gpu (copy_variants.cu,
// mla_gather_ceiling.cu, gemv_read_ceiling.cu): CK(call) prints the failing CUDA call with its
// place and returns 1 from main; median_event_ms times a run with events.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));          \
      return 1;                                                                                \
    }                                                                                          \
  } while (0)

// Median of `reps` event-timed runs on the default stream; `before` runs
// before each one, outside the events' interval (an L2 flush, or nothing).
inline double median_event_ms(int reps, const std::function<void()>& before, const std::function<void()>& run) {
  cudaEvent_t a, b;
  cudaEventCreate(&a), cudaEventCreate(&b);
  std::vector<double> ms;
  for (int s = 0; s < reps; ++s) {
    before();
    cudaEventRecord(a);
    run();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float t = 0.f;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t);
  }
  cudaEventDestroy(a), cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}
