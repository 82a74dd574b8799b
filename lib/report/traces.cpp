#include "report/traces.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "schema/io.hpp"

namespace kb::report {
namespace fs = std::filesystem;

Result<std::vector<std::string>> files_with_extension(const std::vector<std::string>& paths, std::string_view ext) {
  std::vector<std::string> files;
  for (const auto& path : paths) {
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) {
      files.push_back(path);
      continue;
    }
    if (!fs::is_directory(path, ec)) return make_error(Code::io_error, fmt::format("{}: no such file or folder", path));
    std::vector<std::string> here;
    for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (it->path().extension() == ext && it->is_regular_file()) here.push_back(it->path().string());
    if (ec) return make_error(Code::io_error, fmt::format("{}: {}", path, ec.message()));
    std::sort(here.begin(), here.end());  // the same output whatever order the folder lists
    files.insert(files.end(), here.begin(), here.end());
  }
  return files;
}

Result<std::vector<std::string>> trace_files(const std::vector<std::string>& paths) {
  if (paths.empty()) return make_error(Code::invalid_argument, "no traces file or folder given");
  auto found = files_with_extension(paths, ".jsonl");
  if (!found) return found.error();
  std::vector<std::string> files = std::move(*found);
  if (files.empty())
    return make_error(Code::invalid_argument, fmt::format("no .jsonl trace file under {}", fmt::join(paths, ", ")));
  return files;
}

std::pair<std::string, std::string> author_from_path(const std::string& path) {
  std::vector<std::string> parts;
  for (const auto& p : fs::path(path)) parts.push_back(p.string());
  // .../traces/<author>/<op_type>/<definition>.jsonl: the last "traces" three levels above the file.
  if (parts.size() >= 4 && parts[parts.size() - 4] == "traces")
    return {parts[parts.size() - 3], parts[parts.size() - 2]};
  return {};
}

std::optional<double> relative_spread(const Measurement& m) {
  if (m.rel_noise && *m.rel_noise >= 0) return *m.rel_noise;
  if (m.min_ms && m.max_ms && m.median_ms > 0 && *m.max_ms >= *m.min_ms)
    return (*m.max_ms - *m.min_ms) / (2 * m.median_ms);
  return std::nullopt;
}

Result<TraceSet> read_traces(const std::vector<std::string>& paths) {
  auto files = trace_files(paths);
  if (!files) return std::move(files).error();
  TraceSet set;
  set.files = *files;
  for (const auto& file : set.files) {
    std::ifstream in(file);
    if (!in) return make_error(Code::io_error, fmt::format("{}: cannot be read", file));
    auto [author, op_type] = author_from_path(file);
    std::string line;
    for (std::size_t number = 1; std::getline(in, line); ++number) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      std::string origin = fmt::format("{}:{}", file, number);
      auto t = read_trace(line, origin);
      if (!t) return std::move(t).error();
      if (!t->solution || !t->evaluation) {
        ++set.workload_only;
        continue;
      }
      TraceRecord r;
      auto m = read_measurement(*t, origin);
      if (!m) return std::move(m).error();
      r.measurement = *m;
      r.trace = std::move(*t);
      r.origin = std::move(origin);
      r.author = author;
      r.op_type = op_type;
      set.records.push_back(std::move(r));
    }
  }
  return set;
}

}  // namespace kb::report
