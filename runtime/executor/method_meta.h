// MethodMeta: what a caller needs to know before loading or calling a method.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/device_allocator.h"
#include "runtime/core/evalue.h"
#include "runtime/core/result.h"
#include "runtime/core/scalar_type.h"
#include "runtime/core/span.h"

namespace executorch_flatbuffer {
struct ExecutionPlan;
}

namespace executorch {
namespace runtime {

// Declared dtype and sizes of a tensor input or output (sizes are upper bounds
// for bounded dynamic shapes). Points into the program file.
struct TensorInfo {
  ScalarType scalar_type;
  Span<const int32_t> sizes;
  Span<const uint8_t> dim_order;  // memory order of the dimensions; data must follow it
  TensorShapeDynamism dynamism;
  bool is_memory_planned;  // placed in a planned arena (else a constant or caller-bound)
};

class MethodMeta final {
 public:
  explicit MethodMeta(const executorch_flatbuffer::ExecutionPlan* plan) : plan_(plan) {}

  const char* name() const;
  size_t num_inputs() const;
  size_t num_outputs() const;
  // Tag of input/output `index`; InvalidArgument when out of range, InvalidProgram
  // when the program's index is.
  Result<Tag> input_tag(size_t index) const;
  Result<Tag> output_tag(size_t index) const;
  Result<TensorInfo> input_tensor_info(size_t index) const;
  Result<TensorInfo> output_tensor_info(size_t index) const;
  // Planned arenas the caller must provide (non_const_buffer_sizes without entry 0).
  size_t num_memory_planned_buffers() const;
  Result<int64_t> memory_planned_buffer_size(size_t index) const;
  // Where planned buffer `index` must be allocated (non_const_buffer_device; the host if unlisted).
  Result<etensor::Device> memory_planned_buffer_device(size_t index) const;
  size_t num_instructions() const;

  const executorch_flatbuffer::ExecutionPlan* flatbuffer() const { return plan_; }

 private:
  Result<Tag> value_tag(const void* indices, size_t index) const;
  Result<TensorInfo> tensor_info(const void* indices, size_t index) const;
  const executorch_flatbuffer::ExecutionPlan* plan_;
};

}  // namespace runtime
}  // namespace executorch
