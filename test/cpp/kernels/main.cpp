// Runs every registered kernel test (or those whose name contains argv[1]); exit 1 on failure.
#include <cstring>

#include "test/cpp/kernels/check.h"

int main(int argc, char** argv) {
  int ran = 0;
  for (const auto& c : ktest::cases()) {
    if (argc > 1 && std::strstr(c.name, argv[1]) == nullptr) continue;
    const int before = ktest::failures();
    c.fn();
    std::printf("%s %s\n", ktest::failures() == before ? "ok  " : "FAIL", c.name);
    ++ran;
  }
  std::printf("%d tests, %d failed checks\n", ran, ktest::failures());
  return ktest::failures() == 0 && ran > 0 ? 0 : 1;
}
