// Running a Python script kb carries as text (the PyTorch references of
// definitions and of BackendBench lines): in a private temporary directory,
// stdin from /dev/null, stdout and stderr to files there, killed past a time
// limit. The script talks to kb through files in that directory.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace kb::python {

// Removes its directory (and everything in it) when it goes out of scope.
struct TempDir {
  std::filesystem::path path;
  ~TempDir();
};

// A new directory $TMPDIR/<prefix>-XXXXXX (TMPDIR unset: /tmp).
Result<std::filesystem::path> make_temp_dir(std::string_view prefix);

Status write_text(const std::filesystem::path& p, std::string_view text);
std::string read_text(const std::filesystem::path& p);  // "" when it cannot be read

// The last `n` non-empty lines of `text`, each on a new line and indented.
std::string last_lines(const std::string& text, std::size_t n);

struct ScriptRun {
  int exit_code = 0;        // 128 + the signal when one ended it
  bool timed_out = false;   // killed past the limit (exit_code is then 0)
  std::string error;        // DIR/error.txt, where the script explains a failure
  std::string stderr_text;  // everything it wrote to stderr
};

// Writes `script` to DIR/script_name and runs `python -B DIR/script_name DIR
// extra...`. An Error only when python cannot be started or waited for.
Result<ScriptRun> run_script(const std::string& python, double timeout_s, const std::filesystem::path& dir,
                             std::string_view script_name, std::string_view script,
                             const std::vector<std::string>& extra);

}  // namespace kb::python
