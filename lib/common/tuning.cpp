// The tuning table (tuning.hpp), the process default, the per-call scopes and
// the diagnostic sink.
#include "common/tuning.hpp"
#include "common/printable.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

namespace kb::tuning {

namespace {

constexpr Entry kEntries[] = {
    {"gemm_race", "KB_GEMM_RACE", "0|1", "1",
     "kb_cuda_gemm times its candidate forms on each problem's first uncaptured call and keeps the fastest (the gemv's "
     "plans or cuBLASLt at M <= 16, the long-K forms). 0: the static rule for problems not yet raced (a race file's "
     "winners are still taken)."},
    {"gemm_race_file", "KB_GEMM_RACE_FILE", "<path>|\"\"", "",
     "A JSON-lines file keeping kb_cuda_gemm's race winners across processes: a problem it holds for this machine is "
     "not raced, and each race appends its winner. \"\": none."},
    {"cublaslt_autotune", "KB_CUBLASLT_AUTOTUNE", "0|1", "1",
     "kb's cuBLASLt plans time the heuristic's candidates (and kb's tile and cluster variants) on a shape's first "
     "uncaptured call and keep the fastest. 0: the heuristic's first algorithm."},
    {"l2_flush", "KB_L2_FLUSH", "clean|write", "clean",
     "How a cold sample's L2 flush leaves the L2: clean (memset twice the L2 size, then read it back: no dirty "
     "lines left) or write (the memset alone, as nvbench and FlashInfer-Bench do)."},
    {"throttle_threshold", "KB_THROTTLE_THRESHOLD", "<number in [0, 1]>", "0.75",
     "A timed batch whose average SM clock was under this fraction of the maximum is set aside and the GPU rests "
     "(nvbench's rule). 0 keeps every sample."},
    {"cupti_library", "KB_CUPTI_LIBRARY", "<path>|\"\"", "",
     "The libcupti kb opens for per-kernel timing; \"\": libcupti.so.13 or libcupti.so from the loader's path, then "
     "the CUDA toolkit's usual places."},
    {"python", "KB_PYTHON", "<program>", "python3",
     "The Python interpreter that runs definitions' PyTorch references."},
    {"cache_dir", "KB_CACHE_DIR", "<path>|\"\"", "",
     "Where Solution JSON builds are cached; \"\": $XDG_CACHE_HOME/kb, else ~/.cache/kb, else /tmp/kb-cache-<uid>."},
    {"worker", "KB_WORKER", "<path>|\"\"", "",
     "The kb-worker executable that runs outside solutions; \"\": the build tree's, then the installed one."},
    {"log", "KB_LOG", "off|error|warn|info", "warn",
     "The least severe diagnostic delivered to the log callback (the kb command prints them to stderr). info adds "
     "kb's notes: each cuBLASLt plan's choice and its candidates' times, each gemm race's result."},
};

Error bad_value(const Entry& e, std::string_view value, std::string_view why) {
  return Error{Code::invalid_argument,
               fmt::format("tuning {} ({}): \"{}\" is not allowed: {} (allowed: {})", e.name, e.env, value, why,
                           e.values)};
}

const Entry* find(std::string_view name) {
  for (const Entry& e : kEntries)
    if (name == e.name) return &e;
  return nullptr;
}

std::string known_names() {
  std::string out;
  for (const Entry& e : kEntries) out += fmt::format("{}{}", out.empty() ? "" : ", ", e.name);
  return out;
}

Status set_bool(const Entry& e, bool& field, std::string_view v) {
  if (v == "1") return field = true, ok_status();
  if (v == "0") return field = false, ok_status();
  return bad_value(e, v, "not 0 or 1");
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The process default: immutable once published; replaced ones are kept (a call
// may still read them), reachable from `retired`.
std::atomic<const Settings*> g_default{nullptr};
std::mutex g_default_mutex;
std::vector<std::unique_ptr<const Settings>>& retired() {
  static auto* v = new std::vector<std::unique_ptr<const Settings>>;
  return *v;
}

const Settings* publish(Settings s) {
  auto owned = std::make_unique<const Settings>(std::move(s));
  const Settings* p = owned.get();
  retired().push_back(std::move(owned));
  g_default.store(p, std::memory_order_release);
  return p;
}

// The defaults with each valid environment override (an invalid one is left at its default: the library
// has no one to tell; the kb command reads from_environment() and reports it).
Settings lenient_environment() {
  Settings s;
  for (const Entry& e : kEntries)
    if (const char* v = std::getenv(e.env)) (void)set(s, e.name, v);
  return s;
}

const Settings& process_settings() {
  if (const Settings* p = g_default.load(std::memory_order_acquire)) return *p;
  std::lock_guard<std::mutex> lock(g_default_mutex);
  if (const Settings* p = g_default.load(std::memory_order_acquire)) return *p;
  return *publish(lenient_environment());
}

thread_local const Settings* t_settings = nullptr;
thread_local LogFn t_log = nullptr;
thread_local void* t_log_user_data = nullptr;

}  // namespace

std::span<const Entry> entries() { return kEntries; }

std::string table() {
  std::string out;
  for (const Entry& e : kEntries)
    out += fmt::format("{} ({})\n  values: {}\n  default: {}\n  {}\n", e.name, e.env, e.values,
                       *e.default_value ? e.default_value : "\"\"", e.doc);
  return out;
}

Status set(Settings& s, std::string_view name, std::string_view value) {
  const Entry* e = find(name);
  if (!e)
    return make_error(Code::invalid_argument,
                      fmt::format("unknown tuning name \"{}\" (known: {})", name, known_names()));
  if (name == "gemm_race") return set_bool(*e, s.gemm_race, value);
  if (name == "cublaslt_autotune") return set_bool(*e, s.cublaslt_autotune, value);
  if (name == "l2_flush") {
    if (value == "clean") return s.l2_flush = L2Flush::clean, ok_status();
    if (value == "write") return s.l2_flush = L2Flush::write, ok_status();
    return bad_value(*e, value, "not clean or write");
  }
  if (name == "throttle_threshold") {
    const std::string text(value);
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || !end || *end != '\0' || errno != 0 || !(v >= 0 && v <= 1))
      return bad_value(*e, value, "not a number in [0, 1]");
    s.throttle_threshold = v;
    return ok_status();
  }
  if (name == "log") {
    for (LogLevel l : {LogLevel::off, LogLevel::error, LogLevel::warn, LogLevel::info})
      if (value == log::level_name(l)) return s.log = l, ok_status();
    return bad_value(*e, value, "not a level");
  }
  if (name == "python") {
    if (value.empty()) return bad_value(*e, value, "empty");
    s.python = value;
    return ok_status();
  }
  std::string* path = name == "gemm_race_file" ? &s.gemm_race_file
                      : name == "cupti_library" ? &s.cupti_library
                      : name == "cache_dir"     ? &s.cache_dir
                                                : &s.worker;
  *path = value;
  return ok_status();
}

std::string get(const Settings& s, std::string_view name) {
  if (name == "gemm_race") return s.gemm_race ? "1" : "0";
  if (name == "gemm_race_file") return s.gemm_race_file;
  if (name == "cublaslt_autotune") return s.cublaslt_autotune ? "1" : "0";
  if (name == "l2_flush") return s.l2_flush == L2Flush::clean ? "clean" : "write";
  if (name == "throttle_threshold") return fmt::format("{}", s.throttle_threshold);
  if (name == "cupti_library") return s.cupti_library;
  if (name == "python") return s.python;
  if (name == "cache_dir") return s.cache_dir;
  if (name == "worker") return s.worker;
  if (name == "log") return log::level_name(s.log);
  return {};
}

Status apply(Settings& s, std::string_view list) {
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view item = trim(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return make_error(Code::invalid_argument,
                        fmt::format("tuning item \"{}\" is not name=value (known names: {})", item, known_names()));
    KB_TRY(set(s, trim(item.substr(0, eq)), trim(item.substr(eq + 1))));
  }
  return ok_status();
}

Result<Settings> from_environment() {
  Settings s;
  for (const Entry& e : kEntries)
    if (const char* v = std::getenv(e.env)) KB_TRY(set(s, e.name, v));
  return s;
}

Settings process_default() { return process_settings(); }

void set_process_default(const Settings& s) {
  std::lock_guard<std::mutex> lock(g_default_mutex);
  publish(s);
}

const Settings& current() { return t_settings ? *t_settings : process_settings(); }

Scope::Scope(const Settings* settings, LogFn log, void* log_user_data) noexcept
    : prev_settings_(t_settings), prev_log_(t_log), prev_user_data_(t_log_user_data) {
  if (settings) t_settings = settings;
  if (log) t_log = log, t_log_user_data = log_user_data;
}

Scope::~Scope() {
  t_settings = prev_settings_;
  t_log = prev_log_;
  t_log_user_data = prev_user_data_;
}

}  // namespace kb::tuning

namespace kb::log {

namespace {
std::mutex g_sink_mutex;
tuning::LogFn g_sink = nullptr;
void* g_sink_user_data = nullptr;
}  // namespace

const char* level_name(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::off: return "off";
    case LogLevel::error: return "error";
    case LogLevel::warn: return "warn";
    case LogLevel::info: return "info";
  }
  return "off";
}

bool enabled(LogLevel level) noexcept {
  if (level == LogLevel::off || static_cast<int>(level) > static_cast<int>(tuning::current().log)) return false;
  if (tuning::t_log) return true;
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  return g_sink != nullptr;
}

void emit(LogLevel level, std::string_view message) noexcept {
  try {
    if (level == LogLevel::off || static_cast<int>(level) > static_cast<int>(tuning::current().log)) return;
    // Messages quote input text: controls escaped, long names cut (the sink may be a terminal).
    const std::string text = printable(message, Lines::many);
    if (tuning::t_log) {
      tuning::t_log(level, text.c_str(), tuning::t_log_user_data);
      return;
    }
    tuning::LogFn fn;
    void* user = nullptr;
    {
      std::lock_guard<std::mutex> lock(g_sink_mutex);
      fn = g_sink;
      user = g_sink_user_data;
    }
    if (fn) fn(level, text.c_str(), user);
  } catch (...) {
    // Out of memory for the message: the diagnostic is dropped, never the caller's work.
  }
}

void set_process_sink(tuning::LogFn fn, void* user_data) {
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  g_sink = fn;
  g_sink_user_data = user_data;
}

}  // namespace kb::log
