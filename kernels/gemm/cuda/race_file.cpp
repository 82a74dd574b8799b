// KB_GEMM_RACE_FILE's lines (race_file.hpp): written with json::Writer, read
// with json::parse, one file's entries kept per process.
#include "race_file.hpp"

#include <sys/stat.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>

#include "common/append_line.hpp"
#include "common/tuning.hpp"
#include "json/json.hpp"
#include "schema/dtype.hpp"

namespace kb::kernels::gemm_cuda {

namespace {

std::string where(std::string_view origin, std::size_t number) { return fmt::format("{}:{}", origin, number); }

Error bad_line(std::string_view origin, std::size_t number, std::string_view why) {
  return Error{Code::parse_error, fmt::format("{}: {}", where(origin, number), why)};
}

// dst = the value of expr (a Result), or return its error.
#define KB_RACE_FILE_TAKE(dst, expr)                       \
  do {                                                     \
    auto kb_take_r_ = (expr);                              \
    if (!kb_take_r_.ok()) return std::move(kb_take_r_).error(); \
    dst = std::move(*kb_take_r_);                          \
  } while (0)

}  // namespace

std::string race_file_line(const RaceFileEntry& e) {
  json::Writer w;
  w.begin_object();
  w.key("kb_gemm_race").string(e.race);
  w.key("device").string(e.machine.device);
  w.key("sms").integer(e.machine.sms);
  w.key("compute_capability").integer(e.machine.compute_capability);
  w.key("software").string(e.machine.software);
  w.key("kb").string(e.machine.kb);
  w.key("dtype").string(dtype_name(static_cast<DType>(e.key.dtype)));
  w.key("M").integer(e.key.M);
  w.key("N").integer(e.key.N);
  w.key("K").integer(e.key.K);
  w.key("misaligned").integer(e.key.misaligned);
  if (e.race == kRaceSmallM) w.key("scratch_bytes").integer(static_cast<std::int64_t>(e.key.scratch_bytes));
  w.key("choice").string(e.choice);
  w.end_object();
  return w.str();
}

Result<RaceFileEntry> parse_race_file_line(std::string_view line, std::string_view origin, std::size_t number) {
  auto doc = json::parse(line, where(origin, number));
  if (!doc) return doc.error();
  json::Object obj;
  if (doc->root().get(obj) != simdjson::SUCCESS)
    return bad_line(origin, number, fmt::format("expected an object, found {}", json::type_name(doc->root())));
  // Required members: a string, or an integer within [lo, hi].
  auto text = [&](const char* name) -> Result<std::string> {
    json::Element v;
    if (obj[name].get(v) != simdjson::SUCCESS) return bad_line(origin, number, fmt::format("no \"{}\"", name));
    std::string_view s;
    if (v.get(s) != simdjson::SUCCESS || s.empty())
      return bad_line(origin, number, fmt::format("\"{}\" must be a non-empty string, found {}", name,
                                                  json::describe(v)));
    return std::string(s);
  };
  auto integer = [&](const char* name, std::int64_t lo, std::int64_t hi) -> Result<std::int64_t> {
    json::Element v;
    if (obj[name].get(v) != simdjson::SUCCESS) return bad_line(origin, number, fmt::format("no \"{}\"", name));
    std::int64_t i = 0;
    if (v.get(i) != simdjson::SUCCESS || i < lo || i > hi)
      return bad_line(origin, number, fmt::format("\"{}\" must be an integer from {} to {}, found {}", name, lo, hi,
                                                  json::describe(v)));
    return i;
  };
  RaceFileEntry e;
  e.line = number;
  std::string dtype;
  std::int64_t sms = 0, cc = 0, misaligned = 0, scratch = 0;
  KB_RACE_FILE_TAKE(e.race, text("kb_gemm_race"));
  if (e.race != kRaceLongK && e.race != kRaceSmallM)
    return bad_line(origin, number, fmt::format("\"kb_gemm_race\" is \"{}\"; kb keeps \"{}\" and \"{}\"", e.race,
                                                kRaceLongK, kRaceSmallM));
  KB_RACE_FILE_TAKE(e.machine.device, text("device"));
  KB_RACE_FILE_TAKE(sms, integer("sms", 1, 1 << 20));
  KB_RACE_FILE_TAKE(cc, integer("compute_capability", 0, 1000));
  KB_RACE_FILE_TAKE(e.machine.software, text("software"));
  KB_RACE_FILE_TAKE(e.machine.kb, text("kb"));
  KB_RACE_FILE_TAKE(dtype, text("dtype"));
  const auto t = dtype_from_name(dtype);
  if (!t) return bad_line(origin, number, fmt::format("\"dtype\" \"{}\" is not a dtype kb knows", dtype));
  constexpr std::int64_t kMaxExtent = std::int64_t{1} << 40;
  KB_RACE_FILE_TAKE(e.key.M, integer("M", 1, kMaxExtent));
  KB_RACE_FILE_TAKE(e.key.N, integer("N", 1, kMaxExtent));
  KB_RACE_FILE_TAKE(e.key.K, integer("K", 1, kMaxExtent));
  KB_RACE_FILE_TAKE(misaligned, integer("misaligned", 0, 7));
  if (e.race == kRaceSmallM) KB_RACE_FILE_TAKE(scratch, integer("scratch_bytes", 0, kMaxExtent));
  KB_RACE_FILE_TAKE(e.choice, text("choice"));
  e.machine.sms = static_cast<int>(sms);
  e.machine.compute_capability = static_cast<int>(cc);
  e.key.dtype = static_cast<int>(*t);
  e.key.misaligned = static_cast<unsigned>(misaligned);
  e.key.scratch_bytes = static_cast<std::size_t>(scratch);
  return e;
}

Result<std::vector<RaceFileEntry>> parse_race_file(std::string_view text, std::string_view origin) {
  std::vector<RaceFileEntry> out;
  std::size_t number = 0;
  while (!text.empty()) {
    ++number;
    const std::size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto e = parse_race_file_line(line, origin, number);
    if (!e) {
      if (end == std::string_view::npos) break;  // a torn last line: a writer killed mid-line
      return e.error();
    }
    out.push_back(std::move(*e));
  }
  return out;
}

namespace {

struct LoadedFile {
  bool loaded = false;
  std::vector<RaceFileEntry> entries;
};

// Leaked on purpose, like race.cpp's state.
std::mutex& files_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::map<std::string, LoadedFile>& files() {
  static auto* m = new std::map<std::string, LoadedFile>;
  return *m;
}

// Reads the file into `f` once (under files_mutex()).
Status load(const std::string& path, LoadedFile& f) {
  if (f.loaded) return ok_status();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) {
    f.loaded = true;  // nothing raced yet: record() creates it
    return ok_status();
  }
  std::string text;
  KB_RACE_FILE_TAKE(text, json::read_text_file(path));
  KB_RACE_FILE_TAKE(f.entries, parse_race_file(text, path));
  f.loaded = true;
  return ok_status();
}

// The same problem of one race: the key without its device (and, for long K, the scratch, which it does not use).
bool same_problem(std::string_view race, const RaceKey& a, const RaceKey& b) {
  return a.dtype == b.dtype && a.M == b.M && a.N == b.N && a.K == b.K && a.misaligned == b.misaligned &&
         (race != kRaceSmallM || a.scratch_bytes == b.scratch_bytes);
}

}  // namespace

std::string race_file_path() { return tuning::current().gemm_race_file; }

Result<std::optional<RaceFileEntry>> race_file_lookup(const std::string& path, const RaceMachine& machine,
                                                      std::string_view race, const RaceKey& key) {
  std::lock_guard<std::mutex> lock(files_mutex());
  LoadedFile& f = files()[path];
  KB_TRY(load(path, f));
  for (auto it = f.entries.rbegin(); it != f.entries.rend(); ++it)
    if (it->race == race && it->machine == machine && same_problem(race, it->key, key))
      return std::optional<RaceFileEntry>(*it);
  return std::optional<RaceFileEntry>();
}

Status race_file_record(const std::string& path, const RaceFileEntry& e) {
  std::lock_guard<std::mutex> lock(files_mutex());
  auto start = append_line(path, race_file_line(e));
  if (!start) return make_error(start.error().code, "gemm race file " + start.error().message);
  // The line's number, for messages about it: one more than the newlines before it (other processes may have
  // appended since this one read the file).
  RaceFileEntry written = e;
  written.line = 1;
  std::ifstream f(path, std::ios::binary);
  char buf[1 << 14];
  for (std::uint64_t left = *start; left > 0 && f;) {
    f.read(buf, static_cast<std::streamsize>(std::min<std::uint64_t>(sizeof buf, left)));
    written.line += static_cast<std::size_t>(std::count(buf, buf + f.gcount(), '\n'));
    left -= static_cast<std::uint64_t>(f.gcount());
    if (f.gcount() == 0) break;
  }
  LoadedFile& loaded = files()[path];
  if (loaded.loaded) loaded.entries.push_back(std::move(written));  // else the first lookup reads it from the file
  return ok_status();
}

}  // namespace kb::kernels::gemm_cuda
