// Building a Solution JSON (language cpp or cuda) into a kb plugin.
//
// The sources go to <cache>/solutions/<sha256>/src, where the hash covers the
// solution, its definition's signature, the compiler and its flags; kb adds a
// generated file that #includes the entry file and defines
// kb_plugin_entry_v1, calling the entry symbol with destination passing
// (positional, definition order) and checking its parameter list at compile
// time. Two kb processes may build at once: each builds in a private temporary
// directory under an exclusive lock on <sha256>.lock and renames it into
// place; the loser of a race reuses the winner's build. A compiler failure is
// cached with its log (it is deterministic); a missing compiler or a build
// that outran its limit is not.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.hpp"
#include "schema/model.hpp"

namespace kb::plugin {

// Each compiler run is a child in its own process group under these limits;
// past one it is killed (the whole group) or fails, and the build is a
// COMPILE_ERROR naming the limit. They bound what a hostile source can cost
// the machine: `#include "/dev/zero"` behind a macro meets memory_bytes.
struct BuildLimits {
  double wall_seconds = 600;                    // the whole compiler run
  double cpu_seconds = 600;                     // RLIMIT_CPU of each compiler process
  std::uint64_t memory_bytes = 0;               // RLIMIT_AS of each compiler process; 0: half the machine's memory, at most 8 GiB
  std::uint64_t output_bytes = 512ull << 20;    // RLIMIT_FSIZE: any one file a compiler process writes
};

struct BuildOptions {
  std::string cache_dir;  // required
  BuildLimits limits;
};

// Sources may include their own files and the system's headers, never a path
// outside the solution: an absolute path (/dev/zero, /proc/self/..., /etc/...)
// or one whose '..' climbs out of src/ in #include, #include_next, #import,
// #embed or an assembler .incbin. Returns "" or what is refused, with the file
// and line ("src/a.cpp:3: ..."). Macros can still compute a path; the limits
// above bound what that costs.
std::string refused_include(const std::string& path, std::string_view content);

struct BuildResult {
  std::string library;  // the built plugin; "" when the build failed
  std::string log;      // the compiler's command line and output
  std::string note;     // one line: where, and whether it was built now or reused
  bool cached = false;  // an earlier build (or failed build) was reused
  bool ok() const { return !library.empty(); }
};

// Errors: io_error (the cache cannot be written), unsupported (language).
// A failed compile is a BuildResult with ok() false.
Result<BuildResult> build_solution(const Solution& s, const Definition& d, const BuildOptions& options);

// The generated entry-point source for `s` (exposed for tests).
std::string generate_entry_source(const Solution& s, const Definition& d);

// Lowercase hex SHA-256 of `data` (FIPS 180-4).
std::string sha256_hex(std::string_view data);

}  // namespace kb::plugin
