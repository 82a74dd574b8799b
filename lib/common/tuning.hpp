// kb's tuning settings: the one table of choices a user or developer may
// change (tuning.cpp holds it), and how a call finds the settings that apply
// to it.
//
// Settings reach kb's code three ways, the first that applies winning:
//  1. a scope (Scope below) installed by the C ABI for the duration of a call
//     made with a kb_context whose options give a tuning string or a log
//     callback (capi/);
//  2. the process default, set by set_process_default() (the kb command sets
//     it from its flags and the environment; kb_gemm_race_file_set changes its
//     race file);
//  3. until then, the built-in defaults with the environment's overrides
//     (from_environment(); a value the table refuses is left at its default).
// The environment variable of an entry is KB_ and its name in capitals
// (gemm_race -> KB_GEMM_RACE). This file's getenv is the only place kb reads
// a KB_* variable.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace kb::tuning {

// How a cold sample's L2 flush leaves the L2 (lib/cuda/timing.hpp says why
// clean is the default).
enum class L2Flush { write, clean };

// Diagnostic levels, most severe first; a message is delivered when its level
// is at or above Settings::log (log=info delivers error, warn and info).
enum class LogLevel { off = 0, error = 1, warn = 2, info = 3 };

struct Settings {
  bool gemm_race = true;            // gemm_race
  std::string gemm_race_file;       // gemm_race_file ("": none)
  bool cublaslt_autotune = true;    // cublaslt_autotune
  L2Flush l2_flush = L2Flush::clean;  // l2_flush
  double throttle_threshold = 0.75;   // throttle_threshold
  std::string cupti_library;        // cupti_library ("": the usual places)
  std::string python = "python3";   // python
  std::string cache_dir;            // cache_dir ("": XDG_CACHE_HOME/kb, ~/.cache/kb or /tmp)
  std::string worker;               // worker ("": the build's, then the installed kb-worker)
  LogLevel log = LogLevel::warn;    // log
  bool operator==(const Settings&) const = default;
};

// One entry of the table.
struct Entry {
  const char* name;        // "gemm_race"
  const char* env;         // "KB_GEMM_RACE"
  const char* values;      // the allowed values, e.g. "0|1"; "<path>", "<number in [0, 1]>"
  const char* default_value;  // as text, parseable by set()
  const char* doc;         // what it changes
};

// The table, in a fixed order.
std::span<const Entry> entries();

// The table as text, one entry a paragraph: name (environment variable),
// allowed values, default, what it changes. `kb tuning`-style listings and
// the documentation print this.
std::string table();

// Sets entry `name` of `s` from its text form; an error (Code::invalid_argument)
// naming the entry and its environment variable where the name is unknown or
// the value not allowed.
Status set(Settings& s, std::string_view name, std::string_view value);

// The text form of entry `name` in `s` ("" for an unknown name).
std::string get(const Settings& s, std::string_view name);

// Applies "name=value,name=value" to `s` (spaces around names and values
// ignored; an empty string changes nothing). Stops at the first bad item,
// whose error names it.
Status apply(Settings& s, std::string_view list);

// The built-in defaults with every KB_* variable of the table that is set in
// the environment applied; the first bad value is an error naming its
// variable.
Result<Settings> from_environment();

// The process default (see the top). Thread-safe; a call already running
// keeps the settings it started with.
Settings process_default();
void set_process_default(const Settings& s);

// The settings that apply to the calling thread now (see the top). Cheap: no
// lock, no allocation once the process default has been read.
const Settings& current();

// A diagnostic sink: level, one-line message, the user data it was installed with.
using LogFn = void (*)(LogLevel level, const char* message, void* user_data);

// For the duration of a C ABI call: `settings` (nullable: keep the process
// default) and a log sink (nullable fn: keep the process sink) become the
// calling thread's. Scopes nest; the innermost wins. Neither is copied: both
// must outlive the scope.
class Scope {
 public:
  Scope(const Settings* settings, LogFn log, void* log_user_data) noexcept;
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  const Settings* prev_settings_;
  LogFn prev_log_;
  void* prev_user_data_;
};

}  // namespace kb::tuning

namespace kb::log {

using tuning::LogLevel;

// "error", "warn", "info" ("off" for off).
const char* level_name(LogLevel level) noexcept;

// Delivers `message` to the current scope's sink, else to the process sink
// (none unless set_process_sink was called: then nothing is delivered), when
// `level` passes tuning::current().log. Never throws; a sink must not call
// back into kb.
void emit(LogLevel level, std::string_view message) noexcept;

// Whether emit(level, ...) would deliver anything now: callers skip building
// a message nobody reads.
bool enabled(LogLevel level) noexcept;

// The process sink (nullptr fn: none). The kb command installs one that
// prints. Thread-safe.
void set_process_sink(tuning::LogFn fn, void* user_data);

}  // namespace kb::log
