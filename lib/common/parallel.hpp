// Host-side data parallelism for the judge and the input generator: items of
// independent work spread over a few threads.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

namespace kb {

// Runs work(i) once for every i in [0, count), on the calling thread and up to
// max_threads - 1 others (never more than the machine's hardware threads or
// than count). Items are taken one at a time from a shared counter, so uneven
// items balance, and a thread the system refuses to start costs only speed:
// the threads that did start finish every item. work must be safe to call
// concurrently for different i and must not throw. Returns after every item.
template <class Work>
void parallel_for(std::int64_t count, unsigned max_threads, Work&& work) {
  if (count <= 0) return;
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const auto threads = static_cast<unsigned>(std::min<std::int64_t>({count, std::max(1u, max_threads), hw}));
  if (threads <= 1) {
    for (std::int64_t i = 0; i < count; ++i) work(i);
    return;
  }
  std::atomic<std::int64_t> next{0};
  auto drain = [&] {
    for (std::int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < count;) work(i);
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (unsigned t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(drain);
    } catch (const std::system_error&) {
      break;
    }
  }
  drain();
  for (auto& t : pool) t.join();
}

}  // namespace kb
