// A value measured or created once per CUDA device per process (copy
// bandwidth, the MMA rate, an NVML handle, the L2 flush buffer): the first
// caller on a device computes it under a lock, later callers read it.
#pragma once

#include <map>
#include <mutex>
#include <utility>

#include "common/result.hpp"

namespace kb::cuda {

template <class T>
class PerDevice {
 public:
  // The value for `device`, from make() the first time (kept whatever it is).
  template <class Make>
  T get(int device, Make&& make) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = values_.find(device); it != values_.end()) return it->second;
    T value = std::forward<Make>(make)();
    values_.emplace(device, value);
    return value;
  }

  // As get, with make() returning Result<T>: an error is returned and not
  // kept, so a later call tries again.
  template <class Make>
  Result<T> try_get(int device, Make&& make) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = values_.find(device); it != values_.end()) return it->second;
    Result<T> value = std::forward<Make>(make)();
    if (value) values_.emplace(device, *value);
    return value;
  }

 private:
  std::mutex mutex_;
  std::map<int, T> values_;
};

}  // namespace kb::cuda
