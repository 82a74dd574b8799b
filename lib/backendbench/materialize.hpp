// Trace lines -> tensors. BackendBench's value distributions (notes/formats.md):
// floats uniform in [0, 1), signed ints uniform in [-9, 9], u8 in [0, 9],
// bools 50/50; complex parts like floats. Every storage element of the exact
// strided layout is filled (a view of span() = 1 + sum((size-1)*stride)
// elements; overlapping 0-strides share values, gaps hold values too), from
// a splitmix64 stream seeded by (seed, operator, line, argument), so the same
// seed gives the same tensors on every run and machine. Index arguments are
// made valid afterwards by the operator's prepare function (ops.hpp).
#pragma once

#include <cstdint>
#include <string_view>

#include "backendbench/ops.hpp"
#include "backendbench/trace.hpp"
#include "common/result.hpp"

namespace kb::backendbench {

inline constexpr std::uint64_t default_seed = 20240917;

// A tensor of value `v` (Kind::tensor): strides as written or contiguous.
// meta: shape/dtype only. Refuses views over `max_elements` storage elements.
// defer_above > 0: a floating or bool tensor of more storage elements is not
// filled here; it gets HostTensor::device_fill and empty storage instead (the
// device generates the same values, without a host pass or a copy).
Result<HostTensor> materialize_tensor(const Value& v, Rng& rng, bool meta,
                                      std::int64_t max_elements = std::int64_t{1} << 34, std::int64_t defer_above = 0);

// The whole call of one line. `args` must outlive the Call (it points into it).
// The seed mixes `seed`, the operator name and `line_index` (0-based within the operator).
Result<Call> materialize_call(std::string_view op, const Args& args, std::uint64_t seed, std::size_t line_index,
                              bool meta, std::int64_t defer_above = 0);

// The call every run of a line gets (the CPU and CUDA runs, PyTorch's): its
// tensors with values (materialize_call, not meta), then its index arguments
// made valid by the operator's prepare function (ops.hpp) from a stream of its
// own. An error names the step: "materialize: ..." or "prepare: ...".
Result<Call> materialize_prepared(const OpInfo& info, const Args& args, std::uint64_t seed, std::size_t line_index,
                                  std::int64_t defer_above = 0);

// Per-line seed used by materialize_call (the same for a prepare function's Rng).
std::uint64_t line_seed(std::uint64_t seed, std::string_view op, std::size_t line_index);

}  // namespace kb::backendbench
