#include "harness/trace_writer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

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
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);  // read too: the torn-line check below
  if (fd < 0) return make_error(Code::io_error, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  // A previous run killed mid-line leaves no newline at the end: start fresh.
  std::string line;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    char last = '\n';
    if (::pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n') line = "\n";
  }
  line += to_json(t) + "\n";
  std::size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      return make_error(Code::io_error, fmt::format("{}: write failed: {}", path, std::strerror(err)));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    return make_error(Code::io_error, fmt::format("{}: fsync failed: {}", path, std::strerror(err)));
  }
  ::close(fd);
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
