// Program: a verified view of a .pte file held in caller memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "runtime/core/data_loader.h"
#include "runtime/core/event_tracer.h"
#include "runtime/core/named_data_map.h"
#include "runtime/core/result.h"
#include "runtime/core/span.h"
#include "runtime/executor/memory_manager.h"
#include "runtime/executor/method_meta.h"

namespace executorch_flatbuffer {
struct Program;
}

namespace executorch {
namespace runtime {

class Method;

// The fields of the extended header ("eh00") that follows the FlatBuffer root.
struct ExtendedHeader {
  static constexpr size_t kOffset = 8;
  uint64_t program_size = 0;
  uint64_t segment_base_offset = 0;
  uint64_t segment_data_size = 0;
};

class Program final {
 public:
  enum class Verification : uint8_t {
    // Structural checks of the FlatBuffer skipped: only for files you produced.
    // Every index and offset the runtime follows is still bounds-checked.
    Minimal,
    // Runs the FlatBuffers verifier over the whole program table (default).
    InternalConsistency,
  };

  // The file must stay alive and unmoved while the Program and its Methods
  // are used. Constant tensors point into it; kernels never write to them in
  // a well-formed program, but a malformed one could, so pass writable memory.
  static Result<Program> load(const void* data, size_t size,
                              Verification verification = Verification::InternalConsistency);

  // Loads the whole file through `loader` (FileDataLoader, MmapDataLoader, BufferDataLoader...)
  // and keeps the loaded bytes for the Program's lifetime; the loader may go afterwards.
  static Result<Program> load(DataLoader* loader, Verification verification = Verification::InternalConsistency);

  // Parses the extended header at offset 8; NotFound when the file has none.
  static Result<ExtendedHeader> parse_extended_header(const void* data, size_t size);

  size_t num_methods() const;
  Result<const char*> get_method_name(size_t index) const;
  Result<MethodMeta> method_meta(const char* name) const;
  // `external_data` (may be null) supplies tensors the program keeps in a .ptd file and named
  // data its backends read; it must outlive the Method.
  Result<Method> load_method(const char* name, MemoryManager* memory_manager,
                             const NamedDataMap* external_data = nullptr) const;
  // The same, reporting the load and every execute() of the method to `event_tracer` (upstream's
  // argument order: the tracer before the data map).
  Result<Method> load_method(const char* name, MemoryManager* memory_manager, EventTracer* event_tracer,
                             const NamedDataMap* external_data = nullptr) const;

  // Bytes of constant `index` (>= 1) of `nbytes`, bounds-checked against the file.
  Result<const uint8_t*> constant_data(size_t index, size_t nbytes) const;
  // Bytes of segment `index`, bounds-checked against the file.
  Result<Span<const uint8_t>> segment(size_t index) const;
  // Initial bytes of a mutable buffer: sub-segment `offset_index` of
  // mutable_data_segments[`table_index`].
  Result<const uint8_t*> mutable_data(size_t table_index, size_t offset_index, size_t nbytes) const;

  const executorch_flatbuffer::Program* flatbuffer() const { return program_; }
  // Bytes of the FlatBuffer part of the file (without segments).
  size_t program_size() const { return program_size_; }
  // Bytes of the whole file (segments included).
  size_t file_size() const { return size_; }
  // True when `p` points into the FlatBuffer part (e.g. a legacy inline constant).
  bool in_program_table(const void* p) const {
    return static_cast<const uint8_t*>(p) >= data_ && static_cast<const uint8_t*>(p) < data_ + program_size_;
  }

 private:
  Program(const uint8_t* data, size_t size, size_t program_size, const executorch_flatbuffer::Program* program,
          size_t segment_base)
      : data_(data), size_(size), program_size_(program_size), program_(program), segment_base_(segment_base) {}

  // Takes over `file`, the bytes `loaded` views.
  Program(Program&& loaded, FreeableBuffer&& file)
      : data_(loaded.data_),
        size_(loaded.size_),
        program_size_(loaded.program_size_),
        program_(loaded.program_),
        segment_base_(loaded.segment_base_),
        file_(std::move(file)) {}

  const uint8_t* data_;
  size_t size_;
  size_t program_size_;
  const executorch_flatbuffer::Program* program_;
  size_t segment_base_;
  // The bytes a DataLoader gave (empty when the caller owns the memory).
  FreeableBuffer file_;
};

}  // namespace runtime
}  // namespace executorch
