#include "common/append_line.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace kb {

Result<std::uint64_t> append_line(const std::string& path, std::string_view line) {
  // Read-write: the torn-line check reads the last byte.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return make_error(Code::io_error, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  bool torn = false;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    char last = '\n';
    torn = ::pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n';
  }
  const std::string text = fmt::format("{}{}\n", torn ? "\n" : "", line);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      return make_error(Code::io_error, fmt::format("{}: write failed: {}", path, std::strerror(err)));
    }
    done += static_cast<std::size_t>(n);
  }
  // O_APPEND left the offset at the end of what was just written.
  const off_t end = ::lseek(fd, 0, SEEK_CUR);
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return make_error(Code::io_error, fmt::format("{}: fsync failed: {}", path, std::strerror(err)));
  }
  ::close(fd);
  return static_cast<std::uint64_t>(end) - (text.size() - (torn ? 1 : 0));
}

}  // namespace kb
