// The device half of kb's random inputs: a deferred input
// (MaterializeOptions::defer_random_floats) generated in GPU memory with the
// bytes fill_random() gives it on the host, from the same functions
// (inputs/random.hpp, compiled by nvcc for the device), so a 1 GB cache is
// neither generated on one host thread nor copied over. CUDA builds only; the
// header has no CUDA types.
#pragma once

#include <cstdint>

#include "common/result.hpp"
#include "inputs/random.hpp"

namespace kb {

// Writes the recipe's storage (dtype_storage_bytes(dtype, numel) bytes) at
// `dst`, device memory of the current device, on `stream` (a cudaStream_t;
// null: the legacy default stream). Asynchronous: launch errors only.
Status device_fill(void* dst, const RandomRecipe& recipe, void* stream);

// device_fill of fresh_recipe(recipe, salt, *serial), with *serial read on
// the device when the kernel runs: a CUDA graph that replays this fill draws
// new values whenever the counter at `serial` (device memory) has moved.
Status device_fill_fresh(void* dst, const RandomRecipe& recipe, std::uint64_t salt, const unsigned long long* serial,
                         void* stream);

// How many storage units (elements; bytes for float4_e2m1) at `src` differ in
// their bits from the recipe's values: 0 when the input is as generated.
// Regenerates the values on the fly (no second copy); synchronizes `stream`.
Result<std::int64_t> device_count_changed(const void* src, const RandomRecipe& recipe, void* stream);

}  // namespace kb
