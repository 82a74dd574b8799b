// `kb backendbench parse FILE`: parse a BackendBench / TritonBench trace file
// and report every line that does not parse.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace kb::backendbench {

// args: the words after `kb backendbench`, e.g. {"parse", "traces.txt"}.
// Prints each failure as "file:line:col: message" on err, then
// "parsed N of M lines" on out. Returns 0 when every line parsed, 1 when some
// did not (or the file cannot be read), 2 on bad usage; --help prints the
// usage on out and returns 0.
int run_parse_command(const std::vector<std::string>& args, std::FILE* out, std::FILE* err);

extern const char* const kParseUsage;

}  // namespace kb::backendbench
