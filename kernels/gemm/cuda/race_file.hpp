// The gemm race file (the tuning setting gemm_race_file, KB_GEMM_RACE_FILE;
// common/tuning.hpp): kb_cuda_gemm's race winners kept on disk, so that a
// process does not race a problem another process already raced on the same
// machine (an engine warming up many batch sizes pays 0.1-0.3 s per small-M
// problem and 0.2-7 s per long-K one otherwise; gemv_or_cublaslt.hpp,
// long_k_race.hpp). Like PyTorch's TunableOp results file, but one JSON
// object per line, appended as races finish:
//   {"kb_gemm_race": "long_k", "device": "NVIDIA H200", "sms": 132,
//    "compute_capability": 90, "software": "cuda_runtime 13.0, ...",
//    "kb": "0.1.0", "dtype": "float16", "M": 2048, "N": 8192, "K": 28672,
//    "misaligned": 0, "choice": "kb wgmma (clusters of 2)"}
// "kb_gemm_race" names the race: "long_k" (the choice is a long-K form's
// label) or "small_m" (the gemv or cuBLASLt at M <= 16: the choice is
// "cuBLASLt" or a gemv plan's label such as "gemv 32r bulk x2", and the line
// also holds "scratch_bytes", the stream's split-K scratch the plan was
// raced with, part of the problem).
// A line counts only for the machine it names (GPU model, SM count, compute
// capability, CUDA and cuBLASLt versions, kb's version): other lines are
// kept in the file and passed over. A line that is not such an object is an
// error naming the file and the line; a last line with no newline that does
// not parse is passed over (another process may be writing it), but once a
// line follows it (a machine that went down mid-write) it is an error like
// any other: delete it. Where a problem has several lines for this machine,
// the last one counts. Lookups happen before the race, and also under stream
// capture and gemm_race=0, where kb_cuda_gemm could not race: the file's
// winner instead of the static rule. A choice the race could not have made
// here (a hand-edited line) is an error naming the line. A long-K form forced
// by a test (ForcedLongKForm) neither reads nor writes the file. The parsing has no
// CUDA (built in every build, tested in tests/kernels/test_launch_rules.cpp
// and fuzzed by tests/fuzz/fuzz_race_file.cpp); race_file_find and
// race_file_keep, at the end, are in CUDA builds only.
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

// The races a file keeps ("kb_gemm_race").
inline constexpr std::string_view kRaceLongK = "long_k", kRaceSmallM = "small_m";

struct RaceFileEntry {
  std::string race = std::string(kRaceLongK);  // kRaceLongK or kRaceSmallM
  RaceMachine machine;
  RaceKey key;          // its device is not kept (0 when read); scratch_bytes only for small_m (else 0)
  std::string choice;   // the winner's label (long_k_form_label; "cuBLASLt" or the gemv plan's label)
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

// The choice the file at `path` holds for `key` (its device ignored; its
// scratch_bytes too for long_k) in race `race` on `machine`: the last such line. The file is read once per
// process and path (a missing file holds nothing); what record() appends
// is seen at once. Errors: the file cannot be read, or a bad line.
Result<std::optional<RaceFileEntry>> race_file_lookup(const std::string& path, const RaceMachine& machine,
                                                      std::string_view race, const RaceKey& key);

// Appends e as one line to the file at `path` (created if missing; one
// O_APPEND write, then fsync: common/append_line.hpp). Errors name the file.
Status race_file_record(const std::string& path, const RaceFileEntry& e);

// The file the current call keeps its races in: the tuning setting
// gemm_race_file (common/tuning.hpp); empty where there is none.
std::string race_file_path();

// ---- CUDA builds only (race_file_cuda.cpp): the file of this process ----

// The line the file at `path` (race_file_path()) holds for `key` in race
// `race` on the machine of key.device (nothing where `path` is empty);
// errors as race_file_lookup's.
Result<std::optional<RaceFileEntry>> race_file_find(const std::string& path, std::string_view race, const RaceKey& key);

// Appends the winner `choice` of race `race` on `key` (on the machine of
// key.device) to the file at `path`; nothing where `path` is empty.
Status race_file_keep(const std::string& path, std::string_view race, const RaceKey& key, std::string choice);

}  // namespace kb::kernels::gemm_cuda
