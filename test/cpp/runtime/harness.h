// A tiny test harness for the runtime tests: self-registering cases, non-fatal checks.
#pragma once

#include <cstdio>
#include <cstdint>
#include <string>
#include <vector>

namespace rtest {

struct Case {
  const char* name;
  void (*fn)();
};

inline std::vector<Case>& cases() {
  static std::vector<Case> all;
  return all;
}

inline int& failures() {
  static int n = 0;
  return n;
}

struct Registrar {
  Registrar(const char* name, void (*fn)()) { cases().push_back({name, fn}); }
};

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

#define RTEST(name)                                          \
  static void name();                                        \
  static rtest::Registrar name##_registrar(#name, &name);    \
  static void name()

#define RCHECK(cond)                                                          \
  do {                                                                        \
    if (!(cond)) {                                                            \
      std::printf("  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++rtest::failures();                                                    \
    }                                                                         \
  } while (0)
