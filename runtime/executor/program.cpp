// Program loading: header parsing, FlatBuffer verification, segment and constant lookup.
#include "runtime/executor/program.h"

#include <cstring>

#include "runtime/executor/flatbuffer_util.h"
#include "runtime/executor/method.h"
#include "schema/program_generated.h"

namespace executorch {
namespace runtime {
namespace {

constexpr char kMagic[4] = {'e', 'h', '0', '0'};
// Magic + u32 length + three u64 fields; files before segment_data_size stop at 24.
constexpr size_t kHeaderMinLength = 24;

uint32_t read_u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

uint64_t read_u64(const uint8_t* p) { return uint64_t(read_u32(p)) | uint64_t(read_u32(p + 4)) << 32; }

// True when [offset, offset + length) lies inside [0, size).
bool in_bounds(uint64_t offset, uint64_t length, uint64_t size) { return offset <= size && length <= size - offset; }

}  // namespace

Result<ExtendedHeader> Program::parse_extended_header(const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  if (size < ExtendedHeader::kOffset + kHeaderMinLength ||
      std::memcmp(p + ExtendedHeader::kOffset, kMagic, sizeof(kMagic)) != 0)
    return Error::NotFound;
  const uint8_t* h = p + ExtendedHeader::kOffset;
  uint32_t length = read_u32(h + 4);
  if (length < kHeaderMinLength || !in_bounds(ExtendedHeader::kOffset, length, size)) {
    ET_LOG(Error, "extended header length %u is invalid for a %zu-byte file", length, size);
    return Error::InvalidProgram;
  }
  ExtendedHeader header;
  header.program_size = read_u64(h + 8);
  header.segment_base_offset = read_u64(h + 16);
  header.segment_data_size = length >= 32 ? read_u64(h + 24) : 0;
  return header;
}

Result<Program> Program::load(DataLoader* loader, Verification verification) {
  ET_CHECK_OR_RETURN(loader != nullptr, InvalidArgument, "Program::load: the data loader is null");
  Result<size_t> size = loader->size();
  if (!size.ok()) return size.error();
  Result<FreeableBuffer> file = loader->load(0, *size, DataLoader::SegmentInfo(DataLoader::SegmentInfo::Type::Program));
  if (!file.ok()) return file.error();
  ET_CHECK_OR_RETURN(file->size() == *size, AccessFailed, "Program::load: the loader gave %zu of %zu bytes",
                     file->size(), *size);
  Result<Program> program = load(file->data(), file->size(), verification);
  if (!program.ok()) return program.error();
  return Program(std::move(*program), std::move(*file));
}

Result<Program> Program::load(const void* data, size_t size, Verification verification) {
  ET_CHECK_OR_RETURN(size > 0, InvalidProgram, "the program is empty (0 bytes); not a .pte file");
  ET_CHECK_OR_RETURN(data != nullptr, InvalidArgument, "program data is null");
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  // Root offset + file identifier.
  ET_CHECK_OR_RETURN(size >= 8, InvalidProgram, "file is %zu bytes; a program has at least 8", size);
  ET_CHECK_OR_RETURN(flatbuffers::BufferHasIdentifier(bytes, executorch_flatbuffer::ProgramIdentifier()),
                     InvalidProgram, "file identifier %02x %02x %02x %02x is not '%s': not a .pte program", bytes[4],
                     bytes[5], bytes[6], bytes[7], executorch_flatbuffer::ProgramIdentifier());

  size_t program_size = size;
  size_t segment_base = 0;
  Result<ExtendedHeader> header = parse_extended_header(data, size);
  if (header.ok()) {
    ET_CHECK_OR_RETURN(header->program_size >= 8 && header->program_size <= size, InvalidProgram,
                       "header program_size %llu exceeds the %zu-byte file",
                       static_cast<unsigned long long>(header->program_size), size);
    ET_CHECK_OR_RETURN(header->segment_base_offset <= size, InvalidProgram,
                       "header segment_base_offset %llu exceeds the %zu-byte file",
                       static_cast<unsigned long long>(header->segment_base_offset), size);
    ET_CHECK_OR_RETURN(in_bounds(header->segment_base_offset, header->segment_data_size, size), InvalidProgram,
                       "segment data (%llu bytes) runs past the file end",
                       static_cast<unsigned long long>(header->segment_data_size));
    // Segments follow the program table: kernels may write to constant memory in a
    // malformed program, and that must never reach the table the runtime reads.
    ET_CHECK_OR_RETURN(header->segment_base_offset == 0 || header->segment_base_offset >= header->program_size,
                       InvalidProgram, "segment data starts at %llu, inside the %llu-byte program table",
                       static_cast<unsigned long long>(header->segment_base_offset),
                       static_cast<unsigned long long>(header->program_size));
    program_size = static_cast<size_t>(header->program_size);
    segment_base = static_cast<size_t>(header->segment_base_offset);
  } else if (header.error() != Error::NotFound) {
    return header.error();
  }

  if (verification == Verification::InternalConsistency) {
    flatbuffers::Verifier verifier(bytes, program_size);
    ET_CHECK_OR_RETURN(executorch_flatbuffer::VerifyProgramBuffer(verifier), InvalidProgram,
                       "program table failed verification: the file is truncated or corrupt");
  } else {
    uint32_t root = read_u32(bytes);
    ET_CHECK_OR_RETURN(root >= 8 && root <= program_size - 4, InvalidProgram,
                       "root table offset %u is outside the %zu-byte program", root, program_size);
  }
  const executorch_flatbuffer::Program* program = executorch_flatbuffer::GetProgram(bytes);

  const auto* cs = program->constant_segment();
  const auto* cb = program->constant_buffer();
  ET_CHECK_OR_RETURN(
      !(cs != nullptr && cs->offsets() != nullptr && cs->offsets()->size() > 0 && cb != nullptr && cb->size() > 0),
      InvalidProgram, "program has both constant_buffer and constant_segment data; only one may be used");
  return Program(bytes, size, program_size, program, segment_base);
}

size_t Program::num_methods() const {
  const auto* plans = program_->execution_plan();
  return plans == nullptr ? 0 : plans->size();
}

Result<const char*> Program::get_method_name(size_t index) const {
  ET_CHECK_OR_RETURN(index < num_methods(), InvalidArgument, "method index %zu >= %zu", index, num_methods());
  const auto* name = program_->execution_plan()->Get(index)->name();
  ET_CHECK_OR_RETURN(name != nullptr, InvalidProgram, "method %zu has no name", index);
  return name->c_str();
}

Result<MethodMeta> Program::method_meta(const char* name) const {
  for (size_t i = 0; i < num_methods(); ++i) {
    const auto* plan = program_->execution_plan()->Get(i);
    if (plan->name() != nullptr && std::strcmp(plan->name()->c_str(), name) == 0) return MethodMeta(plan);
  }
  ET_LOG(Error, "program has no method named '%s'", name);
  return Error::NotFound;
}

Result<Method> Program::load_method(const char* name, MemoryManager* memory_manager,
                                    const NamedDataMap* external_data) const {
  return load_method(name, memory_manager, static_cast<EventTracer*>(nullptr), external_data);
}

Result<Method> Program::load_method(const char* name, MemoryManager* memory_manager, EventTracer* event_tracer,
                                    const NamedDataMap* external_data) const {
  ET_CHECK_OR_RETURN(memory_manager != nullptr && memory_manager->method_allocator != nullptr, InvalidArgument,
                     "load_method needs a MemoryManager with a method allocator");
  EventTracerEntry load;
  if (event_tracer != nullptr) {
    event_tracer->create_event_block("Default");
    load = event_tracer->start_profiling("Program::load_method", kUnsetChainId, 0);
  }
  Result<MethodMeta> meta = method_meta(name);
  if (!meta.ok()) return meta.error();
  Method method(*meta);
  method.external_ = external_data;
  method.event_tracer_ = event_tracer;
  EventTracerEntry init;
  if (event_tracer != nullptr) init = event_tracer->start_profiling("Method::init", kUnsetChainId, 0);
  Error e = method.init(*this, memory_manager);
  if (event_tracer != nullptr) {
    event_tracer->end_profiling(init);
    event_tracer->end_profiling(load);
  }
  method.external_ = nullptr;
  if (e != Error::Ok) return e;
  return Result<Method>(std::move(method));
}

Result<Span<const uint8_t>> Program::segment(size_t index) const {
  const auto* segments = program_->segments();
  ET_CHECK_OR_RETURN(segments != nullptr && index < segments->size(), InvalidProgram,
                     "segment index %zu is out of range (%u segments)", index,
                     segments == nullptr ? 0u : segments->size());
  ET_CHECK_OR_RETURN(segment_base_ != 0, InvalidProgram,
                     "segment %zu is used but the file has no segment data (no extended header)", index);
  const auto* s = segments->Get(index);
  uint64_t offset = s->offset();
  ET_CHECK_OR_RETURN(offset <= UINT64_MAX - segment_base_ && in_bounds(segment_base_ + offset, s->size(), size_),
                     InvalidProgram, "segment %zu (offset %llu, %llu bytes) runs past the %zu-byte file", index,
                     static_cast<unsigned long long>(offset), static_cast<unsigned long long>(s->size()), size_);
  return Span<const uint8_t>(data_ + segment_base_ + offset, static_cast<size_t>(s->size()));
}

Result<const uint8_t*> Program::constant_data(size_t index, size_t nbytes) const {
  const auto* cs = program_->constant_segment();
  if (cs != nullptr && cs->offsets() != nullptr && cs->offsets()->size() > 0) {
    const auto* offsets = cs->offsets();
    ET_CHECK_OR_RETURN(index < offsets->size(), InvalidProgram, "constant index %zu is out of range (%u constants)",
                       index, offsets->size());
    Result<Span<const uint8_t>> seg = segment(cs->segment_index());
    if (!seg.ok()) return seg.error();
    uint64_t offset = load_item(offsets, index);
    ET_CHECK_OR_RETURN(in_bounds(offset, nbytes, seg->size()), InvalidProgram,
                       "constant %zu (offset %llu, %zu bytes) runs past its %zu-byte segment", index,
                       static_cast<unsigned long long>(offset), nbytes, seg->size());
    return seg->data() + offset;
  }
  const auto* buffers = program_->constant_buffer();
  ET_CHECK_OR_RETURN(buffers != nullptr && index < buffers->size(), InvalidProgram,
                     "constant index %zu is out of range (%u constant buffers)", index,
                     buffers == nullptr ? 0u : buffers->size());
  const auto* storage = buffers->Get(index)->storage();
  ET_CHECK_OR_RETURN(storage != nullptr && nbytes <= storage->size(), InvalidProgram,
                     "constant buffer %zu holds %u bytes; the tensor needs %zu", index,
                     storage == nullptr ? 0u : storage->size(), nbytes);
  return storage->data();
}

Result<const uint8_t*> Program::mutable_data(size_t table_index, size_t offset_index, size_t nbytes) const {
  const auto* tables = program_->mutable_data_segments();
  ET_CHECK_OR_RETURN(tables != nullptr && table_index < tables->size(), InvalidProgram,
                     "mutable data table %zu is out of range", table_index);
  const auto* table = tables->Get(table_index);
  const auto* offsets = table->offsets();
  ET_CHECK_OR_RETURN(offsets != nullptr && offset_index < offsets->size(), InvalidProgram,
                     "mutable data index %zu is out of range", offset_index);
  Result<Span<const uint8_t>> seg = segment(table->segment_index());
  if (!seg.ok()) return seg.error();
  uint64_t offset = load_item(offsets, offset_index);
  ET_CHECK_OR_RETURN(in_bounds(offset, nbytes, seg->size()), InvalidProgram,
                     "mutable data %zu (offset %llu, %zu bytes) runs past its segment", offset_index,
                     static_cast<unsigned long long>(offset), nbytes);
  return seg->data() + offset;
}

}  // namespace runtime
}  // namespace executorch
