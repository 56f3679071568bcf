// open_file: opens a path to read and sizes it, telling apart the ways a path is no readable file
// (missing, a directory, refused), so the loaders, Module and executor_runner name the cause alike.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

namespace executorch {
namespace extension {

struct OpenedFile {
  int fd = -1;  // >= 0 when open; the caller closes it
  size_t size = 0;
  // When fd < 0, what is wrong, to follow the path in a message: "is a directory", ...
  char problem[96] = {};
};

inline OpenedFile open_file(const char* path) {
  OpenedFile f;
  auto fail = [&f](const char* what, int err) {
    if (err == ENOENT)
      std::snprintf(f.problem, sizeof(f.problem), "does not exist (no such file)");
    else if (err == EISDIR)
      std::snprintf(f.problem, sizeof(f.problem), "is a directory, not a file");
    else
      std::snprintf(f.problem, sizeof(f.problem), "cannot be %s (%s)", what, std::strerror(err));
    if (f.fd >= 0) ::close(f.fd);
    f.fd = -1;
    return f;
  };
  f.fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return fail("opened", errno);
  // A directory opens read-only on Linux; reading it is what fails.
  char byte;
  if (::pread(f.fd, &byte, 1, 0) < 0) return fail("read", errno);
  // The size by seeking: fstat is a glibc 2.33 symbol, and the SDK runs on older glibc.
  const off_t end = ::lseek(f.fd, 0, SEEK_END);
  if (end < 0) return fail("sized", errno);
  f.size = static_cast<size_t>(end);
  return f;
}

}  // namespace extension
}  // namespace executorch
