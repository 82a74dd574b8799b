// KB_GEMM_RACE_FILE: kb_cuda_gemm's long-K race winners kept on disk, so
// that a process does not race a problem another process already raced on
// the same machine (an engine warming up many batch sizes pays 0.2-7 s per
// long-K shape otherwise; long_k_race.hpp). Like PyTorch's TunableOp
// results file, but one JSON object per line, appended as races finish:
//   {"kb_gemm_race": "long_k", "device": "NVIDIA H200", "sms": 132,
//    "compute_capability": 90, "software": "cuda_runtime 13.0, ...",
//    "kb": "0.1.0", "dtype": "float16", "M": 2048, "N": 8192, "K": 28672,
//    "misaligned": 0, "choice": "kb wgmma (clusters of 2)"}
// A line counts only for the machine it names (GPU model, SM count, compute
// capability, CUDA and cuBLASLt versions, kb's version): other lines are
// kept in the file and passed over. A line that is not such an object is an
// error naming the file and the line; a last line with no newline that does
// not parse is passed over (another process may be writing it), but once a
// line follows it (a machine that went down mid-write) it is an error like
// any other: delete it. Where a problem has several lines for this machine,
// the last one counts. Lookups happen before the race, and also under stream
// capture and KB_GEMM_RACE=0, where kb_cuda_gemm could not race: the file's
// winner instead of the static rule. The small-M race (gemv or
// cuBLASLt, gemv_or_cublaslt.hpp) is not kept: its answer is a gemv plan,
// and its race costs 0.1-0.3 s. No CUDA here (built in every build, tested
// in tests/kernels/test_launch_rules.cpp and fuzzed by
// tests/fuzz/fuzz_race_file.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "race.hpp"

namespace kb::kernels::gemm_cuda {

// What a line's race ran on.
struct RaceMachine {
  std::string device;          // the GPU's name (cudaDeviceProp::name)
  int sms = 0;                 // multiprocessors
  int compute_capability = 0;  // major * 10 + minor
  std::string software;        // CUDA runtime, driver and cuBLASLt versions
  std::string kb;              // kb's version
  bool operator==(const RaceMachine&) const = default;
};

struct RaceFileEntry {
  RaceMachine machine;
  RaceKey key;          // its device and scratch_bytes are not kept (0 when read)
  std::string choice;   // the winner's label (long_k_form_label)
  std::size_t line = 0; // where it was read (1-based; 0: not read from a file)
};

// The entry as one line of JSON, without the newline.
std::string race_file_line(const RaceFileEntry& e);

// One line (without its newline): the entry, or an error (Code::parse_error)
// "<origin>:<number>: ...".
Result<RaceFileEntry> parse_race_file_line(std::string_view line, std::string_view origin, std::size_t number);

// Every entry of a file's text, blank lines skipped; the first bad line's
// error. A last line with no newline that does not parse is passed over.
Result<std::vector<RaceFileEntry>> parse_race_file(std::string_view text, std::string_view origin);

// The choice the file at `path` holds for `key` (device and scratch_bytes
// ignored) on `machine`: the last such line. The file is read once per
// process and path (a missing file holds nothing); what record() appends
// is seen at once. Errors: the file cannot be read, or a bad line.
Result<std::optional<RaceFileEntry>> race_file_lookup(const std::string& path, const RaceMachine& machine,
                                                      const RaceKey& key);

// Appends e as one line to the file at `path` (created if missing; one
// O_APPEND write, then fsync: common/append_line.hpp). Errors name the file.
Status race_file_record(const std::string& path, const RaceFileEntry& e);

}  // namespace kb::kernels::gemm_cuda
