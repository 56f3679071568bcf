// Runtime-test helpers on top of the shared harness: reading files and fixtures.
#pragma once

#include <cstdio>
#include <cstdint>
#include <string>
#include <vector>

#include "test/cpp/harness.h"

namespace rtest {

// Whole file contents; empty when unreadable (the test then fails on load).
inline std::vector<uint8_t> read_file(const std::string& path) {
  std::vector<uint8_t> data;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    uint8_t buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) data.insert(data.end(), buf, buf + n);
    std::fclose(f);
  }
  return data;
}

inline std::string fixture(const char* rel) { return std::string(ET_FIXTURE_DIR) + "/" + rel; }

}  // namespace rtest

#define RTEST(name) ETTEST(name)
#define RCHECK(cond) ETCHECK(cond)
