// Names of Error values, for messages and the Python exceptions built from them.
#include "runtime/core/error.h"

namespace executorch {
namespace runtime {

const char* error_name(Error error) {
  switch (error) {
    case Error::Ok: return "Ok";
    case Error::Internal: return "Internal";
    case Error::InvalidState: return "InvalidState";
    case Error::EndOfMethod: return "EndOfMethod";
    case Error::NotSupported: return "NotSupported";
    case Error::NotImplemented: return "NotImplemented";
    case Error::InvalidArgument: return "InvalidArgument";
    case Error::InvalidType: return "InvalidType";
    case Error::OperatorMissing: return "OperatorMissing";
    case Error::RegistrationExceedingMaxKernels: return "RegistrationExceedingMaxKernels";
    case Error::RegistrationAlreadyRegistered: return "RegistrationAlreadyRegistered";
    case Error::NotFound: return "NotFound";
    case Error::MemoryAllocationFailed: return "MemoryAllocationFailed";
    case Error::AccessFailed: return "AccessFailed";
    case Error::InvalidProgram: return "InvalidProgram";
    case Error::InvalidExternalData: return "InvalidExternalData";
    case Error::OutOfResources: return "OutOfResources";
    case Error::DelegateInvalidCompatibility: return "DelegateInvalidCompatibility";
  }
  return "Unknown";
}

}  // namespace runtime
}  // namespace executorch
