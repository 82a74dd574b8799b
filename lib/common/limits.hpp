// Hard limits on what readers accept. Hostile input (deep nesting, absurd
// sizes, huge strings) is refused against these before anything is allocated.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kb::limits {

// Largest JSON / JSONL / safetensors-header file kb reads as text.
inline constexpr std::size_t max_json_file_bytes = std::size_t{256} << 20;  // 256 MiB
// Largest single JSON document (one definition, one JSONL line).
inline constexpr std::size_t max_json_document_bytes = std::size_t{64} << 20;
// JSON nesting depth (FlashInfer Trace objects need < 10).
inline constexpr std::size_t max_json_depth = 64;
// Rank of any tensor.
inline constexpr std::size_t max_tensor_rank = 16;
// Elements in one tensor described by a workload or passed to kb (2^40).
inline constexpr std::int64_t max_tensor_elements = std::int64_t{1} << 40;
// Constraint expression text and its nesting.
inline constexpr std::size_t max_expression_chars = 4096;
inline constexpr std::size_t max_expression_depth = 64;
// Longest line of a BackendBench trace that is parsed; longer lines are
// refused before parsing (real traces' lines are a few KiB).
inline constexpr std::size_t max_backendbench_line_bytes = std::size_t{16} << 20;  // 16 MiB
// Most elements of one list or tuple of a BackendBench line, and most values
// (scalars, containers, keyword arguments) in all of one line. Parsing stops at
// the first one past either bound, so what a line's parse holds (about 200
// bytes per value) stays under half a GB whatever the text.
inline constexpr std::size_t max_backendbench_list_elements = 1'000'000;
inline constexpr std::size_t max_backendbench_line_values = 2'000'000;
// safetensors header (the format itself caps it at 100 MB).
inline constexpr std::size_t max_safetensors_header_bytes = std::size_t{100} << 20;

}  // namespace kb::limits
