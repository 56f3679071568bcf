// The C++ tests' harness: cases register themselves, checks record a failure and carry on, and
// run_all runs every case (or those whose name contains argv[1]), exiting 1 on any failure.
#pragma once

#include <cstdio>
#include <cstring>
#include <vector>

namespace ettest {

struct Case {
  const char* name;
  void (*fn)();
};

inline std::vector<Case>& cases() {
  static std::vector<Case> all;
  return all;
}

inline int& failures() {
  static int count = 0;
  return count;
}

struct Registrar {
  Registrar(const char* name, void (*fn)()) { cases().push_back({name, fn}); }
};

inline int run_all(int argc, char** argv) {
  int ran = 0;
  for (const auto& c : cases()) {
    if (argc > 1 && std::strstr(c.name, argv[1]) == nullptr) continue;
    const int before = failures();
    c.fn();
    std::printf("%s %s\n", failures() == before ? "ok  " : "FAIL", c.name);
    ++ran;
  }
  std::printf("%d tests, %d failed checks\n", ran, failures());
  return failures() == 0 && ran > 0 ? 0 : 1;
}

}  // namespace ettest

#define ETTEST(name)                                         \
  static void name();                                        \
  static ::ettest::Registrar name##_registrar(#name, &name); \
  static void name()

#define ETCHECK(cond)                                                               \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      ++::ettest::failures();                                                       \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                               \
  } while (0)
