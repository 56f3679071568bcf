// Logging and abort hooks; a port overrides the weak defaults in platform.cpp.
#pragma once

#include <cstddef>

namespace executorch {
namespace runtime {

enum class LogLevel : char { Debug = 'D', Info = 'I', Error = 'E', Fatal = 'F' };

}  // namespace runtime
}  // namespace executorch

extern "C" {
// Receives every log line. Weak: define your own to route logs elsewhere.
void et_pal_emit_log(char level, const char* file, int line, const char* message, size_t length);
// Called only on unrecoverable internal errors. Weak: the default calls abort().
[[noreturn]] void et_pal_abort(void);
}

namespace executorch {
namespace runtime {

// Formats with printf syntax and forwards to et_pal_emit_log.
void log_message(LogLevel level, const char* file, int line, const char* format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

}  // namespace runtime
}  // namespace executorch

#ifndef ET_LOG_ENABLED
#define ET_LOG_ENABLED 1
#endif

#if ET_LOG_ENABLED
#define ET_LOG(level, ...) \
  ::executorch::runtime::log_message(::executorch::runtime::LogLevel::level, __FILE__, __LINE__, __VA_ARGS__)
#else
#define ET_LOG(level, ...) ((void)0)
#endif
