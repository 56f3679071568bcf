// Default (weak) platform hooks: stderr logging and abort().
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

#include "runtime/platform/log.h"

extern "C" {

__attribute__((weak)) void et_pal_emit_log(char level, const char* file, int line, const char* message, size_t length) {
  std::fprintf(stderr, "%c %s:%d] %.*s\n", level, file, line, static_cast<int>(length), message);
}

__attribute__((weak)) void et_pal_abort(void) { std::abort(); }
}

namespace executorch {
namespace runtime {

void log_message(LogLevel level, const char* file, int line, const char* format, ...) {
  // Bounded buffer: logging must not allocate; long messages are truncated.
  char buffer[256];
  va_list args;
  va_start(args, format);
  int n = std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  if (n < 0) return;
  size_t length = static_cast<size_t>(n) < sizeof(buffer) ? static_cast<size_t>(n) : sizeof(buffer) - 1;
  // Only the file's base name: build paths are noise in logs.
  const char* base = file;
  for (const char* p = file; *p != '\0'; ++p)
    if (*p == '/' || *p == '\\') base = p + 1;
  et_pal_emit_log(static_cast<char>(level), base, line, buffer, length);
}

}  // namespace runtime
}  // namespace executorch
