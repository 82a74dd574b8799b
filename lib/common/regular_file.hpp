// Opening input files so that a FIFO, device or socket in a dataset (or given
// on the command line) is refused at once instead of blocking a read forever
// or streaming without end: only regular files (after following links) are
// read.
#pragma once

#include <string>

#include "common/result.hpp"

namespace kb {

// "a FIFO", "a character device", ... for a path that exists and is not a
// regular file after following links; "" for a regular file or a path that
// cannot be examined (opening it reports why).
std::string non_regular_kind(const std::string& path);

// A read-only descriptor (close-on-exec) on the regular file at `path`, the
// caller's to close. The file is examined before it is opened and the
// descriptor after, and the open does not block, so that a FIFO swapped in
// between is refused too. Errors (Code::io_error) name the file:
// "PATH: cannot open: REASON" or "PATH: not a regular file (a FIFO)".
Result<int> open_regular_file(const std::string& path);

}  // namespace kb
