// Tensor values generated on the device (materialize.hpp's deferred tensors):
// the large inputs of lines judged against the GPU reference are not filled
// on the host and copied over; the device computes the same splitmix64
// stream and stores the same bytes the host would have (materialize_tensor's
// conversions: a uniform double in [0, 1) rounded to the dtype; bools from
// the top bit).
#pragma once

#include <cstdint>

#include "backendbench/trace.hpp"
#include "common/result.hpp"

namespace kb::backendbench {

// Storage elements 0 .. elements-1 of a tensor of `dtype` (floating or b8)
// whose stream starts at `state` (HostTensor::device_fill), at `dst`, on
// `stream` (a cudaStream_t; null: the legacy default stream).
Status device_fill(void* dst, Dtype dtype, std::int64_t elements, std::uint64_t state, void* stream);

}  // namespace kb::backendbench
