#include "harness/trace_writer.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "common/append_line.hpp"
#include "schema/io.hpp"

namespace kb {
namespace fs = std::filesystem;

std::string TraceWriter::path_for(const std::string& author, const Definition& d) const {
  return (fs::path(out_dir_) / "traces" / author / (d.op_type.empty() ? "unknown" : d.op_type) / (d.name + ".jsonl"))
      .string();
}

Status TraceWriter::append(const std::string& author, const Definition& d, const Trace& t) {
  std::string path = path_for(author, d);
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return make_error(Code::io_error, fmt::format("{}: cannot create directory: {}", path, ec.message()));
  auto at = append_line(path, to_json(t));
  if (!at) return at.error();
  return ok_status();
}

Result<std::set<std::tuple<std::string, std::string, std::string>>> TraceWriter::recorded() const {
  std::set<std::tuple<std::string, std::string, std::string>> keys;
  fs::path root = fs::path(out_dir_) / "traces";
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return keys;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->path().extension() != ".jsonl") continue;
    std::ifstream f(it->path());
    std::string line;
    while (std::getline(f, line)) {
      if (line.empty()) continue;
      auto t = read_trace(line, it->path().string());
      if (!t || !t->solution) continue;  // torn or foreign lines are not "done"
      keys.emplace(t->definition, t->workload.uuid, *t->solution);
    }
  }
  return keys;
}

}  // namespace kb
