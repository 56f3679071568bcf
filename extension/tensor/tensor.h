// TensorPtr and the functions that make one (from_blob, make_tensor_ptr), at ExecuTorch's header path.
#pragma once

#include "extension/tensor/tensor_ptr.h"
