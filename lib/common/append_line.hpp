// Appending one line to a JSON-lines file so that no fault loses or mangles
// it: trace files (harness/trace_writer.hpp) and KB_GEMM_RACE_FILE
// (kernels/gemm/cuda/race_file.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace kb {

// Appends `line` and a newline to the file at `path` (created if missing)
// with one write(2) on an O_APPEND descriptor, so that processes sharing the
// file do not interleave their lines, then fsyncs it. A file whose last line
// has no newline (a writer killed mid-line) gets one first, so the new line
// stands on its own. Returns the byte offset where `line` starts. Errors
// (Code::io_error) name the file.
Result<std::uint64_t> append_line(const std::string& path, std::string_view line);

}  // namespace kb
