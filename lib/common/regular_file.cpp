#include "common/regular_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace kb {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISDIR(mode)) return "a directory";
  return "not a file";
}

Error not_regular(const std::string& path, const char* kind) {
  return make_error(Code::io_error, fmt::format("{}: not a regular file ({})", path, kind));
}

}  // namespace

std::string non_regular_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return kind_of(st.st_mode);
}

Result<int> open_regular_file(const std::string& path) {
  if (std::string kind = non_regular_kind(path); !kind.empty()) return not_regular(path, kind.c_str());
  // O_NONBLOCK: opening a FIFO swapped in after the stat returns at once.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return make_error(Code::io_error, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    int saved = errno;
    ::close(fd);
    if (S_ISREG(st.st_mode) || st.st_mode == 0)
      return make_error(Code::io_error, fmt::format("{}: cannot examine: {}", path, std::strerror(saved)));
    return not_regular(path, kind_of(st.st_mode));
  }
  // Reads of a regular file never block; clear the flag anyway for readers that expect blocking reads.
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

}  // namespace kb
