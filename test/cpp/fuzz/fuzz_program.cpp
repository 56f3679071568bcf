// libFuzzer entry: any byte string goes through program load, method load and execute.
#include "test/cpp/runtime/exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rtest::exercise(data, size);
  return 0;
}

// Runtime logs would drown the fuzzer's own output.
extern "C" void et_pal_emit_log(char, const char*, int, const char*, size_t) {}
