// Error codes returned by every fallible runtime call (no exceptions).
#pragma once

#include <cstdint>

#include "runtime/platform/log.h"

namespace executorch {
namespace runtime {

// Numeric values match the published runtime so codes mean the same in logs.
enum class Error : uint32_t {
  Ok = 0x00,
  Internal = 0x01,
  InvalidState = 0x02,
  EndOfMethod = 0x03,
  NotSupported = 0x10,
  NotImplemented = 0x11,
  InvalidArgument = 0x12,
  InvalidType = 0x13,
  OperatorMissing = 0x14,
  RegistrationExceedingMaxKernels = 0x15,
  RegistrationAlreadyRegistered = 0x16,
  NotFound = 0x20,
  MemoryAllocationFailed = 0x21,
  AccessFailed = 0x22,
  InvalidProgram = 0x23,
  InvalidExternalData = 0x24,
  OutOfResources = 0x25,
  DelegateInvalidCompatibility = 0x30,
};

// Stable name of an error, e.g. "InvalidProgram"; "Unknown" for other values.
const char* error_name(Error error);

}  // namespace runtime
}  // namespace executorch

// Returns `error` from the enclosing function when `cond` is false, logging why.
#define ET_CHECK_OR_RETURN(cond, error, ...)      \
  do {                                            \
    if (!(cond)) {                                \
      ET_LOG(Error, __VA_ARGS__);                 \
      return ::executorch::runtime::Error::error; \
    }                                             \
  } while (0)

// Propagates a non-Ok Error from `expr`.
#define ET_TRY(expr)                                                         \
  do {                                                                       \
    ::executorch::runtime::Error et_try_err_ = (expr);                       \
    if (et_try_err_ != ::executorch::runtime::Error::Ok) return et_try_err_; \
  } while (0)
