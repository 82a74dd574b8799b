#include "harness/trace_writer.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "common/append_line.hpp"
#include "common/path_component.hpp"
#include "common/regular_file.hpp"
#include "schema/io.hpp"

namespace kb {
namespace fs = std::filesystem;

std::string TraceWriter::path_for(const std::string& author, const Definition& d) const {
  return (fs::path(out_dir_) / "traces" / author / (d.op_type.empty() ? "unknown" : d.op_type) / (d.name + ".jsonl"))
      .string();
}

Status TraceWriter::append(const std::string& author, const Definition& d, const Trace& t) {
  for (auto [what, name] : {std::pair{"author", &author}, std::pair{"op_type", &d.op_type},
                            std::pair{"definition", &d.name}}) {
    if (name->empty() && name == &d.op_type) continue;  // written as "unknown"
    if (std::string why = path_component_problem(*name); !why.empty())
      return make_error(Code::invalid_argument,
                        fmt::format("no trace written: {} name {} {} (it must be a single path component)", what,
                                    quote_name(*name), why));
  }
  std::string path = path_for(author, d);
  // Links under the output directory (traces/, an author or op_type
  // directory, the file itself) must not lead elsewhere: the file, resolved,
  // lies under the resolved output directory, both before the directories are
  // created and after.
  std::error_code ec;
  auto inside = [&]() -> Status {
    fs::path root = fs::canonical(out_dir_, ec);
    if (ec) return make_error(Code::io_error, fmt::format("{}: cannot resolve: {}", out_dir_, ec.message()));
    // weakly_canonical leaves a dangling link unresolved, yet opening it
    // creates its target: a link must resolve in full.
    fs::path resolved = fs::is_symlink(path, ec) ? fs::canonical(path, ec) : fs::weakly_canonical(path, ec);
    if (ec) return make_error(Code::io_error, fmt::format("no trace written: {}: cannot resolve: {}", path, ec.message()));
    fs::path rel = resolved.lexically_relative(root);
    if (rel.empty() || *rel.begin() == "..")
      return make_error(Code::invalid_argument,
                        fmt::format("no trace written: {} resolves to {}, outside the output directory {}", path,
                                    resolved.string(), root.string()));
    return ok_status();
  };
  fs::create_directories(out_dir_, ec);
  if (ec) return make_error(Code::io_error, fmt::format("{}: cannot create directory: {}", out_dir_, ec.message()));
  KB_TRY(inside());
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return make_error(Code::io_error, fmt::format("{}: cannot create directory: {}", path, ec.message()));
  KB_TRY(inside());
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
    std::error_code kind_ec;
    if (it->path().extension() != ".jsonl" || it->is_directory(kind_ec)) continue;
    // Only regular files are read: a FIFO here would block --resume forever.
    if (std::string kind = non_regular_kind(it->path().string()); !kind.empty())
      return make_error(Code::io_error, fmt::format("{}: not a regular file ({})", it->path().string(), kind));
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
