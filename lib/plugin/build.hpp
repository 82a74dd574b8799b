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

#include <string>
#include <string_view>

#include "common/result.hpp"
#include "schema/model.hpp"

namespace kb::plugin {

struct BuildOptions {
  std::string cache_dir;   // required
  double timeout_s = 600;  // one compiler run
};

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
