// FileDataLoader: pread into aligned heap buffers.
#include "extension/data_loader/file_data_loader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "extension/data_loader/open_file.h"
#include "runtime/platform/log.h"

namespace executorch {
namespace extension {

using runtime::Error;
using runtime::FreeableBuffer;
using runtime::Result;

namespace {

void free_aligned(void* /*context*/, void* data, size_t /*size*/) { std::free(data); }

}  // namespace

Result<FileDataLoader> FileDataLoader::from(const char* file_name, size_t alignment) {
  ET_CHECK_OR_RETURN(file_name != nullptr, InvalidArgument, "FileDataLoader: file name is null");
  ET_CHECK_OR_RETURN(alignment != 0 && (alignment & (alignment - 1)) == 0, InvalidArgument,
                     "FileDataLoader: alignment %zu is not a power of two", alignment);
  const OpenedFile file = open_file(file_name);
  ET_CHECK_OR_RETURN(file.fd >= 0, AccessFailed, "FileDataLoader: %s %s", file_name, file.problem);
  char* name = ::strdup(file_name);
  if (name == nullptr) {
    ::close(file.fd);
    return Error::MemoryAllocationFailed;
  }
  return FileDataLoader(file.fd, file.size, alignment, name);
}

FileDataLoader::FileDataLoader(FileDataLoader&& other) noexcept
    : fd_(other.fd_), file_size_(other.file_size_), alignment_(other.alignment_), file_name_(other.file_name_) {
  other.fd_ = -1;
  other.file_name_ = nullptr;
}

FileDataLoader::~FileDataLoader() {
  if (fd_ >= 0) ::close(fd_);
  std::free(file_name_);
}

Error FileDataLoader::load_into(size_t offset, size_t size, const SegmentInfo& /*segment_info*/, void* buffer) const {
  ET_CHECK_OR_RETURN(fd_ >= 0, InvalidState, "FileDataLoader: used after being moved from");
  ET_CHECK_OR_RETURN(buffer != nullptr, InvalidArgument, "FileDataLoader: destination is null");
  ET_CHECK_OR_RETURN(offset <= file_size_ && size <= file_size_ - offset, InvalidArgument,
                     "FileDataLoader: %zu bytes at offset %zu run past the %zu-byte file '%s'", size, offset,
                     file_size_, file_name_);
  auto* out = static_cast<uint8_t*>(buffer);
  size_t got = 0;
  while (got < size) {
    const ssize_t n = ::pread(fd_, out + got, size - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    ET_CHECK_OR_RETURN(n > 0, AccessFailed, "FileDataLoader: short read of '%s' (%zu of %zu bytes at %zu)", file_name_,
                       got, size, offset);
    got += static_cast<size_t>(n);
  }
  return Error::Ok;
}

Result<FreeableBuffer> FileDataLoader::load(size_t offset, size_t size, const SegmentInfo& segment_info) const {
  ET_CHECK_OR_RETURN(offset <= file_size_ && size <= file_size_ - offset, InvalidArgument,
                     "FileDataLoader: %zu bytes at offset %zu run past the %zu-byte file '%s'", size, offset,
                     file_size_, file_name_);
  if (size == 0) return FreeableBuffer(nullptr, 0);
  // aligned_alloc wants a size that is a multiple of the alignment.
  const size_t padded = (size + alignment_ - 1) & ~(alignment_ - 1);
  ET_CHECK_OR_RETURN(padded >= size, InvalidArgument, "FileDataLoader: %zu bytes cannot be allocated", size);
  void* data = std::aligned_alloc(alignment_ < sizeof(void*) ? sizeof(void*) : alignment_, padded);
  ET_CHECK_OR_RETURN(data != nullptr, MemoryAllocationFailed, "FileDataLoader: cannot allocate %zu bytes", size);
  const Error err = load_into(offset, size, segment_info, data);
  if (err != Error::Ok) {
    std::free(data);
    return err;
  }
  return FreeableBuffer(data, size, free_aligned);
}

}  // namespace extension
}  // namespace executorch
