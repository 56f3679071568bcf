// Runs every runtime test case (or those whose name contains argv[1]); exit 1 on failure.
#include <cstring>

#include "test/cpp/runtime/harness.h"

int main(int argc, char** argv) {
  int ran = 0;
  for (const auto& c : rtest::cases()) {
    if (argc > 1 && std::strstr(c.name, argv[1]) == nullptr) continue;
    int before = rtest::failures();
    c.fn();
    std::printf("%s %s\n", rtest::failures() == before ? "ok  " : "FAIL", c.name);
    ++ran;
  }
  std::printf("%d tests, %d failed checks\n", ran, rtest::failures());
  return rtest::failures() == 0 && ran > 0 ? 0 : 1;
}
