// Kernel registration (register_kernels, ET_REGISTER_KERNEL) at the path ExecuTorch's SDK uses.
#pragma once

#include "runtime/core/operator_registry.h"
