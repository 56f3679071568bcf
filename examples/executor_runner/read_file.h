// Reading a whole file for executor_runner: into aligned heap memory taken without throwing, with
// one line on stderr naming the path and what is wrong when it cannot be had.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "extension/data_loader/open_file.h"

struct Bytes {
  std::unique_ptr<uint8_t, void (*)(void*)> data{nullptr, std::free};
  size_t size = 0;
};

// `size` bytes, 64-byte aligned (constants and the data map need 16), the padding after them
// zeroed; false when the memory is refused.
inline bool allocate(size_t size, Bytes* out) {
  const size_t padded = size == 0 ? 64 : (size + 63) & ~size_t(63);
  if (padded < size) return false;
  void* p = std::aligned_alloc(64, padded);
  if (p == nullptr) return false;
  std::memset(static_cast<uint8_t*>(p) + size, 0, padded - size);
  out->data.reset(static_cast<uint8_t*>(p));
  out->size = size;
  return true;
}

// Reads `path` whole. `kind` (".pte") says what an empty file is not; null accepts empty files.
inline bool read_file(const std::string& path, const char* kind, Bytes* out) {
  const char* me = "executor_runner";
  executorch::extension::OpenedFile file = executorch::extension::open_file(path.c_str());
  if (file.fd < 0) {
    std::fprintf(stderr, "%s: %s %s\n", me, path.c_str(), file.problem);
    return false;
  }
  bool ok = true;
  if (file.size == 0 && kind != nullptr) {
    std::fprintf(stderr, "%s: %s is empty (0 bytes); not a %s\n", me, path.c_str(), kind);
    ok = false;
  } else if (!allocate(file.size, out)) {
    std::fprintf(stderr, "%s: cannot allocate %zu bytes to read %s\n", me, file.size, path.c_str());
    ok = false;
  }
  for (size_t got = 0; ok && got < file.size;) {
    const ssize_t n = ::pread(file.fd, out->data.get() + got, file.size - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::fprintf(stderr, "%s: %s could not be read past byte %zu of %zu (%s)\n", me, path.c_str(), got, file.size,
                   n < 0 ? std::strerror(errno) : "it shrank while being read");
      ok = false;
    }
    got += n > 0 ? static_cast<size_t>(n) : 0;
  }
  ::close(file.fd);
  return ok;
}
